"""BLEU, CIDEr-D and METEOR from tokenised sentences or sufficient statistics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from capeval.metrics.meteor.stats import MeteorStats

# pycocoevalcap's BLEU smoothing: added to the clipped matches and to the guesses
BLEU_TINY = 1e-15
BLEU_SMALL = 1e-9


def bleu_from_stats(testlen: float, reflen: float, guess: Sequence[float], correct: Sequence[float]) -> list[float]:
    """BLEU-1..n from sufficient statistics, as pycocoevalcap 1.2 computes them.

    ``testlen``: candidate length; ``reflen``: the reference length used for the brevity
    penalty (per item the closest, ties to the shorter); ``guess[k]`` / ``correct[k]``:
    candidate (k+1)-grams and those matched (clipped by the max reference count). For
    corpus BLEU pass the sums over items. With ``p_k = (correct_k + 1e-15) / (guess_k +
    1e-9)``::

        BLEU-n = (prod_{k<=n} p_k) ** (1/n) * BP,   BP = exp(1 - r/c) if c/r < 1 else 1

    where ``c/r = (testlen + 1e-15) / (reflen + 1e-9)``. Range [0, 1]. Statistics per item:
    :func:`capeval.metrics.bleu.bleu_stats`. Reference: Papineni et al. 2002; Chen et al.
    2015 (COCO caption evaluation).
    """
    n = len(guess)
    scores = []
    bleu = 1.0
    for k in range(n):
        bleu *= (float(correct[k]) + BLEU_TINY) / (float(guess[k]) + BLEU_SMALL)
        scores.append(bleu ** (1.0 / (k + 1)))
    ratio = (testlen + BLEU_TINY) / (reflen + BLEU_SMALL)
    if ratio < 1:
        bp = math.exp(1 - 1 / ratio)
        scores = [s * bp for s in scores]
    return scores


def cider_d(candidates: Sequence[str], references: Sequence[Sequence[str]], n: int = 4,
            sigma: float = 6.0) -> np.ndarray:
    """Per-item CIDEr-D (pycocoevalcap 1.2) of tokenised candidates against tokenised references.

    Sentences are already tokenised (words separated by spaces; the scorer's PTB step is not
    applied here). ``references[i]`` are the references of ``candidates[i]``. With
    ``g_k(s)`` the tf-idf vector of the k-grams of ``s`` (``df`` = number of items whose
    references contain the k-gram, ``N`` = number of items) and ``l`` the number of
    bigrams::

        CIDEr-D = 10/|R| sum_r mean_k  sum min(g_k(c), g_k(r)) g_k(r) / (|g_k(c)| |g_k(r)|)
                  * exp(-(l_c - l_r)^2 / (2 sigma^2))

    Scores depend on the whole set through ``df``. Range [0, 10]. Same numbers as the
    ``cider-d`` scorer with ``tokenizer="none"`` (this calls
    :func:`capeval.metrics.cider.cider_d`). Reference: Vedantam et al. 2015.
    """
    from capeval.metrics.cider import cider_d as compute

    return np.asarray(compute(list(candidates), [list(r) for r in references], n, sigma), dtype=np.float64)


def meteor_from_stats(stats: MeteorStats | str | Sequence[float]) -> float:
    """METEOR 1.5 score (English default task) of one segment's sufficient statistics.

    ``stats``: a :class:`capeval.metrics.meteor.stats.MeteorStats`, or the 23 numbers
    METEOR's ``SCORE`` command prints (a string or a sequence). With module weights ``w_i``
    and ``delta = 0.75``, P and R are the weighted matches over the weighted lengths of
    candidate and reference, ``Fmean = PR / (alpha P + (1 - alpha) R)`` (alpha 0.85),
    ``Pen = 0.6 (chunks / mean matches) ** 0.2`` and ``score = max(0, Fmean (1 - Pen))``;
    pass summed statistics for the corpus score. Range [0, 1]. Computed by
    :func:`capeval.metrics.meteor.stats.compute`. Reference: Denkowski and Lavie 2014.
    """
    from capeval.metrics.meteor import stats as meteor_stats

    if isinstance(stats, str):
        stats = meteor_stats.MeteorStats.from_string(stats)
    elif not isinstance(stats, meteor_stats.MeteorStats):
        stats = meteor_stats.MeteorStats.from_string(" ".join(repr(float(v)) for v in stats))
    return meteor_stats.compute(stats).score
