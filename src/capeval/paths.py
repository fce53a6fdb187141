"""Where capeval keeps prepared resources and caches."""

from __future__ import annotations

import os
from pathlib import Path

from capeval.errors import InputError, ResourceError, shown


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


#: The longest name component accepted from outside (bytes in UTF-8): what ext4, XFS, APFS and
#: NTFS all store; a longer one fails at open() with an OS message that names no item.
MAX_NAME_BYTES = 255


def resolve_under(root: str | os.PathLike[str], name: object, *, what: str, item: str | None = None,
                  max_name_bytes: int = MAX_NAME_BYTES, links: bool = True) -> Path:
    """``root / name`` for a relative ``name`` that came from outside (a file, a server, a hub
    listing, an archive member), or a one-line :class:`InputError`.

    ``what`` names where the name came from (``"caparena_auto_600.json image"``) and ``item``
    the item, both for the message. Refused, before anything is opened: a non-string, an empty
    name, NUL or other control characters, an absolute path (``/x``, ``C:\\x``, ``\\\\host``),
    any ``..`` component (``\\`` counts as a separator too, as it would on Windows), a component
    over ``max_name_bytes`` bytes; with ``links=False`` also a name that leaves ``root`` through a
    symbolic link inside it (for writes; links the user put in a folder of theirs, such as
    ``images/train2014 -> /mnt/coco/train2014``, are theirs to follow when reading). The name is
    checked as text first, so nothing outside ``root`` is touched by a name alone.
    """
    label = f"{what} {shown(name)}" + (f" (item {shown(item)})" if item is not None else "")
    if not isinstance(name, str):
        raise InputError(f"{label}: expected a file name (a string)", item_id=item)
    if not name or not name.strip():
        raise InputError(f"{label}: empty file name", item_id=item)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise InputError(f"{label}: control character in a file name", item_id=item)
    parts = [p for p in name.replace("\\", "/").split("/")]
    if name.startswith(("/", "\\")) or (len(name) >= 2 and name[1] == ":" and name[0].isalpha()):
        raise InputError(f"{label}: absolute path; expected a name relative to {os.fspath(root)!r}", item_id=item)
    if any(p == ".." for p in parts):
        raise InputError(f"{label}: '..' leaves {os.fspath(root)!r}", item_id=item)
    try:
        too_long = any(len(p.encode("utf-8")) > max_name_bytes for p in parts)
    except UnicodeEncodeError:  # a lone surrogate
        raise InputError(f"{label}: not valid Unicode", item_id=item) from None
    if too_long:
        raise InputError(f"{label}: a name component is longer than {max_name_bytes} bytes", item_id=item)
    base = Path(root).expanduser()
    path = base.joinpath(*[p for p in parts if p not in ("", ".")]) if any(p not in ("", ".") for p in parts) else None
    if path is None:
        raise InputError(f"{label}: names the folder itself, not a file in it", item_id=item)
    if links:
        return path
    real_base = os.path.realpath(base)
    real = os.path.realpath(path)
    if real != real_base and not real.startswith(real_base.rstrip(os.sep) + os.sep):
        raise InputError(f"{label}: leaves {os.fspath(root)!r} through a symbolic link", item_id=item)
    return path


def safe_file_stem(item_id: str, max_bytes: int = 120) -> str:
    """A file-name stem for an id that came from outside: ``[A-Za-z0-9._-]`` kept, anything
    else ``_``; a stem that changed, starts with a dot or is longer than ``max_bytes`` is cut
    and given the first 8 hex digits of the id's sha256, so distinct ids never share a file."""
    import hashlib
    import re

    clean = re.sub(r"[^A-Za-z0-9._-]", "_", item_id)
    if clean != item_id or clean in ("", ".", "..") or clean.startswith(".") or len(clean) > max_bytes:
        digest = hashlib.sha256(item_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        clean = f"{clean.strip('.')[: max_bytes - 9] or 'item'}-{digest}"
    return clean
