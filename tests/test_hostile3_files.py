"""Issue 46, item 3 and two of item 8: nesting and size bounds on every file capeval reads.

COCO annotation folders for CHAIR (streamed by ijson: each chunk is checked by
``capeval.io.nesting.StreamShape`` before the parser sees it), AMBER's folder, DetailCaps'
``GPT4_Eval`` field, ``capeval report`` result files, numbers of thousands of digits, and
Parquet tables (``--items``, DetailCaps) read column by column, only the columns used, each
bounded like a JSON document. Every bad file ends in one ``capeval: error:`` line naming it,
exit status 2, no traceback; memory is checked where it was unbounded (a child under
``RLIMIT_AS`` whose peak resident size, ``ru_maxrss``, must stay small). No timings.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capeval.cli.main import main
from capeval.errors import InputError, ResourceError
from capeval.io.nesting import MAX_DEPTH, StreamShape, json_loads
from capeval.io.reading import read_json

ROOT = Path(__file__).resolve().parents[1]
GB, MB = 2**30, 2**20
#: the peak resident size a bounded child stays under (capeval with pyarrow loaded: ~100 MB)
RSS_BOUND = 400 * MB


# -- helpers ----------------------------------------------------------------------------------


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code: int, err: str, *fragments: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("capeval: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _child(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> tuple:
    """``capeval ARGS`` in a grandchild under a 3 GB address-space limit: (exit status, stdout,
    stderr, its own peak resident size in bytes); a hang is a failure after ``timeout``."""
    code = (
        "import json, os, resource, subprocess, sys\n"
        "args, timeout = json.loads(sys.argv[1])\n"
        "def pre():\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "p = subprocess.run([sys.executable, '-m', 'capeval.cli', *args], capture_output=True, text=True,\n"
        "                   preexec_fn=pre, timeout=timeout)\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "print(json.dumps([p.returncode, p.stdout, p.stderr, rss]))\n"
    )
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
                    OPENBLAS_NUM_THREADS="1", CAPEVAL_CACHE=str(cwd / "cache"), **(env or {}))
    res = subprocess.run([sys.executable, "-c", code, json.dumps([args, timeout])], cwd=cwd, capture_output=True,
                         text=True, timeout=timeout + 60, env=full_env, check=False)
    assert res.returncode == 0, res.stderr  # a TimeoutExpired of the grandchild lands here
    return tuple(json.loads(res.stdout))


def _child_line(result: tuple, *fragments: str) -> str:
    code, out, err, _ = result
    assert out == "", out
    return _one_line(code, err, *fragments)


def _reference_depth(text: str) -> int:
    """The deepest nesting of a JSON text, character by character (the slow, obvious way)."""
    depth = best = 0
    inside = escaped = False
    for ch in text:
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
        elif ch == '"':
            inside = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def _feed(shape: StreamShape, data: bytes, rng: random.Random) -> None:
    pos = 0
    while pos < len(data):
        n = rng.choice((1, 2, 3, 5, 64, 4096, 1 << 20))
        shape.feed(data[pos:pos + n])
        pos += n


# -- the streamed-document check (capeval.io.nesting.StreamShape) -----------------------------


def test_stream_shape_finds_the_depth_and_top_level_keys_of_any_chunking() -> None:
    """Random documents full of quotes, backslashes and brackets inside strings, fed in random
    chunks (an escape or a key cut in two): the depth found equals a character-by-character
    count, one level less is refused, and the top-level keys of interest are found."""
    rng = random.Random(46)
    alphabet = ['a', '"', '\\', '[', ']', '{', '}', ':', ',', 'é', '\n', ' ', 'annotations']

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))

    def value(level: int):
        r = rng.random()
        if level > 6 or r < 0.3:
            return rng.choice([1, 2.5, None, True, text()])
        if r < 0.65:
            return [value(level + 1) for _ in range(rng.randint(0, 4))]
        return {text(): value(level + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(400):
        doc = {text(): value(1) for _ in range(rng.randint(0, 5))}
        if rng.random() < 0.6:
            doc["annotations"] = value(1)
        raw = json.dumps(doc, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1])).encode()
        depth = _reference_depth(raw.decode())
        shape = StreamShape("f.json", max_string=1 << 30, keys=("annotations", "images"), limit=depth)
        _feed(shape, raw, rng)
        assert shape.values == {k: json.dumps(v)[0] for k, v in doc.items() if k in ("annotations", "images")}
        with pytest.raises(InputError, match="nested more than"):
            _feed(StreamShape("f.json", max_string=1 << 30, limit=depth - 1), raw, rng)


@pytest.mark.parametrize("raw,fragment", [
    (b'{"annotations": [], "annotations": []}', "key 'annotations' appears twice in the top-level object"),
    (b'{"annot\\u0061tions": [], "annotations": []}', "key 'annotations' appears twice"),  # the same key, escaped
    (b'[{"annotations": []}]', "expected a JSON object {...} at the top, found a list"),
    (b'  "annotations"', "found a string"),
    (b"{" + b'"k": 1, ' * 1001 + b'"annotations": []}', "more than 1,000 keys in the top-level object"),
    (b'{"a": "' + b"x" * 101 + b'"}', "a string longer than 100 bytes"),
    (b'{"a": "' + b'\\"' * 51 + b'"}', "a string longer than 100 bytes"),
    (b'{"a": ' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}", "nested more than 100 levels deep"),
])
def test_stream_shape_refusals(raw: bytes, fragment: str) -> None:
    for chunk in (1, 7, 1 << 20):
        shape = StreamShape("f.json", max_string=100, keys=("annotations",))
        with pytest.raises(InputError) as exc:
            for i in range(0, len(raw), chunk):
                shape.feed(raw[i:i + chunk])
        assert str(exc.value).startswith("f.json: ") and fragment in str(exc.value), exc.value


@pytest.mark.parametrize("raw", [
    b'{"info": "annotations", "annotations": []}',  # a string value, not a key
    b'{"a": "' + b'\\"' * 50 + b'"}',  # 100 bytes: at the limit
    b'{"a": "[[[[{{{{", "b": ' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}",  # brackets in a string
])
def test_stream_shape_accepts(raw: bytes) -> None:
    for chunk in (1, 3, 1 << 20):
        shape = StreamShape("f.json", max_string=100, keys=("annotations",))
        for i in range(0, len(raw), chunk):
            shape.feed(raw[i:i + chunk])


# -- numbers of thousands of digits: refused as integers, read as floats -------------------------


def test_an_integer_of_5000_digits_is_one_line_naming_the_file_and_line() -> None:
    with pytest.raises(InputError, match=r"^f\.json, line 3: an integer with more than 4,300 digits; refused"):
        json_loads('{"a": 1,\n "b": [2,\n' + "9" * 5000 + "]}", "f.json")
    with pytest.raises(InputError, match="an integer with more than 4,300 digits"):
        json_loads("[-" + "1" * 4301 + "]", "f.json")
    assert json_loads("[" + "1" * 4300 + "]", "f.json") == [int("1" * 4300)]  # Python's own limit, inclusive


def test_a_float_of_5000_digits_is_read_as_python_reads_it() -> None:
    text = "1." + "5" * 5000
    assert json_loads(f"[{text}, {text}e2]", "f.json") == [float(text), float(text + "e2")]
    assert json_loads('["' + "9" * 5000 + '"]', "f.json") == ["9" * 5000]  # digits in a string are text


def test_cli_items_and_captions_with_an_integer_of_5000_digits(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("c.json").write_text('{"a": ' + "9" * 5000 + "}")
    Path("i.jsonl").write_text('{"id": "a", "candidate": "x"}\n{"id": ' + "9" * 5000 + ', "candidate": "y"}\n')
    _one_line(*_run(capsys, "score", "-q", "-m", "length", "-c", "c.json")[::2], "c.json, line 1: an integer with")
    _one_line(*_run(capsys, "score", "-q", "-m", "length", "--items", "i.jsonl")[::2], "i.jsonl, line 2: an integer")


# -- result files of bench / reproduce (capeval report) -----------------------------------------


@pytest.mark.parametrize("text,fragment", [
    ('{"cells": ' + "[" * 200_000 + "]" * 200_000 + "}", "r.json, line 1: nested more than 100 levels deep"),
    ('{"results": [' + "[" * 5000 + "]" * 5000 + '], "benchmarks": []}', "nested more than 100 levels deep"),
    ('{"cells": [{"value": ' + "9" * 5000 + "}]}", "r.json, line 1: an integer with more than 4,300 digits"),
    ('{"cells": [], "cells": []}', "r.json: key 'cells' appears twice in one object"),
    ('{"cells": [', "r.json: invalid JSON at line 1, column 12"),
    ("", "r.json: invalid JSON at line 1, column 1"),
])
def test_report_reads_a_result_file_within_bounds(tmp_path, capsys, text: str, fragment: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    _one_line(*_run(capsys, "report", str(path), "--html", str(tmp_path / "o.html"))[::2], fragment)
    assert not (tmp_path / "o.html").exists()


def test_read_json_keeps_what_a_result_file_may_hold(tmp_path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(b'\xef\xbb\xbf{"v": NaN, "w": [Infinity, 1.' + b"5" * 5000 + b"]}")  # BOM, NaN: written by us
    data = read_json(path)
    assert np.isnan(data["v"]) and data["w"] == [float("inf"), float("1." + "5" * 5000)]
    folder = tmp_path / "d.json"
    folder.mkdir()
    with pytest.raises(InputError, match="expected a file, got a directory"):
        read_json(folder)


# -- CHAIR: the COCO 2014 annotation folder ------------------------------------------------------

CATS = [{"id": 1, "name": "dog"}, {"id": 2, "name": "cat"}]
IMAGES = [{"id": 1, "file_name": "COCO_val2014_000000000001.jpg"}]
GOOD = {
    "instances_train2014.json": {"images": [], "categories": CATS, "annotations": []},
    "instances_val2014.json": {"info": {}, "images": IMAGES, "categories": CATS, "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "segmentation": [[1.5, 2.5, 3.0, 4.0]]}]},
    "captions_train2014.json": {"images": [], "annotations": []},
    "captions_val2014.json": {"images": IMAGES, "annotations": [{"id": 1, "image_id": 1, "caption": "a dog"}]},
}
INST, CAPS = "instances_val2014.json", "captions_val2014.json"


@pytest.fixture
def coco(tmp_path, monkeypatch) -> Path:
    pytest.importorskip("ijson")
    pytest.importorskip("punkt.data.english")
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "coco"
    folder.mkdir()
    for name, obj in GOOD.items():
        (folder / name).write_text(json.dumps(obj))
    (tmp_path / "c.json").write_text(json.dumps({"1": "a dog and a cat"}))
    return folder


def _chair(capsys, folder: Path, *extra: str) -> tuple[int, str, str]:
    return _run(capsys, "score", "-q", "-m", "chair", f"-Ochair.annotations={folder}", "-c",
                str(folder.parent / "c.json"), *extra)


def test_chair_reads_the_good_folder(coco, capsys) -> None:
    code, out, err = _chair(capsys, coco)
    assert code == 0, err
    assert json.loads(out)["scores"] == {"chair-s": 1.0, "chair-i": 0.5}  # the cat is hallucinated


_INST_HEAD = '{"categories": [{"id": 1, "name": "dog"}], "annotations": ['


@pytest.mark.parametrize("name,text,fragment", [
    # item 8: a top-level list (before: read as an empty file, every object hallucinated, exit 0)
    (INST, "[1, 2, 3]", "instances_val2014.json: expected a JSON object {...} at the top, found a list"),
    (INST, '"hello"', "expected a JSON object {...} at the top, found a string"),
    (INST, '{"categories": [{"id": 1, "name": "dog"}]}', "instances_val2014.json: no 'annotations' list at the top"),
    (CAPS, '{"annotations": []}', "captions_val2014.json: no 'images' list at the top level"),
    (INST, '{"categories": [], "annotations": {"a": 1}}', "'annotations' must be a list [...]"),
    (INST, _INST_HEAD + "[1, 2]]}", "instances_val2014.json: annotations[0]: expected an object, got a list"),
    (INST, '{"categories": ["dog"], "annotations": []}', "categories[0]: expected an object, got a string"),
    (INST, '{"categories": [{"id": 1, "name": 5}], "annotations": []}', "categories[0]: name=5, expected a string"),
    (CAPS, '{"images": [{"id": 1, "file_name": ["x"]}], "annotations": []}', "images[0]: file_name=['x'], expected"),
    (CAPS, '{"images": [7], "annotations": []}', "images[0]: expected an object, got a number"),
    (INST, _INST_HEAD + '{"id": 1, "image_id": 1.5, "category_id": 1}]}', "annotations[0]: image_id=1.5, expected"),
    # silent last-wins, refused
    (INST, _INST_HEAD + '{"id": 1, "image_id": 1, "category_id": 1, "category_id": 2}]}',
     "annotations[0]: the key 'category_id' appears twice"),
    (INST, '{"categories": [], "annotations": [], "annotations": []}', "key 'annotations' appears twice in the top"),
    (INST, '{"categories": [{"id": 1, "name": "dog"}, {"id": 1, "name": "cat"}], "annotations": []}',
     "categories[1]: category id 1 is given twice, as 'dog' and 'cat'"),
    (CAPS, '{"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "a.jpg"}], "annotations": []}',
     "images[1]: file name 'a.jpg' is given to two images, 1 and 2"),
    # numbers, literals, broken text
    (INST, _INST_HEAD + '{"id": 1, "image_id": ' + "9" * 5000 + ', "category_id": 1}]}', "not valid JSON (parse error"),
    (INST, _INST_HEAD + '{"id": 1, "image_id": 1, "category_id": 1, "area": NaN}]}', "not valid JSON (lexical error"),
    (INST, _INST_HEAD + '{"id": 1, "image_id": 1, "category_id": 1, "area": 1e99999}]}', "not valid JSON"),
    (INST, _INST_HEAD + '{"id": 1, "image_id": 1, "categ', "instances_val2014.json: not valid JSON (parse error: "),
    (INST, "", "instances_val2014.json: not valid JSON (parse error: premature EOF)"),
    (INST, '{"categories": [], "annotations": []} {"a": 1}', "not valid JSON (parse error: trailing garbage)"),
    (CAPS, b'{"images": [], "annotations": [{"id": 1, "image_id": 1, "caption": "a \xff dog"}]}',
     "captions_val2014.json: not valid JSON (lexical error: invalid bytes in UTF8 string.)"),
    # depth: a list or an object nested 200,000 deep, in a list read or in a key nobody reads
    (INST, _INST_HEAD + "[" * 200_000 + "]" * 200_000 + "]}", "instances_val2014.json: nested more than 100 levels"),
    (INST, '{"info": ' + '{"a": ' * 200_000 + "1" + "}" * 200_000 + ', "categories": [], "annotations": []}',
     "nested more than 100 levels deep"),
])
def test_chair_annotation_file_is_one_line_naming_it(coco, capsys, name: str, text, fragment: str) -> None:
    path = coco / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    code, out, err = _chair(capsys, coco)
    assert out == ""
    line = _one_line(code, err, fragment)
    assert str(path) in line


def test_chair_reads_a_bom_and_floats_of_many_digits_as_the_plain_file(coco, capsys) -> None:
    """A byte order mark and a 5,000-digit coordinate are legitimate: same result as without."""
    code, plain, err = _chair(capsys, coco)
    assert code == 0, err
    inst = GOOD[INST] | {"annotations": [{"id": 1, "image_id": 1, "category_id": 1,
                                          "segmentation": "SEGMENT"}]}
    text = json.dumps(inst).replace('"SEGMENT"', "[[1." + "3" * 5000 + "]]")
    (coco / INST).write_bytes(b"\xef\xbb\xbf" + text.encode())
    code, out, err = _chair(capsys, coco)
    assert code == 0, err
    assert json.loads(out)["scores"] == json.loads(plain)["scores"]


def test_chair_annotation_size_is_checked_before_the_file_is_hashed(coco, capsys, monkeypatch) -> None:
    import capeval.metrics.chair.annotations as annotations

    def no_hash(paths):
        raise AssertionError("hashed before the size was checked")

    monkeypatch.setattr(annotations, "files_digest", no_hash)
    monkeypatch.setenv("CAPEVAL_MAX_ANNOTATION_BYTES", "100")
    _one_line(*_chair(capsys, coco)[::2], "instances_train2014.json: ", "bytes, more than the 100 an annotation",
              "CAPEVAL_MAX_ANNOTATION_BYTES")


def test_chair_strings_are_bounded_and_read_whole_within_the_bound(coco, capsys, monkeypatch) -> None:
    """A string longer than CAPEVAL_MAX_LINE_BYTES is refused (ijson re-scans a string split over
    its reads: 100 MB took minutes); a long one within the bound is read as it is."""
    # (in a field CHAIR does not tokenize: its Punkt rules are slow on a long word)
    caps = GOOD[CAPS] | {"images": [{**IMAGES[0], "coco_url": "x" * (3 * MB)}]}
    (coco / CAPS).write_text(json.dumps(caps))
    code, out, err = _chair(capsys, coco)
    assert code == 0, err
    assert json.loads(out)["scores"] == {"chair-s": 1.0, "chair-i": 0.5}
    monkeypatch.setenv("CAPEVAL_MAX_LINE_BYTES", str(MB))
    _one_line(*_chair(capsys, coco, "-Ochair.cache=false")[::2], "captions_val2014.json: a string longer than 1,048,576",
              "CAPEVAL_MAX_LINE_BYTES")


def test_chair_nested_200000_deep_in_bounded_memory(tmp_path) -> None:
    """Before: ijson kept the path of every level (quadratic), 21 GB and the OOM killer (here:
    a MemoryError traceback at the 3 GB address-space limit)."""
    pytest.importorskip("ijson")
    pytest.importorskip("punkt.data.english")
    folder = tmp_path / "coco"
    folder.mkdir()
    for name, obj in GOOD.items():
        (folder / name).write_text(json.dumps(obj))
    (folder / INST).write_text(_INST_HEAD + "[" * 200_000 + "]" * 200_000 + "]}")
    (tmp_path / "c.json").write_text(json.dumps({"1": "a dog"}))
    result = _child(["score", "-q", "-m", "chair", f"-Ochair.annotations={folder}", "-c", "c.json"], tmp_path)
    _child_line(result, "instances_val2014.json: nested more than 100 levels deep")
    assert result[3] < RSS_BOUND, result[3]


def _cache_entry(folder: Path) -> Path:
    entries = list((folder.parent / "cache" / "chair").glob("coco2014-*.json"))
    assert len(entries) == 1, entries
    return entries[0]


@pytest.mark.parametrize("change", [
    lambda d: {**d, "categories": [1, 2]},
    lambda d: {**d, "captions": {"1": 5}},
    lambda d: {k: v for k, v in d.items() if k != "files"},
    lambda d: {**d, "categories": {"x": ["dog"]}},
    lambda d: {**d, "categories": {"1": [1, 2]}},
    lambda d: {**d, "files": {"a.jpg": "x"}},
    lambda d: {**d, "files": {"a.jpg": 1.5}},
    lambda d: [d],
    lambda d: {**d, "layout": "1"},
], ids=["categories-list", "captions-int", "no-files", "key-not-number", "names-ints", "file-id-text",
        "file-id-float", "top-list", "layout-text"])
def test_chair_cache_entry_of_the_wrong_shape_is_a_miss_and_rebuilt(coco, capsys, change) -> None:
    """Item 8: the right digest and the wrong shape (before: AttributeError / KeyError /
    ValueError tracebacks at every run) is a miss: rebuilt, same result, valid again."""
    code, first, err = _chair(capsys, coco)
    assert code == 0, err
    entry = _cache_entry(coco)
    good = json.loads(entry.read_text())
    entry.write_text(json.dumps(change(good)))
    code, again, err = _chair(capsys, coco)
    assert code == 0 and err == "", err
    assert json.loads(again)["scores"] == json.loads(first)["scores"]
    assert json.loads(entry.read_text()) == good  # rebuilt


@pytest.mark.parametrize("damage", ["deep", "digits", "truncated", "utf8", "duplicate"])
def test_chair_damaged_cache_entry_is_rebuilt(coco, capsys, damage: str) -> None:
    code, first, err = _chair(capsys, coco)
    assert code == 0, err
    entry = _cache_entry(coco)
    good = entry.read_text()
    entry.write_bytes({"deep": b'{"layout": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
                       "digits": good.replace('"layout": 1', '"layout": ' + "1" * 5000).encode(),
                       "truncated": good[:40].encode(), "utf8": b"\xff\xfe{}",
                       "duplicate": good.replace('{"layout": 1', '{"layout": 1, "layout": 1').encode()}[damage])
    code, again, err = _chair(capsys, coco)
    assert code == 0 and err == "", err
    assert again == first and entry.read_text() == good


def test_chair_cache_entry_that_is_a_fifo_or_a_folder_is_left_alone(tmp_path) -> None:
    """Before: a FIFO in the cache hung the run (the write blocked on it), a folder was an error."""
    pytest.importorskip("ijson")
    pytest.importorskip("punkt.data.english")
    folder = tmp_path / "coco"
    folder.mkdir()
    for name, obj in GOOD.items():
        (folder / name).write_text(json.dumps(obj))
    (tmp_path / "c.json").write_text(json.dumps({"1": "a dog and a cat"}))
    args = ["score", "-q", "-m", "chair", f"-Ochair.annotations={folder}", "-c", "c.json"]
    code, out, err, _ = _child(args, tmp_path)
    assert code == 0, err
    entry = _cache_entry(folder)
    for kind in ("fifo", "folder"):
        entry.unlink() if entry.is_file() or entry.is_fifo() else entry.rmdir()
        os.mkfifo(entry) if kind == "fifo" else entry.mkdir()
        again = _child(args, tmp_path, timeout=120)
        assert again[0] == 0 and json.loads(again[1]) == json.loads(out), again[2]
        assert entry.is_fifo() if kind == "fifo" else entry.is_dir()  # not replaced, not written through


# -- AMBER ---------------------------------------------------------------------------------------


@pytest.fixture
def amber(tmp_path) -> Path:
    import _amber_cases

    folder = tmp_path / "amber"
    _amber_cases.build(folder)
    (tmp_path / "r.json").write_text(json.dumps([{"id": 1201, "response": "Yes"}]))
    return folder


def _amber(capsys, folder: Path) -> tuple[int, str, str]:
    tools = [f"-Oamber.{n}=_amber_cases:{n}" for n in ("tokenize", "tag", "lemmatize", "similarity")]
    return _run(capsys, "score", "-q", "-m", "amber-d", f"-Oamber.annotations={folder}", *tools, "-c",
                str(folder.parent / "r.json"))


@pytest.mark.parametrize("name,text,fragment", [
    ("annotations.json", "[" * 200_000 + "]" * 200_000, "annotations.json, line 1: nested more than 100 levels"),
    ("relation.json", '{"a": ' * 200_000 + "1" + "}" * 200_000, "relation.json, line 1: nested more than 100"),
    ("annotations.json", '[{"id": ' + "9" * 5000 + ', "type": "generative"}]',
     "annotations.json, line 1: an integer with more than 4,300 digits"),
    ("relation.json", '{"dog": [], "dog": ["puppy"]}', "relation.json: key 'dog' appears twice"),
])
def test_amber_annotation_file_is_one_line_naming_it(amber, capsys, name: str, text: str, fragment: str) -> None:
    (amber / name).write_text(text)
    line = _one_line(*_amber(capsys, amber)[::2], fragment)
    assert str(amber / name) in line


def test_amber_sizes_are_checked_before_the_files_are_hashed(amber, capsys, monkeypatch) -> None:
    """Before: a 2 GB annotations.json was hashed whole (20 s) before being refused."""
    import capeval.metrics.amber.annotations as annotations

    def no_hash(paths):
        raise AssertionError("hashed before the size was checked")

    monkeypatch.setattr(annotations, "files_digest", no_hash)
    with open(amber / "annotations.json", "r+b") as f:
        f.truncate(2 * GB)  # sparse
    _one_line(*_amber(capsys, amber)[::2], "annotations.json: 2,147,483,648 bytes, more than the 268,435,456")


# -- Parquet: only the columns used, each bounded -------------------------------------------------


def _zeros_text(size: int):
    """A string array of one value of ``size`` zero bytes, built without touching ``size`` bytes
    of memory (calloc'd pages stay unmapped until written)."""
    import pyarrow as pa

    data = np.zeros(size, np.uint8)
    return pa.StringArray.from_buffers(1, pa.py_buffer(np.array([0, size], np.int32)), pa.py_buffer(data))


def _repeated(size: int, rows: int):
    """``rows`` times one string of ``size`` bytes, stored once: as a Parquet column it is a
    dictionary page of ``size`` bytes (a few KB compressed) that expands to ``rows * size``."""
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), _zeros_text(size))


