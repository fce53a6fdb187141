"""Item tables (capeval.io.items) read in-process, and URIs fetched (capeval.io.uris).

Every format must give the same items as the hand-written mappings; bad rows are one-line
errors naming the file, row and item.
"""

from __future__ import annotations

import csv
import http.server
import json
import threading

import numpy as np
import pytest

import capeval
from capeval.errors import InputError
from capeval.io.items import items_from_rows, read_items
from capeval.io.uris import fetch_media, is_uri

ROWS = [
    {"id": "007", "candidate": "a dog runs", "references": ["a dog is running", "dog, running"]},
    {"id": "8", "candidate": "two cats", "references": ["cats on a sofa"]},
    {"id": "x y", "candidate": "a \"quoted\", comma caption", "references": ["a caption", "[not a list"]},
]


def _write(tmp_path, fmt, rows=ROWS, extra=None):
    path = tmp_path / f"items.{fmt}"
    rows = [dict(r, **(extra or {}).get(r["id"], {})) for r in rows]
    if fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    elif fmt == "json":
        path.write_text(json.dumps(rows))
    elif fmt in ("csv", "tsv"):
        with open(path, "w", newline="") as f:
            w = csv.writer(f, dialect="excel-tab" if fmt == "tsv" else "excel")
            keys = list(rows[0])
            w.writerow(keys)
            for r in rows:
                w.writerow([json.dumps(r[k]) if isinstance(r[k], list) else r[k] for k in keys])
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "tsv", "parquet"])
def test_every_format_gives_the_same_items(tmp_path, fmt):
    items = read_items(_write(tmp_path, fmt))
    assert list(items.candidates) == ["007", "8", "x y"]  # ids as text: CSV's 007 is not 7
    assert items.candidates == {r["id"]: r["candidate"] for r in ROWS}
    assert items.references == {r["id"]: r["references"] for r in ROWS}
    assert items.images is None and items.videos is None and items.segments is None


def test_items_score_as_the_mappings(tmp_path):
    path = _write(tmp_path, "csv")
    cands = {r["id"]: r["candidate"] for r in ROWS}
    refs = {r["id"]: r["references"] for r in ROWS}
    a = capeval.score(items=str(path), metrics="bleu-4,cider-d,rouge-l")
    b = capeval.score(cands, refs, "bleu-4,cider-d,rouge-l")
    for m in b:
        assert dict(a[m].items) == dict(b[m].items) and a[m].system == b[m].system


def test_media_columns_and_segments(tmp_path):
    rows = [{"id": 1, "candidate": "c", "image": "a.png", "video": "v.mp4", "start": "1.5", "end": 3},
            {"id": 2.0, "caption": "d", "image": "s3://bucket/b.png"}]
    items = items_from_rows(rows, "t")
    assert list(items.candidates) == ["1", "2"]
    assert items.images == {"1": "a.png", "2": "s3://bucket/b.png"}
    assert items.videos == {"1": "v.mp4"} and items.segments == {"1": (1.5, 3.0)}
    assert items.references is None


