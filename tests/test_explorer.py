"""The per-item explorer's page (issue 51), without a browser: the data blocks are inert JSON
that round-trips, the policy allows exactly the page's own script and style, hostile ids,
captions, references and metric names stay data, and the CLI paths (score --html, report of a
saved score result, compare --html) carry the scores that the scorers computed."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import capeval
from capeval.cli.main import main
from capeval.explorer.data import encode, script_json
from capeval.explorer.page import write_page

from _explorer_cases import CHAIR_MARKS, write_coco

HOSTILE = ["</script><script>alert(1)</script>", "<!--<script>", "javascript:alert(1)", "\"'><img src=x onerror=alert(1)>",
           "a\u2028b\u2029c", "&lt;b&gt;", "</SCRIPT >", "\\u003c/script>"]


class _Page(HTMLParser):
    """Tags, attributes and the text of each <script> and <style>, as a browser tokenizes them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.raw: list[tuple[str, dict[str, str | None], str]] = []
        self._open: tuple[str, dict[str, str | None]] | None = None
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._open = (tag, dict(attrs))
            self.raw.append((tag, dict(attrs), ""))

    def handle_data(self, data):
        if self._open is not None:
            tag, attrs, text = self.raw[-1]
            self.raw[-1] = (tag, attrs, text + data)

    def handle_endtag(self, tag):
        if self._open is not None and tag == self._open[0]:
            self._open = None

    def handle_comment(self, data):
        self.comments.append(data)


def parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def check_page(text: str) -> tuple[dict, list]:
    """The page's structure: the policy first, two JSON blocks and one script whose hash the
    policy names, no other element that runs or loads anything; returns (meta, rows)."""
    page = parse(text)
    assert not page.comments
    tags = [t for t, _ in page.tags]
    assert tags[:4] == ["html", "head", "meta", "meta"]
    policy = page.tags[3][1]
    assert policy["http-equiv"] == "Content-Security-Policy"
    csp = {d.split()[0]: d.split()[1:] for d in policy["content"].split(";") if d.strip()}
    assert csp["default-src"] == ["'none'"] and csp["base-uri"] == ["'none'"] and csp["form-action"] == ["'none'"]
    assert csp["img-src"] == ["'self'", "data:"] and csp["object-src"] == ["'none'"]
    scripts = [r for r in page.raw if r[0] == "script"]
    styles = [r for r in page.raw if r[0] == "style"]
    assert [s[1].get("type") for s in scripts] == ["application/json", "application/json", None]
    assert csp["script-src"] == [_sha(scripts[2][2])] and csp["style-src"] == [_sha(styles[0][2])]
    assert set(tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "div", "table", "span", "label",
                         "select", "input", "script", "noscript", "p"}, set(tags)
    for _, attrs in page.tags:
        assert not any(k.startswith("on") or k in ("src", "href") for k in attrs), attrs
    return json.loads(scripts[0][2]), json.loads(scripts[1][2])


def test_script_json_is_inert_and_round_trips():
    value = {"ids": HOSTILE, "nested": [{"k</script>": HOSTILE}], "x": 1.5, "surrogate": "a\ud800b"}
    text = script_json(value)
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    raw = encode(text)
    raw.decode("utf-8")  # valid UTF-8 even with a lone surrogate in the data
    assert json.loads(raw.decode("utf-8")) == value
    assert json.loads(script_json({"nan": float("nan"), "inf": float("-inf")})) == {"nan": None, "inf": None}


def test_hostile_strings_stay_data_in_the_page(tmp_path):
    meta = {"systems": HOSTILE[:2], "columns": [{"label": h, "metric": h} for h in HOSTILE],
            "summary": [{"metric": h, "system": 1.0, "signature": h} for h in HOSTILE], "notes": HOSTILE,
            "images": True}
    rows = [[h, [h, h], [h, h], h, [0.5] * len(HOSTILE), {h: h}, [[h], [h]]] for h in HOSTILE]
    path = tmp_path / "p.html"
    assert write_page(str(path), HOSTILE[0], meta, iter(rows)) == len(rows)
    got_meta, got_rows = check_page(path.read_text(encoding="utf-8"))
    assert got_rows == rows and got_meta == {**meta, "title": HOSTILE[0]}
    assert "<title>&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;</title>" in path.read_text()


