"""Writing result files atomically: a temporary file in the same folder, then ``os.replace``;
an error never leaves a partial or half-updated set of files.

What a target path may be:

- a symlink: followed; the temporary file is made beside the final target, which is replaced
  (the link stays a link);
- an existing file: its permission bits (and, for root, its owner) are kept;
- a character device or a pipe (``/dev/null``, ``/dev/stdout``, a FIFO, ``/dev/fd/N``):
  written into, never replaced (no atomicity is possible there); a block device or a socket
  is refused;
- a file with several hard links: :func:`check_writable` (what the CLI runs on every output
  option before any work) refuses it. A rename necessarily gives the name a new inode, and
  writing in place would make a crash visible through every link; so the user decides
  (remove the extra link, or name another file). A later rewrite of a file hard-linked behind
  our back (a ``cp -al`` snapshot of a cache) replaces the name and leaves the snapshot as it was.

Temporary files carry the writer's host and pid (:mod:`capeval.io.temps`), so a run killed
with SIGKILL leaves nothing that the next run in that folder does not delete.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from capeval.errors import InputError
from capeval.io.temps import make_temp

# names of an already-open descriptor: whatever they resolve to is written into, not replaced
_DESCRIPTOR = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|thread-self|\d+)/fd/(\d+)")


def _kind(mode: int) -> str:
    return ("block device" if stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode)
            else "directory" if stat.S_ISDIR(mode) else "special file")


def _target(path: str | os.PathLike[str]) -> tuple[Path, os.stat_result | None, bool]:
    """``(where the bytes go, its stat or None when absent, whether it is written in place)``.

    Raises InputError for what must never be written (block devices, sockets, folders) and
    for a symlink loop."""
    path = Path(path)
    try:
        st: os.stat_result | None = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None  # to be created (a folder that is a file is reported by the caller)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or _own_descriptor(path) is not None):
        return path, st, True  # (a descriptor of ours may be a socket: stdout under a service manager)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path} is a {_kind(st.st_mode)}; name a regular file")
    if _DESCRIPTOR.fullmatch(os.path.abspath(path)):
        return path, st, True  # e.g. --out /dev/stdout while stdout is redirected to a file
    return Path(os.path.realpath(path)), st, False


def _new_temp(target: Path, like: os.stat_result | None, suffix: str = ".tmp") -> tuple[int, str]:
    """A temporary file beside ``target`` with the permissions the result should have: those
    of the file it replaces (``like``), else what a plain ``open()`` would give."""
    fd, tmp = make_temp(target, suffix)
    try:
        if like is None:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
        else:
            if like.st_uid != os.geteuid() or like.st_gid != os.getegid():
                try:
                    os.fchown(fd, like.st_uid, like.st_gid)
                except PermissionError:
                    pass  # only root may give a file away; the file becomes ours, as any rewrite would
            os.fchmod(fd, stat.S_IMODE(like.st_mode))
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def _own_descriptor(path: Path) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout`` -> 1), else None."""
    m = _DESCRIPTOR.fullmatch(os.path.abspath(path))
    if m is None:
        return None
    if m[1] in ("stdout", "stderr"):
        return 1 if m[1] == "stdout" else 2
    if m[1] is not None:
        return int(m[1][3:])
    return int(m[3]) if m[2] in ("self", "thread-self", str(os.getpid())) else None


def _open_in_place(path: Path) -> IO[bytes]:
    """A character device, pipe or open descriptor, opened to be written into (never truncated)."""
    sys.stdout.flush()
    sys.stderr.flush()
    own = _own_descriptor(path)
    # a descriptor of ours is duplicated, so that the bytes follow what was printed through it
    # (a fresh open of /dev/stdout redirected to a file would start at offset 0 and overwrite it)
    fd = os.dup(own) if own is not None else os.open(path, os.O_WRONLY | os.O_APPEND)
    return os.fdopen(fd, "wb")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    A crash or error never leaves a partial file at ``path``.
    """
    atomic_write_many([(path, text)], make_folders=True)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """:func:`atomic_write_text` for bytes."""
    atomic_write_many([(path, data)], make_folders=True)


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through (``np.save``, ``torch.save``, ...): the data goes
    to a temporary file beside it, which replaces ``path`` only when the block ends without error
    (a character device or pipe is written into directly)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    target, st, in_place = _target(path)
    if in_place:
        with _open_in_place(target) as f:
            yield f
        return
    fd, tmp = _new_temp(target, st)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary file name beside ``path`` for writers that take a name, not a file
    (``safetensors.save_file``, a download); it replaces ``path`` when the block ends without
    error. A character device or pipe is handed over as it is."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    target, st, in_place = _target(path)
    if in_place:
        yield target
        return
    fd, tmp = _new_temp(target, st, suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def atomic_write_many(files: list[tuple[str | os.PathLike[str], str | bytes]], make_folders: bool = False) -> None:
    """Write several files (text or bytes) so that either all of them appear or none does.

    Every file is first written to a temporary file next to its target; the targets are
    replaced only once all temporary files are complete, so an error while writing the
    second file never leaves the first one behind. Character devices and pipes among the
    targets are written into before any file is replaced (they cannot be taken back).
    """
    staged: list[tuple[str, Path]] = []
    streams: list[tuple[Path, bytes]] = []
    try:
        for path, text in files:
            data = text.encode("utf-8") if isinstance(text, str) else text
            if make_folders:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            target, st, in_place = _target(path)
            if in_place:
                streams.append((target, data))
                continue
            fd, tmp = _new_temp(target, st)
            staged.append((tmp, target))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for target, data in streams:
            with _open_in_place(target) as f:
                f.write(data)
        for tmp, target in staged:
            os.replace(tmp, target)
    except BaseException:
        for tmp, _ in staged:
            _unlink(tmp)
        raise


def check_writable(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """Fail fast (before any scoring) when ``path`` cannot be written; return it as a Path.

    The folder must exist (a typo in it is far more likely than a wish to create it) and
    accept a new file; ``path`` itself must not be a folder, a block device or a socket, nor
    an existing file with other hard links (see the module notes). A character device or a
    pipe must be writable. Nothing is left behind.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory; name a file")
    try:
        target, st, in_place = _target(path)
    except InputError as exc:
        raise InputError(f"{what} {exc}") from None
    if in_place:
        if not os.access(path, os.W_OK):
            raise InputError(f"{what} {path}: not writable")
        return path
    parent = target.parent
    if not parent.exists():
        raise InputError(f"{what} {path}: the folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise InputError(f"{what} {path}: {parent} is not a folder")
    if st is not None and st.st_nlink > 1:
        raise InputError(f"{what} {path} has {st.st_nlink - 1} other hard link(s); an atomic rewrite would "
                         "detach it from them: remove the file first or name another one")
    try:
        fd, tmp = make_temp(target, ".probe")
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot write in {parent} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)
    return path