def _write_parquet(path: Path, columns: dict) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # store_schema=False: read back as plain strings, as a file written by any other tool
    pq.write_table(pa.table(columns), path, compression="zstd", store_schema=False)
    return path


@pytest.fixture
def parquet_items(tmp_path):
    pytest.importorskip("pyarrow")

    def write(columns: dict) -> Path:
        return _write_parquet(tmp_path / "items.parquet", columns)

    return write


def test_items_parquet_reads_only_the_columns_used(tmp_path, parquet_items) -> None:
    """An unused column expanding to 1.5 GB (before: 3.4 GB resident, or the address-space limit)."""
    rows = 16
    path = parquet_items({"id": [str(i) for i in range(rows)], "candidate": ["a dog"] * rows,
                          "blob": _repeated(96 * MB, rows)})
    assert path.stat().st_size < MB
    code, out, err, rss = _child(["score", "-q", "-m", "length", "--items", path.name], tmp_path)
    assert code == 0, err
    assert json.loads(out)["scores"] == {"length": 2.0}
    assert rss < RSS_BOUND, rss


def test_items_parquet_used_column_that_expands_past_the_limit(tmp_path, parquet_items) -> None:
    """A used column whose metadata says 32 MB but which expands to 1.5 GB (dictionary
    encoding): refused by what it expands to, before it is expanded (before: 1.5 GB resident,
    or the address-space limit)."""
    rows = 48
    path = parquet_items({"id": [str(i) for i in range(rows)], "candidate": _repeated(32 * MB, rows)})
    result = _child(["score", "-q", "-m", "length", "--items", path.name], tmp_path)
    _child_line(result, "items file items.parquet: column 'candidate' holds more than the 268,435,456 bytes",
                "CAPEVAL_MAX_JSON_BYTES")
    assert result[3] < RSS_BOUND, result[3]


