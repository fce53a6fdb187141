"""Where capeval keeps prepared resources and caches."""

from __future__ import annotations

import os
from pathlib import Path

from capeval.errors import InputError, ResourceError


def cache_dir() -> Path:
    """``$CAPEVAL_CACHE``, else ``$XDG_CACHE_HOME/capeval``, else ``~/.cache/capeval``.

    A path that exists but is not a folder raises a one-line :class:`ResourceError` naming
    it and ``CAPEVAL_CACHE`` (nothing is created here: see :func:`make_cache_folder`).
    """
    env = os.environ.get("CAPEVAL_CACHE")
    if env:
        path = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
        path = base / "capeval"
    if path.exists() and not path.is_dir():
        raise ResourceError(f"capeval cache folder {path} is not a folder; set CAPEVAL_CACHE to a writable folder")
    return path


def make_cache_folder(path: str | os.PathLike[str]) -> Path:
    """Create the cache folder ``path`` (and its parents) or raise a one-line :class:`ResourceError`
    naming it and ``CAPEVAL_CACHE`` (an unwritable or non-folder cache is the environment's, not a bug)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResourceError(f"cannot create the cache folder {path} ({exc.strerror or exc}); set CAPEVAL_CACHE to "
                            "a writable folder") from None
    if not os.access(path, os.W_OK):
        raise ResourceError(f"cache folder {path} is not writable; set CAPEVAL_CACHE to a writable folder")
    return path


def data_home() -> Path:
    """The benchmark data root: ``$CAPEVAL_DATA``, else ``<cache>/data`` (where ``capeval download``
    puts benchmark files; nothing is created here)."""
    env = os.environ.get("CAPEVAL_DATA")
    return Path(env).expanduser() if env else cache_dir() / "data"


def data_mirror() -> str | None:
    """``$CAPEVAL_DATA_MIRROR`` without its trailing slash, or None: benchmark files come from
    ``<mirror>/<benchmark>/<file name>`` instead of their sources."""
    url = os.environ.get("CAPEVAL_DATA_MIRROR", "").strip()
    return url.rstrip("/") or None


def folder_files(option: str, folder: str | os.PathLike[str], names: tuple[str, ...], what: str,
                 missing_hint: str) -> list[Path]:
    """``folder / name`` for each of ``names``, or a one-line :class:`~capeval.errors.InputError`
    naming the option ``option`` when the folder or a file is missing (``what``: the folder
    expected; ``missing_hint``: where the files come from)."""
    from capeval.errors import InputError

    root = Path(folder).expanduser()
    if not root.is_dir():
        raise InputError(f"option {option}={str(folder)!r}: not a folder ({what})")
    missing = [name for name in names if not (root / name).is_file()]
    if missing:
        raise InputError(f"option {option}={str(folder)!r}: missing {', '.join(missing)} ({missing_hint})")
    return [root / name for name in names]
