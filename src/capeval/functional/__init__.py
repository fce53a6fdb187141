"""The metric formulas as plain functions on numbers, arrays and tensors (no model, no I/O).

The scorers compute their numbers with these functions (or with the pure functions these
wrap), so each formula has one implementation; use them to score embeddings or statistics
you already have, or to test a formula on hand-made inputs. Importing this package needs
numpy only: torch is imported inside the functions that work on tensors (the EMScore
ones), and the element-wise functions accept numpy arrays or torch tensors alike.
Submodules: :mod:`~capeval.functional.clip`, :mod:`~capeval.functional.text`,
:mod:`~capeval.functional.emscore`, :mod:`~capeval.functional.hice`; everything is importable from here.

=========================  ===============================================================
:func:`clip_s`             ``w * max(cos, 0)``: CLIP-S, PAC-S, PAC-S++
:func:`positive_part`      ``max(x, 0)``: the clamped reference similarity of RefCLIP-S
:func:`harmonic_mean`      ``2ab / (a + b)``: how RefCLIP-S combines its two parts
:func:`ref_clip_s`         RefCLIP-S / RefPAC-S / RefPAC-S++ from cosines
:func:`bleu_from_stats`    BLEU-1..n (pycocoevalcap variant) from n-gram statistics
:func:`cider_d`            CIDEr-D of tokenised sentences (document frequency over the set)
:func:`meteor_from_stats`  METEOR 1.5 from its 23 sufficient statistics
:func:`emscore_from_embeddings`    EMScore from token and frame embeddings
:func:`emscore_from_similarities`  EMScore from token-frame / token-token cosine matrices
:func:`set_match`          HICE-S's P / R / hMean between two sets from their cosine matrix
:func:`hice_s`             HICE-S ``w * hMean(gITC, lITC)``; :func:`ref_hice_s` with gTTC, lTTC
=========================  ===============================================================
"""

from __future__ import annotations

from capeval.functional.clip import clip_s, harmonic_mean, positive_part, ref_clip_s
from capeval.functional.emscore import (
    EMScoreParts,
    EMScoreResult,
    emscore_from_embeddings,
    emscore_from_similarities,
)
from capeval.functional.hice import SetMatch, hice_s, hmean, ref_hice_s, set_match
from capeval.functional.text import BLEU_SMALL, BLEU_TINY, bleu_from_stats, cider_d, meteor_from_stats

__all__ = [
    "SetMatch",
    "hice_s",
    "hmean",
    "ref_hice_s",
    "set_match",
    "clip_s",
    "positive_part",
    "harmonic_mean",
    "ref_clip_s",
    "BLEU_SMALL",
    "BLEU_TINY",
    "bleu_from_stats",
    "cider_d",
    "meteor_from_stats",
    "EMScoreParts",
    "EMScoreResult",
    "emscore_from_embeddings",
    "emscore_from_similarities",
]