def test_items_parquet_column_size_from_the_metadata_is_checked_before_reading(tmp_path, parquet_items, capsys,
                                                                                monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    parquet_items({"id": ["a", "b"], "candidate": ["a dog " * 100, "a cat " * 100], "blob": ["x" * 5000] * 2})
    code, out, err = _run(capsys, "score", "-q", "-m", "length", "--items", "items.parquet")
    assert code == 0, err
    monkeypatch.setenv("CAPEVAL_MAX_JSON_BYTES", "1000")  # the unused 'blob' is larger still: not counted
    _one_line(*_run(capsys, "score", "-q", "-m", "length", "--items", "items.parquet")[::2],
              "items file items.parquet: column 'candidate' holds", "bytes uncompressed, more than the 1,000")


def test_items_parquet_that_is_not_a_table(tmp_path, capsys, monkeypatch) -> None:
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    Path("empty.parquet").write_bytes(b"")
    Path("json.parquet").write_text("{}")
    Path("dir.parquet").mkdir()
    for name, fragment in (("empty.parquet", "not a readable Parquet file"),
                           ("json.parquet", "not a readable Parquet file"),
                           ("dir.parquet", "no .jsonl, .json, .csv")):
        _one_line(*_run(capsys, "score", "-q", "-m", "length", "--items", name)[::2], name, fragment)
    import pyarrow as pa

    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["x"]), pa.array(["y"])], ["id", "candidate", "candidate"])
    import pyarrow.parquet as pq

    pq.write_table(table, "twice.parquet")
    _one_line(*_run(capsys, "score", "-q", "-m", "length", "--items", "twice.parquet")[::2],
              "twice.parquet: column 'candidate' appears twice")


