"""How each metric's corpus score is rebuilt on a resample (see :mod:`capeval.significance.paired`).

Every statistic comes from the system's one scoring pass (the scorers keep their per-item
statistics for ``capeval compare``); nothing is tokenised or run again.

- BLEU-1..4: per item the sufficient statistics ``(testlen, reflen, guess_1..4, correct_1..4)``
  (:func:`capeval.metrics.bleu.table_bleu_stats`); a resample's BLEU is computed from their sums
  (corpus brevity penalty), as pycocoevalcap computes the corpus score.
- CIDEr-D: the document frequencies are those of the resample (an item drawn twice counts
  twice, as it would in a test set holding it twice) and ``N`` its size, so every drawn item
  is rescored on every resample (:mod:`capeval.significance.cider_resample`); the resample's
  score is the mean of its items. In the approximate randomisation test both systems share
  the references, so the frequencies, and the item scores, stay those of the full set.
- METEOR: per item the best reference's 23 statistics (a perfectly matched item adds no
  chunks, as METEOR's ``addStats``); a resample's METEOR is computed from their sums.
- every other metric whose system score is the mean of its item scores (ROUGE-L, SPICE, the
  CLIP family, BERTScore, ...): the resample's mean. A metric whose system score is neither is
  refused with a one-line error.

The BLEU and METEOR aggregates run over all the resamples of a block at once with numpy, with
the operations of :func:`capeval.functional.bleu_from_stats` and
:func:`capeval.metrics.meteor.stats.compute` in their order; ``pow`` and ``exp`` stay Python's
(libm's: numpy's vectorised ones may differ in the last bit), one call per resample.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np

from capeval.errors import InputError
from capeval.significance.blas_threads import threads_for


class SumStatistic:
    """A corpus score that is a function of per-item statistics summed over the items."""

    def __init__(self, stats: np.ndarray, aggregate: Callable[[np.ndarray], np.ndarray]):
        self.stats = np.asarray(stats, dtype=np.float64)
        self.n = len(self.stats)
        self.aggregate = aggregate
        #: the largest |statistic| when every one is a whole number (BLEU's and METEOR's counts), else None
        self._whole_max = _whole_max(self.stats)

    def score(self) -> float:
        return float(self.aggregate(self.stats.sum(axis=0)[None, :])[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        with threads_for(lambda: self._exact(counts)):
            return self.aggregate(counts @ self.stats)

    def mixed(self, take_self: np.ndarray, other: "SumStatistic") -> np.ndarray:
        with threads_for(lambda: self._exact(take_self) and other._exact(take_self)):
            return self.aggregate(take_self @ self.stats + (~take_self) @ other.stats)

    def _exact(self, weights: np.ndarray) -> bool:
        """Whether every product of ``weights`` with the statistics is exact in float64, whatever
        the order of its sums (BLAS's threads split them): whole statistics (BLEU's and METEOR's
        counts), whole non-negative weights (multiplicities, or 0/1), sums below 2^53. Then BLAS
        runs on one thread, whose spinning threads would otherwise take a core from the other
        metrics' work, and gives the threaded call's doubles."""
        if self._whole_max is None:
            return False
        largest_row = _largest_whole_row(weights)
        return largest_row is not None and largest_row * self._whole_max < _EXACT_BELOW


#: float64 holds every whole number below this exactly
_EXACT_BELOW = 2.0**53


def _whole_max(stats: np.ndarray) -> float | None:
    """The largest |statistic| when every statistic is a whole number, else None."""
    if not stats.size or not np.all(np.isfinite(stats)) or not np.array_equal(stats, np.floor(stats)):
        return None
    return float(np.abs(stats).max())


#: the last weights checked by _largest_whole_row (a weak reference: a block's multiplicities are
#: not kept alive by it, so paired._CountsArrays can reuse their array) and the answer: every
#: statistic of a comparison is given the same block of multiplicities, checked once
_LAST_WEIGHTS: list[Any] = [None, None]


def _largest_whole_row(weights: np.ndarray) -> float | None:
    """The largest row sum of ``weights`` when they are whole and non-negative (bools: their
    width), else None."""
    last = _LAST_WEIGHTS[0]
    if last is not None and last() is weights:
        return _LAST_WEIGHTS[1]
    w = np.asarray(weights)
    if w.dtype == np.bool_ or not w.size:
        largest: float | None = float(w.shape[-1]) if w.ndim else 1.0
    elif w.min() < 0 or not np.array_equal(w, np.floor(w)):
        largest = None
    else:
        largest = float(w.sum(axis=-1).max())
        largest = largest if math.isfinite(largest) else None
    try:
        _LAST_WEIGHTS[:] = [weakref.ref(weights), largest]
    except TypeError:  # not an array: not remembered
        _LAST_WEIGHTS[:] = [None, None]
    return largest


def mean_statistic(items: np.ndarray) -> SumStatistic:
    """The mean of item scores."""
    n = len(items)
    return SumStatistic(np.asarray(items, dtype=np.float64)[:, None], lambda sums: sums[:, 0] / n)


def bleu_scores(sums: np.ndarray, order: int) -> np.ndarray:
    """BLEU-``order`` of each row of summed ``(testlen, reflen, guess_1..4, correct_1..4)``, with
    :func:`capeval.functional.bleu_from_stats`'s operations in its order (the same doubles)."""
    from capeval.functional import BLEU_SMALL, BLEU_TINY

    sums = np.asarray(sums, dtype=np.float64)
    bleu = np.ones(len(sums))
    for k in range(order):
        bleu = bleu * ((sums[:, 6 + k] + BLEU_TINY) / (sums[:, 2 + k] + BLEU_SMALL))
    exponent = 1.0 / order
    scores = [b**exponent for b in bleu.tolist()]
    ratio = (sums[:, 0] + BLEU_TINY) / (sums[:, 1] + BLEU_SMALL)
    for i in np.flatnonzero(ratio < 1).tolist():
        scores[i] = scores[i] * math.exp(1 - 1 / float(ratio[i]))
    return np.array(scores, dtype=np.float64)