def test_the_script_takes_thumbnails_only_from_data_images_or_relative_files():
    js = (Path(capeval.__file__).parent / "data" / "explorer" / "explorer.js").read_text()
    pattern = re.search(r"function safeThumb\(u\) \{\s*return typeof u === \"string\" && \((.*?)\) \? u : null;",
                        js, re.S).group(1)
    data_re, file_re = [r.replace("\\/", "/") for r in re.findall(r"/\^(.*?)\$/", pattern)]
    assert 'u.split("/").indexOf("..") < 0' in pattern

    def ok(u: str) -> bool:  # the script's test, in Python
        return bool(re.fullmatch(data_re, u) or (re.fullmatch(file_re, u) and ".." not in u.split("/")))

    assert ok("data:image/jpeg;base64,AAAA") and ok("page_files/im%201.jpg")
    for bad in ("javascript:alert(1)", "data:text/html,<script>", "/etc/passwd", "http://x/y.jpg", "a/../b.jpg",
                "data:image/svg+xml;base64,AAAA", "//evil/x.jpg", "..", "x:y", "JAVASCRIPT:x"):
        assert not ok(bad), bad


def _files(tmp_path, cands, refs):
    c, r = tmp_path / "c.json", tmp_path / "r.json"
    c.write_text(json.dumps(cands))
    r.write_text(json.dumps(refs))
    return c, r


CANDS = {f"im{k}": f"a dog runs on the grass number {k}" for k in range(12)}
REFS = {f"im{k}": [f"a dog running on grass {k}", "the dog is on the lawn"] for k in range(12)}


def test_score_html_with_hostile_ids_captions_and_references(tmp_path, capsys):
    cands = {**CANDS, **{h: h for h in HOSTILE}}
    refs = {**REFS, **{h: [h, "x " + h] for h in HOSTILE}}
    c, r = _files(tmp_path, cands, refs)
    page, per = tmp_path / "page.html", tmp_path / "per.json"
    assert main(["score", "-c", str(c), "-r", str(r), "-m", "bleu-4,cider-d", "--per-item", str(per),
                 "--html", str(page), "-q"]) == 0
    meta, rows = check_page(page.read_text(encoding="utf-8"))
    scores = json.loads(per.read_text())
    assert [c["metric"] for c in meta["columns"]] == ["bleu-4", "cider-d"]
    assert [row[0] for row in rows] == list(cands)
    for row in rows:
        assert row[1] == [cands[row[0]]] and row[2] == refs[row[0]] and row[3] is None
        assert row[4] == [scores["bleu-4"][row[0]], scores["cider-d"][row[0]]]


def test_html_options_are_checked_before_scoring(tmp_path, capsys):
    c, r = _files(tmp_path, CANDS, REFS)
    assert main(["score", "-c", str(c), "-r", str(r), "-m", "bleu-4", "--html-images", "embed"]) == 2
    assert "--html-images embed given without --html" in capsys.readouterr().err
    assert main(["score", "-c", str(c), "-r", str(r), "-m", "bleu-4", "--html", str(tmp_path / "p.html"),
                 "--html-images", "link"]) == 2
    assert "no pictures to show" in capsys.readouterr().err
    assert main(["score", "-c", str(c), "-r", str(r), "-m", "bleu-4", "--html", str(c)]) == 2
    assert "is also an input file" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()


def _images(folder: Path, ids) -> None:
    from PIL import Image

    folder.mkdir()
    for k, i in enumerate(ids):
        Image.new("RGB", (400, 300), (20 * k % 255, 120, 200)).save(folder / f"{i}.png")


