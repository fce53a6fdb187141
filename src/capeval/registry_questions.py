"""Registry entries of the question-based caption metrics (VDCscore, DREAM-1K AutoDQ, CAPability):
plain data, no imports.

An LLM answers questions about the video or image from the candidate caption alone (or extracts
events from it) and judges those answers; the metric is the share judged right. Kept beside
:mod:`capeval.registry` (which turns each dict into a ``MetricSpec``), like
:mod:`capeval.registry_judges`. ``in_all=False`` everywhere: a running judge server is not
something the ``all`` preset should start. Documented in ``docs/question-based.md``.
"""

from __future__ import annotations

from typing import Any

_VDC = ("Chai et al. 2025, AuroraCap: Efficient, Performant Video Detailed Captioning and a New Benchmark "
        "(ICLR 2025; VDC, VDCscore)")
_VDC_COMMON: dict[str, Any] = dict(factory="capeval.metrics.vdcscore.scorer:VDCscore", group="vdcscore",
                                   needs=frozenset(), accepts=frozenset({"skip_bad_items"}), reference=_VDC,
                                   in_all=False)

_CAPABILITY = ("Liu et al. 2025, What Is a Good Caption? A Comprehensive Visual Caption Benchmark for Evaluating "
               "Both Correctness and Thoroughness (CAPability, arXiv 2502.14914)")
_CAPABILITY_COMMON: dict[str, Any] = dict(factory="capeval.metrics.capability.scorer:CAPability", group="capability",
                                          needs=frozenset(), accepts=frozenset({"skip_bad_items"}),
                                          range=(0.0, 100.0), reference=_CAPABILITY, in_all=False)

_TARSIER = ("Wang et al. 2024, Tarsier: Recipes for Training and Evaluating Large Video Description Models "
            "(arXiv 2407.00634; DREAM-1K, AutoDQ)")
_AUTODQ_COMMON: dict[str, Any] = dict(factory="capeval.metrics.autodq.scorer:AutoDQ", group="autodq",
                                      needs=frozenset(), accepts=frozenset({"references", "skip_bad_items"}),
                                      reference=_TARSIER, in_all=False)

QUESTION_SPECS: list[dict[str, Any]] = [
    dict(name="vdcscore", range=(0.0, 5.0), aliases=("vdc-score", "vdc_score"),
         description="VDCscore: an LLM (Llama-3.1-8B-Instruct on any OpenAI-compatible server) answers VDC's "
                     "ground-truth questions of one dimension (-O vdcscore.dimension / qa) from the caption alone, "
                     "then judges each answer 0-5; mean per video, then over videos; higher is better",
         **_VDC_COMMON),
    dict(name="vdcscore-acc", range=(0.0, 1.0), aliases=("vdcscore_acc", "vdc-acc"),
         description="VDCscore accuracy: the share of answers the judge calls correct ('yes'), per video, then "
                     "over videos (the README prints it x100); higher is better", **_VDC_COMMON),
    dict(name="capability-precision", aliases=("capability",),
         description="CAPability precision: an LLM judge (gpt-4-turbo, any OpenAI-compatible server) checks the "
                     "caption against each annotated visual element of 13 dimensions (-O capability.annotations=DIR); "
                     "correct / mentioned, x100, mean over the dimensions; higher is better", **_CAPABILITY_COMMON),
    dict(name="capability-hit", aliases=("capability-hit-rate",),
         description="CAPability hit rate: share of annotated elements the caption mentions (right or wrong), x100, "
                     "mean over the dimensions; higher is better", **_CAPABILITY_COMMON),
    dict(name="capability-recall", description="CAPability recall: correct / annotated, x100, mean over the "
                                               "dimensions; higher is better", **_CAPABILITY_COMMON),
    dict(name="capability-f1", description="CAPability F1 of precision and recall per dimension, x100, mean over the "
                                           "dimensions (the paper's headline); higher is better", **_CAPABILITY_COMMON),
    dict(name="autodq-f1", aliases=("autodq", "autodq_f1"),
         description="DREAM-1K AutoDQ F1: an LLM (the paper's gpt-3.5-turbo-0125, any OpenAI-compatible server) "
                     "extracts events from caption and reference and checks each against the other description "
                     "(-O autodq.annotations=DREAM-1k.jsonl, or -r); F1 of the recall and precision below; higher "
                     "is better", **_AUTODQ_COMMON),
    dict(name="autodq-recall", aliases=("autodq_recall",),
         description="DREAM-1K AutoDQ recall: share of the reference's events the caption entails, per video, "
                     "mean per subtask, then over subtasks; higher is better", **_AUTODQ_COMMON),
    dict(name="autodq-precision", aliases=("autodq_precision",),
         description="DREAM-1K AutoDQ precision: share of the caption's events the reference entails (neutral is "
                     "no hit, as the official script), aggregated as recall; higher is better", **_AUTODQ_COMMON),
]
