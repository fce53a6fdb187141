"""Registry entries of the object-hallucination metrics (CHAIR): plain data, no imports.

Kept beside :mod:`capeval.registry` (which turns each dict into a ``MetricSpec``), like
:mod:`capeval.registry_baselines`. ``in_all=False``: they need the COCO annotation folder.
"""

from __future__ import annotations

from typing import Any

_CHAIR = "Rohrbach*, Hendricks* et al. 2018, Object Hallucination in Image Captioning (EMNLP 2018)"
# accepts images: a mapping {candidate id: image file} names each candidate's COCO image by its file
# name (benchmarks whose item ids are not COCO ids, e.g. FOIL); the pixels are never read
_CHAIR_COMMON: dict[str, Any] = dict(factory="capeval.metrics.chair.scorer:Chair", group="chair", needs=frozenset(),
                                     accepts=frozenset({"images"}), range=(0.0, 1.0), direction="lower", extra="chair",
                                     reference=_CHAIR, in_all=False)

HALLUCINATION_SPECS: list[dict[str, Any]] = [
    dict(name="chair-s", aliases=("chairs", "chair_s"),
         description="CHAIR-s: share of captions mentioning an MSCOCO object that is not in the image (COCO 2014 "
                     "instances + reference captions, -O chair.annotations=DIR), as LisaAnne/Hallucination's "
                     "chair.py; lower is better", **_CHAIR_COMMON),
    dict(name="chair-i", aliases=("chairi", "chair_i"),
         description="CHAIR-i: hallucinated MSCOCO object mentions / all object mentions (pooled over captions; "
                     "per item: of the caption), as LisaAnne/Hallucination's chair.py; lower is better",
         **_CHAIR_COMMON),
]

HALLUCINATION_PRESETS: dict[str, tuple[str, ...]] = {"chair": ("chair-s", "chair-i")}
