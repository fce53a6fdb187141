"""What every region backend returns: :class:`Region` (one boolean mask at the image's own
size) and the :class:`RegionBackend` protocol. numpy only; nothing heavy is imported here."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from capeval.errors import InputError

#: the SAM checkpoint of region backend ``sam`` (a hub name; ``checkpoint=`` picks another); named
#: here, where nothing heavy is imported, for the backend, its registry and ``capeval check``
SAM_CHECKPOINT = "facebook/sam-vit-base"

if TYPE_CHECKING:  # PIL is only needed by the callers that pass images
    from PIL import Image


@dataclass(frozen=True, eq=False)
class Region:
    """One region proposal A_n of an image (HICE-S, Sec. 3.2.2).

    ``mask``: bool array (H, W) at the original image size. ``score``: the backend's quality
    estimate (SAM: the predicted IoU in [0, 1], higher is better; grid: 1.0). ``stability``:
    SAM's stability score in [0, 1] (None for backends without one). ``bbox``: ``(x0, y0, x1,
    y1)`` in pixels with exclusive ends, so ``mask[y0:y1, x0:x1]`` holds every True pixel.
    ``area``: number of True pixels.
    """

    mask: np.ndarray
    score: float
    bbox: tuple[int, int, int, int]
    area: int
    stability: float | None = None

    @classmethod
    def from_mask(cls, mask: np.ndarray, score: float, stability: float | None = None) -> Region:
        """A region with ``bbox`` and ``area`` computed from ``mask`` (cast to bool)."""
        mask = np.ascontiguousarray(mask, dtype=bool)
        if mask.ndim != 2:
            raise InputError(f"a region mask must be 2-D (H, W), got shape {mask.shape}")
        return cls(mask=mask, score=float(score), bbox=mask_bbox(mask), area=int(mask.sum()), stability=stability)


def mask_bbox(mask: np.ndarray) -> tuple[int, int, int, int]:
    """``(x0, y0, x1, y1)`` with exclusive ends around the True pixels; (0, 0, 0, 0) when empty."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return (0, 0, 0, 0)
    cols = np.flatnonzero(mask.any(axis=0))
    return (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)


def ordered(regions: Sequence[Region]) -> list[Region]:
    """Deterministic output order: score descending, then area descending, then input order."""
    return [r for _, r in sorted(enumerate(regions), key=lambda ir: (-ir[1].score, -ir[1].area, ir[0]))]


@runtime_checkable
class RegionBackend(Protocol):
    """A segment-everything model: one image in, its region masks out.

    ``name``: the registry name (``"sam"``, ``"grid"``, ``"mobilesamv2"``). ``settings()``:
    JSON-able dict of everything the masks depend on (weights fingerprint, thresholds, ...),
    used in the reproducibility signature and as the mask-cache namespace. ``masks(image)``:
    the regions of a PIL image, each mask at the image's original (H, W), in a deterministic
    order (score, then area, descending).
    """

    name: str

    def settings(self) -> dict[str, Any]: ...

    def masks(self, image: Image.Image) -> list[Region]: ...


def settings_hash(settings: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``settings`` (the mask-cache namespace)."""
    blob = json.dumps(settings, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def image_size(image: Any, what: str = "image") -> tuple[int, int]:
    """``(H, W)`` of a PIL image; :class:`InputError` for anything else or an empty image."""
    size = getattr(image, "size", None)
    if not (hasattr(image, "convert") and isinstance(size, tuple) and len(size) == 2):
        raise InputError(f"{what}: expected a PIL image, got {type(image).__name__}")
    w, h = size
    if w <= 0 or h <= 0:
        raise InputError(f"{what}: empty image ({w}x{h})")
    return int(h), int(w)


def check_number(name: str, value: Any, low: float, high: float = math.inf, *, integer: bool = False,
                 low_open: bool = False) -> Any:
    """``value`` when it is a number in ``[low, high]`` (``(low, high]`` with ``low_open``), else InputError."""
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or (not integer and math.isnan(value)):
        raise InputError(f"region option {name}={value!r}: expected {'an integer' if integer else 'a number'}")
    if value < low or value > high or (low_open and value == low):
        bounds = f"{'(' if low_open else '['}{low}, {high}]"
        raise InputError(f"region option {name}={value!r}: must be in {bounds}")
    return value
