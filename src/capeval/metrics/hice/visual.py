"""HICE-S's visual side: images -> region masks {A_n} -> Alpha-CLIP embeddings (Eq. 2 and Sec. 3.2.2).

For each image: the global embedding ``Cv(I, full mask)`` and one embedding per region
``f_{I,n} = Cv(I, A_n)``. Regions come from a region backend
(:func:`capeval.models.regions.region_backend`), optionally cut to the ``max_regions`` best
(the backend's order: quality score, then area). An image for which the backend finds no
region gets the full-image mask as its one region (its embedding is then the global one).

Speed: the forward passes of all regions of a chunk of images are batched together
(``batch_size`` image-mask pairs per pass; the alpha masks are built per batch, so memory
stays flat). Cache (``cache=True`` or a folder, as :mod:`capeval.models.clip.embed`): one
``.npy`` of shape (1 + N, D) per image under the backbone's signature hash, keyed by
sha256 of (image pixels, region-backend settings, the packed masks themselves), so other
masks never reuse an entry. Masks are cached by the region backend itself (``regions/``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from capeval.models.clip.embed import l2_normalize, open_cache
from capeval.models.regions import Region
from capeval.models.regions.base import settings_hash
from capeval.models.regions.cache import image_digest

CACHE_KIND = "hice-regions"


@dataclass
class ImageRegions:
    """One image's embeddings (L2-normalised, float32) and region facts.

    ``global_emb`` (D,); ``region_emb`` (N, D); ``bboxes``/``areas``/``scores``: per region
    (``scores``: the backend's quality estimate); ``masks``: the bool masks when kept (for
    drawing), else None; ``fallback``: True when the full image stands in for "no region".
    """

    size: tuple[int, int]
    global_emb: np.ndarray
    region_emb: np.ndarray
    bboxes: list[tuple[int, int, int, int]]
    areas: list[int]
    scores: list[float]
    masks: list[np.ndarray] | None
    fallback: bool


def source_key(source: Any) -> Any:
    """Identity of an image source within one call (the same file or object is segmented once)."""
    if isinstance(source, (str, os.PathLike)):
        return ("path", os.path.abspath(os.fspath(source)))
    return ("obj", id(source))


class RegionEmbedder:
    """Segment images and embed their regions with an Alpha-CLIP backbone, batched and cached."""

    def __init__(self, backbone: Any, backend: Any, batch_size: int = 32, cache: Any = None,
                 max_regions: int | None = None):
        self.backbone = backbone
        self.backend = backend
        self.batch_size = int(batch_size)
        self.max_regions = max_regions
        self.store = open_cache(cache, backbone)
        self.settings_hash = settings_hash(backend.settings())
        self.stats = {"images": 0, "regions": 0, "cache_hits": 0, "forward_passes": 0, "fallback_images": 0}

    def _regions(self, image: Any) -> list[Region]:
        regions = list(self.backend.masks(image))
        return regions[: self.max_regions] if self.max_regions else regions

    def _key(self, digest: str, regions: list[Region]) -> str:
        h = hashlib.sha256(f"{digest}|{self.settings_hash}|{len(regions)}|".encode())
        for r in regions:
            h.update(np.packbits(r.mask).tobytes())
        return h.hexdigest()

    def embed(self, images: Sequence[Any], names: Sequence[str], keep_masks: bool = False) -> list[ImageRegions]:
        """Embeddings of decoded PIL ``images`` (``names`` label errors); masks kept with ``keep_masks``."""
        bb = self.backbone
        regions = [self._regions(im) for im in images]
        keys = [self._key(image_digest(im), rs) for im, rs in zip(images, regions)]
        feats: dict[int, np.ndarray] = {}
        pixels: dict[int, torch.Tensor] = {}
        jobs: list[tuple[int, int]] = []  # (image position, region index; -1 = full image)
        for p, (im, rs) in enumerate(zip(images, regions)):
            hit = self.store.get(CACHE_KIND, keys[p]) if self.store is not None else None
            if hit is not None and hit.shape == (1 + len(rs), bb.embed_dim):
                feats[p] = hit
                self.stats["cache_hits"] += 1
                continue
            pixels[p] = bb.load_image(im, names[p])
            jobs += [(p, -1)] + [(p, n) for n in range(len(rs))]
        out_rows: dict[int, list[np.ndarray | None]] = {p: [None] * (1 + len(regions[p])) for p in pixels}
        full = bb.full_alpha(1)[0].cpu()
        for start in range(0, len(jobs), self.batch_size):
            batch = jobs[start: start + self.batch_size]
            px = torch.stack([pixels[p] for p, _ in batch])
            alpha = torch.stack([full if n < 0 else bb.load_mask(regions[p][n].mask, names[p], images[p].size)
                                 for p, n in batch])
            emb = bb.encode_images_with_masks(px, alpha).to("cpu", torch.float32).numpy()
            self.stats["forward_passes"] += 1
            for (p, n), row in zip(batch, emb):
                out_rows[p][n + 1] = row
        for p, rows in out_rows.items():
            feats[p] = np.stack(rows).astype(np.float32)
            if self.store is not None:
                self.store.put(CACHE_KIND, keys[p], feats[p])
        out = []
        for p, (im, rs) in enumerate(zip(images, regions)):
            f = l2_normalize(feats[p])
            fallback = not rs
            w, h = im.size
            if fallback:
                rs = [Region.from_mask(np.ones((h, w), dtype=bool), 1.0)]
                region_emb = f[:1]
                self.stats["fallback_images"] += 1
            else:
                region_emb = f[1:]
            self.stats["images"] += 1
            self.stats["regions"] += len(rs)
            out.append(ImageRegions((w, h), f[0], region_emb, [r.bbox for r in rs], [r.area for r in rs],
                                    [float(r.score) for r in rs], [r.mask for r in rs] if keep_masks else None,
                                    fallback))
        return out