@pytest.mark.parametrize("rows, message", [
    ([{"id": "a", "candidate": "x"}, {"id": "a", "candidate": "y"}], r"t, row 2 \(item 'a'\): the id appears twice \(first in row 1\)"),
    ([{"candidate": "x"}], r"t, row 1: no id"),
    ([{"id": "a"}], r"item 'a'\): no candidate"),
    ([{"id": "a", "candidate": 3}], r"the candidate must be text, got int"),
    ([{"id": "a", "candidate": "x", "references": ["r"]}, {"id": "b", "candidate": "y"}],
     r"item 'b' has no references while other rows have some"),
    ([{"id": "a", "candidate": "x", "references": "[\"r\", "}], r"references is not a valid JSON array"),
    ([{"id": "a", "candidate": "x", "references": [1, 2]}], r"references must be a list of strings"),
    ([{"id": "a", "candidate": "x", "start": 1}], r"give both start and end"),
    ([{"id": "a", "candidate": "x", "start": "soon", "end": 2}], r"start must be a number of seconds"),
])
def test_bad_rows_are_one_line_errors(rows, message):
    with pytest.raises(InputError, match=message) as err:
        items_from_rows(rows, "t")
    assert "\n" not in str(err.value)


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "candidate": "x"}\n{"id": \n')
    with pytest.raises(InputError, match=r"bad.jsonl, line 2: not valid JSON"):
        read_items(bad)
    with pytest.raises(InputError, match="unknown format '.txt'"):
        read_items(tmp_path / "items.txt")
    obj = tmp_path / "obj.json"
    obj.write_text('{"a": "x"}')
    with pytest.raises(InputError, match="list of rows"):
        read_items(obj)
    short = tmp_path / "short.csv"
    short.write_text("id,candidate\na,x,extra\n")
    with pytest.raises(InputError, match="short.csv, line 2: the number of fields"):
        read_items(short)
    one = _write(tmp_path, "jsonl")
    with pytest.raises(InputError, match="appears in an earlier items file too"):
        read_items([one, one])


def test_a_folder_of_tables_in_name_order(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for k, r in enumerate(ROWS):
        (folder / f"part-{k}.jsonl").write_text(json.dumps(r) + "\n")
    (folder / "_SUCCESS").write_text("")
    assert list(read_items(folder).candidates) == ["007", "8", "x y"]


@pytest.fixture
def http_root(tmp_path):
    """A local HTTP server over tmp_path/www (the http:// fetch path, with no network)."""
    root = tmp_path / "www"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_uris_are_fetched_and_failures_name_the_item(tmp_path, http_root):
    root, base = http_root
    (root / "a.png").write_bytes(b"png bytes")
    local = tmp_path / "b.png"
    local.write_bytes(b"other")
    assert is_uri("s3://b/k") and is_uri(base) and not is_uri("C:/x.png") and not is_uri("rel/a.png")
    images = {"1": f"{base}/a.png", "2": local.as_uri(), "3": "plain/path.png", "4": f"{base}/a.png"}
    out = fetch_media({"images": images}, tmp_path / "fetched", skip_bad_items=False)["images"]
    assert out["1"].read_bytes() == b"png bytes" and out["4"] == out["1"]  # one fetch per distinct URI
    assert out["2"] == local and out["3"] == "plain/path.png"
    missing = {"5": f"{base}/missing.png", "6": local.as_uri()}
    with pytest.raises(InputError, match=r"item '5': cannot fetch image http://.*/missing.png: HTTP 404"):
        fetch_media({"images": missing}, tmp_path / "f2", skip_bad_items=False)
    kept = fetch_media({"images": missing}, tmp_path / "f3", skip_bad_items=True)["images"]
    assert list(kept) == ["6"]


def test_clip_s_on_an_items_table_with_image_uris(tmp_path, http_root):
    """The same scores from paths in a mapping and from http:// / file:// URIs in a table."""
    backbone = pytest.importorskip("capeval.models.clip.backbone")
    from PIL import Image

    root, base = http_root
    rng = np.random.default_rng(0)
    rows, paths = [], {}
    for k, r in enumerate(ROWS):
        name = f"im{k}.png"
        Image.fromarray(rng.integers(0, 256, (32, 40, 3), dtype=np.uint8)).save(root / name)
        paths[r["id"]] = str(root / name)
        uri = f"{base}/{name}" if k % 2 == 0 else (root / name).as_uri()
        rows.append(dict(r, image=uri))
    table = tmp_path / "t.jsonl"
    table.write_text("\n".join(json.dumps(r) for r in rows))
    opts = {"clip": {"backbone": backbone.random_backbone("tiny", seed=0)}}
    a = capeval.score(items=str(table), metrics="clip-s,ref-clip-s", options=opts)
    b = capeval.score({r["id"]: r["candidate"] for r in ROWS}, {r["id"]: r["references"] for r in ROWS},
                      "clip-s,ref-clip-s", options=opts, images=paths)
    for m in ("clip-s", "ref-clip-s"):
        assert dict(a[m].items) == dict(b[m].items) and a[m].system == b[m].system


def test_relative_media_paths_reach_ray_actors_as_absolute(tmp_path, monkeypatch):
    """An actor may run in another working directory: the driver sends absolute paths (URIs as given)."""
    from capeval.engines.sources import absolute_paths

    monkeypatch.chdir(tmp_path)
    got = absolute_paths({"images": {"a": "imgs/a.png", "b": "/abs/b.png", "c": "s3://bucket/c.png"},
                          "videos": "clips", "segments": {"a": (1.0, 2.0)}})
    assert got == {"images": {"a": str(tmp_path / "imgs/a.png"), "b": "/abs/b.png", "c": "s3://bucket/c.png"},
                   "videos": str(tmp_path / "clips"), "segments": {"a": (1.0, 2.0)}}
