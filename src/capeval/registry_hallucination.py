"""Registry entries of the object-hallucination metrics (CHAIR, ALOHa): plain data, no imports.

Kept beside :mod:`capeval.registry` (which turns each dict into a ``MetricSpec``), like
:mod:`capeval.registry_baselines`. ``in_all=False``: they need the COCO annotation folder or an LLM server.
"""

from __future__ import annotations

from typing import Any

_CHAIR = "Rohrbach*, Hendricks* et al. 2018, Object Hallucination in Image Captioning (EMNLP 2018)"
_ALOHA = "Petryk*, Chan* et al. 2024, ALOHa: A New Measure for Hallucination in Captioning Models (NAACL 2024)"
_CHAIR_COMMON: dict[str, Any] = dict(factory="capeval.metrics.chair.scorer:Chair", group="chair", needs=frozenset(),
                                     accepts=frozenset(), range=(0.0, 1.0), direction="lower", extra="chair",
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
    dict(name="aloha", factory="capeval.metrics.aloha.scorer:ALOHa", group="aloha", needs=frozenset({"references"}),
         accepts=frozenset({"references", "images", "skip_bad_items"}), range=(-1.0, 1.0), extra="aloha", reference=_ALOHA,
         in_all=False,
         description="ALOHa: an LLM (any OpenAI-compatible server) lists the objects of the candidate and of the "
                     "references, Hungarian matching on MPNet cosines; min over candidate objects of the matched "
                     "similarity, as DavidMChan/aloha; higher is better (fewer hallucinations)"),
]

HALLUCINATION_PRESETS: dict[str, tuple[str, ...]] = {"chair": ("chair-s", "chair-i")}
