"""Thumbnails for the explorer: each item's image shrunk with PIL, embedded in the page as a
``data:`` URL (``--html-images embed``) or written as a small JPEG into a folder beside the page
and linked relatively (``link``: ``PAGE_files/<id>.jpg``, explanation pictures in ``PAGE_files/explain/``; the page
stays small)."""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

#: longest side of a thumbnail, in pixels (the table shows it at 90 x 62, the item's record at 320 x 240)
SIZE = 192
#: JPEG quality of a thumbnail (PIL's scale); about 6 KB for a 192 px COCO picture
QUALITY = 80
MODES = ("embed", "link", "none")


def _jpeg(source: Any, item: str, size: int = SIZE) -> bytes:
    """``source`` (a path, or a PIL image) as a JPEG of at most ``size`` pixels a side, decoded
    under capeval's pixel limit (:func:`capeval.io.image_files.decode_image`)."""
    from PIL import Image

    from capeval.io.image_files import decode_image

    img = source.copy() if isinstance(source, Image.Image) else decode_image(source, item)
    img.thumbnail((size, size))
    if img.mode != "RGB":
        img = img.convert("RGB")
    out = io.BytesIO()
    img.save(out, "JPEG", quality=QUALITY)
    return out.getvalue()


class Thumbnails:
    """``thumbs(item)``: the item's thumbnail URL, or None (no image, or one that cannot be
    decoded: counted in ``failed``, the page says so; the run's scores are not its business)."""

    def __init__(self, mode: str, sources: Mapping[str, Any], page: str, size: int = SIZE, sub: str = ""):
        if mode not in MODES:
            raise ValueError(mode)
        self.mode, self.sources, self.size, self.sub = mode, sources, size, sub  # sub: a folder of its own
        page_path = Path(page)
        self.folder = page_path.parent / f"{page_path.stem}_files"
        self.failed: dict[str, str] = {}
        self.written = 0

    def __call__(self, item: str) -> str | None:
        from capeval.errors import InputError

        source = self.sources.get(item)
        if self.mode == "none" or source is None or (isinstance(source, str) and "://" in source):
            return None
        try:
            data = _jpeg(source, item, self.size)
        except (InputError, OSError, ValueError) as exc:
            self.failed[item] = str(exc)
            return None
        if self.mode == "embed":
            return "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
        from capeval.io.atomic import atomic_write_bytes
        from capeval.paths import safe_file_stem

        name = safe_file_stem(item) + ".jpg"
        atomic_write_bytes(self.folder / self.sub / name if self.sub else self.folder / name, data)
        self.written += 1
        return "/".join(quote(part, safe="") for part in (self.folder.name, self.sub, name) if part)


def sources_of(images: Any, ids: list[str]) -> dict[str, Any]:
    """``{id: image}`` from an images folder (``<id>.<ext>``, as the image metrics find them:
    :func:`capeval.io.images.resolve_images`) or a mapping id -> path; items without one are left out."""
    from capeval.io.images import resolve_images

    if images is None:
        return {}
    if isinstance(images, (str, os.PathLike)) or isinstance(images, Mapping):
        found, _ = resolve_images(images, ids, "--html")
        return found
    return {}


def make(mode: str | None, images: Any, ids: list[str], page: str) -> Callable[[str], str | None] | None:
    """The thumbnailer of a page, or None when there are no pictures (mode ``none`` or no images)."""
    if mode == "none" or images is None:
        return None
    return Thumbnails(mode or "embed", sources_of(images, ids), page)


#: longest side of an explanation picture on the page (HICE-S's regions must stay readable)
EXPLAIN_SIZE = 640


def explanations(mode: str | None, folder: str | None, ids: list[str], page: str) -> Callable[[str], str | None] | None:
    """HICE-S's explanation pictures (``--explain DIR`` wrote ``DIR/<id>.png``, named by
    :func:`capeval.metrics.hice.explain.safe_name`) for the items' records, shrunk to
    :data:`EXPLAIN_SIZE` and embedded or linked as the thumbnails are (``none``: not shown)."""
    if folder is None or mode == "none":
        return None
    from capeval.metrics.hice.explain import safe_name

    found = {i: path for i in ids if (path := Path(folder) / f"{safe_name(i)}.png").is_file()}
    return Thumbnails(mode or "embed", found, page, EXPLAIN_SIZE, "explain") if found else None
