"""Paired significance tests between two systems scored on the same items.

Both follow sacreBLEU 2.x (``sacrebleu/significance.py``), draw for draw, so that with the
same statistics, seed and sample count they give sacreBLEU's p-values exactly:

- **paired bootstrap** (Koehn 2004; sacreBLEU ``--paired-bs``): ``numpy.random.default_rng(seed)``
  draws ``samples x n`` item indices with replacement (one draw shared by both systems); the
  corpus score of each resample is recomputed from the resampled items' statistics;
  with ``d_k = |score_sys(k) - score_base(k)|``, ``p = (#{d_k - mean(d) > |observed diff|} + 1)
  / (samples + 1)``. The system's bootstrap mean and the half-width of its 95% interval are
  sacreBLEU's (sorted scores, ``n // 40`` cut from each side).
- **approximate randomisation** (Riezler & Maxwell 2005; sacreBLEU ``--paired-ar``): per trial
  each item's two outputs are swapped with probability 1/2 (``rng.integers(2, size=(samples, n),
  dtype=bool)``); ``p = (#{|score_a - score_b| > |observed diff|} + 1) / (samples + 1)``.

A :class:`Statistic` computes corpus scores for many resamples at once; how a metric's corpus
score is rebuilt from its items is the statistic's business (sums of sufficient statistics for
BLEU, document frequencies for CIDEr-D, item means otherwise).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

#: resamples per block: a multiple of 32, so that drawing in blocks consumes numpy's bit
#: generator exactly as one (samples x n) draw does (bools are cut from 32-bit words)
_BLOCK = 64


class Statistic(Protocol):
    """Corpus scores of one system for weighted or mixed item sets. Optional, used by
    :func:`bootstrap_scores` where a statistic has them: ``prepare_counts(counts)`` (work on a
    block's multiplicities, done on the thread that draws it), ``start_resamples()`` (set-up done
    while the first block is drawn), ``end_resamples()`` (after the last block, on an error too)
    and ``resampled_later(counts)`` (``resampled`` as a call
    giving the scores, made once every block is scored)."""

    n: int

    def score(self) -> float:
        """The corpus score on all items."""

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """Scores of resamples given as ``(k, n)`` item multiplicities."""

    def mixed(self, take_self: np.ndarray, other: "Statistic") -> np.ndarray:
        """Scores of ``(k, n)`` pseudo-systems: item ``i`` from ``self`` where ``take_self``, else from ``other``."""


@dataclass(frozen=True)
class PairedResult:
    """One system against the baseline: scores, p-value and the system's bootstrap mean and CI half-width."""

    baseline: float
    system: float
    p_value: float
    mean: float | None = None
    ci: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None


def estimate_ci(scores: np.ndarray) -> tuple[float, float]:
    """sacreBLEU's ``estimate_ci``: (mean, half-width of the central 95% of the sorted scores)."""
    scores = np.sort(scores)
    low = len(scores) // 40
    high = len(scores) - low - 1
    return float(scores.mean()), float(0.5 * (scores[high] - scores[low]))


def _p_value(stats: np.ndarray, observed: float) -> float:
    return (int(np.sum(stats > observed)) + 1) / (len(stats) + 1)


def _counts(idx: np.ndarray, n: int, out: np.ndarray | None = None) -> np.ndarray:
    """``(k, n)`` multiplicities (float64) of the items drawn in each row of ``idx`` (into ``out``
    when given: every element is written)."""
    # row by row: one bincount of n values per row stays in the cache, where one of the whole
    # block over k * n bins (and its offset indices) does not (a quarter of the time at 40,000 items)
    if out is None:
        out = np.empty((idx.shape[0], n), dtype=np.float64)
    for r, row in enumerate(idx):
        out[r] = np.bincount(row, minlength=n)
    return out


