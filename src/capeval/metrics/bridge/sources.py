"""Template captions of images (Sarto et al. 2024, Sec. 3.2): a caption file, or a captioner with a cache.

The paper generates them with BLIP (ViT-L, COCO fine-tuned; Sec. 4.1); any object with a
``key`` (str: what its captions depend on) and ``caption(images) -> list[str]`` works, e.g.
:class:`capeval.train.captioner.Captioner` (BLIP / BLIP-2 through transformers).

Cache: one caption per (image content, captioner): ``<root>/<sha256(key)[:16]>/<h[:2]>/<h>.txt``
where ``h`` is the sha256 of the image file's bytes (paths) or of mode, size and pixels (PIL
images, arrays). ``cache=True``: ``cache_dir()/bridge-templates``; a path: that folder;
``False``: none. Files are written atomically, so an interrupted run resumes from the cache.
A caption file (JSON/JSONL/CSV as ``capeval score`` reads candidates) maps an item id, an
image file name or its stem to the template caption; no captioner runs then.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from capeval.io.atomic import atomic_write_text
from capeval.paths import make_cache_folder
from capeval.errors import InputError
from capeval.hashing import file_digest
from capeval.progress import make_progress


def image_sha256(image: Any) -> str:
    """sha256 of a file's bytes, or of a PIL image's / uint8 array's mode, size and pixels."""
    if isinstance(image, (str, os.PathLike)):
        try:
            return file_digest(image, "sha256")
        except FileNotFoundError:
            raise InputError(f"image file not found: {image}") from None
        except IsADirectoryError:
            raise InputError(f"expected an image file, got a directory: {image}") from None
    if isinstance(image, np.ndarray):
        h = hashlib.sha256(f"{image.dtype}{image.shape}".encode())
        h.update(np.ascontiguousarray(image).tobytes())
        return h.hexdigest()
    h = hashlib.sha256(f"{getattr(image, 'mode', '')}{getattr(image, 'size', '')}".encode())
    h.update(image.tobytes())
    return h.hexdigest()


class TemplateCache:
    """Captions on disk keyed by (captioner key, image sha256)."""

    def __init__(self, root: str | os.PathLike[str], captioner_key: str):
        self.root = Path(root) / hashlib.sha256(captioner_key.encode()).hexdigest()[:16]

    def _path(self, image_key: str) -> Path:
        return self.root / image_key[:2] / f"{image_key}.txt"

    def get(self, image_key: str) -> str | None:
        try:
            text = self._path(image_key).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return text if text.strip() else None

    def put(self, image_key: str, caption: str) -> None:
        path = self._path(image_key)
        make_cache_folder(path.parent)
        atomic_write_text(path, caption)


def open_template_cache(cache: Any, captioner_key: str) -> TemplateCache | None:
    if cache is None or cache is False:
        return None
    if cache is True:
        from capeval.paths import cache_dir

        return TemplateCache(cache_dir() / "bridge-templates", captioner_key)
    return TemplateCache(cache, captioner_key)


def _file_lookup(table: Mapping[str, str], item_id: str, source: Any) -> str | None:
    if item_id in table:
        return table[item_id]
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        for key in (p.name, p.stem):
            if key in table:
                return table[key]
    return None


class TemplateSource:
    """Template captions for images from ``templates`` (a caption file or mapping) or a ``captioner``.

    ``captioner``: an object with ``key`` and ``caption(images)``, or a transformers model name
    or path (loaded on first use through :func:`capeval.train.captioner.load_captioner`).
    """

    def __init__(self, templates: Any = None, captioner: Any = None, cache: Any = True, batch_size: int = 16,
                 device: str = "cpu"):
        self.table: dict[str, str] | None = None
        self.file_tag = ""
        if templates is not None:
            if isinstance(templates, Mapping):
                self.table = {str(k): str(v) for k, v in templates.items()}
                self.file_tag = "mapping:" + hashlib.sha256(repr(sorted(self.table.items())).encode()).hexdigest()[:16]
            else:
                from capeval.io.captions import read_captions

                data = read_captions(templates, "candidates")
                self.table = {str(k): (v[0] if isinstance(v, list) else str(v)) for k, v in data.items()}
                self.file_tag = f"file:{Path(templates).name}:{file_digest(templates, 'sha256')[:16]}"
        self._captioner = captioner
        self.cache = cache
        self.batch_size = int(batch_size)
        self.device = device

    @property
    def captioner(self) -> Any:
        if isinstance(self._captioner, (str, os.PathLike)) or self._captioner is None:
            from capeval.train.captioner import DEFAULT_CAPTIONER, load_captioner

            self._captioner = load_captioner(self._captioner or DEFAULT_CAPTIONER, device=self.device)
        return self._captioner

    def describe(self) -> str:
        """For signatures: the caption file (name + sha256) or the captioner's key."""
        if self.table is not None:
            return self.file_tag
        cap = self._captioner
        name = cap if isinstance(cap, (str, os.PathLike)) or cap is None else getattr(cap, "key", type(cap).__name__)
        return f"captioner:{name or 'default'}"

    def get(self, ids: Sequence[str], sources: Mapping[str, Any], progress: bool | None = False
            ) -> tuple[dict[str, str], dict[str, str]]:
        """``(id -> template caption, id -> problem)`` for the ids that have an image source."""
        out: dict[str, str] = {}
        bad: dict[str, str] = {}
        if self.table is not None:
            for i in ids:
                found = _file_lookup(self.table, i, sources[i])
                if found is None or not str(found).strip():
                    bad[i] = f"item {i!r}: no template caption for this image in {self.file_tag}"
                else:
                    out[i] = str(found)
            return out, bad
        captioner = self.captioner
        store = open_template_cache(self.cache, captioner.key)
        keys: dict[str, str] = {}
        todo: list[str] = []
        for i in ids:
            try:
                keys[i] = image_sha256(sources[i])
            except InputError as exc:
                bad[i] = f"item {i!r}: {exc}"
                continue
            hit = store.get(keys[i]) if store is not None else None
            if hit is None:
                todo.append(i)
            else:
                out[i] = hit
        from capeval.models.clip.preprocess import open_image

        with make_progress(len(todo), "templates", progress) as bar:
            for start in range(0, len(todo), self.batch_size):
                chunk, images = [], []
                for i in todo[start: start + self.batch_size]:
                    try:
                        images.append(open_image(sources[i], i))
                        chunk.append(i)
                    except InputError as exc:
                        bad[i] = str(exc) if str(exc).startswith("item ") else f"item {i!r}: {exc}"
                captions = captioner.caption(images) if images else []
                for i, caption in zip(chunk, captions):
                    out[i] = caption
                    if store is not None and caption.strip():
                        store.put(keys[i], caption)
                bar.update(len(todo[start: start + self.batch_size]))
        return out, bad