@pytest.mark.parametrize("mode", ["embed", "link"])
def test_score_page_of_an_items_table_with_images(tmp_path, mode):
    from PIL import Image

    _images(tmp_path / "imgs", list(CANDS)[:-1])  # the last item has no picture
    table = tmp_path / "items.jsonl"
    table.write_text("".join(json.dumps({"id": i, "candidate": CANDS[i], "references": REFS[i],
                                         **({"image": str(tmp_path / "imgs" / f"{i}.png")} if i != "im11" else {})})
                             + "\n" for i in CANDS))
    page = tmp_path / "out" / "page.html"
    page.parent.mkdir()
    assert main(["score", "--items", str(table), "-m", "bleu-4", "--html", str(page), "--html-images", mode, "-q"]) == 0
    meta, rows = check_page(page.read_text(encoding="utf-8"))
    assert meta["images"] is True and rows[-1][3] is None
    for row in rows[:-1]:
        if mode == "embed":
            assert row[3].startswith("data:image/jpeg;base64,")
        else:
            assert row[3] == f"page_files/{row[0]}.jpg"
            assert Image.open(page.parent / row[3]).size == (192, 144)


def test_thumbnails_of_a_folder(tmp_path):
    from PIL import Image

    from capeval.explorer.thumbs import make

    _images(tmp_path / "imgs", ["a", "b"])
    (tmp_path / "imgs" / "c.png").write_bytes(b"not an image")
    for mode in ("embed", "link"):
        thumbs = make(mode, str(tmp_path / "imgs"), ["a", "b", "c", "d"], str(tmp_path / "p.html"))
        urls = {i: thumbs(i) for i in "abcd"}
        assert urls["d"] is None and urls["c"] is None and "c" in thumbs.failed
        if mode == "embed":
            data = base64.b64decode(urls["a"].split(",", 1)[1])
            img = Image.open(__import__("io").BytesIO(data))
        else:
            assert urls["a"] == "p_files/a.jpg"
            img = Image.open(tmp_path / urls["a"])
        assert img.format == "JPEG" and max(img.size) == 192 and img.size == (192, 144)
    assert make("none", str(tmp_path / "imgs"), ["a"], str(tmp_path / "p.html")) is None




def test_chair_page_and_the_report_of_the_saved_result(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    cands = write_coco(tmp_path / "coco")
    Path("c.json").write_text(json.dumps(cands))
    args = ["-m", "chair", "-O", "chair.annotations=coco", "-c", "c.json", "-q"]
    assert main(["score", *args, "--html", "live.html", "--out", "out.json", "--per-item", "per.json",
                 "--per-item-extras", "ex.json"]) == 0
    _, live = check_page(Path("live.html").read_text(encoding="utf-8"))
    assert {row[0]: row[6] for row in live} == {k: [v] for k, v in CHAIR_MARKS.items()}
    capsys.readouterr()
    assert main(["report", "out.json", "--html", "saved.html"]) == 2
    assert "--per-item FILE" in capsys.readouterr().err
    assert main(["report", "out.json", "--html", "saved.html", "--per-item", "per.json",
                 "--per-item-extras", "ex.json"]) == 0
    meta, saved = check_page(Path("saved.html").read_text(encoding="utf-8"))
    assert saved == live and [c["metric"] for c in meta["columns"]] == ["chair-s", "chair-i"]
    per = json.loads(Path("per.json").read_text())
    assert [row[4] for row in saved] == [[per["chair-s"][k], per["chair-i"][k]] for k in cands]


def test_compare_page_has_each_items_differences(tmp_path, capsys):
    other = {k: (REFS[k][0] if int(k[2:]) % 2 else v) for k, v in CANDS.items()}
    c, r = _files(tmp_path, CANDS, REFS)
    b = tmp_path / "b.json"
    b.write_text(json.dumps(other))
    page = tmp_path / "cmp.html"
    assert main(["compare", "-c", f"base={c}", f"new={b}", "-r", str(r), "-m", "cider-d,bleu-4", "--samples", "20",
                 "--html", str(page), "-q"]) == 0
    assert "<a href='cmp.items.html'>" in page.read_text()
    meta, rows = check_page((tmp_path / "cmp.items.html").read_text(encoding="utf-8"))
    assert meta["systems"] == ["base", "new"] and meta["sort"] == 2
    assert [c["label"] for c in meta["columns"]] == ["cider-d · base", "cider-d · new", "cider-d Δ new",
                                                    "bleu-4 · base", "bleu-4 · new", "bleu-4 Δ new"]
    mine = capeval.score(CANDS, REFS, metrics=["cider-d", "bleu-4"])
    theirs = capeval.score(other, REFS, metrics=["cider-d", "bleu-4"])
    for row in rows:
        i = row[0]
        assert row[1] == [CANDS[i], other[i]]
        for k, m in enumerate(["cider-d", "bleu-4"]):
            a, z = mine[m].items[i], theirs[m].items[i]
            assert row[4][3 * k: 3 * k + 3] == [a, z, z - a]


def test_explanation_pictures_of_an_explain_folder(tmp_path):
    import io

    from PIL import Image

    from capeval.explorer.data import score_rows
    from capeval.explorer.thumbs import explanations
    from capeval.metrics.hice.explain import safe_name
    from capeval.result import MetricResult, Signature

    folder = tmp_path / "explain"
    folder.mkdir()
    Image.new("RGB", (1280, 960), (200, 30, 30)).save(folder / f"{safe_name('a/b')}.png")
    for mode, check in (("embed", lambda u: Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1])))),
                        ("link", lambda u: Image.open(tmp_path / u))):
        explained = explanations(mode, str(folder), ["a/b", "c"], str(tmp_path / "p.html"))
        result = MetricResult("hice-s", 0.5, {"a/b": 0.25, "c": 0.75}, Signature.build("hice-s"))
        rows = list(score_rows([("a/b", "x", ["y"]), ("c", "z", ["w"])], [result], None, explained))
        assert rows[1][7] is None and rows[0][4] == [0.25]
        assert check(rows[0][7]).size == (640, 480)
    assert explanations("none", str(folder), ["a/b"], str(tmp_path / "p.html")) is None


