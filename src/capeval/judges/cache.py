"""On-disk cache of the judges' generations (VisCE2 contexts and ratings, CLAIR, FLEUR, EXPERT answers).

One JSON file per generation, ``<root>/<kind>/<key[:2]>/<key>.json``, written atomically
(:mod:`capeval.io.atomic`) as soon as the answer arrives, so an interrupted run leaves only
complete entries and a rerun resumes from them. The key is the sha256 of the canonical JSON
of everything the answer depends on: the image's content hash, the exact prompt sent (its
sha256; the prompt embeds the context for ratings), the model identity (backend, model,
revision, quantization, dtype, conversation template or server URL) and the decoding
settings (temperature, seed, max new tokens). Re-scoring new captions of the same images
thus costs one generation per caption: the contexts come from the cache.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from capeval.errors import ResourceError
from capeval.paths import make_cache_folder
from capeval.io.atomic import atomic_write_text

#: bump when the record layout changes (old entries are then misses, never misread)
FORMAT = 1


def text_sha(text: str) -> str:
    """sha256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(kind: str, fields: Mapping[str, Any]) -> str:
    """sha256 of ``{"kind", "format", **fields}`` as canonical JSON."""
    blob = json.dumps({"kind": kind, "format": FORMAT, **fields}, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class AnswerCache:
    """Generations on disk (``root``) or nowhere (``root=None``); thread-safe counters.

    ``hits``/``misses``/``writes`` count lookups and stores by kind; a damaged entry (not
    JSON, other format) counts as a miss and is overwritten by the next store.
    """

    def __init__(self, root: str | os.PathLike[str] | None, *, refresh: bool = False):
        self.root = Path(root).expanduser() if root is not None else None
        #: read nothing (every lookup a miss), so answers are asked again and their entries replaced
        self.refresh = refresh
        self._lock = threading.Lock()
        self.hits: dict[str, int] = {}
        self.misses: dict[str, int] = {}
        self.writes: dict[str, int] = {}

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def _path(self, kind: str, key: str) -> Path:
        assert self.root is not None
        return self.root / kind / key[:2] / f"{key}.json"

    def _count(self, table: dict[str, int], kind: str) -> None:
        with self._lock:
            table[kind] = table.get(kind, 0) + 1

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        """The stored record (``{"answer": ..., ...}``) or None."""
        record = None
        if self.root is not None and not self.refresh:
            try:
                data = json.loads(_read_entry(self._path(kind, key)))
                if isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("answer"), str):
                    record = data
            except (FileNotFoundError, NotADirectoryError):
                pass
            except (OSError, ValueError, RecursionError):
                pass  # damaged entry (or nested too deep to parse): a miss, rewritten on the next store
        self._count(self.hits if record is not None else self.misses, kind)
        return record

    def put(self, kind: str, key: str, record: Mapping[str, Any]) -> None:
        """Store ``record`` (must hold ``"answer"``) atomically; no-op without a root. A failed
        write (disk full, ...) is a one-line :class:`ResourceError` naming the folder."""
        if self.root is None:
            return
        path = self._path(kind, key)
        make_cache_folder(path.parent)
        _clear_non_entry(path)
        body = {"format": FORMAT, "kind": kind, "key": key, "created": time.time(), **record}
        try:
            atomic_write_text(path, json.dumps(body, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise ResourceError(f"cannot write the judge cache in {path.parent}: {_why(exc)}; free some space or "
                                "point CAPEVAL_CACHE (or the judge's cache option) at another folder") from None
        self._count(self.writes, kind)

    def check_writable(self, kind: str, keys: Iterable[str]) -> None:
        """Fail (one line naming the folder) unless every folder the entries ``keys`` go to can
        take a new file: called before the requests, so a read-only cache costs none."""
        if self.root is None:
            return
        for folder in sorted({self._path(kind, k).parent for k in keys}):
            make_cache_folder(folder)
            try:
                _probe(folder)
            except OSError as exc:
                raise ResourceError(f"the judge cache folder {folder} cannot take new answers ({_why(exc)}); "
                                    "nothing was asked: make it writable or point CAPEVAL_CACHE (or the judge's "
                                    "cache option) at another folder") from None

    def stats(self) -> dict[str, dict[str, int]]:
        """``{"hits": {kind: n}, "misses": {...}, "writes": {...}}`` so far."""
        with self._lock:
            return {"hits": dict(self.hits), "misses": dict(self.misses), "writes": dict(self.writes)}


#: the largest entry read back: four times the largest answer a judge may send (16 MB, the
#: transport's default cap), for JSON's escapes; a larger file is no entry of ours (a miss)
MAX_ENTRY_BYTES = 64 << 20


def _read_entry(path: Path) -> str:
    """An entry's text, read with bounded memory and never blocking: a symbolic link, a FIFO,
    a folder or a file over :data:`MAX_ENTRY_BYTES` is a damaged entry (``ValueError``: a miss)."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise FileNotFoundError(str(path)) from None
        raise ValueError(f"{path}: not a readable entry") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            raise ValueError(f"{path}: not an entry of this cache")
        data = f.read(MAX_ENTRY_BYTES + 1)
    if len(data) > MAX_ENTRY_BYTES:
        raise ValueError(f"{path}: not an entry of this cache")
    return data.decode("utf-8")


def _clear_non_entry(path: Path) -> None:
    """Remove what is no entry of ours where an entry goes (a symbolic link, a FIFO, a socket):
    the atomic writer would write through a link to its target, or into a FIFO in place and
    block. A folder there stays, and the store fails with one line."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        path.unlink()


def _probe(folder: Path) -> None:
    """Create and remove an empty file in ``folder`` (what a store will need)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=".probe.", suffix=".tmp", dir=folder)
    os.close(fd)
    os.unlink(tmp)


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
    return exc.strerror or type(exc).__name__


def open_cache(cache: bool | str | os.PathLike[str] | None, name: str = "visce2", *,
               refresh: bool = False) -> AnswerCache:
    """``True``: ``<capeval cache>/<name>``; a path: that folder; ``None``/``False``: no disk cache.
    ``refresh``: read nothing from it, ask again and overwrite (see :class:`AnswerCache`)."""
    if cache is None or cache is False:
        return AnswerCache(None)
    if cache is True:
        from capeval.paths import cache_dir

        return AnswerCache(cache_dir() / name, refresh=refresh)
    if isinstance(cache, (str, os.PathLike)):
        return AnswerCache(cache, refresh=refresh)
    raise TypeError(f"cache must be True/False/None or a folder, got {type(cache).__name__}")