class _CountsArrays:
    """The arrays the blocks' multiplicities are written into, each reused once nothing but this
    pool refers to it (no statistic holds that block's counts, or a view of them, any more): a
    fresh ``(64, n)`` array per block had its pages zeroed by the kernel, 0.17 s of CPU per 1,000
    resamples at 40,000 items on the thread drawing them, beside the CIDEr-D kernels. At most
    :data:`_KEPT_ARRAYS` are kept; beyond, a block gets an array of its own."""

    def __init__(self, n: int):
        self.n = n
        self._arrays: list[np.ndarray] = []
        #: a private object held by this list only: its count, read by the same expression as an
        #: array's, is the count of an array nothing else refers to (whatever the interpreter
        #: adds for the call itself)
        self._alone: list[object] = [object()]

    def get(self, k: int) -> np.ndarray:
        """A ``(k, n)`` float64 view of an array nothing else refers to (its values: any)."""
        for j in range(len(self._arrays)):
            if sys.getrefcount(self._arrays[j]) == sys.getrefcount(self._alone[0]):
                return self._arrays[j][:k]
        array = np.empty((_BLOCK, self.n), dtype=np.float64)
        if len(self._arrays) < _KEPT_ARRAYS:
            self._arrays.append(array)
        return array[:k]


#: the most arrays of multiplicities kept for reuse (blocks drawn ahead and held by statistics)
_KEPT_ARRAYS = 4


def bootstrap_scores(statistics: Sequence[Statistic], samples: int = 1000, seed: int | None = 12345,
                     progress: Any = None) -> np.ndarray:
    """``(len(statistics), samples)`` corpus scores of each statistic on the same resamples.

    The draws are sacreBLEU's (``rng.choice(n, size=(k, n))`` per block, see :data:`_BLOCK`),
    made once for all the statistics: the baseline's scores are computed once however many
    systems are compared with it, and a statistic may share work between systems per block
    (CIDEr-D's document frequencies). ``progress``: a :class:`~capeval.progress.Progress`
    told of each block's resamples."""
    rng = np.random.default_rng(seed)
    n = statistics[0].n
    out = np.empty((len(statistics), samples), dtype=np.float64)
    starts = range(0, samples, _BLOCK)

    # a statistic's work that needs only the block's multiplicities (CIDEr-D's transposed copy for
    # its df) is done by the thread that draws the block, beside the scoring of the one before
    prepares = [p for p in (getattr(s, "prepare_counts", None) for s in statistics) if p is not None]

    arrays = _CountsArrays(n)

    def draw(start: int) -> np.ndarray:
        k = min(_BLOCK, samples - start)
        counts = _counts(rng.choice(n, size=(k, n), replace=True), n, arrays.get(k))
        for prepare in prepares:
            prepare(counts)
        return counts

    blocks = map(draw, starts) if len(starts) < 2 or n < _DRAW_AHEAD_ITEMS else _drawn_ahead(draw, starts)
    try:
        # a statistic's set-up for the resamples (CIDEr-D's threads and groups) is done while the
        # first block is drawn; its end_resamples (stopping those threads) once the scores are made
        for stat in statistics:
            start_resamples = getattr(stat, "start_resamples", None)
            if start_resamples is not None:
                start_resamples()
        # a statistic may give a block's scores as a call made later (CIDEr-D's last means are
        # taken beside the next block's work): made once every block is scored
        deferred = [getattr(s, "resampled_later", None) for s in statistics]
        later: list[tuple[int, int, int, Any]] = []
        for start, counts in zip(starts, blocks):
            for j, stat in enumerate(statistics):
                if deferred[j] is not None:
                    later.append((j, start, len(counts), deferred[j](counts)))
                else:
                    out[j, start:start + len(counts)] = stat.resampled(counts)
            if progress is not None:
                progress.update(len(counts))
        for j, start, size, scores in later:
            out[j, start:start + size] = scores()
    finally:
        for stat in statistics:
            end_resamples = getattr(stat, "end_resamples", None)
            if end_resamples is not None:
                end_resamples()
    return out


