"""File digests shared by checkpoints, benchmark data and prepared resources."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CACHE: dict[tuple[str, str, int, int], str] = {}


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256", *, cached: bool = True) -> str:
    """Hex digest of a file, read in 1 MiB blocks.

    With ``cached`` the digest is remembered for the process, keyed by path, size and
    mtime, so a benchmark file hashed for every signature is read once.
    """
    p = Path(path)
    key = None
    if cached:
        st = p.stat()
        key = (str(p.resolve()), algorithm, st.st_size, st.st_mtime_ns)
        if key in _CACHE:
            return _CACHE[key]
    h = hashlib.new(algorithm)
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    if key is not None:
        _CACHE[key] = digest
    return digest


def files_digest(paths: list[Path]) -> str:
    """sha256 over ``name:sha256`` lines of several files: one key for a set of annotation files."""
    h = hashlib.sha256()
    for path in paths:
        h.update(f"{path.name}:{file_digest(path)}\n".encode())
    return h.hexdigest()
