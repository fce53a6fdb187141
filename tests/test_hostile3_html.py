"""Issue 46, item 5 and two of item 8: HTML written from a result file is inert, and
``capeval compare`` / ``capeval report`` handle odd results with one line.

Real results are made here (``capeval bench`` on THumB and PASCAL-50S, ``capeval reproduce`` on
VisCE2's Table 2, ``capeval compare`` on a few captions); then every field of them (every
string, number and null leaf, and every object key, one field pattern at a time: ``results[*].n``
in all results at once) gets each payload below, and the page rendered from it is checked: exit 0
with an inert page, or exit 2 with one ``capeval: error:`` line and no page.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

import pytest

from capeval.cli.main import main

STRINGS = [
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "'><svg/onload=alert(1)>",
    "javascript:alert(1)",
    " JaVaScRiPt:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "' \" ` quotes",
    "</style><script>alert(1)</script>",
    "<!--",
    "</title></textarea><script>alert(1)</script>",
    "/etc/passwd",
    "../../../x.png",
    "nul\x00here",
]
NUMBERS = [math.nan, math.inf, -math.inf, 1e308, -1e308, 10**300, 10**400, -1, 0, True, None]
# per field (a sweep renders a page per field and payload): the string payloads above in one,
# a scheme at the start (what a link would take), and the numbers that break formatting
SWEEP = ["\"'><script>alert(1)</script><img src=x onerror=alert(1)></style></title></textarea><!--`\x00",
         "javascript:alert(1)", "data:text/html,<svg/onload=alert(1)>",
         math.nan, -math.inf, 1e308, 10**300, 10**400, True, None]

# what the pages are made of; anything else in a page is a payload that became markup
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "small", "b", "code", "span",
                "div", "table", "tr", "th", "td", "br", "a", "ul", "li", "figure", "figcaption", "details",
                "summary", "pre", "svg", "text", "rect", "line"}
URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "poster", "data", "background"}


class _Page(HTMLParser):
    """Tags, attributes and text of a page, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def assert_inert(text: str) -> _Page:
    """The page has the CSP meta first in its head and no script, event handler, foreign tag,
    comment or link that is not a relative file under the page's folder."""
    assert not re.search(r"<\s*script", text, re.I), "a <script> in the page"
    assert not re.search(r"<\s*(img|iframe|object|embed|base|form|link|frame)\b", text, re.I)
    page = _Page()
    page.feed(text)
    page.close()
    assert not page.comments, page.comments
    tags = [t for t, _ in page.tags]
    assert set(tags) <= ALLOWED_TAGS, set(tags) - ALLOWED_TAGS
    metas = [dict(a) for t, a in page.tags if t == "meta"]
    assert tags[:5] == ["html", "head", "meta", "meta", "title"]  # the policy before anything it governs
    assert len(metas) == 2 and metas[0] == {"charset": "utf-8"} and metas[1]["http-equiv"] == "Content-Security-Policy"
    csp = {d.split()[0]: d.split()[1:] for d in metas[1]["content"].split(";")}
    assert csp["default-src"] == ["'none'"] and csp["script-src"] == ["'none'"] and csp["base-uri"] == ["'none'"]
    assert csp["form-action"] == ["'none'"] and csp["object-src"] == ["'none'"]
    for tag, attrs in page.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name in URL_ATTRS:
                assert tag == "a" and name == "href", (tag, name)
                assert value and re.fullmatch(r"[A-Za-z0-9%._~-]+(/[A-Za-z0-9%._~-]+)*", value), value
                assert ".." not in value.split("/") and ":" not in value
            if name == "style":
                assert re.fullmatch(r"background:#[0-9a-f]{6}", value or ""), value
    return page


