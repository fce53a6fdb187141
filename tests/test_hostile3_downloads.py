"""Issue 46, items 1, 6 and two of 8: downloads are exact, whatever a server, a mirror, a hub
listing or an archive hands us. Every server here is scripted on 127.0.0.1 (a body cut short,
an endless body, a trickle, a 404, an HTML page); the data root is a fresh cache per test."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from capeval.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


class Scripted(BaseHTTPRequestHandler):
    """Serves ``server.files[path]`` as ``server.modes[path]`` says: ``plain`` (with ``Range``),
    ``short`` (announces every byte, sends ``server.cut`` of them), ``endless`` (no length, sends
    until the client goes), ``huge`` (announces a terabyte), ``trickle`` (a byte every 50 ms, for
    at most 15 s), ``404``. ``server.gate``, when set, holds every answer until it opens."""

    protocol_version = "HTTP/1.0"  # the connection closes after each answer: a body may end early

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        srv.arrived.set()
        if srv.gate is not None:
            srv.gate.wait(60)
        data, mode = srv.files.get(self.path), srv.modes.get(self.path, "plain")
        if data is None or mode == "404":
            self.send_error(404)
            return
        try:
            if mode == "short":
                self._head(200, len(data))
                self.wfile.write(data[:srv.cut])
            elif mode in ("endless", "huge"):
                self._head(200, 10 ** 12 if mode == "huge" else None)
                block = (data * (65536 // max(len(data), 1) + 1))[:65536]
                while srv.sent < 64 << 20:  # a bound for the test server itself
                    self.wfile.write(block)
                    srv.sent += len(block)
            elif mode == "trickle":
                self._head(200, len(data))
                start = time.monotonic()
                for k in range(len(data)):
                    if time.monotonic() - start > 15:
                        break
                    self.wfile.write(data[k:k + 1])
                    self.wfile.flush()
                    time.sleep(0.05)
            else:
                rng = self.headers.get("Range")
                if rng:
                    start = int(rng.split("=")[1].rstrip("-"))
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                    self.send_header("Content-Length", str(len(data) - start))
                    self.end_headers()
                    self.wfile.write(data[start:])
                else:
                    self._head(200, len(data))
                    self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what it should do

    def _head(self, code: int, length: int | None) -> None:
        self.send_response(code)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    srv.daemon_threads = True
    srv.files, srv.modes, srv.requests = {}, {}, []
    srv.cut, srv.sent, srv.gate, srv.arrived = 1000, 0, None, threading.Event()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    if srv.gate is not None:
        srv.gate.set()
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def env(tmp_path, server, monkeypatch):
    """The data mirror is the scripted server; the data root the default one of a fresh cache."""
    monkeypatch.setenv("CAPEVAL_DATA_MIRROR", server.url + "/")
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAPEVAL_DATA", raising=False)
    monkeypatch.delenv("CAPEVAL_CHECKPOINT_MIRROR", raising=False)
    monkeypatch.delenv("CAPEVAL_DOWNLOAD_DEADLINE", raising=False)
    return tmp_path / "cache" / "data"


def _thumb(server, shared_data) -> dict[str, bytes]:
    files = {n: (shared_data / "thumb" / n).read_bytes() for n in ("mscoco_THumB-1.0.jsonl", "mscoco_references.json")}
    for n, b in files.items():
        server.files[f"/thumb/{n}"] = b
    return files


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code: int, err: str, *fragments: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("capeval: error: "), err
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


# -- a body cut short -------------------------------------------------------------------------

def test_a_cut_body_of_a_known_file_is_not_placed_and_resumes(env, server, shared_data, capsys):
    files = _thumb(server, shared_data)
    server.modes["/thumb/mscoco_references.json"] = "short"
    code, out, err = _run(capsys, "download", "thumb", "--quiet")
    line = _one_line(code, err, "mscoco_references.json", "cut short", f"1,000 of the {len(files['mscoco_references.json']):,}")
    assert "kept" in line and "resumes" in line
    folder = env / "thumb"
    assert not (folder / "mscoco_references.json").exists()
    assert not (folder / ".mscoco_references.json.sha256").exists()
    part = folder / ".mscoco_references.json.part"
    assert part.read_bytes() == files["mscoco_references.json"][:1000]  # kept for the resume
    server.modes.clear()
    server.requests.clear()
    assert main(["download", "thumb", "--quiet"]) == 0
    assert ("/thumb/mscoco_references.json", "bytes=1000-") in server.requests
    assert (folder / "mscoco_references.json").read_bytes() == files["mscoco_references.json"]
    assert not part.exists()


def test_a_cut_body_of_a_file_without_a_digest_is_neither_placed_nor_recorded(env, server, capsys):
    body = b"image,mt,refs,score\n" + b"a.jpg,a dog,['a dog'],0.5\n" * 200
    server.files["/polaris/polaris_test.csv"] = body
    server.modes["/polaris/polaris_test.csv"] = "short"
    code, out, err = _run(capsys, "download", "polaris", "--quiet")
    line = _one_line(code, err, "polaris_test.csv", "cut short")
    assert "nothing was written" in line
    folder = env / "polaris"
    assert not (folder / "polaris_test.csv").exists()
    assert not (folder / ".polaris_test.csv.sha256").exists()  # never recorded as the truth
    assert not (folder / ".polaris_test.csv.part").exists()  # nothing could check a resumed file


def test_a_cut_checkpoint_is_not_placed(tmp_path, server, monkeypatch, capsys):
    monkeypatch.setenv("CAPEVAL_CHECKPOINT_MIRROR", server.url)
    server.files["/polos/reprod.zip"] = b"PK" + b"x" * 5000
    server.modes["/polos/reprod.zip"] = "short"
    code, out, err = _run(capsys, "download", "polos/reprod", "--dir", str(tmp_path / "ck"))
    _one_line(code, err, "polos/reprod", "cut short")
    assert not any(p.is_file() for p in (tmp_path / "ck").rglob("*"))


# -- an endless body --------------------------------------------------------------------------

def test_an_endless_body_stops_at_the_expected_size(env, server, shared_data, capsys):
    server.files["/pascal-50s/pascal_50s.json"] = (shared_data / "pascal50s" / "pascal_50s.json").read_bytes()
    server.modes["/pascal-50s/pascal_50s.json"] = "endless"
    code, out, err = _run(capsys, "download", "pascal-50s", "--quiet")
    line = _one_line(code, err, "pascal_50s.json", "sent more than", "stopped there", "nothing was written")
    cap = int(line.split("more than the ")[1].split(" bytes")[0].replace(",", ""))
    assert cap < 4 << 20  # the table's 1.7 MB plus a margin, not a gigabyte
    assert not list((env / "pascal50s").glob("*")) or not (env / "pascal50s" / "pascal_50s.json").exists()
    assert not (env / "pascal50s" / ".pascal_50s.json.part").exists()
    assert server.sent < 48 << 20  # the client hung up long before the test server's own bound


def test_an_announced_terabyte_is_refused_before_a_byte_is_written(env, server, shared_data, capsys):
    server.files["/pascal-50s/pascal_50s.json"] = b"{}"
    server.modes["/pascal-50s/pascal_50s.json"] = "huge"
    code, out, err = _run(capsys, "download", "pascal-50s", "--quiet")
    _one_line(code, err, "announces 1,000,000,000,000 bytes", "pascal_50s.json", "nothing was written")
    assert not (env / "pascal50s" / ".pascal_50s.json.part").exists()


def test_an_endless_body_of_unknown_size_stops_at_the_global_bound(env, server, monkeypatch, capsys):
    from capeval.models import download as md

    monkeypatch.setattr(md, "MAX_UNKNOWN_BYTES", 1 << 20)  # stands in for 8 GiB
    server.files["/polaris/polaris_test.csv"] = b"x" * 1000
    server.modes["/polaris/polaris_test.csv"] = "endless"
    code, out, err = _run(capsys, "download", "polaris", "--quiet")
    _one_line(code, err, "more than the 1,048,576 bytes expected", "polaris_test.csv")
    assert not any(p.is_file() for p in (env / "polaris").rglob("*"))


# -- a trickle --------------------------------------------------------------------------------

def test_a_trickle_meets_the_overall_deadline(env, server, shared_data, monkeypatch, capsys):
    files = _thumb(server, shared_data)
    server.modes["/thumb/mscoco_references.json"] = "trickle"  # 20 bytes a second: 90 minutes
    monkeypatch.setenv("CAPEVAL_DOWNLOAD_DEADLINE", "1")
    code, out, err = _run(capsys, "download", "thumb", "--quiet")
    line = _one_line(code, err, "mscoco_references.json", "did not finish within CAPEVAL_DOWNLOAD_DEADLINE=1 s")
    assert "kept" in line  # a file with a known sha256: resumable
    assert not (env / "thumb" / "mscoco_references.json").exists()
    part = env / "thumb" / ".mscoco_references.json.part"
    assert 0 < part.stat().st_size < 1000 and files["mscoco_references.json"].startswith(part.read_bytes())


@pytest.mark.parametrize("value", ["0", "-5", "abc", "nan", "inf", "1e9", "86401"])
def test_a_deadline_outside_its_range_is_one_line(env, server, shared_data, monkeypatch, capsys, value):
    _thumb(server, shared_data)
    monkeypatch.setenv("CAPEVAL_DOWNLOAD_DEADLINE", value)
    code, out, err = _run(capsys, "download", "thumb", "--quiet")
    _one_line(code, err, "CAPEVAL_DOWNLOAD_DEADLINE=", "from 1 to 86400")
    assert server.requests == []


# -- symbolic links ---------------------------------------------------------------------------

def test_a_part_file_that_is_a_link_is_never_written_through(env, server, shared_data, tmp_path, capsys):
    _thumb(server, shared_data)
    victim = tmp_path / "notes.txt"
    victim.write_bytes(b"the user's own notes\n")
    folder = env / "thumb"
    folder.mkdir(parents=True)
    (folder / ".mscoco_references.json.part").symlink_to(victim)
    code, out, err = _run(capsys, "download", "thumb", "--quiet")
    _one_line(code, err, ".mscoco_references.json.part", "symbolic link", "nothing was written")
    assert victim.read_bytes() == b"the user's own notes\n"
    assert (folder / ".mscoco_references.json.part").is_symlink()  # the user's link is left alone too


def test_a_target_that_is_a_link_is_neither_written_through_nor_replaced(env, server, shared_data, tmp_path, capsys):
    _thumb(server, shared_data)
    victim = tmp_path / "elsewhere.json"
    folder = env / "thumb"
    folder.mkdir(parents=True)
    (folder / "mscoco_references.json").symlink_to(victim)  # dangling: the file is not there yet
    code, out, err = _run(capsys, "download", "thumb", "--quiet", "--force")
    _one_line(code, err, "mscoco_references.json", "symbolic link")
    assert not victim.exists() and (folder / "mscoco_references.json").is_symlink()


def test_a_linked_file_that_verifies_is_read_not_replaced(env, server, shared_data, tmp_path, capsys):
    files = _thumb(server, shared_data)
    copy = tmp_path / "shared_copy.json"
    copy.write_bytes(files["mscoco_references.json"])
    folder = env / "thumb"
    folder.mkdir(parents=True)
    (folder / "mscoco_references.json").symlink_to(copy)
    assert main(["download", "thumb", "--quiet"]) == 0
    assert (folder / "mscoco_references.json").is_symlink() and copy.read_bytes() == files["mscoco_references.json"]


def test_a_checkpoint_part_that_is_a_link_is_never_written_through(tmp_path, server, monkeypatch, capsys):
    monkeypatch.setenv("CAPEVAL_CHECKPOINT_MIRROR", server.url)
    server.files["/polos/reprod.zip"] = b"PK" + b"x" * 5000
    victim = tmp_path / "id_rsa.pub"
    victim.write_bytes(b"ssh-ed25519 AAAA\n")
    folder = tmp_path / "ck" / "polos"
    folder.mkdir(parents=True)
    (folder / ".reprod.zip.part").symlink_to(victim)
    code, out, err = _run(capsys, "download", "polos/reprod", "--dir", str(tmp_path / "ck"))
    _one_line(code, err, ".reprod.zip.part", "symbolic link")
    assert victim.read_bytes() == b"ssh-ed25519 AAAA\n"


def test_a_part_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path, server, shared_data):
    _thumb(server, shared_data)
    folder = tmp_path / "cache" / "data" / "thumb"
    folder.mkdir(parents=True)
    os.mkfifo(folder / ".mscoco_references.json.part")  # an open() for writing would wait for a reader forever
    child = _child(["download", "thumb", "--quiet"], {"CAPEVAL_DATA_MIRROR": server.url + "/",
                                                     "CAPEVAL_CACHE": str(tmp_path / "cache")})
    try:
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    _one_line(child.returncode, err, ".mscoco_references.json.part", "not a regular file")


# -- archives ---------------------------------------------------------------------------------

_F8K = ("ExpertAnnotations.txt", "CrowdFlowerAnnotations.txt", "Flickr8k.token.txt", "Flickr_8k.testImages.txt")


def _f8k_zip(shared_data, extra=(), rename=None, symlink=None, compression=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name in _F8K:
            if name == symlink:
                info = zipfile.ZipInfo(name)
                info.external_attr = (0o120777 << 16)
                z.writestr(info, "/etc/passwd")
                continue
            z.writestr((rename or {}).get(name, name), (shared_data / "flickr8k" / name).read_bytes())
        for name, data in extra:
            z.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("case, fragment", [
    ("dotdot", "'..' leaves"),
    ("absolute", "absolute path"),
    ("symlink", "is a symbolic link, not a file"),
    ("twice", "two members named 'ExpertAnnotations.txt'"),
    ("backslash", "'..' leaves"),
])
def test_zip_members_are_checked_before_anything_is_unpacked(env, server, shared_data, tmp_path, capsys, case, fragment):
    if case == "dotdot":
        data = _f8k_zip(shared_data, rename={"ExpertAnnotations.txt": "../../../../escape/ExpertAnnotations.txt"})
    elif case == "absolute":
        data = _f8k_zip(shared_data, extra=[(str(tmp_path / "abs" / "x.txt"), b"x")])
    elif case == "symlink":
        data = _f8k_zip(shared_data, symlink="ExpertAnnotations.txt")
    elif case == "twice":
        data = _f8k_zip(shared_data, extra=[("other/ExpertAnnotations.txt", b"1\t2\t3\n")])
    else:  # a Windows-style name: "\\" is a separator too
        data = _f8k_zip(shared_data, extra=[("..\\..\\escape\\x.txt", b"x")])
    server.files["/flickr8k-expert/Flickr8k_text.zip"] = data
    code, out, err = _run(capsys, "download", "flickr8k-expert", "--quiet")
    _one_line(code, err, "Flickr8k_text.zip", fragment)
    assert not (env / "flickr8k").exists()  # no member was unpacked
    assert not (tmp_path / "escape").exists() and not (tmp_path / "abs").exists()


def test_zip_member_count_and_size_are_capped_before_unpacking(env, server, shared_data, monkeypatch, capsys):
    from capeval.bench import data_download as dl

    server.files["/flickr8k-expert/Flickr8k_text.zip"] = _f8k_zip(shared_data, extra=[(f"n{k}.txt", b"") for k in range(20)])
    monkeypatch.setattr(dl, "MAX_ARCHIVE_MEMBERS", 10)
    code, out, err = _run(capsys, "download", "flickr8k-expert", "--quiet")
    _one_line(code, err, "more than 10 members")
    monkeypatch.setattr(dl, "MAX_ARCHIVE_MEMBERS", 100_000)
    monkeypatch.setattr(dl, "MAX_MEMBER_BYTES", 1000)  # stands in for 1 GiB: the token file is 3 MB
    code, out, err = _run(capsys, "download", "flickr8k-expert", "--quiet")
    _one_line(code, err, "unpacks to", "more than 1,000")
    assert not (env / "flickr8k").exists()
    monkeypatch.setattr(dl, "MAX_MEMBER_BYTES", 1 << 30)
    assert main(["download", "flickr8k-expert", "--quiet"]) == 0  # the same archive, within the bounds
    assert (env / "flickr8k" / "ExpertAnnotations.txt").read_bytes() == (
        shared_data / "flickr8k" / "ExpertAnnotations.txt").read_bytes()


def test_a_corrupt_archive_is_one_line(env, server, shared_data, capsys):
    raw = bytearray(_f8k_zip(shared_data, compression=zipfile.ZIP_DEFLATED))
    raw[len(raw) // 3:len(raw) // 3 + 200] = b"\xff" * 200  # inside a deflated member
    server.files["/flickr8k-expert/Flickr8k_text.zip"] = bytes(raw)
    code, out, err = _run(capsys, "download", "flickr8k-expert", "--quiet")
    _one_line(code, err, "Flickr8k_text.zip is not a readable archive")


# -- hub listings (item 1) and LongCap-Arena's file_name (item 8) -----------------------------

@pytest.mark.parametrize("bad", [
    "data/dci_val.desc-/../../../../outside/x.parquet",
    "data/dci_val.desc-00000\x00.parquet",
    "data/dci_val.desc-\\..\\..\\..\\outside\\x.parquet",
])
def test_a_hub_listing_that_leaves_the_data_folder_is_refused_before_any_folder(tmp_path, monkeypatch, capsys, bad):
    pytest.importorskip("huggingface_hub")
    import huggingface_hub

    listing = ["data/dci_val.desc-00000-of-00001.parquet", bad, "README.md"]
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", lambda self, repo, **kw: listing)
    monkeypatch.delenv("CAPEVAL_DATA_MIRROR", raising=False)
    root = tmp_path / "a" / "b" / "data"
    code, out, err = _run(capsys, "download", "longcap-arena", "--dir", str(root), "--quiet")
    _one_line(code, err, "hub listing")
    assert not (tmp_path / "a").exists()  # not even the data root: nothing was created
    assert not list(tmp_path.rglob("outside"))


def _longcap_rows(tmp_path, n: int, bad_row: int, bad_name: str | None = None) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "longcap-arena" / "data"
    folder.mkdir(parents=True)
    names = [f"sa_{k}.jpg" for k in range(n)]
    blobs = [{"bytes": b"\xff\xd8\xff", "path": None} for _ in range(n)]
    if bad_name is not None:
        names[bad_row] = bad_name
    else:
        blobs[bad_row] = {"bytes": b"", "path": None}
    shard = folder / "dci_val.desc-00000-of-00001.parquet"
    pq.write_table(pa.table({
        "file_name": names,
        "image": pa.array(blobs, pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        "refs": pa.array([["a long reference."]] * n, pa.list_(pa.string())),
        "cand": ["a long candidate."] * n, "score": pa.array([0.5] * n, pa.float64()),
    }), shard)
    return shard


def test_longcap_arena_image_rows_are_numbered_across_batches(tmp_path):
    from capeval.bench.longcap_arena import extract_images
    from capeval.errors import CapevalError

    _longcap_rows(tmp_path, 40, 35)
    with pytest.raises(CapevalError, match=r"\(row 35\): no embedded image bytes") as e:
        extract_images(tmp_path)  # batches of 32 rows: row 35 is the 4th of the second batch
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["sa_\x00.jpg", "sa_1.jpg\n", "../sa.jpg", "/etc/passwd", "..", " "])
def test_longcap_arena_bad_file_name_is_one_line_naming_the_row(tmp_path, name):
    from capeval.bench import get_benchmark
    from capeval.bench.longcap_arena import extract_images
    from capeval.errors import CapevalError

    shard = _longcap_rows(tmp_path, 40, 35, bad_name=name)
    for call in (lambda: extract_images(tmp_path), lambda: get_benchmark("longcap-arena").load(tmp_path)):
        with pytest.raises(CapevalError, match=rf"{shard.name} \(row 35\): .*file_name") as e:
            call()
        assert "\n" not in str(e.value)
    assert not list((tmp_path / "longcap-arena" / "images").glob("*\x00*"))


# -- the rest of item 6 -----------------------------------------------------------------------

def test_an_optional_file_missing_from_the_mirror_is_a_note(env, server, capsys):
    server.files["/polaris/polaris_test.csv"] = b"image,mt,refs,score\na.jpg,a dog,['a dog'],0.5\n"
    code, out, err = _run(capsys, "download", "polaris", "--quiet")  # polaris_val.csv: 404
    assert code == 0, err
    assert "Traceback" not in err
    notes = [ln for ln in err.splitlines() if ln.startswith("capeval: polaris: note: optional file polaris_val.csv")]
    assert len(notes) == 1 and "404" in notes[0]
    assert (env / "polaris" / "polaris_test.csv").is_file() and not (env / "polaris" / "polaris_val.csv").exists()


def test_a_data_file_error_speaks_of_data_not_checkpoints(env, server, shared_data, capsys):
    server.files["/pascal-50s/pascal_50s.json"] = b"<!DOCTYPE html><html><title>Rate limited</title></html>"
    code, out, err = _run(capsys, "download", "pascal-50s", "--quiet")
    line = _one_line(code, err, "pascal_50s.json", "data file", "HTML page")
    assert "checkpoint" not in line


def test_checkpoints_come_from_the_mirror(tmp_path, server, monkeypatch, capsys):
    payload = b"PK\x05\x06" + b"\0" * 18
    server.files["/checkpoints/polos/reprod.zip"] = payload
    monkeypatch.setenv("CAPEVAL_DATA_MIRROR", server.url + "/")
    monkeypatch.delenv("CAPEVAL_CHECKPOINT_MIRROR", raising=False)
    code, out, err = _run(capsys, "download", "polos/reprod", "--dir", str(tmp_path / "ck"))
    assert code == 0, err
    assert server.requests == [("/checkpoints/polos/reprod.zip", None)]  # the source was never asked
    assert (tmp_path / "ck" / "polos" / "reprod.zip").read_bytes() == payload
    server.files["/own/polos/reprod.zip"] = payload
    monkeypatch.setenv("CAPEVAL_CHECKPOINT_MIRROR", server.url + "/own")
    server.requests.clear()
    assert main(["download", "polos/reprod", "--dir", str(tmp_path / "ck2")]) == 0
    assert server.requests == [("/own/polos/reprod.zip", None)]


# -- two downloads at once --------------------------------------------------------------------

def _child(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", **env)
    full.pop("CAPEVAL_DATA", None)
    return subprocess.Popen([sys.executable, "-m", "capeval.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=full, text=True)


def _first_line(stream, seconds: float = 60) -> str:
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return got[0] if got else ""


def test_two_downloads_of_one_benchmark_the_second_waits(tmp_path, server, shared_data):
    files = _thumb(server, shared_data)
    server.gate = threading.Event()  # every answer waits until the second process is started
    env = {"CAPEVAL_DATA_MIRROR": server.url + "/", "CAPEVAL_CACHE": str(tmp_path / "cache")}
    first = _child(["download", "thumb", "--quiet"], env)
    second = None
    try:
        assert server.arrived.wait(60), "the first download never asked the server"
        second = _child(["download", "thumb", "--quiet"], env)
        line = _first_line(second.stderr)
        assert "another capeval download holds" in line and "waiting for it to finish" in line, line
        server.gate.set()
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
    finally:
        server.gate.set()
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    for err in (err1, err2):
        assert "Traceback" not in err and "FileNotFoundError" not in err
    assert len(server.requests) == 2  # the second found both files in place and verified
    data = tmp_path / "cache" / "data" / "thumb"
    for name, body in files.items():
        assert (data / name).read_bytes() == body
    assert '"thumb/mscoco_references.json": "' + hashlib.sha256(files["mscoco_references.json"]).hexdigest() in out2
    assert not (tmp_path / "cache" / "data" / ".downloads" / "lock").exists()  # removed on release


def test_two_downloads_of_one_checkpoint_the_second_waits(tmp_path, server):
    from capeval.models.download import download_lock

    server.files["/polos/reprod.zip"] = b"PK\x05\x06" + b"\0" * 18
    target = tmp_path / "ck" / "polos" / "reprod.zip"
    with download_lock(target.parent / ".reprod.zip.lock", "test"):  # a first download, still running
        child = _child(["download", "polos/reprod", "--dir", str(tmp_path / "ck")],
                       {"CAPEVAL_CHECKPOINT_MIRROR": server.url, "CAPEVAL_CACHE": str(tmp_path / "cache")})
        try:
            line = _first_line(child.stderr)
            assert "polos/reprod: another capeval download holds" in line, line
            assert not target.exists() and server.requests == []
        except BaseException:
            child.kill()
            raise
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert sorted(p.name for p in target.parent.iterdir()) == [".reprod.zip.sha256", "reprod.zip"]  # no lock left
