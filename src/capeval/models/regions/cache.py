"""On-disk cache of region masks, keyed by (image content, backend settings).

Layout: ``<root>/<sha256(settings)[:16]>/<key[:2]>/<key>.npz`` with ``settings.json`` in the
namespace folder (what the masks were computed with, for people). ``key`` is the sha256 of
the image's mode, size and pixels, so the same picture from a file or in memory hits the
same entry. ``root``: ``cache=True`` -> ``cache_dir()/regions``; a path -> that folder.

Each ``.npz`` (compressed) holds ``shape`` = (N, H, W), ``bits`` = ``np.packbits`` of each
flattened mask (N, ceil(H*W/8)), ``scores`` and ``stability`` (float32, NaN = none). bbox
and area are recomputed from the mask. Files are written via a temporary file and
``os.replace``; an unreadable or inconsistent entry is recomputed and overwritten.
"""

from __future__ import annotations

import hashlib
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from capeval.paths import make_cache_folder
from capeval.io.atomic import atomic_open, atomic_write_json
from capeval.models.regions.base import Region, RegionBackend, image_size, settings_hash

FORMAT = 1


def image_digest(image: Any) -> str:
    """sha256 of a PIL image's mode, size and pixel bytes."""
    h = hashlib.sha256(f"{image.mode}{image.size}".encode())
    h.update(image.tobytes())
    return h.hexdigest()


class RegionCache:
    """``.npz`` files of packed masks for one backend configuration (``settings``)."""

    def __init__(self, root: str | os.PathLike[str], settings: dict[str, Any]):
        self.root = Path(root) / settings_hash(settings)[:16]
        self._settings = settings

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def get(self, key: str, size: tuple[int, int]) -> list[Region] | None:
        """The cached regions of image ``key`` (of ``size`` = (H, W)), or None when absent or unusable."""
        try:
            with np.load(self.path(key), allow_pickle=False) as f:
                if int(f["format"]) != FORMAT:
                    return None
                n, h, w = (int(v) for v in f["shape"])
                bits, scores, stab = f["bits"], f["scores"], f["stability"]
            if (h, w) != tuple(size) or bits.shape != (n, (h * w + 7) // 8) or scores.shape != (n,) or stab.shape != (n,):
                return None
            masks = np.unpackbits(bits, axis=1, count=h * w).astype(bool).reshape(n, h, w)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
            return None  # absent, truncated or foreign: recompute
        return [Region.from_mask(masks[i], float(scores[i]), None if np.isnan(stab[i]) else float(stab[i]))
                for i in range(n)]

    def put(self, key: str, regions: list[Region], size: tuple[int, int]) -> None:
        h, w = size
        n = len(regions)
        flat = np.stack([r.mask.reshape(-1) for r in regions]) if n else np.zeros((0, h * w), dtype=bool)
        arrays = {
            "format": np.array(FORMAT, dtype=np.int64),
            "shape": np.array([n, h, w], dtype=np.int64),
            "bits": np.packbits(flat, axis=1),
            "scores": np.array([r.score for r in regions], dtype=np.float32),
            "stability": np.array([np.nan if r.stability is None else r.stability for r in regions], dtype=np.float32),
        }
        target = self.path(key)
        make_cache_folder(target.parent)
        if not (self.root / "settings.json").exists():
            atomic_write_json(self.root / "settings.json", self._settings)
        with atomic_open(target) as out:
            np.savez_compressed(out, **arrays)


class CachedBackend:
    """A :class:`RegionBackend` whose ``masks`` are read from / written to a :class:`RegionCache`.

    Scores and stabilities are stored as float32, so a backend whose values are float32
    (SAM) returns identical regions from the cache. ``hits``/``misses`` count lookups.
    """

    def __init__(self, backend: RegionBackend, cache: bool | str | os.PathLike[str] = True):
        if cache is True:
            from capeval.paths import cache_dir

            root = cache_dir() / "regions"
        else:
            root = Path(cache)
        self.backend = backend
        self.name = backend.name
        self.cache = RegionCache(root, backend.settings())
        self.hits = 0
        self.misses = 0

    def settings(self) -> dict[str, Any]:
        return self.backend.settings()

    def masks(self, image: Any) -> list[Region]:
        size = image_size(image)
        key = image_digest(image)
        found = self.cache.get(key, size)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        regions = self.backend.masks(image)
        try:
            self.cache.put(key, regions, size)
        except OSError as exc:  # a full or read-only cache folder costs speed, not the result
            warnings.warn(f"region mask cache {self.cache.root}: cannot write ({exc}); continuing without it", stacklevel=2)
        return regions
