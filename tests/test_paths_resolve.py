"""``paths.resolve_under`` and ``paths.safe_file_stem`` (issue 46 item 1): a name that came from
outside stays inside its root, whatever its spelling; nothing outside is touched by a name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capeval.errors import InputError
from capeval.paths import MAX_NAME_BYTES, resolve_under, safe_file_stem


@pytest.mark.parametrize("name, fragment", [
    ("../../etc/passwd", "'..' leaves"),
    ("a/../../b", "'..' leaves"),
    ("a/..", "'..' leaves"),
    ("..\\..\\etc\\passwd", "'..' leaves"),
    ("/etc/passwd", "absolute path"),
    ("//host/share", "absolute path"),
    ("\\\\host\\share", "absolute path"),
    ("C:\\Windows\\x", "absolute path"),
    ("c:x", "absolute path"),
    ("", "empty file name"),
    ("   ", "empty file name"),
    ("a\x00b", "control character"),
    ("a\nb", "control character"),
    ("a\x7fb", "control character"),
    (".", "names the folder itself"),
    ("./", "names the folder itself"),
    ("x" * (MAX_NAME_BYTES + 1), "longer than"),
    ("é" * 128, "longer than"),  # 256 bytes in UTF-8
    ("\udcff.jpg", "not valid Unicode"),
    (5, "expected a file name"),
    (None, "expected a file name"),
    (["a"], "expected a file name"),
    (b"a.jpg", "expected a file name"),
])
def test_refused(tmp_path: Path, name: object, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_under(tmp_path, name, what="test image", item="k1")
    message = str(info.value)
    assert fragment in message and "test image" in message and "'k1'" in message
    assert "\n" not in message and len(message) < 400
    assert info.value.item_id == "k1"


@pytest.mark.parametrize("name, parts", [
    ("a.jpg", ("a.jpg",)),
    ("sub/a.jpg", ("sub", "a.jpg")),
    ("./sub//a.jpg", ("sub", "a.jpg")),
    ("..a.jpg", ("..a.jpg",)),  # dots inside a name are a name
    ("a..", ("a..",)),
    ("x" * MAX_NAME_BYTES, ("x" * MAX_NAME_BYTES,)),
    ("é" * 127, ("é" * 127,)),
])
def test_accepted(tmp_path: Path, name: str, parts: tuple[str, ...]) -> None:
    assert resolve_under(tmp_path, name, what="image") == tmp_path.joinpath(*parts)


def test_links_inside_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("x")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "linked")
    # reading: a link the user put in their folder is theirs to follow
    assert resolve_under(root, "linked/secret", what="image") == root / "linked" / "secret"
    # writing: refused
    with pytest.raises(InputError, match="through a symbolic link"):
        resolve_under(root, "linked/secret", what="member", links=False)
    # a root that is itself a link is fine either way
    os.symlink(root, tmp_path / "root-link")
    assert resolve_under(tmp_path / "root-link", "a", what="member", links=False) == tmp_path / "root-link" / "a"


def test_nothing_touched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name refused as text never reaches the file system (no stat, no open)."""
    touched: list[str] = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, *a, **k: touched.append(str(p)) or real(p, *a, **k))
    with pytest.raises(InputError):
        resolve_under(tmp_path, "../x", what="image", links=False)
    assert touched == []


@pytest.mark.parametrize("item_id", ["../../x", "/abs", "a/b", ".", "..", ".hidden", "", "x" * 10_000, "é", "²",
                                     "a b", "\udcff", "CON", "a\x00b"])
def test_safe_file_stem(item_id: str) -> None:
    stem = safe_file_stem(item_id)
    assert stem and len(stem.encode()) <= 120
    assert "/" not in stem and "\\" not in stem and not stem.startswith(".") and stem not in (".", "..")
    assert all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in stem)


def test_safe_file_stem_keeps_safe_ids_and_never_collides() -> None:
    assert safe_file_stem("COCO_val2014_000000000042") == "COCO_val2014_000000000042"
    ids = ["a/b", "a_b", "a?b", "a b", "x" * 200, "x" * 201, "x" * 200 + "/", "é", "è"]
    stems = [safe_file_stem(i) for i in ids]
    assert len(set(stems)) == len(ids)
