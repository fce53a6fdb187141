"""The bounded-download primitives of :mod:`capeval.models.download` and
:mod:`capeval.bench.data_download`: the download deadline and the checkpoint mirror (environment),
writing a file never through a symbolic link (:func:`refuse_link`, :func:`open_new`), hashing a
partial file, and the per-file download lock."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


#: environment variable: the longest one file's download may take, in seconds (all its URLs together)
DEADLINE_ENV = "CAPEVAL_DOWNLOAD_DEADLINE"
#: its default (one hour: a 1.7 GB checkpoint at 0.5 MB/s) and the values accepted
DEFAULT_DEADLINE_S = 3600.0
DEADLINE_RANGE = (1.0, 86400.0)
#: environment variable: a mirror for the checkpoint table's files (``URL/<folder>/<file>``)
CHECKPOINT_MIRROR_ENV = "CAPEVAL_CHECKPOINT_MIRROR"


class IncompleteDownload(Exception):
    """A download that stopped before its last byte (a body cut short, the deadline): like a network
    error, the caller may try the next copy; the ``.part`` file is kept when it can be resumed."""


def download_deadline() -> float:
    """``$CAPEVAL_DOWNLOAD_DEADLINE`` in seconds (default :data:`DEFAULT_DEADLINE_S`), within
    :data:`DEADLINE_RANGE`; a one-line :class:`~capeval.errors.InputError` naming the variable otherwise."""
    import math

    from capeval.errors import InputError

    raw = os.environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    lo, hi = DEADLINE_RANGE
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not lo <= value <= hi:  # NaN fails too
        raise InputError(f"{DEADLINE_ENV}={raw[:40]!r}: expected the seconds one file's download may take, "
                         f"from {lo:g} to {hi:g} (default {DEFAULT_DEADLINE_S:g})")
    return value


def checkpoint_mirror() -> str | None:
    """Where checkpoint files come from instead of their sources: ``$CAPEVAL_CHECKPOINT_MIRROR``,
    else ``$CAPEVAL_DATA_MIRROR/checkpoints`` (one mirror for data and models), else None. A file
    comes from ``<mirror>/<its path under the checkpoint folder>`` (``pac-s/clip_ViT-B-32.pth``)."""
    from capeval.paths import data_mirror

    url = os.environ.get(CHECKPOINT_MIRROR_ENV, "").strip().rstrip("/")
    if url:
        return url
    data = data_mirror()
    return f"{data}/checkpoints" if data else None


def refuse_link(path: Path, role: str) -> None:
    """A one-line error when ``path`` is a symbolic link (a download never writes through one) or
    something else than a regular file (a folder, a FIFO that would block the write)."""
    import stat

    from capeval.errors import ResourceError

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise ResourceError(f"{path} ({role}) is a symbolic link; a download never writes through one: remove it "
                            "and run again (nothing was written)")
    if not stat.S_ISREG(mode):
        raise ResourceError(f"{path} ({role}) is not a regular file (a folder, a FIFO, a device); a download only "
                            "replaces files: move it away and run again (nothing was written)")


def open_new(path: Path, append: bool = False) -> int:
    """A file descriptor for writing ``path`` (created 0644, truncated unless ``append``), never
    through a symbolic link (``O_NOFOLLOW``: a link is a one-line error, not a write to its target)."""
    from capeval.errors import ResourceError

    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if append else os.O_TRUNC
    try:
        return os.open(path, flags, 0o644)
    except OSError as exc:
        import errno

        if exc.errno == errno.ELOOP:
            raise ResourceError(f"{path} is a symbolic link; a download never writes through one: remove it and "
                                "run again (nothing was written)") from None
        raise


def _data_sniff(path: Path) -> str | None:
    """What a wrong data file is, when that says more than its digest: empty, or a web page."""
    size = path.stat().st_size
    if size == 0:
        return "is empty (0 bytes)"
    with open(path, "rb") as f:
        head = f.read(512).lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return f"is an HTML page ({size:,} bytes), not the data file: the server answered with a web page"
    return None



def _content_length(headers: Any) -> int | None:
    raw = (headers.get("Content-Length") or "").strip()
    return int(raw) if raw.isdigit() else None



def _hash_into(path: Path, digest: Any) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)


@contextmanager
def download_lock(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created) for the block: a second download of the
    same files waits here, saying so in one line on stderr, instead of racing for the same
    ``.part`` file. The lock file is removed on release; a waiter that then holds a removed
    file's lock takes the new one (checked by inode), so two holders never overlap."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    from capeval.errors import ResourceError

    path.parent.mkdir(parents=True, exist_ok=True)
    said = False
    while True:
        refuse_link(path, "the download's lock file")  # not a link, not a FIFO that would block the open
        try:
            fd = open_new(path, append=True)
        except OSError as exc:
            raise ResourceError(f"cannot create the lock file {path} ({exc.strerror or exc})") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    print(f"capeval: {what}: another capeval download holds {path}; waiting for it to finish",
                          file=sys.stderr, flush=True)
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            mine = os.fstat(fd)
            try:
                now = os.lstat(path)
                same = (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)  # the holder removed this file on release: lock the one there now
    try:
        yield
    finally:
        try:
            os.unlink(path)  # while still held: a waiter sees another inode and starts over
        except OSError:
            pass
        os.close(fd)
