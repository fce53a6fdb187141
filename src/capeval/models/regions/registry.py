"""``region_backend(name, **options)``: the region backends by name. Backends are imported
when asked for, so this module (and ``capeval.models.regions``) imports nothing heavy."""

from __future__ import annotations

import os
from typing import Any

from capeval.errors import UnknownNameError
from capeval.models.regions.base import SAM_CHECKPOINT, RegionBackend


BACKENDS: dict[str, str] = {
    "sam": "SAM everything-mode on a transformers SamModel (any SAM/SlimSAM checkpoint); needs torch + transformers",
    "mobilesamv2": "MobileSAMv2 (the paper's segmenter) through its own code and weights, when installed",
    "grid": "rows x cols rectangles (default 3x3); no model, no weights; a fallback, not semantic regions",
}


def region_backend(name: str, cache: bool | str | os.PathLike[str] | None = None, **options: Any) -> RegionBackend:
    """The region backend ``name`` built with ``options``; with ``cache`` its masks are cached on disk.

    ``"sam"``: ``checkpoint`` (hub name or folder, default ``facebook/sam-vit-base``) or
    ``model=``/``processor=`` objects, ``device``, and the everything-mode options of
    :mod:`capeval.models.regions.sam`. ``"mobilesamv2"``: ``weights_dir`` and the options of
    :mod:`capeval.models.regions.mobilesamv2`. ``"grid"``: ``rows``, ``cols``, ``full_image``.
    ``cache``: ``True`` -> ``cache_dir()/regions``, a path -> that folder, None/False -> off.
    Unknown names raise :class:`UnknownNameError`; bad options :class:`InputError`.
    """
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in BACKENDS:
        raise UnknownNameError(f"unknown region backend {name!r}; known: {', '.join(BACKENDS)}")
    backend: RegionBackend
    if key == "grid":
        from capeval.models.regions.grid import GridRegions

        backend = GridRegions(**options)
    elif key == "sam":
        from capeval._optional import require

        require("torch", purpose="region backend 'sam'")
        require("transformers", purpose="region backend 'sam'")
        from capeval.models.regions.sam import load_sam

        backend = load_sam(**options)
    else:
        from capeval.models.regions.mobilesamv2 import MobileSamV2Regions

        backend = MobileSamV2Regions(**options)
    if cache is not None and cache is not False:
        from capeval.models.regions.cache import CachedBackend

        backend = CachedBackend(backend, cache)
    return backend
