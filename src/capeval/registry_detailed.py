"""Registry entries of the detailed-caption metrics (CAPTURE, VELA): plain data, no imports.

Kept beside :mod:`capeval.registry` like :mod:`capeval.registry_hallucination`. ``in_all=False``:
CAPTURE needs nltk's tokenizer and tagger data, WordNet and two models (FACTUAL, Sentence-BERT);
VELA needs its authors' package and weights.
"""

from __future__ import annotations

from typing import Any

_VELA = "Matsuda et al. 2025, VELA: An LLM-Hybrid-as-a-Judge Approach for Evaluating Long Image Captions (EMNLP)"
_CAPTURE = "Dong et al. 2024, Benchmarking and Improving Detail Image Caption (capture-metric 0.1.13)"

DETAILED_SPECS: list[dict[str, Any]] = [
    dict(name="capture", factory="capeval.metrics.capture.scorer:CaptureScore", group="capture",
         extra="capture", reference=_CAPTURE, in_all=False,
         description="CAPTURE: weighted F1 of FACTUAL scene-graph objects, attributes, relations (0.5/0.5/0.2) "
                     "matched exactly, by WordNet synonym, then by all-mpnet-base-v2 similarity, as capture-metric "
                     "0.1.13; [0, 1]"),
    dict(name="vela", factory="capeval.metrics.vela:VelaScore", group="vela", extra="clip", reference=_VELA,
         needs=frozenset({"references", "images"}), accepts=frozenset({"references", "images", "skip_bad_items"}),
         in_all=False,
         description="VELA: the authors' package (Qwen2.5-3B-Instruct LoRA reading references and candidate, "
                     "Long-CLIP-L image-candidate branch, trained regressor) scores a long caption for one "
                     "perspective (-O vela.perspective=desc, rel or flu); [0, 1]"),
]
