"""Finding each item's image: a folder of ``<id>`` / ``<id>.<ext>`` files, or a mapping id -> image."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from capeval.errors import InputError
from capeval.io.image_files import not_regular

#: file extensions looked up for ``<id>.<ext>`` in an images folder
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")


def resolve_images(images: Any, ids: Sequence[str], who: str,
                   extensions: Sequence[str] = IMAGE_EXTENSIONS) -> tuple[dict[str, Any], dict[str, str]]:
    """``({id: image source}, {id: problem})`` for the items ``ids``.

    ``images``: a folder (an item's file is named ``<id>`` or ``<id>.<ext>``; two candidate
    files are a problem, not a silent pick) or a mapping id -> path / PIL image / array (a
    missing or None entry is a problem). ``who`` names the metric in the error raised when
    ``images`` is absent or of the wrong kind. Problems are one-line messages naming the item;
    the caller decides whether they are errors or skipped items.
    """
    found: dict[str, Any] = {}
    bad: dict[str, str] = {}
    if images is None:
        raise InputError(f"{who} needs images: pass images=<folder> or a mapping id -> image")
    if isinstance(images, (str, os.PathLike)):
        folder = Path(images)
        if not folder.is_dir():
            raise InputError(f"images folder not found: {folder}")
        names: dict[str, Path] = {}
        by_stem: dict[str, list[Path]] = {}
        for entry in os.scandir(folder):
            names[entry.name] = Path(entry.path)
            stem, ext = os.path.splitext(entry.name)
            if ext.lower() in extensions:
                by_stem.setdefault(stem, []).append(Path(entry.path))
        for i in ids:
            hits = by_stem.get(i, [])
            if i in names and names[i].is_file():
                found[i] = names[i]
            elif len(hits) == 1:
                found[i] = hits[0]
                kind = not_regular(hits[0])
                if kind is not None:  # a FIFO would block its reader forever: named now, not read
                    del found[i]
                    bad[i] = f"item {i!r}: not a regular file ({kind}): {hits[0]}; images are read from regular files only"
            elif hits:
                bad[i] = f"item {i!r}: several image files match: {sorted(p.name for p in hits)}"
            else:
                bad[i] = f"item {i!r}: no image {i} or {i}.{{{','.join(e[1:] for e in extensions)}}} in {folder}"
        return found, bad
    if isinstance(images, Mapping):
        table = {str(k): v for k, v in images.items()}
        for i in ids:
            value = table.get(i)
            kind = not_regular(value) if isinstance(value, (str, os.PathLike)) else None
            if kind is not None:
                bad[i] = f"item {i!r}: not a regular file ({kind}): {value}; images are read from regular files only"
            elif value is not None:
                found[i] = value
            else:
                bad[i] = f"item {i!r}: no image given for this id"
        return found, bad
    raise InputError(f"images must be a folder or a mapping id -> path/PIL image/array, got {type(images).__name__}")


def image_metric_inputs(
    candidates: Any, references: Any, images: Any, metrics: Sequence[str], needs_references: bool = False
) -> tuple[dict[str, str], dict[str, list[str]] | None, list[str], dict[str, Any], dict[str, str]]:
    """The inputs of an image metric, checked: ``(candidates, references or None, ids,
    {id: image source}, {id: problem})``.

    References are required (and must cover the same ids) when one of ``metrics`` is a
    ``ref-`` variant or ``needs_references`` (metrics whose every variant reads them); an empty caption or a missing image is a problem of its item, which the
    caller turns into an error or a skipped item.
    """
    from capeval.io.inputs import check_same_ids, normalize_candidates, normalize_references

    cands = normalize_candidates(candidates, allow_empty=True)
    refs: dict[str, list[str]] | None = None
    if needs_references or any(m.startswith("ref-") for m in metrics):
        if references is None:
            raise InputError(f"{', '.join(m for m in metrics if m.startswith('ref-'))} needs references")
        refs = normalize_references(references)
        check_same_ids(cands, refs)
    ids = list(cands)
    sources, bad = resolve_images(images, ids, "/".join(metrics))
    for i in ids:
        if not cands[i].strip():
            bad.setdefault(i, f"item {i!r}: caption is empty")
    return cands, refs, ids, sources, bad
