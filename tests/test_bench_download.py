"""``capeval download <benchmark>`` through ``CAPEVAL_DATA_MIRROR`` served by a local HTTP server
(127.0.0.1, started here): the real benchmark files of ../shared/data, checked against the loaders'
sha256, laid out where ``bench`` reads them without ``--data-root``."""

from __future__ import annotations

import hashlib
import json
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from capeval.cli.main import main

REQUESTS: list[tuple[str, str | None]] = []


class RangeHandler(SimpleHTTPRequestHandler):
    """Static files with ``Range: bytes=N-`` support (what a resumed download asks for)."""

    def log_message(self, *args) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        REQUESTS.append((self.path, self.headers.get("Range")))
        path = Path(self.translate_path(self.path))
        rng = self.headers.get("Range")
        if not rng or not path.is_file():
            return super().do_GET()
        start = int(rng.split("=")[1].rstrip("-"))
        data = path.read_bytes()[start:]
        self.send_response(206)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def mirror(tmp_path, shared_data, monkeypatch):
    """A mirror folder of real files, served on 127.0.0.1; data root = the default in a fresh cache."""
    root = tmp_path / "mirror"
    for rel in ("thumb/mscoco_THumB-1.0.jsonl", "thumb/mscoco_references.json"):
        (root / "thumb").mkdir(parents=True, exist_ok=True)
        (root / "thumb" / Path(rel).name).write_bytes((shared_data / rel).read_bytes())
    (root / "flickr8k-expert").mkdir()
    with zipfile.ZipFile(root / "flickr8k-expert" / "Flickr8k_text.zip", "w") as z:  # the release's layout
        for name in ("ExpertAnnotations.txt", "CrowdFlowerAnnotations.txt", "Flickr8k.token.txt",
                     "Flickr_8k.testImages.txt"):
            z.write(shared_data / "flickr8k" / name, name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("CAPEVAL_DATA_MIRROR", f"http://127.0.0.1:{server.server_address[1]}/")
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAPEVAL_DATA", raising=False)
    REQUESTS.clear()
    yield root
    server.shutdown()
    server.server_close()


def _bench_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(["bench", *argv, "--bootstrap", "0", "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_download_through_a_mirror_then_bench_without_data_root(mirror, shared_data, tmp_path, capsys):
    data = tmp_path / "cache" / "data"
    assert main(["bench", "--list"]) == 0
    assert "thumb              THumB 1.0 (MSCOCO) [image] (missing: capeval download thumb)" in capsys.readouterr().out
    assert main(["download", "thumb", "flickr8k-expert", "--quiet"]) == 0
    out = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert [o["benchmark"] for o in out] == ["thumb", "flickr8k-expert"] and all(o["root"] == str(data) for o in out)
    for rel in ("thumb/mscoco_THumB-1.0.jsonl", "thumb/mscoco_references.json", "flickr8k/ExpertAnnotations.txt",
                "flickr8k/Flickr8k.token.txt"):
        digest = hashlib.sha256((shared_data / rel).read_bytes()).hexdigest()
        assert (data / rel).read_bytes() == (shared_data / rel).read_bytes()
        assert out[rel.startswith("flickr8k")]["files"][rel] == digest
    assert not (data / ".downloads").exists() or not any((data / ".downloads").rglob("*.zip"))  # archive removed
    assert not list(data.rglob(".*.part"))
    assert main(["bench", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "[image] (present)" in listing.split("thumb ")[1].splitlines()[0]
    # bench reads the default data folder: the same numbers as from the reference copy
    for bench, metric in (("thumb", "bleu-4"), ("flickr8k-expert", "cider-d")):
        ours = _bench_json(capsys, bench, "-m", metric)
        ref = _bench_json(capsys, bench, "-m", metric, "--data-root", str(shared_data))
        assert ours["results"] == ref["results"] and len(ours["results"]) >= 2
        assert ours["benchmarks"][bench]["files"] == ref["benchmarks"][bench]["files"]
    # a second download finds verified files in place and asks the mirror for nothing
    REQUESTS.clear()
    assert main(["download", "thumb", "--quiet"]) == 0
    assert REQUESTS == []


def test_resumes_a_partial_download(mirror, shared_data, tmp_path, capsys):
    data = tmp_path / "cache" / "data"
    whole = (shared_data / "thumb" / "mscoco_references.json").read_bytes()
    (data / "thumb").mkdir(parents=True)
    (data / "thumb" / ".mscoco_references.json.part").write_bytes(whole[:1000])  # an interrupted download
    assert main(["download", "thumb", "--quiet"]) == 0
    assert ("/thumb/mscoco_references.json", "bytes=1000-") in REQUESTS
    assert (data / "thumb" / "mscoco_references.json").read_bytes() == whole


def test_a_file_that_differs_from_the_release_is_not_placed(mirror, tmp_path, capsys):
    (mirror / "thumb" / "mscoco_references.json").write_text('{"seg_id": "x", "refs": ["tampered"]}\n')
    assert main(["download", "thumb", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "sha256" in err and "nothing was written" in err
    assert not (tmp_path / "cache" / "data" / "thumb" / "mscoco_references.json").exists()


def test_by_hand_files_say_where_to_get_them_and_where_to_put_them(mirror, tmp_path, capsys):
    assert main(["download", "vatex-eval", "--quiet"]) == 1  # not in the mirror, no public direct URL
    err = capsys.readouterr().err
    data = tmp_path / "cache" / "data"
    assert "github.com/ShiYaya/emscore" in err and f"{data}/vatex-eval/candidates_list.pkl" in err


def test_flickr8k_images_are_checked_where_the_command_says(mirror, shared_data, tmp_path, capsys):
    assert main(["download", "flickr8k-expert", "--quiet"]) == 0
    err = capsys.readouterr().err
    data = tmp_path / "cache" / "data"
    assert "https://forms.illinois.edu/sec/1713398" in err and f"{data}/flickr8k/Flicker8k_Dataset/" in err
    folder = data / "flickr8k" / "Flicker8k_Dataset"
    folder.mkdir()
    images = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))
    for p in images:
        (folder / p.name).write_bytes(p.read_bytes())
    (folder / images[0].name).write_bytes(b"not the image")
    assert main(["download", "flickr8k-expert", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"images: {len(images) - 1}/1000 test images in {folder} match the published MD5 list" in err
    assert "1 differ (first: " + images[0].name in err


def test_every_registered_benchmark_has_a_source_and_a_row_in_the_docs():
    from capeval.bench.base import CATALOG
    from capeval.bench.sources import SOURCES

    assert set(SOURCES) == set(CATALOG)
    text = (Path(__file__).resolve().parents[1] / "docs" / "bench.md").read_text(encoding="utf-8")
    files = text.split("| benchmark | files (under the data folder) | size |\n", 1)[1].split("\n\n", 1)[0]
    sources = text.split("| benchmark | source | licence |\n", 1)[1].split("\n\n", 1)[0]
    for name in CATALOG:
        assert f"\n| `{name}` | " in files and f"\n| `{name}` | " in sources, name
    for src in SOURCES.values():  # every by-hand file says where to get it and where it goes
        for f in src.files:
            assert f.urls or (f.manual and "{root}" in f.manual), (src.benchmark, f.name)
