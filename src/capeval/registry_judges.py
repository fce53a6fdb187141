"""Registry entries of the LLM/VLM judges (VisCE2, CLAIR, FLEUR / RefFLEUR, EXPERT): plain data, no imports.

Kept beside :mod:`capeval.registry` (which turns each dict into a ``MetricSpec``), like
:mod:`capeval.registry_baselines`. ``in_all=False`` everywhere: a 13B model or a running
server is not something the ``all`` preset should start.
"""

from __future__ import annotations

from typing import Any

_VLM_IN = frozenset({"images", "references", "skip_bad_items"})
_VISCE2 = ("Maeda et al. 2024, Vision Language Model-based Caption Evaluation Method Leveraging Visual Context "
           "Extraction")
_CLAIR = "Chan et al. 2023, CLAIR: Evaluating Image Captions with Large Language Models (EMNLP 2023)"
_FLEUR = ("Lee et al. 2024, FLEUR: An Explainable Reference-Free Evaluation Metric for Image Captioning Using a "
          "Large Multimodal Model (ACL 2024)")
_EXPERT = ("Kim et al. 2025, EXPERT: An Explainable Image Captioning Evaluation Metric with Structured "
           "Explanations (Findings of ACL 2025)")

_VISCE2_COMMON: dict[str, Any] = dict(factory="capeval.metrics.visce2.scorer:VisCE2", group="visce2",
                                      accepts=_VLM_IN, range=(0.0, 100.0), reference=_VISCE2, in_all=False)
_FLEUR_COMMON: dict[str, Any] = dict(factory="capeval.metrics.fleur:FLEUR", group="fleur", accepts=_VLM_IN,
                                     reference=_FLEUR, in_all=False)

JUDGE_SPECS: list[dict[str, Any]] = [
    dict(name="visce2", needs=frozenset({"images"}), aliases=("visce",),
         description="VisCE2: a VLM (LLaVA-1.5-13B via transformers, or any OpenAI-compatible server) extracts the "
                     "image's visual context, then rates the caption 0-100 given image + context; first integer of "
                     "the answer; higher is better", **_VISCE2_COMMON),
    dict(name="visce2-vanilla", needs=frozenset({"images"}), aliases=("visce2vanilla", "visce2_vanilla"),
         description="VisCE2 ablation: the VLM rates the caption 0-100 from the image alone (no context); higher is "
                     "better", **_VISCE2_COMMON),
    dict(name="visce2-ref", needs=frozenset({"images", "references"}), aliases=("visce2ref", "visce2_ref"),
         description="VisCE2 ablation: the references in place of the visual context; 0-100; higher is better",
         **_VISCE2_COMMON),
    dict(name="visce2-desc", needs=frozenset({"images"}), aliases=("visce2desc", "visce2_desc"),
         description="VisCE2 ablation: a free description of the image (step 1) in place of the structured "
                     "context; 0-100; higher is better", **_VISCE2_COMMON),
    dict(name="clair", factory="capeval.metrics.clair:CLAIR", group="clair", reference=_CLAIR,
         needs=frozenset({"references"}), accepts=frozenset({"references", "skip_bad_items"}), in_all=False,
         description="CLAIR: an LLM (any OpenAI-compatible server, or a local chat LLM via transformers) rates 0-100 "
                     "how likely the candidate and the references describe the same image, JSON answer with a "
                     "reason; score / 100; higher is better"),
    dict(name="fleur", needs=frozenset({"images"}),
         description="FLEUR: LLaVA-1.5-13B rates the caption 0.0-1.0 from the image; the number smoothed with the "
                     "model's digit probabilities; higher is better", **_FLEUR_COMMON),
    dict(name="ref-fleur", needs=frozenset({"images", "references"}), aliases=("reffleur", "ref_fleur"),
         description="RefFLEUR: FLEUR with the references in the prompt; 0-1, smoothed; higher is better",
         **_FLEUR_COMMON),
    dict(name="expert", factory="capeval.metrics.fleur:EXPERT", group="expert", accepts=_VLM_IN,
         needs=frozenset({"images"}), reference=_EXPERT, in_all=False,
         description="EXPERT: LLaVA-1.5-13B with the EXPERT LoRA rates the caption 0.0-1.0 (FLEUR's smoothing), "
                     "optionally explains it (fluency, relevance, descriptiveness); higher is better"),
]
