"""Checkpoint table, missing-file and hash errors, and ``capeval download``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from capeval.models.clip import checkpoints as ck
from capeval.cli.main import main
from capeval.errors import ResourceError


def test_table_has_the_required_entries():
    for name in ("openai/ViT-B-32", "openai/ViT-L-14", "open_clip/ViT-L-14-laion2b_s32b_b82k", "pac-s/ViT-B-32",
                 "pac-s/ViT-L-14", "pac-s++/ViT-B-32", "pac-s++/ViT-L-14", "clip-vocab"):
        assert name in ck.CHECKPOINTS
    # OpenAI's URLs carry the sha256 as the folder name
    for name in ("openai/ViT-B-32", "openai/ViT-L-14"):
        entry = ck.CHECKPOINTS[name]
        assert entry.urls[0].split("/")[-2] == entry.sha256
    laion = ck.CHECKPOINTS["pac-s/ViT-L-14"]
    assert laion.preprocess.mean == laion.preprocess.std == (0.5, 0.5, 0.5) and laion.activation == "gelu"
    assert ck.CHECKPOINTS["pac-s++/ViT-L-14"].base == "openai/ViT-L-14"
    info = ck.checkpoint_info()
    assert info["entries"]["openai/ViT-B-32"]["present"] in (True, False)


def test_missing_file_says_what_to_download(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    with pytest.raises(ResourceError) as err:
        ck.resolve(ck.CHECKPOINTS["pac-s++/ViT-B-32"])
    msg = str(err.value)
    assert "capeval download pac-s++/ViT-B-32" in msg and str(tmp_path / "pac-s++" / "PAC++_clip_ViT-B-32.pth") in msg


def test_missing_file_through_the_scorer(tmp_path, monkeypatch):
    import capeval

    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    with pytest.raises(ResourceError, match="capeval download pac-s/ViT-B-32"):
        capeval.load("pac-s")


def test_hash_mismatch_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    path = tmp_path / "openai" / "ViT-L-14.pt"
    path.parent.mkdir()
    path.write_bytes(b"not the model")
    with pytest.raises(ResourceError) as err:
        ck.resolve(ck.CHECKPOINTS["openai/ViT-L-14"])
    assert str(path) in str(err.value) and "sha256" in str(err.value)


def test_unknown_sha_is_recorded_not_invented(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    path = tmp_path / "pac-s" / "clip_ViT-B-32.pth"
    path.parent.mkdir()
    path.write_bytes(b"abc")
    assert ck.CHECKPOINTS["pac-s/ViT-B-32"].sha256 is None
    got, digest = ck.resolve(ck.CHECKPOINTS["pac-s/ViT-B-32"])
    assert got == path and digest == hashlib.sha256(b"abc").hexdigest()


def _fake_entry(monkeypatch, tmp_path, payload: bytes, sha: str | None):
    src = tmp_path / "remote.bin"
    src.write_bytes(payload)
    entry = replace(ck.CHECKPOINTS["pac-s++/ViT-B-32"], urls=(src.as_uri(),), sha256=sha)
    monkeypatch.setitem(ck.CHECKPOINTS, "pac-s++/ViT-B-32", entry)
    return entry


def test_download_verifies_and_writes_atomically(tmp_path, monkeypatch, capsys):
    payload = b"weights" * 1000
    _fake_entry(monkeypatch, tmp_path, payload, hashlib.sha256(payload).hexdigest())
    out = tmp_path / "ckpts"
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out)]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    target = out / "pac-s++" / "PAC++_clip_ViT-B-32.pth"
    assert Path(line["path"]) == target and target.read_bytes() == payload
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary files left


def test_download_with_wrong_hash_writes_nothing(tmp_path, monkeypatch, capsys):
    _fake_entry(monkeypatch, tmp_path, b"tampered", "0" * 64)
    out = tmp_path / "ckpts"
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out)]) == 2
    assert "sha256" in capsys.readouterr().err
    assert not any(p.is_file() for p in out.rglob("*"))


def test_download_list(capsys):
    assert main(["download", "--list", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert "pac-s++/ViT-L-14" in table["entries"]


_DRIVE_WARNING = (b"<!DOCTYPE html><html><head><title>Google Drive - Virus scan warning</title></head>"
                  b"<body>Google Drive can't scan this file for viruses.</body></html>")


def _state_dict_payload(tmp_path) -> bytes:
    torch = pytest.importorskip("torch")
    p = tmp_path / "sd.pth"
    torch.save({"visual.proj": torch.zeros(4, 2)}, str(p))
    return p.read_bytes()


def test_download_without_sha_refuses_an_html_page(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    _fake_entry(monkeypatch, tmp_path, _DRIVE_WARNING, None)
    out = tmp_path / "ckpts"
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "the downloaded file is an HTML page" in err and "nothing was written" in err
    assert not any(p.is_file() for p in out.rglob("*"))


@pytest.mark.parametrize("payload,fragment", [(b"", "is empty (0 bytes)"), (b"PK\x03\x04" + b"\0" * 64, "truncated or corrupt")])
def test_download_without_sha_refuses_empty_and_truncated(tmp_path, monkeypatch, capsys, payload, fragment):
    pytest.importorskip("torch")
    _fake_entry(monkeypatch, tmp_path, payload, None)
    out = tmp_path / "ckpts"
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out)]) == 2
    assert fragment in capsys.readouterr().err
    assert not any(p.is_file() for p in out.rglob("*"))


def test_download_without_sha_accepts_a_state_dict_and_replaces_a_broken_file(tmp_path, monkeypatch, capsys):
    payload = _state_dict_payload(tmp_path)
    _fake_entry(monkeypatch, tmp_path, payload, None)
    out = tmp_path / "ckpts"
    target = out / "pac-s++" / "PAC++_clip_ViT-B-32.pth"
    target.parent.mkdir(parents=True)
    target.write_bytes(_DRIVE_WARNING)  # what an earlier, redirected download left behind
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out)]) == 0
    captured = capsys.readouterr()
    assert "is an HTML page" in captured.err and "downloading it again" in captured.err
    assert target.read_bytes() == payload
    assert json.loads(captured.out)["sha256"] == hashlib.sha256(payload).hexdigest()


def test_download_without_sha_records_the_first_digest_and_checks_it(tmp_path, monkeypatch, capsys):
    payload = _state_dict_payload(tmp_path)
    _fake_entry(monkeypatch, tmp_path, payload, None)
    out = tmp_path / "ckpts"
    target = out / "pac-s++" / "PAC++_clip_ViT-B-32.pth"
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out)]) == 0
    record = target.parent / f".{target.name}.sha256"
    assert record.read_text().strip() == hashlib.sha256(payload).hexdigest()
    capsys.readouterr()
    assert main(["download", "--list", "--dir", str(out)]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("pac-s++/ViT-B-32 "))
    assert hashlib.sha256(payload).hexdigest()[:12] + "... (recorded)" in row
    # the source now serves other bytes: a new download must match the record, so nothing is written
    (tmp_path / "remote.bin").write_bytes(payload + b"\0")
    target.write_bytes(b"truncated")
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "expected " + hashlib.sha256(payload).hexdigest() in err and "recorded at its first download" in err
    assert target.read_bytes() == b"truncated"
    assert main(["download", "pac-s++/ViT-B-32", "--dir", str(out), "--force"]) == 0  # a new first download
    assert record.read_text().strip() == hashlib.sha256(payload + b"\0").hexdigest()


def test_html_under_an_official_name_says_what_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    path = tmp_path / "openai" / "ViT-B-32.pt"
    path.parent.mkdir()
    path.write_bytes(_DRIVE_WARNING)
    with pytest.raises(ResourceError, match="is an HTML page .*the download was redirected"):
        ck.resolve(ck.CHECKPOINTS["openai/ViT-B-32"])


def test_download_list_is_a_table(tmp_path, capsys):
    present = tmp_path / "pac-s" / "clip_ViT-B-32.pth"
    present.parent.mkdir()
    present.write_bytes(b"x")
    assert main(["download", "--list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "ARCH", "SHA256", "STATUS", "WHERE"]
    row = {ln.split()[0]: ln.split() for ln in lines[1:] if ln and not ln.startswith((" ", "folder", "manual"))}
    assert set(ck.CHECKPOINTS) <= set(row)
    assert row["openai/ViT-B-32"][2] == ck.CHECKPOINTS["openai/ViT-B-32"].sha256[:12] + "..."
    assert row["openai/ViT-B-32"][3:] == ["missing", "from", "openaipublic.azureedge.net"]
    # no published sha256: the one of the first download is recorded and checked afterwards
    assert " ".join(row["pac-s/ViT-B-32"][2:]) == f"recorded at download present {present}"
    assert "manual download" in " ".join(row["pac-s/ViT-L-14"])
    assert not out.lstrip().startswith("{")
