"""Hostile inputs to ``capeval caparena-auto`` (issue 46, third round: items 1, 2 and 8).

- image names from ``caparena_auto_600.json`` stay inside the images folder: ``../``, absolute
  paths, NUL, over-long names, lone surrogates are one line naming the image, before any image
  is opened or any request sent (a recording 127.0.0.1 judge sees nothing; the outside file's
  bytes appear nowhere);
- what stands where an image should (a folder, a FIFO, a device, a huge file) is one line;
- the verdict parser gives the official regexes' verdict on every answer (random and edge
  answers against the regexes themselves) in linear time (16 MB answers in a subprocess with
  a generous timeout: the regexes take minutes on 200 KB);
- a cached answer that does not parse is a try like a fresh one, never a crash, and
  ``--refresh`` asks again and replaces the entries;
- duplicate keys, nesting, size, encoding and shape of the two JSON files: one line each.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_caparena_auto import TEST, make_fixture, reply_text  # noqa: E402

from capeval.cli.main import main  # noqa: E402
from capeval.errors import InputError  # noqa: E402
from capeval.judges import caparena_auto as ca  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECRET = b"\xff\xd8\xff" + b"TOP-SECRET-6f1c0a9e-not-an-image" * 4


# ---------------------------------------------------------------------------
# a judge that records every request it gets, byte for byte
# ---------------------------------------------------------------------------


class Recorder:
    """An OpenAI-compatible server on 127.0.0.1 recording every request (method, path, raw
    body); ``reply(body) -> text`` answers the chat completions."""

    def __init__(self, reply: Callable[[dict], Any] | None = None):
        self.reply = reply or (lambda body: reply_text(body["messages"][-1]["content"][-1]["text"], 0))
        self.requests: list[tuple[str, str, bytes]] = []
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                with lock:
                    server.requests.append(("GET", self.path, b""))
                self._send({"data": [{"id": "judge"}]})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    server.requests.append(("POST", self.path, raw))
                content = server.reply(json.loads(raw))
                self._send({"choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": content}}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def posts(self) -> int:
        return sum(1 for m, _, _ in self.requests if m == "POST")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def judge():
    srv = Recorder()
    yield srv
    srv.close()


def _fixture(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """The released layout under ``tmp_path/data`` and a file outside it, ``tmp_path/secret.jpg``
    (``../../secret.jpg`` from ``data/all_images``)."""
    data = tmp_path / "data"
    data.mkdir()
    auto, results, imgs = make_fixture(data)
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(SECRET)
    return auto, results, imgs, secret


def _add_image(auto: Path, results: Path, name: str, first: bool = True) -> None:
    """An image entry named ``name`` in both files (first in file order by default)."""
    entry = {"captions": {"human": "human words", ca.BASELINES[0]: "baseline words"}, "ref_model": ca.BASELINES[0]}
    table, res = json.loads(auto.read_text()), json.loads(results.read_text())
    table = {name: entry, **table} if first else {**table, name: entry}
    res[name] = "test win caption"
    auto.write_text(json.dumps(table))  # ensure_ascii: a lone surrogate travels as "\ud800"
    results.write_text(json.dumps(res))


def _run(args: list[str], capsys: Any) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line(rc: int, out: str, err: str, *fragments: str) -> str:
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("capeval: error:"), err
    assert "Traceback" not in err and out == ""
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def _cli(tmp_path: Path, srv: Recorder, *extra: str) -> list[str]:
    return ["caparena-auto", "--name", TEST, "--captions", str(tmp_path / "data" / "results.json"),
            "--data", str(tmp_path / "data"), "--server", srv.base_url, "--judge", "judge",
            "--cache", str(tmp_path / "cache"), "--max-retries", "0", "-q", *extra]


def _nowhere(secret: bytes, srv: Recorder, *roots: Path, texts: tuple[str, ...] = ()) -> None:
    """Neither the bytes nor their base64 in any request, printed text or file under ``roots``."""
    needles = [secret[3:], base64.b64encode(secret), base64.b64encode(secret[3:])[:40]]
    for _, _, raw in srv.requests:
        assert not any(n in raw for n in needles)
    for text in texts:
        assert not any(n.decode("latin-1") in text for n in needles)
    for root in roots:
        for path in root.rglob("*") if root.is_dir() else []:
            if path.is_file() and not path.is_symlink() and path.name != "secret.jpg":
                assert not any(n in path.read_bytes() for n in needles), path


# ---------------------------------------------------------------------------
# item 1: names from caparena_auto_600.json stay under the images folder
# ---------------------------------------------------------------------------

ESCAPES = [
    ("../../secret.jpg", "'..' leaves"),
    ("{secret}", "absolute path"),
    ("./../../secret.jpg", "'..' leaves"),
    ("sub/../../../secret.jpg", "'..' leaves"),
    ("..\\..\\secret.jpg", "'..' leaves"),
    ("..", "'..' leaves"),
    ("C:\\secret.jpg", "absolute path"),
    ("\\\\host\\share\\secret.jpg", "absolute path"),
    ("//host/secret.jpg", "absolute path"),
    ("x\x00.jpg", "control character"),
    ("../../secret.jpg\x00.png", "control character"),
    ("x\n.jpg", "control character"),
    ("a" * 300 + ".jpg", "longer than 255 bytes"),
    ("é" * 130 + ".jpg", "longer than 255 bytes"),  # 264 bytes in UTF-8, 134 characters
    ("\ud800.jpg", "not valid Unicode"),
    ("", "empty file name"),
    ("   ", "empty file name"),
    (".", "names the folder itself"),
    ("./", "names the folder itself"),
]


@pytest.mark.parametrize("name, why", ESCAPES, ids=range(len(ESCAPES)))
def test_image_name_outside_the_folder_is_one_line_and_nothing_is_sent(tmp_path, capsys, judge, name, why):
    auto, results, imgs, secret = _fixture(tmp_path)
    name = name.format(secret=secret)
    _add_image(auto, results, name, first=False)  # the other 18 images are fine and come first
    out = tmp_path / "out.json"
    rc, stdout, err = _run(_cli(tmp_path, judge, "--out", str(out)), capsys)
    _one_line(rc, stdout, err, "caparena_auto_600.json image", why)
    assert judge.requests == [] and not out.exists()
    assert not (tmp_path / "cache").exists()  # nothing asked, nothing stored
    _nowhere(SECRET, judge, tmp_path, texts=(stdout, err))


def test_image_name_refused_through_the_python_api(tmp_path, judge):
    """Non-strings can only come from Python: refused as names, before any request."""
    auto, results, imgs, secret = _fixture(tmp_path)
    table, res = json.loads(auto.read_text()), json.loads(results.read_text())
    for bad, why in ((7, "expected a file name"), (None, "expected a file name"), (("a",), "expected a file name"),
                     (str(secret), "absolute path"), (Path("../../secret.jpg"), "expected a file name")):
        hostile = {bad: next(iter(table.values())), **table}
        with pytest.raises(InputError, match=why):
            ca.evaluate(TEST, {**res, bad: "test win x"}, hostile, imgs, base_url=judge.base_url, cache=None,
                        max_retries=0)
    assert judge.requests == []


def test_hostile_names_only_in_the_results_file_are_never_opened(tmp_path, capsys, judge):
    """The results file's keys are looked up by the names of caparena_auto_600.json, never
    opened: extra keys (as the official code) are not read, let alone sent."""
    auto, results, imgs, secret = _fixture(tmp_path)
    res = json.loads(results.read_text())
    res.update({"../../secret.jpg": "x", str(secret): "y", "x\u0000.jpg": "z"})
    results.write_text(json.dumps(res))
    rc, stdout, err = _run(_cli(tmp_path, judge, "--json"), capsys)
    assert rc == 0, err
    assert json.loads(stdout)["battles"] == 18
    _nowhere(SECRET, judge, tmp_path, texts=(stdout, err))


# ---------------------------------------------------------------------------
# what stands where an image should
# ---------------------------------------------------------------------------


def _replace_first_image(imgs: Path, make: Callable[[Path], None]) -> None:
    target = imgs / "test_00000.jpg"
    target.unlink()
    make(target)


@pytest.mark.parametrize("kind, why", [
    ("folder", "is a folder"),
    ("fifo", "not a regular file"),
    ("link-to-folder", "is a folder"),
    ("link-to-fifo", "not a regular file"),
    ("link-to-device", "not a regular file"),
    ("dangling-link", "not found"),
    ("huge", "more than the 67,108,864"),
])
def test_what_stands_where_an_image_should_is_one_line(tmp_path, capsys, judge, kind, why):
    auto, results, imgs, secret = _fixture(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def make(target: Path) -> None:
        if kind == "folder":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)  # opening it for reading would wait for a writer forever
        elif kind == "link-to-folder":
            target.symlink_to(elsewhere)
        elif kind == "link-to-fifo":
            os.mkfifo(elsewhere / "pipe")
            target.symlink_to(elsewhere / "pipe")
        elif kind == "link-to-device":
            target.symlink_to("/dev/zero")
        elif kind == "dangling-link":
            target.symlink_to(elsewhere / "none.jpg")
        else:
            with open(target, "wb") as f:
                f.truncate(ca.MAX_IMAGE_BYTES + 1)  # sparse: no disk used

    _replace_first_image(imgs, make)
    rc, stdout, err = _run(_cli(tmp_path, judge), capsys)
    _one_line(rc, stdout, err, "image 'test_00000.jpg'", why)
    assert judge.requests == []


def test_a_link_the_user_put_in_the_images_folder_is_followed(tmp_path, capsys, judge):
    """The images folder is the user's: a link there (images on another disk) is read, as the
    official code's open() does; only names from the file are confined."""
    auto, results, imgs, secret = _fixture(tmp_path)
    moved = tmp_path / "disk"
    moved.mkdir()
    (imgs / "test_00000.jpg").rename(moved / "test_00000.jpg")
    (imgs / "test_00000.jpg").symlink_to(moved / "test_00000.jpg")
    rc, stdout, err = _run(_cli(tmp_path, judge, "--json"), capsys)
    assert rc == 0, err
    assert json.loads(stdout)["battles"] == 18