def test_items_parquet_fifo_is_refused_without_blocking(tmp_path) -> None:
    pytest.importorskip("pyarrow")
    os.mkfifo(tmp_path / "items.parquet")
    _child_line(_child(["score", "-q", "-m", "length", "--items", "items.parquet"], tmp_path, timeout=120),
                "items.parquet: not a regular file")


# -- DetailCaps ----------------------------------------------------------------------------------

MODELS = ("CogVLM", "ShareCaptioner", "LLaVA_v15")
REFS = ("GT_Caption_GPT4O", "GT_Caption_GPT4V", "GT_Caption_Gemini15Pro")
GOOD_EVAL = json.dumps(dict(zip(MODELS, [1, 2, 3])))


def _detailcaps(root: Path, n: int = 4, evals=None, **extra) -> Path:
    cols = {"image": [f"coco/{i}.jpg" for i in range(n)], "source": ["COCO"] * n, "binary": [b"\xff\xd8"] * n}
    for c in REFS:
        cols[c] = [f"{c} reference {i} a dog on the grass" for i in range(n)]
    for m in MODELS:
        cols[m] = [f"{m} says image {i} shows a dog" for i in range(n)]
    cols["GPT4_Eval"] = evals or [json.dumps(dict(zip(MODELS, [1 + i % 3, 2, 3]))) for i in range(n)]
    cols.update(extra)
    (root / "detailcaps").mkdir(parents=True, exist_ok=True)
    return _write_parquet(root / "detailcaps" / "DetailCaps-4870.parquet", cols)


