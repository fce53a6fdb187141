"""What the judge cache hands back is read with bounded memory and never blocks (issue 46): a
FIFO, a symbolic link, a folder or an oversized file where an entry should be is a miss, and the
next store replaces it with a real entry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capeval.judges import cache as cache_mod
from capeval.judges.cache import AnswerCache


@pytest.mark.parametrize("kind", ["fifo", "link", "folder", "huge", "not-utf8"])
def test_hostile_entry_is_a_miss_then_replaced(tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "MAX_ENTRY_BYTES", 1 << 20)
    store = AnswerCache(tmp_path / "cache")
    store.put("clair", "aa11", {"answer": "a good answer"})
    path = store._path("clair", "bb22")
    path.parent.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "users-file.json"
    outside.write_text('{"format": 1, "answer": "forged"}')
    if kind == "fifo":
        os.mkfifo(path)  # a plain read would block forever
    elif kind == "link":
        os.symlink(outside, path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate((1 << 20) + 1)  # sparse: nothing is written to disk
    else:
        path.write_bytes(b'{"format": 1, "answer": "\xff"}')
    assert store.get("clair", "bb22") is None
    assert store.stats()["misses"] == {"clair": 1}
    if kind != "folder":  # a folder is not replaced by a file (the store fails with one line instead)
        store.put("clair", "bb22", {"answer": "asked again"})
        assert store.get("clair", "bb22")["answer"] == "asked again"
    assert outside.read_text() == '{"format": 1, "answer": "forged"}'  # the link's target untouched
    assert store.get("clair", "aa11")["answer"] == "a good answer"
