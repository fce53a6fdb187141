"""``"grid"`` region backend: fixed rectangles, no model and no weights.

A documented fallback for machines without SAM weights (and a cheap baseline): the image
is cut into ``rows`` x ``cols`` cells with integer edges ``floor(i * H / rows)`` and
``floor(j * W / cols)``, so the cells tile the image exactly (no overlap, no gap). With
``full_image=True`` the whole-image mask is added as well. Every region has score 1.0; the
order is the common one (score, then area, descending; ties row by row). These are not
semantic regions: scores computed with them are not HICE-S as published.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from capeval.errors import InputError
from capeval.models.regions.base import Region, check_number, image_size, ordered

DEFAULTS: dict[str, Any] = {"rows": 3, "cols": 3, "full_image": False}


class GridRegions:
    """``rows`` x ``cols`` rectangular masks (plus the full image with ``full_image``)."""

    name = "grid"

    def __init__(self, **options: Any):
        unknown = sorted(set(options) - set(DEFAULTS))
        if unknown:
            raise InputError(f"unknown option(s) {', '.join(unknown)} for region backend 'grid'; known: {', '.join(DEFAULTS)}")
        opts = {**DEFAULTS, **options}
        self.rows = int(check_number("rows", opts["rows"], 1, 4096, integer=True))
        self.cols = int(check_number("cols", opts["cols"], 1, 4096, integer=True))
        if not isinstance(opts["full_image"], bool):
            raise InputError(f"region option full_image={opts['full_image']!r}: expected True or False")
        self.full_image = opts["full_image"]

    def settings(self) -> dict[str, Any]:
        return {"backend": self.name, "algorithm": "capeval-grid/1", "rows": self.rows, "cols": self.cols,
                "full_image": self.full_image}

    def masks(self, image: Any) -> list[Region]:
        """The grid cells of a PIL image as masks at its size; cells of zero area are left out."""
        h, w = image_size(image)
        ys = [i * h // self.rows for i in range(self.rows + 1)]
        xs = [j * w // self.cols for j in range(self.cols + 1)]
        regions = [Region.from_mask(np.ones((h, w), dtype=bool), 1.0)] if self.full_image else []
        for r in range(self.rows):
            for c in range(self.cols):
                if ys[r + 1] > ys[r] and xs[c + 1] > xs[c]:
                    mask = np.zeros((h, w), dtype=bool)
                    mask[ys[r] : ys[r + 1], xs[c] : xs[c + 1]] = True
                    regions.append(Region.from_mask(mask, 1.0))
        return ordered(regions)
