"""Writing result files atomically: a temporary file in the same folder, then ``os.replace``;
an error never leaves a partial or half-updated set of files."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from capeval.errors import InputError


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    A crash or error never leaves a partial file at ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_many([(path, text)])


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """:func:`atomic_write_text` for bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_many([(path, data)])


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through (``np.save``, ``torch.save``, ...): the data goes
    to a temporary file beside it, which replaces ``path`` only when the block ends without error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        _plain_permissions(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _plain_permissions(tmp: str) -> None:
    # mkstemp creates 0600; give the file the permissions a plain open() would
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)


def atomic_write_many(files: list[tuple[str | os.PathLike[str], str | bytes]]) -> None:
    """Write several files (text or bytes) so that either all of them appear or none does.

    Every file is first written to a temporary file next to its target; the targets are
    replaced only once all temporary files are complete, so an error while writing the
    second file never leaves the first one behind.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files:
            path = Path(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8") if isinstance(text, str) else text)
                f.flush()
                os.fsync(f.fileno())
            _plain_permissions(tmp)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        raise


def check_writable(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """Fail fast (before any scoring) when ``path`` cannot be written; return it as a Path.

    The folder must exist (a typo in it is far more likely than a wish to create it) and
    accept a new file; ``path`` itself must not be a folder. Nothing is left behind.
    """
    path = Path(path)
    parent = path.parent
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory; name a file")
    if not parent.exists():
        raise InputError(f"{what} {path}: the folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise InputError(f"{what} {path}: {parent} is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot write in {parent} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)
    return path
