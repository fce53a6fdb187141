"""Locating and verifying a benchmark's images/videos in the user's folder."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Iterable

from capeval.errors import ResourceError
from capeval.hashing import file_digest
from capeval.paths import resolve_under

_MAX_LISTED = 10


def checksum_table(names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """``{basename: (md5, relative path)}`` from the packaged lists (capeval/data/checksums)."""
    out: dict[str, tuple[str, str]] = {}
    base = resources.files("capeval") / "data" / "checksums"
    for name in names:
        text = (base / name).read_text(encoding="utf-8")
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                md5, rel = parts
                out[rel.rsplit("/", 1)[-1]] = (md5, rel)
    return out


def _md5(path: Path) -> str:
    return file_digest(path, "md5", cached=False)


def resolve_media(
    bench_name: str,
    needed: Iterable[str],
    folder: str | Path,
    checksum_lists: Iterable[str] = (),
    kind: str = "image",
    verify: bool = True,
) -> dict[str, str]:
    """``{name: path}`` for every needed file, looked up as ``folder/<list path>`` or ``folder/<name>``.

    With checksum lists, each file's MD5 must match; missing and differing files are listed
    together in one :class:`ResourceError`.
    """
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise ResourceError(f"{bench_name}: {kind} folder not found: {root}")
    table = checksum_table(checksum_lists) if checksum_lists else {}
    found: dict[str, str] = {}
    missing: list[str] = []
    differing: list[str] = []
    for name in sorted(set(needed)):
        rel = table.get(name, (None, name))[1]
        # names come from the benchmark's data files (and the checksum lists): never outside the folder
        what = f"{bench_name} {kind} name"
        candidates = [resolve_under(root, rel, what=what), resolve_under(root, name, what=what)] if rel != name \
            else [resolve_under(root, name, what=what)]
        if kind == "video" and "." not in name:
            candidates += [resolve_under(root, f"{name}.mp4", what=what)]  # candidates[0]: a folder of frames
        path = next((c for c in candidates if c.exists()), None)
        if path is None:
            missing.append(f"{name} (looked for {', '.join(str(c) for c in candidates)})")
            continue
        if verify and name in table and path.is_file():
            digest = _md5(path)
            if digest != table[name][0]:
                differing.append(f"{path} (md5 {digest}, expected {table[name][0]})")
                continue
        found[name] = str(path)
    if missing or differing:
        parts = []
        if missing:
            shown = "; ".join(missing[:_MAX_LISTED])
            more = f"; and {len(missing) - _MAX_LISTED} more" if len(missing) > _MAX_LISTED else ""
            parts.append(f"{len(missing)} {kind} file(s) missing: {shown}{more}")
        if differing:
            shown = "; ".join(differing[:_MAX_LISTED])
            more = f"; and {len(differing) - _MAX_LISTED} more" if len(differing) > _MAX_LISTED else ""
            parts.append(
                f"{len(differing)} {kind} file(s) differ from the published checksums "
                f"({', '.join(checksum_lists)}): {shown}{more}"
            )
        raise ResourceError(f"{bench_name}: " + " | ".join(parts))
    return found
