"""How each metric's corpus score is rebuilt on a resample (see :mod:`capeval.significance.paired`).

- BLEU-1..4: per item the sufficient statistics ``(testlen, reflen, guess_1..4, correct_1..4)``
  (:func:`capeval.metrics.bleu.table_bleu_stats`); a resample's BLEU is computed from their sums
  (corpus brevity penalty), as pycocoevalcap computes the corpus score.
- CIDEr-D: the document frequencies are those of the resample (an item drawn twice counts
  twice, as it would in a test set holding it twice) and ``N`` its size, so every item score is
  recomputed on every resample; the resample's score is the mean of its items. In the
  approximate randomisation test both systems share the references, so the frequencies, and the
  item scores, stay those of the full set.
- METEOR: per item the best reference's 23 statistics (a perfectly matched item adds no
  chunks, as METEOR's ``addStats``); a resample's METEOR is computed from their sums.
- every other metric whose system score is the mean of its item scores (ROUGE-L, SPICE, the
  CLIP family, BERTScore, ...): the resample's mean. A metric whose system score is neither is
  refused with a one-line error.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from capeval.errors import InputError


class SumStatistic:
    """A corpus score that is a function of per-item statistics summed over the items."""

    def __init__(self, stats: np.ndarray, aggregate: Callable[[np.ndarray], np.ndarray]):
        self.stats = np.asarray(stats, dtype=np.float64)
        self.n = len(self.stats)
        self.aggregate = aggregate

    def score(self) -> float:
        return float(self.aggregate(self.stats.sum(axis=0)[None, :])[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        return self.aggregate(counts @ self.stats)

    def mixed(self, take_self: np.ndarray, other: "SumStatistic") -> np.ndarray:
        return self.aggregate(take_self @ self.stats + (~take_self) @ other.stats)


def mean_statistic(items: np.ndarray) -> SumStatistic:
    """The mean of item scores."""
    n = len(items)
    return SumStatistic(np.asarray(items, dtype=np.float64)[:, None], lambda sums: sums[:, 0] / n)


def bleu_statistic(stats: np.ndarray, order: int) -> SumStatistic:
    """BLEU-``order`` from summed ``(testlen, reflen, guess_1..4, correct_1..4)`` rows."""
    from capeval.functional import bleu_from_stats

    def aggregate(sums: np.ndarray) -> np.ndarray:
        return np.array([bleu_from_stats(s[0], s[1], s[2:6].tolist(), s[6:10].tolist())[order - 1] for s in sums])

    return SumStatistic(stats, aggregate)


def meteor_statistic(pair_stats: list[tuple]) -> SumStatistic:
    """METEOR from the summed per-item statistics (``pair_stats`` tuples of the best references)."""
    from capeval.metrics.meteor.fast_align import sum_stats
    from capeval.metrics.meteor.stats import MeteorStats, compute

    # one item's MeteorStats as METEOR's addStats would add it (no chunks when perfectly matched)
    rows = np.array([[float(v) for v in sum_stats([t]).to_string().split()] for t in pair_stats],
                    dtype=np.float64).reshape(-1, 23)

    def aggregate(sums: np.ndarray) -> np.ndarray:
        return np.array([compute(MeteorStats.from_string(" ".join(repr(float(v)) for v in s))).score for s in sums])

    return SumStatistic(rows, aggregate)


class CiderStatistic:
    """CIDEr-D with the document frequencies of each resample (see the module docs)."""

    def __init__(self, table: Any, sigma: float):
        from capeval.metrics.cider import cider_table_scores

        self.table = table
        self.sigma = sigma
        self.n = int(table.n_items)
        self._score_table = cider_table_scores
        self._item, self._gram = table.item_grams()
        self.items = self._scores(np.ones(self.n))

    def _scores(self, weights: np.ndarray) -> np.ndarray:
        df = np.bincount(self._gram, weights=weights[self._item], minlength=int(self.table.n_grams))
        return self._score_table(self.table, df, self.n, self.sigma)

    def score(self) -> float:
        return float(np.mean(self.items))

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        return np.array([float(c @ self._scores(c)) / self.n for c in counts])

    def mixed(self, take_self: np.ndarray, other: "CiderStatistic") -> np.ndarray:
        return (take_self @ self.items + (~take_self) @ other.items) / self.n


def check_mean(metric: str, system: float, items: np.ndarray) -> None:
    """Refuse a metric whose system score is not the mean of its items (it needs its own rule)."""
    mean = float(np.mean(items)) if len(items) else math.nan
    if not (math.isclose(mean, system, rel_tol=1e-9, abs_tol=1e-12)):
        raise InputError(f"compare: {metric}'s system score ({system!r}) is not the mean of its item scores "
                         f"({mean!r}) and capeval has no resampling rule for it yet")