def bleu_statistic(stats: np.ndarray, order: int) -> SumStatistic:
    """BLEU-``order`` from summed ``(testlen, reflen, guess_1..4, correct_1..4)`` rows."""
    return SumStatistic(stats, lambda sums: bleu_scores(sums, order))


def meteor_item_rows(pair_stats: Iterable[tuple]) -> np.ndarray:
    """Each item's 23 METEOR statistics (``MeteorStats.toString`` order) as ``addStats`` adds one
    item: the best reference's :func:`~capeval.metrics.meteor.fast_align.pair_stats` tuple, its
    chunks left out when perfectly matched (what ``sum_stats([t])`` gives, as float64)."""
    rows = []
    for a, b, c, d, x1, x2, y1, y2, chunks in pair_stats:
        t1 = sum(x1) + sum(y1)
        t2 = sum(x2) + sum(y2)
        row = [a, b, c, d]
        for i in range(4):
            row += [x1[i], x2[i], y1[i], y2[i]]
        row += [0 if (t1 == a and t2 == b and chunks == 1) else chunks, t1, t2]
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(-1, 23)


def meteor_scores(sums: np.ndarray) -> np.ndarray:
    """METEOR of each row of summed statistics, with :func:`capeval.metrics.meteor.stats.compute`'s
    operations in its order (Java's double division: x/0 is ±inf, 0/0 NaN; NaN scores 0)."""
    from capeval.metrics.meteor.stats import ALPHA, BETA, DELTA, GAMMA, MODULE_WEIGHTS, nan_pow

    s = np.asarray(sums, dtype=np.float64)
    d = DELTA
    with np.errstate(divide="ignore", invalid="ignore"):
        test_wlen = d * (s[:, 0] - s[:, 2]) + (1.0 - d) * s[:, 2]
        ref_wlen = d * (s[:, 1] - s[:, 3]) + (1.0 - d) * s[:, 3]
        test_wm = np.zeros(len(s))
        ref_wm = np.zeros(len(s))
        for i, w in enumerate(MODULE_WEIGHTS):
            test_wm = test_wm + s[:, 4 + 4 * i] * w * d
        for i, w in enumerate(MODULE_WEIGHTS):
            ref_wm = ref_wm + s[:, 5 + 4 * i] * w * d
        for i, w in enumerate(MODULE_WEIGHTS):
            test_wm = test_wm + s[:, 6 + 4 * i] * w * (1.0 - d)
        for i, w in enumerate(MODULE_WEIGHTS):
            ref_wm = ref_wm + s[:, 7 + 4 * i] * w * (1.0 - d)
        precision = test_wm / test_wlen
        recall = ref_wm / ref_wlen
        fmean = 1.0 / ((1.0 - ALPHA) / precision + ALPHA / recall)
        test_total = np.zeros(len(s))
        ref_total = np.zeros(len(s))
        for i in range(4):
            test_total = test_total + s[:, 4 + 4 * i]
            test_total = test_total + s[:, 6 + 4 * i]
            ref_total = ref_total + s[:, 5 + 4 * i]
            ref_total = ref_total + s[:, 7 + 4 * i]
        perfect = (test_total == s[:, 0]) & (ref_total == s[:, 1]) & (s[:, 20] == 1.0)
        frag = np.where(perfect, 0.0, s[:, 20] / ((s[:, 21] + s[:, 22]) / 2.0))
    penalty = np.array([GAMMA * nan_pow(f, BETA) for f in frag.tolist()], dtype=np.float64)
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, as in Java; NaN scores 0
        value = fmean * (1.0 - penalty)
        return np.where(value > 0.0, value, 0.0)


def meteor_statistic(rows: np.ndarray) -> SumStatistic:
    """METEOR from the summed per-item statistics (:func:`meteor_item_rows`)."""
    return SumStatistic(np.asarray(rows, dtype=np.float64).reshape(-1, 23), meteor_scores)


def check_mean(metric: str, system: float, items: np.ndarray) -> None:
    """Refuse a metric whose system score is not the mean of its items (it needs its own rule)."""
    mean = float(np.mean(items)) if len(items) else math.nan
    if not (math.isclose(mean, system, rel_tol=1e-9, abs_tol=1e-12)):
        raise InputError(f"compare: {metric}'s system score ({system!r}) is not the mean of its item scores "
                         f"({mean!r}) and capeval has no resampling rule for it yet")


def cider_statistic(chunks: list[Any], items: np.ndarray, shared: Any) -> Any:
    """CIDEr-D with each resample's document frequencies (:mod:`capeval.significance.cider_resample`)."""
    from capeval.significance.cider_statistic import CiderStatistic

    return CiderStatistic(chunks, items, shared)