#: items from which the next block is drawn while the statistics score the current one
_DRAW_AHEAD_ITEMS = 5000


def _drawn_ahead(draw: Any, starts: range) -> Any:
    """``draw(start)`` for each start in order, the next one made on a second thread while the
    caller scores the current one (a block's draws and multiplicities: a few percent of a large
    CIDEr-D job, on one core while the kernels' threads wait between blocks), the first one from
    the call on. One draw at a time, in order: the generator gives the same numbers as on one
    thread."""
    from concurrent.futures import ThreadPoolExecutor

    # the first block is drawn from now on, not from the first request
    pool = ThreadPoolExecutor(1, thread_name_prefix="capeval-draws")
    first = pool.submit(draw, starts[0])

    def blocks() -> Any:
        ahead = first
        try:
            for nxt in list(starts[1:]) + [None]:
                counts = ahead.result()
                if nxt is not None:
                    ahead = pool.submit(draw, nxt)
                yield counts
        finally:
            pool.shutdown(wait=True)

    return blocks()


def bootstrap_result(base: Statistic, system: Statistic, base_scores: np.ndarray, sys_scores: np.ndarray,
                     confidence: float = 0.95) -> PairedResult:
    """The paired bootstrap's result from both systems' scores on the same resamples."""
    b, s = np.ascontiguousarray(base_scores), np.ascontiguousarray(sys_scores)
    observed = abs(base.score() - system.score())
    diffs = np.abs(s - b)
    p = _p_value(diffs - diffs.mean(), observed)
    mean, ci = estimate_ci(s)
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(s - b, [tail, 1.0 - tail])
    return PairedResult(base.score(), system.score(), p, mean, ci, float(low), float(high))


def paired_bootstrap(base: Statistic, system: Statistic, samples: int = 1000, seed: int | None = 12345,
                     confidence: float = 0.95) -> PairedResult:
    """Paired bootstrap resampling as sacreBLEU's ``_paired_bs_test`` (see the module docs).

    ``diff_low``/``diff_high``: the percentile interval of ``score_sys - score_base`` over the
    resamples at ``confidence`` (capeval's addition; sacreBLEU reports only the p-value).
    """
    b, s = bootstrap_scores([base, system], samples, seed)
    return bootstrap_result(base, system, b, s, confidence)


def randomization_gaps(base: Statistic, systems: Sequence[Statistic], samples: int = 10000,
                       seed: int | None = 12345, progress: Any = None) -> list[np.ndarray]:
    """Per system ``|score_a - score_b|`` of each trial, the trials drawn once for all systems
    (sacreBLEU's draws: ``rng.integers(2, size=(k, n), dtype=bool)`` per block)."""
    rng = np.random.default_rng(seed)
    n = base.n
    gaps: list[list[np.ndarray]] = [[] for _ in systems]
    for start in range(0, samples, _BLOCK):
        take_base = rng.integers(2, size=(min(_BLOCK, samples - start), n), dtype=bool)
        for j, system in enumerate(systems):
            a = base.mixed(take_base, system)
            b = system.mixed(take_base, base)
            gaps[j].append(np.abs(a - b))
        if progress is not None:
            progress.update(len(take_base))
    return [np.concatenate(g) for g in gaps]


def randomization_result(base: Statistic, system: Statistic, gaps: np.ndarray) -> PairedResult:
    """The approximate randomisation's result from the trials' gaps."""
    observed = abs(base.score() - system.score())
    return PairedResult(base.score(), system.score(), _p_value(gaps, observed))


def approximate_randomization(base: Statistic, system: Statistic, samples: int = 10000,
                              seed: int | None = 12345) -> PairedResult:
    """Paired approximate randomisation as sacreBLEU's ``_paired_ar_test`` (see the module docs)."""
    [gaps] = randomization_gaps(base, [system], samples, seed)
    return randomization_result(base, system, gaps)
