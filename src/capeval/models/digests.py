"""The sha256 recorded at a file's first download, for files whose source publishes none
(PAC-S checkpoints, some benchmark files): kept beside the file as ``.<name>.sha256`` and
checked afterwards, so that a truncated or replaced file is caught like a published digest
would catch it."""

from __future__ import annotations

from pathlib import Path


def recorded_path(path: Path) -> Path:
    """Where the sha256 of a file without a published one is recorded: ``.<name>.sha256`` beside it."""
    return path.parent / f".{path.name}.sha256"


def record_digest(path: Path, digest: str) -> None:
    """Record ``digest`` as ``path``'s first-download sha256 (checked by :func:`check_recorded`)."""
    from capeval.io.atomic import atomic_write_text

    atomic_write_text(recorded_path(path), digest + "\n")


def recorded_digest(path: Path) -> str | None:
    """The sha256 recorded at ``path``'s first download, or None."""
    try:
        return recorded_path(path).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def check_recorded(path: Path, digest: str) -> None:
    """A file whose sha256 is not published must still have the one recorded at its first download
    (a truncated or replaced file is caught); one recorded now when there is none."""
    from capeval.errors import ResourceError

    first = recorded_digest(path)
    if first is None:
        record_digest(path, digest)
    elif first != digest:
        raise ResourceError(f"{path} has sha256 {digest[:12]}..., not the {first[:12]}... recorded at its first "
                            f"download; delete it (or pass --force) to download it again")
