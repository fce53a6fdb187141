"""The identity of a local model folder: the sha256 of its files (judge cache keys, signatures).

``folder_sha256(folder)`` is the sha256 of the sorted lines ``<relative path>\\0<file sha256>\\n``
over every file of the folder (symbolic links followed, as a Hugging Face snapshot holds them;
hidden files and folders such as ``.cache/`` or ``.git/`` left out). Two folders with the same
files have the same identity wherever they are; a changed weight, config or chat template gives
another one, so the judges' answer cache never serves the answers of other weights.

Hashing a 15 GB checkpoint takes tens of seconds, so each file's digest is remembered on disk
(``<capeval cache>/file-digests``) under its absolute path, size, mtime and inode: a rerun,
e.g. one answered entirely from the cache, reads a few small files instead of the weights.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from capeval.errors import ResourceError


def _memo_path(path: Path) -> Path | None:
    from capeval.paths import cache_dir

    try:
        st = path.stat()
        root = cache_dir()
    except (OSError, ResourceError):
        return None
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}".encode()).hexdigest()
    return root / "file-digests" / key[:2] / f"{key}.txt"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of one file, remembered on disk (see the module docstring); the memo is an
    optimisation only: an unreadable or unwritable memo means the file is hashed again."""
    from capeval.hashing import file_digest
    from capeval.io.atomic import atomic_write_text
    from capeval.paths import make_cache_folder

    p = Path(path)
    memo = _memo_path(p)
    if memo is not None:
        try:
            text = memo.read_text(encoding="ascii").strip()
            if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
                return text
        except (OSError, UnicodeDecodeError):
            pass
    digest = file_digest(p)
    if memo is not None:
        try:
            make_cache_folder(memo.parent)
            atomic_write_text(memo, digest + "\n")
        except (OSError, ResourceError):
            pass
    return digest


def folder_sha256(folder: str | os.PathLike[str]) -> str:
    """sha256 over the (relative path, content sha256) of every file of ``folder``."""
    root = Path(folder)
    h = hashlib.sha256()
    files = sorted(p for p in root.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    for p in files:
        h.update(f"{p.relative_to(root).as_posix()}\0{file_sha256(p)}\n".encode("utf-8"))
    return h.hexdigest()