def _bench(root: Path) -> list[str]:
    return ["bench", "detailcaps", "-m", "bleu-1", "--data-root", str(root), "--bootstrap", "0", "-q"]


def test_detailcaps_never_reads_its_image_columns(tmp_path) -> None:
    """Before: the 'image' column was read (4.2 MB file: 4.3 GB resident); now only the seven
    columns used are (a 1.5 GB 'image' and 'binary' cost nothing)."""
    pytest.importorskip("pyarrow")
    n = 16
    path = _detailcaps(tmp_path / "data", n=n, image=_repeated(96 * MB, n), binary=_repeated(96 * MB, n))
    assert path.stat().st_size < MB
    code, out, err, rss = _child(_bench(tmp_path / "data"), tmp_path)
    assert code == 0, err
    assert "detailcaps" in out
    assert rss < RSS_BOUND, rss


@pytest.mark.parametrize("column", ["GPT4_Eval", "CogVLM", "GT_Caption_GPT4O"])
def test_detailcaps_used_column_that_expands_past_the_limit(tmp_path, column: str) -> None:
    pytest.importorskip("pyarrow")
    n = 48
    _detailcaps(tmp_path / "data", n=n, **{column: _repeated(32 * MB, n)})
    result = _child(_bench(tmp_path / "data"), tmp_path)
    _child_line(result, "malformed data file", "DetailCaps-4870.parquet: column", f"'{column}'",
                "more than the 268,435,456")
    assert result[3] < RSS_BOUND, result[3]