def test_report_of_a_hostile_saved_score_result(tmp_path, monkeypatch, capsys):
    """A saved result may come from anyone: metric names, signatures (where options are written),
    counters, ids and extras full of markup stay data on the page."""
    monkeypatch.chdir(tmp_path)
    ids = HOSTILE[:4]
    Path("c.json").write_text(json.dumps({i: i + " caption" for i in ids}))
    metric = HOSTILE[0]
    saved = {"scores": {metric: 0.5}, "signatures": {metric: HOSTILE[3]},
             "results": [{"metric": metric, "system": 0.5, "signature": "metric:x|opt:" + HOSTILE[1], "n": 4,
                          "extras": {HOSTILE[2]: HOSTILE[3], "truncated_candidates": 2}}],
             "inputs": {"candidates": {"path": "c.json"}}}
    Path("out.json").write_text(json.dumps(saved))
    Path("per.json").write_text(json.dumps({metric: {i: k / 4 for k, i in enumerate(ids)}}))
    Path("ex.json").write_text(json.dumps({metric: {"hallucinated": {i: [[HOSTILE[0], "x"]] for i in ids}}}))
    assert main(["report", "out.json", "--html", "p.html", "--per-item", "per.json", "--per-item-extras", "ex.json"]) == 0
    meta, rows = check_page(Path("p.html").read_text(encoding="utf-8"))
    assert meta["summary"][0]["signature"] == "metric:x|opt:" + HOSTILE[1]
    assert meta["summary"][0]["counters"] == {HOSTILE[2]: HOSTILE[3], "truncated_candidates": 2}
    assert [r[0] for r in rows] == ids and [r[4] for r in rows] == [[k / 4] for k in range(4)]
    assert rows[0][5] == {f"{metric}.hallucinated": [[HOSTILE[0], "x"]]} and rows[0][6] == [[HOSTILE[0]]]
    Path("per.json").write_text(json.dumps({metric: {ids[0]: "<b>"}}))
    assert main(["report", "out.json", "--html", "p2.html", "--per-item", "per.json"]) == 2
    assert "expected a number or null" in capsys.readouterr().err and not Path("p2.html").exists()