def test_image_file_replaced_by_a_fifo_after_the_checks_is_one_line(tmp_path, judge):
    """The request reads the image as a regular file only: a FIFO swapped in after the
    checks does not block the request thread forever."""
    from capeval.judges.backends import Request

    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    backend = ca.CapArenaJudge("judge", base_url=judge.base_url, max_retries=0)
    with pytest.raises(InputError, match="pipe.jpg"):
        backend.messages(Request("pipe.jpg", str(fifo), "prompt"))


# ---------------------------------------------------------------------------
# item 8 and item 3: the two JSON files
# ---------------------------------------------------------------------------


JSON_CASES = {
    # caparena_auto_600.json
    "dup-image": ("auto", lambda t: t.replace('{"test_00000.jpg": ', '{"test_00000.jpg": {"captions": {}}, '
                                              '"test_00000.jpg": ', 1), "key 'test_00000.jpg' appears twice"),
    "dup-ref_model": ("auto", lambda t: t.replace('"ref_model": "GPT-4o-0806"}',
                                                  '"ref_model": "GPT-4o-0806", "ref_model": "MiniCPM-V2.6-8B"}', 1),
                      "key 'ref_model' appears twice"),
    "dup-caption": ("auto", lambda t: t.replace('"human": "human words 0"',
                                                '"human": "human words 0", "human": "other"', 1),
                    "key 'human' appears twice"),
    "deep": ("auto", lambda t: t[:-1] + ', "deep.jpg": ' + "[" * 200_000 + "]" * 200_000 + "}",
             "nested more than 100 levels"),
    "digits": ("auto", lambda t: t[:-1] + ', "n.jpg": ' + "7" * 5000 + "}", "digits"),
    "not-utf8": ("auto", lambda t: t.replace("human words 0", "human w\udcffords 0"), "not valid UTF-8"),
    "list": ("auto", lambda t: "[" + t + "]", "expected a JSON object"),
    "empty": ("auto", lambda t: "{}", "no images"),
    "truncated": ("auto", lambda t: t[: len(t) // 2], "invalid JSON"),
    "zeros": ("auto", lambda t: "\x00" * 4096, "invalid JSON"),
    "entry-string": ("auto", lambda t: t.replace('{"test_00000.jpg": {', '{"test_00000.jpg": "x", "y": {', 1),
                     "image 'test_00000.jpg': expected {'captions'"),
    "captions-list": ("auto", lambda t: t.replace('"captions": {"human": "human words 0", "GPT-4o-0806": '
                                                  '"baseline GPT-4o-0806 says 0"}', '"captions": ["a", "b"]', 1),
                      "got captions a list"),
    "ref_model-list": ("auto", lambda t: t.replace('"ref_model": "GPT-4o-0806"}', '"ref_model": ["GPT-4o-0806"]}', 1),
                       "ref_model ['GPT-4o-0806'] is not one of"),
    "human-number": ("auto", lambda t: t.replace('"human": "human words 0"', '"human": 5', 1),
                     "no 'human' caption (got a number)"),
    "caption-surrogate": ("auto", lambda t: t.replace("human words 0", "human \\ud800 words"),
                          "the 'human' caption holds a lone surrogate"),
    # the results file
    "results-dup": ("results", lambda t: t.replace('{"test_00000.jpg": ', '{"test_00000.jpg": "a", '
                                                   '"test_00000.jpg": ', 1), "key 'test_00000.jpg' appears twice"),
    "results-deep": ("results", lambda t: t[:-1] + ', "d": ' + "{\"a\": " * 50_000 + "1" + "}" * 50_000 + "}",
                     "nested more than 100 levels"),
    "results-list-caption": ("results", lambda t: t.replace('{"test_00000.jpg": "test win caption 0 "',
                                                            '{"test_00000.jpg": ["test win"]', 1),
                             "no caption for image 'test_00000.jpg' (got a list, expected a string)"),
    "results-null-caption": ("results", lambda t: t.replace('{"test_00000.jpg": "test win caption 0 "',
                                                            '{"test_00000.jpg": null', 1),
                             "no caption for image 'test_00000.jpg' (got null"),
    "results-surrogate": ("results", lambda t: t.replace("test win caption 0", "test \\udfff win"),
                          "caption of image 'test_00000.jpg' holds a lone surrogate"),
    "results-list": ("results", lambda t: "[]", "expected a JSON object"),
}


@pytest.mark.parametrize("case", list(JSON_CASES))
def test_json_files_are_read_within_bounds_and_strictly(tmp_path, capsys, judge, case):
    auto, results, imgs, secret = _fixture(tmp_path)
    which, edit, why = JSON_CASES[case]
    path = auto if which == "auto" else results
    text = path.read_text()
    assert "test_00000.jpg" in text
    new = edit(text)
    path.write_bytes(new.encode("utf-8", "surrogateescape"))
    rc, stdout, err = _run(_cli(tmp_path, judge), capsys)
    line = _one_line(rc, stdout, err, why)
    assert len(line) < 600
    assert judge.requests == []


def test_json_size_limit_applies(tmp_path, capsys, judge, monkeypatch):
    auto, results, imgs, secret = _fixture(tmp_path)
    monkeypatch.setenv("CAPEVAL_MAX_JSON_BYTES", "1024")
    rc, stdout, err = _run(_cli(tmp_path, judge), capsys)
    _one_line(rc, stdout, err, "caparena_auto_600.json", "more than the 1,024")
    assert judge.requests == []


def test_a_huge_ref_model_value_makes_a_short_line(tmp_path, capsys, judge):
    auto, results, imgs, secret = _fixture(tmp_path)
    auto.write_text(auto.read_text().replace('"ref_model": "GPT-4o-0806"}', '"ref_model": "' + "M" * 1_000_000 + '"}', 1))
    rc, stdout, err = _run(_cli(tmp_path, judge), capsys)
    assert len(_one_line(rc, stdout, err, "is not one of")) < 400


# ---------------------------------------------------------------------------
# item 2: the verdict parser, the official regexes' verdicts in linear time
# ---------------------------------------------------------------------------

# vlm_as_a_judge.py:mllm_judge_pairs, transcribed (used here on small answers only)
_OFFICIAL_REASON = re.compile(r"Reason:\s*(.+?)\s*Judgment:", re.DOTALL)
_OFFICIAL_JUDGMENT = re.compile(r"Judgment:\s*(.+)")


def official_parse(response: str) -> str | None:
    reason_match = _OFFICIAL_REASON.search(response)
    judge_match = _OFFICIAL_JUDGMENT.search(response)
    reason = reason_match.group(1).strip() if reason_match else None
    judgment = judge_match.group(1).strip() if judge_match else None
    return judgment if reason and judgment else None


EDGES = {
    "Reason: fine.\nJudgment: Caption 1 is better.": "Caption 1 is better.",
    "Reason: a\nJudgment: Tie\nJudgment: Caption 2 is better": "Tie",  # the first judgment
    "Judgment: Tie\nReason: why\nJudgment: Caption 1 is better": "Tie",  # reason after the first judgment
    "Judgment: Tie\nReason: why": None,  # no Judgment: after the reason
    "Reason:Judgment: Tie": None,
    "Reason: Judgment: Tie": None,  # the regex's group is the blank before Judgment:
    "Reason: Judgment: Tie Judgment: x": "Tie Judgment: x",  # now the group is 'Judgment: Tie'
    "Reason:\n\nJudgment:\n\n  Caption 2 is better  \nmore": None,  # a blank reason
    "Reason: r\n\nJudgment:\n\n  Caption 2 is better  \nmore": "Caption 2 is better",
    "Reason: r\nJudgment:\n\n\n": None,
    "Reason: r\nJudgment:  \n \t": None,
    "Reason: r\nJudgment:": None,
    "Reason: x Judgment:x": "x",
    "Reason: r\nJudgment: Tie\x00": "Tie\x00",
    "Reason: r\nJudgment:\u2028Tie\u2028x": "Tie\u2028x",  # \u2028 is whitespace, not a line end for '.'
    "Reason: r\nJudgment:\u00a0Tie\r\n": "Tie",
    "Reason Judgment: Tie": None,
    "reason: r Judgment: Tie": None,
    "Reason: r\njudgment: Tie": None,
    "": None,
    "Reason: Reason: Judgment: Tie": "Tie",
    "Reason: \u3000Judgment: Tie": None,
}


@pytest.mark.parametrize("answer", list(EDGES), ids=range(len(EDGES)))
def test_parser_edges_match_the_official_regexes(answer):
    assert official_parse(answer) == EDGES[answer]
    assert ca.parse_judgment(answer) == EDGES[answer]


_TOKENS = ["Reason:", "Judgment:", "Reason", "Judgment", "Judgment :", "Reason: ", " ", "  ", "\n", "\t", "\r",
           "\u00a0", "\u2028", "\x85", "\x0b", "\x1c", "\u3000", "Tie", "Tie.", "Caption 1 is better.",
           "Caption 2 is better", ":", "x", "J", "R", "\x00", "judgment:", "é", "Reason:\n", "Judgment:\n", "\n\n",
           "Judgment:Judgment:", "ReasonReason:"]


def test_parser_equals_the_official_regexes_on_random_answers():
    rng = random.Random(46)
    parsed = 0
    for _ in range(60_000):
        answer = "".join(rng.choice(_TOKENS) for _ in range(rng.randint(0, 16)))
        want = official_parse(answer)
        assert ca.parse_judgment(answer) == want, repr(answer)
        parsed += want is not None
    assert parsed > 2000  # both outcomes well covered
    chars = "RJ:\n \teasonudgmt"
    for _ in range(20_000):  # character soup: the tags rarely whole, often cut
        answer = "".join(rng.choice(chars) for _ in range(rng.randint(0, 40)))
        answer = answer.replace("Rea", "Reason:", rng.randint(0, 1)).replace("Jud", "Judgment:", rng.randint(0, 2))
        assert ca.parse_judgment(answer) == official_parse(answer), repr(answer)


_LINEAR = r"""
import sys
from capeval.judges.caparena_auto import parse_judgment
MB = 2**20
cases = {
    "spaces after Reason:": ("Reason:" + " " * (16 * MB), None),
    "many Reason: lines": ("Reason: a Judgment\n" * (16 * MB // 19), None),
    "cut tags": (("Reason" + " Judgment " + "Judgment:"[:5]) * (16 * MB // 25), None),
    "newlines after Judgment:": ("Reason: r\nJudgment:" + "\n" * (16 * MB), None),
    "blank after Judgment:": ("Reason: r Judgment:" + " \n" * (8 * MB), None),
    "a verdict after 16 MB": ("Reason:" + " x" * (8 * MB) + "\nJudgment: Tie", "Tie"),
    "many judgments": ("Reason: r\n" + "Judgment: Tie\n" * (16 * MB // 14), "Tie"),
    "a 16 MB judgment line": ("Reason: r Judgment: " + "Tie " * (4 * MB), ("Tie " * (4 * MB)).strip()),
}
for name, (answer, want) in cases.items():
    got = parse_judgment(answer)
    assert got == want, name
print("ok", len(cases))
"""


def test_parser_is_linear_on_16_mb_answers():
    """Each answer takes the official regexes minutes at 200 KB (hours at 16 MB, the answer
    cap); a linear parser reads all eight in seconds. No timing: a generous timeout only."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, "-c", _LINEAR], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("ok 8"), proc.stderr[-2000:]


# ---------------------------------------------------------------------------
# item 2: answers that do not parse, cached; --refresh
# ---------------------------------------------------------------------------

BAD_ANSWER = "Reason: a Judgment\n" * 20_000  # 380 KB that the official regex scans once per Reason:


def _entries(cache: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(cache.rglob("*.json"))]


def test_cached_answers_that_do_not_parse_are_unjudged_items_and_refresh_asks_again(tmp_path, capsys):
    """The answers are cached under the server's URL: one server throughout, its reply switched."""
    auto, results, imgs, secret = _fixture(tmp_path)
    srv = Recorder(lambda body: BAD_ANSWER)
    try:
        rc, stdout, err = _run(_cli(tmp_path, srv, "--json", "--tries", "2"), capsys)
        assert rc == 0, err
        first = json.loads(stdout)
        assert len(first["unjudged"]) == 18 and first["generated"] == 36 and sum(first["judged"].values()) == 0
        assert srv.posts == 36
        # rerun: every answer from the cache, the same unjudged battles named, nothing sent, no crash
        srv.requests.clear()
        rc, stdout, err = _run(_cli(tmp_path, srv, "--tries", "2"), capsys)
        assert rc == 0, err
        assert "0 of 18 battles counted" in err and "18 never parsed after 2 tries: test_00000.jpg" in err
        assert "0 requests sent, 36 answers from the cache" in err
        assert srv.posts == 0
        # --refresh: asked again, entries replaced
        srv.reply = lambda body: reply_text(body["messages"][-1]["content"][-1]["text"], 0)
        rc, stdout, err = _run(_cli(tmp_path, srv, "--json", "--tries", "2", "--refresh"), capsys)
        assert rc == 0, err
        fresh = json.loads(stdout)
        assert fresh["cached"] == 0 and fresh["generated"] == srv.posts >= 18
        assert len(fresh["unjudged"]) < 18 and sum(fresh["judged"].values()) > 0
        answers = [e["answer"] for e in _entries(tmp_path / "cache")]
        assert sum(a == BAD_ANSWER for a in answers) < 36 and any(a.startswith("Reason: because.") for a in answers)
        # a plain rerun reads the replaced entries
        srv.requests.clear()
        srv.reply = lambda body: BAD_ANSWER
        rc, stdout, err = _run(_cli(tmp_path, srv, "--json", "--tries", "2"), capsys)
        assert rc == 0, err
        again = json.loads(stdout)
        assert srv.posts == 0 and again["generated"] == 0
        assert again["scores"] == fresh["scores"] and again["unjudged"] == fresh["unjudged"]
    finally:
        srv.close()


def test_a_damaged_cache_entry_is_asked_again(tmp_path, capsys, judge):
    auto, results, imgs, secret = _fixture(tmp_path)
    rc, stdout, err = _run(_cli(tmp_path, judge, "--json"), capsys)
    assert rc == 0, err
    sent = judge.posts
    entries = sorted((tmp_path / "cache").rglob("*.json"))
    entries[0].write_text("[" * 200_000)  # nested too deep to parse
    entries[1].write_bytes(b"\xff\xfe not json")
    entries[2].write_text(json.dumps({"format": 1, "answer": ["not", "text"]}))
    rc, stdout, err = _run(_cli(tmp_path, judge, "--json"), capsys)
    assert rc == 0, err
    assert json.loads(stdout)["generated"] == 3 and judge.posts == sent + 3


@pytest.mark.parametrize("extra, why", [
    (["--refresh", "--no-cache"], "--refresh and --no-cache"),
])
def test_refresh_without_a_cache_is_one_line(tmp_path, capsys, judge, extra, why):
    _fixture(tmp_path)
    args = [a for a in _cli(tmp_path, judge) if a not in ("--cache", str(tmp_path / "cache"))] + extra
    _one_line(*_run(args, capsys), why)
    assert judge.requests == []


def test_refresh_option_checked_in_python(tmp_path, judge):
    auto, results, imgs, secret = _fixture(tmp_path)
    with pytest.raises(InputError, match="refresh"):
        ca.evaluate(TEST, results, auto, imgs, base_url=judge.base_url, cache=None, refresh=True)
    with pytest.raises(InputError, match="refresh"):
        ca.evaluate(TEST, results, auto, imgs, base_url=judge.base_url, cache=tmp_path / "c", refresh="yes")
    assert judge.requests == []


# ---------------------------------------------------------------------------
# what a server sends back
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("answer, verdict", [
    ("Reason: a\x00b\nJudgment: Tie\x00", "Tie\x00"),  # kept as sent; not a verdict the scoring reads
    ("Reason: \ud800 r\nJudgment: Tie", "Tie"),  # the lone surrogate becomes U+FFFD before the cache
    ("Reason: r\nJudgment: " + "Tie " * 500_000, ("Tie " * 500_000).strip()),  # a 2 MB judgment line
    ("x" * (4 * 2**20), None),  # 4 MB without a tag: never parsed
    ("", None),
])
def test_odd_answers_are_stored_parsed_and_written(tmp_path, capsys, answer, verdict):
    auto, results, imgs, secret = _fixture(tmp_path)
    srv = Recorder(lambda body: answer)
    out = tmp_path / "battles.json"
    try:
        rc, stdout, err = _run(_cli(tmp_path, srv, "--json", "--tries", "1", "--out", str(out)), capsys)
        assert rc == 0, err
        summary = json.loads(stdout)
        battles = json.loads(out.read_text(encoding="utf-8"))
        assert [b.get("judge") for b in battles] == [verdict] * 18
        assert len(summary["unjudged"]) == (18 if verdict is None else 0)
        assert sum(summary["judged"].values()) == (18 if verdict == "Tie" else 0)
        srv.requests.clear()
        rc, stdout, err = _run(_cli(tmp_path, srv, "--json", "--tries", "1"), capsys)  # the rerun reads the cache
        assert rc == 0, err
        assert json.loads(stdout)["generated"] == 0 and srv.requests == []
    finally:
        srv.close()


# ---------------------------------------------------------------------------
# the human battles of `capeval bench caparena` (caparena_annots_eval.json): the same rules
# ---------------------------------------------------------------------------


def _battle(img: str = "test_00001.jpg") -> dict:
    return {"img": img, "source1": "A", "source2": "B", "caption1": "a cat", "caption2": "a dog",
            "winner": "A", "cluster": "level 1", "ref": "a cat"}


@pytest.mark.parametrize("text, why", [
    (json.dumps([_battle("../../secret.jpg")]), "'..' leaves"),
    (json.dumps([_battle("/etc/passwd")]), "absolute path"),
    (json.dumps([_battle("x\u0000.jpg")]), "control character"),
    (json.dumps([_battle("a" * 300)]), "longer than 255 bytes"),
    (json.dumps([_battle()])[:-2] + ', "winner": "B"}]', "key 'winner' appears twice"),
    ("[" * 200_000 + "]" * 200_000, "nested more than 100 levels"),
    ("[" + "1" * 5000 + "]", "digits"),
])
def test_human_battles_file_is_read_within_bounds_and_strictly(tmp_path, text, why):
    from capeval.bench.caparena import read_battles
    from capeval.errors import ResourceError

    path = tmp_path / "caparena_annots_eval.json"
    path.write_text(text)
    with pytest.raises(ResourceError, match=re.escape(why)) as err:
        read_battles(path)
    assert "\n" not in str(err.value) and len(str(err.value)) < 600
    path.write_text(json.dumps([_battle()]))
    assert len(read_battles(path)[0]) == 1