@pytest.mark.parametrize("bad,fragment", [
    ('{"CogVLM": ' + "[" * 200_000 + "]" * 200_000 + "}", "(row 1): GPT4_Eval: nested more than 100 levels deep"),
    ('{"CogVLM": ' + "9" * 5000 + ', "ShareCaptioner": 2, "LLaVA_v15": 3}',
     "(row 1): GPT4_Eval: an integer with more than 4,300 digits"),
    ('{"CogVLM": 1, "CogVLM": 99, "ShareCaptioner": 2, "LLaVA_v15": 3}', "(row 1): GPT4_Eval has the key 'CogVLM' twice"),
])
def test_detailcaps_gpt4_eval_is_bounded(tmp_path, capsys, bad: str, fragment: str) -> None:
    pytest.importorskip("pyarrow")
    _detailcaps(tmp_path, evals=[GOOD_EVAL, bad, GOOD_EVAL, GOOD_EVAL])
    line = _one_line(*_run(capsys, *_bench(tmp_path))[::2], "malformed data file", fragment)
    assert "DetailCaps-4870.parquet" in line


def test_detailcaps_gpt4_eval_float_of_5000_digits_is_read(tmp_path) -> None:
    pytest.importorskip("pyarrow")
    from capeval.bench import get_benchmark

    long = "1." + "5" * 5000
    _detailcaps(tmp_path, evals=[GOOD_EVAL, '{"CogVLM": ' + long + ', "ShareCaptioner": 2, "LLaVA_v15": 3}'] * 2)
    loaded = get_benchmark("detailcaps").load(tmp_path)
    assert loaded.data[1].tolist() == [float(long), 2.0, 3.0]


@pytest.mark.parametrize("content,fragment", [
    (b"", "not a readable Parquet file (Parquet file size is 0 bytes)"),
    (b"{}", "not a readable Parquet file"),
])
def test_detailcaps_file_that_is_not_parquet(tmp_path, content: bytes, fragment: str) -> None:
    pytest.importorskip("pyarrow")
    from capeval.bench import get_benchmark

    (tmp_path / "detailcaps").mkdir()
    (tmp_path / "detailcaps" / "DetailCaps-4870.parquet").write_bytes(content)
    with pytest.raises(ResourceError, match="malformed data file .*DetailCaps-4870.parquet: " + fragment.split(" (")[0]):
        get_benchmark("detailcaps").load(tmp_path)


def test_detailcaps_missing_column_names_it(tmp_path) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from capeval.bench import get_benchmark

    path = _detailcaps(tmp_path)
    pq.write_table(pq.read_table(path).drop(["GPT4_Eval"]), path)
    with pytest.raises(ResourceError, match=r"\(whole file\): expected Parquet with .* \(no column 'GPT4_Eval'\)"):
        get_benchmark("detailcaps").load(tmp_path)