# ---------------------------------------------------------------- walking a result's fields
def _patterns(obj: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every field pattern of ``obj``: paths of leaves (list indices as ``"*"``) and, with a
    last element ``("key",)``, of object keys."""
    if isinstance(obj, dict):
        if obj:
            yield path + (("key",),)
        for k, v in obj.items():
            yield from _patterns(v, path + (k,))
    elif isinstance(obj, list):
        for v in obj:
            yield from _patterns(v, path + ("*",))
    else:
        yield path


def _unique(patterns: Iterator[tuple]) -> list[tuple]:
    return list(dict.fromkeys(patterns))


def _replaced(obj: Any, pattern: tuple, value: Any) -> Any:
    """A copy of ``obj`` with every field matching ``pattern`` set to ``value``; keys are made
    ``value`` + a number so that an object keeps its entries."""
    if not pattern:
        return copy.deepcopy(value)
    head, rest = pattern[0], pattern[1:]
    if head == ("key",):
        return {(f"{value}{k}" if k else value) if isinstance(value, str) else f"{value!r}{k}": v
                for k, v in enumerate(obj.values())}
    if head == "*":
        return [_replaced(v, rest, value) for v in obj] if isinstance(obj, list) else obj
    if isinstance(obj, dict) and head in obj:
        return {k: (_replaced(v, rest, value) if k == head else v) for k, v in obj.items()}
    return obj


def _string_fields(obj: Any, value: str) -> Any:
    """``obj`` with every string leaf set to ``value``."""
    if isinstance(obj, dict):
        return {k: _string_fields(v, value) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_string_fields(v, value) for v in obj]
    return value if isinstance(obj, str) else obj


def _report(tmp: Path, data: Any, capsys, name: str = "r") -> tuple[int, str, str | None]:
    """``capeval report`` on ``data`` saved as JSON: (exit status, stderr, the page or None).

    The command's function runs through the CLI's error mapping (``_run``) without building the
    whole argument parser each time (most of a call's time, and the sweeps make thousands)."""
    import argparse

    from capeval.cli import report
    from capeval.cli.main import _run

    src, out = tmp / f"{name}.json", tmp / "pages" / f"{name}.html"
    out.parent.mkdir(exist_ok=True)
    out.unlink(missing_ok=True)
    src.write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    rc = _run(argparse.Namespace(result=str(src), html=str(out), func=report.run))
    err = capsys.readouterr().err
    return rc, err, out.read_text(encoding="utf-8") if out.exists() else None


def _check_outcome(rc: int, err: str, page: str | None, what: str) -> None:
    if rc == 0:
        assert page is not None, what
        assert_inert(page)
    else:
        assert rc == 2 and page is None, (what, rc, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("capeval: error: "), (what, err)
        assert "Traceback" not in err


def _sweep(tmp: Path, clean: Any, capsys, string_kinds: set[tuple]) -> int:
    """Every field pattern of ``clean`` times every payload through ``capeval report``; a string
    field given a string must render (exit 0). Returns the number of pages checked."""
    checked = 0
    for pattern in _unique(_patterns(clean)):
        for value in SWEEP:
            if pattern and pattern[-1] == ("key",) and not isinstance(value, str):
                continue  # JSON keys are strings
            data = _replaced(clean, pattern, value)
            rc, err, page = _report(tmp, data, capsys)
            what = f"{pattern} = {value!r}"
            _check_outcome(rc, err, page, what)
            if isinstance(value, str) and pattern in string_kinds:  # a string where a string goes: shown
                assert rc == 0, (what, err)
            checked += 1
    return checked


# ---------------------------------------------------------------- real results
@pytest.fixture(scope="module")
def bench_result(shared_data, tmp_path_factory) -> tuple[Path, dict]:
    """A real ``capeval bench --out`` run (heatmaps, bars, paired tests, paper columns), with an
    explanations entry for a file under the report's folder as ``bench --explain`` writes it."""
    out = tmp_path_factory.mktemp("bench")
    argv = ["bench", "thumb", "pascal-50s", "-m", "bleu-1,rouge-l", "--data-root", str(shared_data),
            "--bootstrap", "5", "--out", str(out / "run.json"), "--quiet"]
    assert main(argv) == 0
    data = json.loads((out / "run.json").read_text())
    assert data["plots"] and data["comparisons"] and data["benchmarks"]["pascal-50s"]
    folder = out / "pages" / "explained" / "thumb" / "all" / "hice-s"
    data["benchmarks"]["thumb"]["explanations"] = {"hice-s": {"all": [
        {"id": "img 1", "score": 0.25, "json": str(folder / "img 1.json"), "png": str(folder / "img 1.png")}]}}
    return out, data


@pytest.fixture(scope="module")
def reproduce_result(shared_data, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("reproduce")
    argv = ["reproduce", "visce2", "--table", "2", "--data-root", str(shared_data), "--bootstrap", "5",
            "--out", str(out / "cells.json"), "-q"]
    assert main(argv) == 0
    data = json.loads((out / "cells.json").read_text())
    statuses = {c["status"].split(":")[0] for c in data["cells"]}
    assert {"reproduced", "differs", "not comparable", "not run"} <= statuses
    assert any(c["ci_low"] is not None for c in data["cells"])
    return data


CANDS_A = {"1": "a man rides a horse", "2": "a dog on the grass", "3": "two cats sleep", "4": "a red bus"}
CANDS_B = {"1": "a man riding a brown horse", "2": "a dog runs on grass", "3": "a cat", "4": "a bus on a street"}
REFS = {"1": ["a man is riding a horse", "a person on a horse"], "2": ["a dog running on the grass"],
        "3": ["two cats are sleeping on a bed"], "4": ["a red bus on the street", "a double decker bus"]}


@pytest.fixture(scope="module")
def compare_result(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("compare")
    for name, data in (("a", CANDS_A), ("b", CANDS_B), ("r", REFS)):
        (out / f"{name}.json").write_text(json.dumps(data))
    assert main(["compare", "-c", f"A={out / 'a.json'}", f"B={out / 'b.json'}", "-r", str(out / "r.json"),
                 "-m", "bleu-4,rouge-l", "--samples", "50", "--out", str(out / "cmp.json")]) == 0
    return json.loads((out / "cmp.json").read_text())


def _string_patterns(clean: Any) -> set[tuple]:
    found: set[tuple] = set()

    def walk(obj: Any, path: tuple) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, path + (k,))
        elif isinstance(obj, list):
            for v in obj:
                walk(v, path + ("*",))
        elif isinstance(obj, str):
            found.add(path)

    walk(clean, ())
    return found


# ---------------------------------------------------------------- bench
def test_bench_report_clean_page_is_inert_and_links_under_its_folder(bench_result, capsys):
    tmp, clean = bench_result
    rc, err, page = _report(tmp, clean, capsys, "run")
    assert rc == 0, err
    parsed = assert_inert(page)
    hrefs = [dict(a)["href"] for t, a in parsed.tags if t == "a"]
    assert hrefs == ["explained/thumb/all/hice-s/img%201.png", "explained/thumb/all/hice-s/img%201.json"]
    assert "<svg" in page and "accuracy per category" in page and "Paired bootstrap tests" in page


def test_every_bench_field_with_every_payload(bench_result, capsys):
    tmp, clean = bench_result
    checked = _sweep(tmp, clean, capsys, _string_patterns(clean))
    assert checked > 600


@pytest.mark.parametrize("payload", STRINGS)
def test_every_bench_string_at_once_is_shown_as_text(bench_result, capsys, payload):
    tmp, clean = bench_result
    rc, err, page = _report(tmp, _string_fields(clean, payload), capsys)
    assert rc == 0, err
    parsed = assert_inert(page)
    # the payload is on the page, as text (a live element would have been parsed as a tag)
    assert payload.replace("\x00", "\ufffd") in "".join(parsed.text) or payload in "".join(parsed.text)
    assert not [t for t, _ in parsed.tags if t == "a"]  # explanation paths that are payloads: no link


def test_result_n_is_escaped(bench_result, capsys):
    """The issue's case: ``results[].n`` was written into ``title='n=...'`` unescaped."""
    tmp, clean = bench_result
    data = copy.deepcopy(clean)
    data["results"][0]["n"] = "'><script>alert(1)</script>"
    rc, err, page = _report(tmp, data, capsys)
    assert rc == 2 and page is None and "results[0].n: expected an integer" in err
    from capeval.bench.report import render_html
    from capeval.bench.runner import BenchRun

    run = BenchRun.from_dict(data)  # a run in memory is rendered, escaped
    assert_inert(render_html(run, str(tmp)))


@pytest.mark.parametrize("path, linked", [
    ("javascript:alert(1)", False), ("JAVASCRIPT:alert(1)", False), ("data:text/html,x", False),
    ("file:///etc/passwd", False), ("/etc/passwd", False), ("../outside.png", False), ("C:\\x.png", False),
    ("\\\\host\\share\\x.png", False), ("{base}/a\x00b.png", False), ("{base}/a\nb.png", False),
    ("{base}/" + "x" * 300 + ".png", False), ("{base}/../escape.png", False), ("{base}/..\\escape.png", False),
    ("{base}/ok.png", True), ("{base}/sub/it's \"q\" <b>.png", True), ("{base}/sub/javascript:alert(1)", True),
    ("{base}", False), ("{base}/", False), ("{base}/./sub/../ok.png", True),
])
def test_explanation_links_only_to_files_under_the_report_folder(tmp_path, path, linked):
    from capeval.bench.report import link

    base = str(tmp_path / "report")
    url = link(path.replace("{base}", base), base)
    assert (url is not None) == linked, url
    if url is not None:
        assert re.fullmatch(r"[A-Za-z0-9%._~-]+(/[A-Za-z0-9%._~-]+)*", url) and ":" not in url
    assert link("ok.png", None) is None  # no folder to be under: no link


def test_bench_report_refuses_bad_fields_with_one_line(bench_result, capsys):
    tmp, clean = bench_result
    cases = [
        (("results", 0, "value"), "<b>", "results[0].value: expected a number or null"),
        (("results", 1, "ci_low"), 10**400, "results[1].ci_low: expected a number or null"),
        (("comparisons", 0, "p_value"), "x", "comparisons[0].p_value"),
        (("plots", 0, "counts"), [[1]], "plots[0]: 1 rows of counts"),
        (("plots", 0, "metric_edges"), [0.0], "at least 2 edges"),
        (("config",), [], "config: expected an object"),
        (("benchmarks", "thumb", "title"), None, "benchmarks['thumb'].title: expected a string"),
    ]
    for path, value, message in cases:
        data = copy.deepcopy(clean)
        target = data
        for k in path[:-1]:
            target = target[k]
        target[path[-1]] = value
        rc, err, page = _report(tmp, data, capsys)
        assert rc == 2 and page is None and message in err, (path, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ---------------------------------------------------------------- reproduce
def test_every_reproduce_field_with_every_payload(reproduce_result, tmp_path, capsys):
    rc, err, page = _report(tmp_path, reproduce_result, capsys)
    assert rc == 0, err
    assert_inert(page)
    assert _sweep(tmp_path, reproduce_result, capsys, _string_patterns(reproduce_result)) > 200
    # the bare list of cells older versions wrote
    assert _sweep(tmp_path, reproduce_result["cells"][:3], capsys, _string_patterns(reproduce_result["cells"])) > 150


@pytest.mark.parametrize("payload", STRINGS)
def test_every_reproduce_string_at_once_is_shown_as_text(reproduce_result, tmp_path, capsys, payload):
    rc, err, page = _report(tmp_path, _string_fields(reproduce_result, payload), capsys)
    assert rc == 0, err
    parsed = assert_inert(page)
    text = "".join(parsed.text)
    assert payload in text or payload.replace("\x00", "\ufffd") in text
    assert f"{len(reproduce_result['cells'])} of another status" in text


@pytest.mark.parametrize("status", ["superseded", "not run", "not run:", "not run: ", "not comparable",
                                    "reproduced (v2)", "", "DIFFERS", "<b>new</b>"])
def test_unknown_statuses_are_shown_as_they_are(reproduce_result, tmp_path, capsys, status):
    """A status of a newer version (or an edited file): rendered escaped and uncoloured, counted
    apart in the summary; never a KeyError / IndexError."""
    from capeval.bench.reproduce import Outcome, summary, text_table

    data = copy.deepcopy(reproduce_result)
    data["cells"][0]["status"] = status
    rc, err, page = _report(tmp_path, data, capsys)
    assert rc == 0, err
    parsed = assert_inert(page)
    assert "1 of another status" in "".join(parsed.text)
    row = re.findall(r"<tr style='background:(#[0-9a-f]+)'", page)[0]
    assert row == "#f1f3f4"
    outcomes = [Outcome.from_dict(c) for c in data["cells"]]
    assert summary(outcomes).endswith(", 1 of another status") and status in text_table(outcomes)


def test_reproduce_report_refuses_bad_cells_with_one_line(reproduce_result, tmp_path, capsys):
    cases = [
        (lambda d: d["cells"][2].update(status=7), "cells[2].status: expected a string, got 7"),
        (lambda d: d["cells"][1].update(published=None), "cells[1].published: expected a number, got None"),
        (lambda d: d["cells"][3].update(ours="1.0"), "cells[3].ours: expected a number or null"),
        (lambda d: d["cells"][0].update(colour="red"), "cells[0]: field 'colour' is not one of a reproduce cell's"),
        (lambda d: d["cells"][0].pop("paper"), "cells[0]: no 'paper'"),
        (lambda d: d["cells"].__setitem__(4, "x"), "cells[4]: expected an object"),
        (lambda d: d.update(cells={}), "cells: expected a list"),
        (lambda d: d.update(config=3), "config: expected an object"),
    ]
    for change, message in cases:
        data = copy.deepcopy(reproduce_result)
        change(data)
        rc, err, page = _report(tmp_path, data, capsys)
        assert rc == 2 and page is None and message in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ---------------------------------------------------------------- compare
def test_every_compare_field_with_every_payload(compare_result):
    from capeval.significance.html import render_html

    assert_inert(render_html(compare_result))
    checked = 0
    for pattern in _unique(_patterns(compare_result)):
        for value in STRINGS + NUMBERS:
            if pattern and pattern[-1] == ("key",) and (not isinstance(value, str) or len(pattern) == 1
                                                         or len(pattern) > 3):
                continue  # keys that are data (system and metric names), not the result's own structure
            data = _replaced(compare_result, pattern, value)
            assert_inert(render_html(data))
            checked += 1
    assert checked > 300
    for payload in STRINGS:
        parsed = assert_inert(render_html(_string_fields(compare_result, payload)))
        assert payload in "".join(parsed.text) or payload.replace("\x00", "\ufffd") in "".join(parsed.text)


def test_compare_html_with_hostile_system_names(tmp_path, capsys):
    for name, data in (("a", CANDS_A), ("b", CANDS_B), ("r", REFS)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    (tmp_path / "'><script>alert(1)<\\script>.json").write_text(json.dumps(CANDS_B))
    page = tmp_path / "cmp.html"
    assert main(["compare", "-c", f"<script>alert(1)</script>\"'={tmp_path / 'a.json'}",
                 str(tmp_path / "'><script>alert(1)<\\script>.json"), "-r", str(tmp_path / "r.json"),
                 "-m", "bleu-4", "--samples", "20", "--html", str(page)]) == 0
    parsed = assert_inert(page.read_text())
    text = "".join(parsed.text)
    assert "<script>alert(1)</script>\"' (baseline)" in text and "'><script>alert(1)<\\script>" in text


class _Judge:
    """An OpenAI-compatible server answering CLAIR's prompt: a number for every candidate but
    those with "blob" in them, which never get one (error items after every try)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"data": [{"id": "judge"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                content = body["messages"][-1]["content"]
                text = content if isinstance(content, str) else content[-1]["text"]
                cand = text.split("Candidate set:\n- ")[1].split("\n")[0]
                answer = "I cannot say" if "blob" in cand else '{"score": 70, "reason": "fine"}'
                self._send({"choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": answer}}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def judge():
    server = _Judge()
    yield server
    server.close()


def _compare(tmp_path: Path, capsys, systems: list[tuple[str, dict]], *extra: str) -> tuple[int, str, str]:
    files = []
    for name, data in systems:
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
        files.append(f"{name}={tmp_path / f'{name}.json'}")
    (tmp_path / "r.json").write_text(json.dumps({i: ["a thing"] for i in systems[0][1]}))
    capsys.readouterr()
    rc = main(["compare", "-c", *files, "-r", str(tmp_path / "r.json"), "--samples", "20", *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_compare_names_a_judges_error_item_and_its_system(tmp_path, capsys, judge):
    """Item 8: a CLAIR error item (no number after every try) in one system was a KeyError
    traceback; now one line naming the item, the metric and the system, in whichever system it is,
    and nothing is left out of one system silently."""
    opts = ["-m", "clair", "-O", f"clair.base_url={judge.base_url}", "-O", "clair.model=judge",
            "-O", "clair.cache=false"]
    good = {"1": "a red square", "2": "a green thing", "3": "a cat"}
    bad = {"1": "a red square", "2": "a blue blob", "3": "a grey blob"}
    for systems, who in (([("A", good), ("B", bad)], "B"), ([("B", bad), ("A", good)], "B"),
                         ([("A", good), ("C", good), ("B", bad)], "B")):
        rc, out, err = _compare(tmp_path, capsys, systems, *opts)
        assert rc == 2 and out == "" and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1
        assert (f"capeval: error: compare: clair of system '{who}': item '2' is an error item (no number in "
                "the answer after 3 tries) (2 such items in all); paired tests need a score for every item of every "
                "system") in err
        assert "-O clair.unparsed=zero" in err
    # scored 0 as the official code does: the comparison runs on every item of both systems
    rc, out, err = _compare(tmp_path, capsys, [("A", good), ("B", bad)], *opts, "-O", "clair.unparsed=zero")
    assert rc == 0, err
    result = json.loads(out)
    assert result["systems"]["A"]["clair"]["score"] == pytest.approx(0.7)
    assert result["systems"]["B"]["clair"]["score"] == pytest.approx(0.7 / 3)


def test_compare_names_an_item_without_a_score(monkeypatch):
    """A metric that leaves an item out (``skip_bad_items``, SPICE's parse errors) or scores it
    NaN: one line naming it, never a KeyError."""
    import capeval
    from capeval.errors import InputError
    from capeval.evaluator import Evaluator
    from capeval.result import MetricResult, Report, Signature

    real = Evaluator.score  # compare scores every system with one Evaluator

    def score(self, cands, refs=None, **kwargs):
        report = real(self, cands, refs, **kwargs)
        r = report["rouge-l"]
        items = dict(r.items)
        if "blob" in cands["2"]:
            items["2"] = math.nan
        if "gone" in cands["3"]:
            del items["3"]
        return Report([MetricResult("rouge-l", r.system, items, Signature(dict(r.signature.fields)))])

    monkeypatch.setattr(Evaluator, "score", score)
    refs = {"1": ["a cat"], "2": ["a dog"], "3": ["a bird"]}
    with pytest.raises(InputError, match=r"rouge-l of system 'B': item '2' has a score of nan;"):
        capeval.compare({"A": {"1": "a cat", "2": "a dog", "3": "a bird"},
                         "B": {"1": "a cat", "2": "a blob", "3": "a bird"}}, refs, "rouge-l", samples=10)
    with pytest.raises(InputError, match=r"rouge-l of system 'A': item '3' has no score \(left out by the metric\)"):
        capeval.compare({"A": {"1": "a cat", "2": "a dog", "3": "gone"},
                         "B": {"1": "a cat", "2": "a dog", "3": "a bird"}}, refs, "rouge-l", samples=10)
