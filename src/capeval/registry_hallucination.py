"""Registry entries of the object-hallucination metrics (CHAIR, AMBER, ALOHa): plain data, no imports.

Kept beside :mod:`capeval.registry` (which turns each dict into a ``MetricSpec``), like
:mod:`capeval.registry_baselines`. ``in_all=False``: they need an annotation folder (COCO 2014,
AMBER's data/) or an LLM server.
"""

from __future__ import annotations

from typing import Any

_CHAIR = "Rohrbach*, Hendricks* et al. 2018, Object Hallucination in Image Captioning (EMNLP 2018)"
_ALOHA = "Petryk*, Chan* et al. 2024, ALOHa: A New Measure for Hallucination in Captioning Models (NAACL 2024)"
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
    dict(name="aloha", factory="capeval.metrics.aloha.scorer:ALOHa", group="aloha", needs=frozenset({"references"}),
         accepts=frozenset({"references", "images", "skip_bad_items"}), range=(-1.0, 1.0), extra="aloha", reference=_ALOHA,
         in_all=False,
         description="ALOHa: an LLM (any OpenAI-compatible server) lists the objects of the candidate and of the "
                     "references, Hungarian matching on MPNet cosines; min over candidate objects of the matched "
                     "similarity, as DavidMChan/aloha; higher is better (fewer hallucinations)"),
]

_AMBER = "Wang et al. 2023, An LLM-free Multi-dimensional Benchmark for MLLMs Hallucination Evaluation (arXiv:2311.07397)"
_AMBER_COMMON: dict[str, Any] = dict(factory="capeval.metrics.amber.scorer:Amber", group="amber", needs=frozenset(),
                                     accepts=frozenset(), range=(0.0, 100.0), extra="amber", reference=_AMBER,
                                     in_all=False)
# the yes/no scoring compares strings: no NLTK or spaCy, no extra
_AMBER_YESNO = {**_AMBER_COMMON, "extra": None}
_AMBER_G = "of AMBER's generative task (-O amber.annotations=DIR), as junyangwang0410/AMBER's inference.py"
_AMBER_D = ("of AMBER's yes/no questions (exact \"Yes\"/\"No\"; \"No\" is the positive class), as "
            "junyangwang0410/AMBER's inference.py")

HALLUCINATION_SPECS += [
    dict(name="amber-chair", description=f"AMBER CHAIR: hallucinated nouns / annotated-vocabulary nouns, % {_AMBER_G}; "
                                         "lower is better", direction="lower", **_AMBER_COMMON),
    dict(name="amber-cover", description=f"AMBER Cover: annotated objects the response names, % {_AMBER_G}; higher "
                                         "is better", direction="higher", **_AMBER_COMMON),
    dict(name="amber-hal", description=f"AMBER Hal: responses with a hallucinated noun, % {_AMBER_G}; lower is better",
         direction="lower", **_AMBER_COMMON),
    dict(name="amber-cog", description=f"AMBER Cog: likely-hallucination objects the response names, % {_AMBER_G}; "
                                       "lower is better", direction="lower", **_AMBER_COMMON),
    dict(name="amber-accuracy", description=f"AMBER Accuracy, % {_AMBER_D}; higher is better", direction="higher",
         **_AMBER_YESNO),
    dict(name="amber-precision", description=f"AMBER Precision, % {_AMBER_D}; higher is better", direction="higher",
         **_AMBER_YESNO),
    dict(name="amber-recall", description=f"AMBER Recall, % {_AMBER_D}; higher is better", direction="higher",
         **_AMBER_YESNO),
    dict(name="amber-f1", description=f"AMBER F1 of the rounded precision and recall, % {_AMBER_D}; higher is better",
         direction="higher", **_AMBER_YESNO),
]

HALLUCINATION_PRESETS: dict[str, tuple[str, ...]] = {
    "chair": ("chair-s", "chair-i"),
    "amber": ("amber-chair", "amber-cover", "amber-hal", "amber-cog"),
    "amber-d": ("amber-accuracy", "amber-precision", "amber-recall", "amber-f1"),
    "amber-all": ("amber-chair", "amber-cover", "amber-hal", "amber-cog", "amber-accuracy", "amber-precision",
                  "amber-recall", "amber-f1"),
}
