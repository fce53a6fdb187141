"""The former ``capeval compare`` (before issue 47), kept verbatim for comparison only.

``benchmarks/bench_compare.py`` times it beside the current implementation and checks that both
give the same p-values, means and intervals; ``tests/test_compare_fast.py`` checks the same bit
for bit on random inputs. It scores each system with ``capeval.score``, tokenises again for the
BLEU/CIDEr-D tables and runs METEOR again, and rescoring the whole CIDEr-D table per resample
(one ``cider_table_scores`` pass each), per system. Not part of capeval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import numpy as np

from capeval.errors import InputError
from capeval.io.inputs import normalize_references
from capeval.significance.compare import DEFAULT_SEED, _check, _every_item_scored, _systems
from capeval.significance.paired import PairedResult, Statistic, estimate_ci

_BLOCK = 64

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

def _p_value(stats: np.ndarray, observed: float) -> float:
    return (int(np.sum(stats > observed)) + 1) / (len(stats) + 1)


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    out = np.zeros((idx.shape[0], n), dtype=np.float64)
    np.add.at(out, (rows, idx.ravel()), 1.0)
    return out


def paired_bootstrap(base: Statistic, system: Statistic, samples: int = 1000, seed: int | None = 12345,
                     confidence: float = 0.95) -> PairedResult:
    """Paired bootstrap resampling as sacreBLEU's ``_paired_bs_test`` (see the module docs).

    ``diff_low``/``diff_high``: the percentile interval of ``score_sys - score_base`` over the
    resamples at ``confidence`` (capeval's addition; sacreBLEU reports only the p-value).
    """
    rng = np.random.default_rng(seed)
    n = base.n
    base_scores, sys_scores = [], []
    for start in range(0, samples, _BLOCK):
        idx = rng.choice(n, size=(min(_BLOCK, samples - start), n), replace=True)
        counts = _counts(idx, n)
        base_scores.append(base.resampled(counts))
        sys_scores.append(system.resampled(counts))
    b, s = np.concatenate(base_scores), np.concatenate(sys_scores)
    observed = abs(base.score() - system.score())
    diffs = np.abs(s - b)
    p = _p_value(diffs - diffs.mean(), observed)
    mean, ci = estimate_ci(s)
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(s - b, [tail, 1.0 - tail])
    return PairedResult(base.score(), system.score(), p, mean, ci, float(low), float(high))


def approximate_randomization(base: Statistic, system: Statistic, samples: int = 10000,
                              seed: int | None = 12345) -> PairedResult:
    """Paired approximate randomisation as sacreBLEU's ``_paired_ar_test`` (see the module docs)."""
    rng = np.random.default_rng(seed)
    n = base.n
    gaps = []
    for start in range(0, samples, _BLOCK):
        take_base = rng.integers(2, size=(min(_BLOCK, samples - start), n), dtype=bool)
        a = base.mixed(take_base, system)
        b = system.mixed(take_base, base)
        gaps.append(np.abs(a - b))
    observed = abs(base.score() - system.score())
    return PairedResult(base.score(), system.score(), _p_value(np.concatenate(gaps), observed))

def _statistics(name: str, cands: dict[str, str], refs: dict[str, list[str]], metrics: list[str],
                options: Mapping[str, Mapping[str, Any]] | None) -> tuple[dict[str, Any], Any]:
    """(metric -> Statistic, the system's Report) for one system."""
    from capeval.api import score

    report = score(cands, refs, metrics, options=options)
    ids = list(cands)
    out: dict[str, Any] = {}
    table = None
    for metric in metrics:
        result = report[metric]
        if metric == "meteor":
            stat = _meteor(ids, cands, refs, options)
            _same(metric, name, stat.score(), result.system)
        elif metric.startswith("bleu-") or metric == "cider-d":
            if table is None:
                table = _ngram_table(ids, cands, refs, options)
            if metric == "cider-d":
                sigma = float(((options or {}).get("cider-d") or {}).get("sigma", 6.0))
                stat = CiderStatistic(table, sigma)
            else:
                from capeval.metrics.bleu import table_bleu_stats

                testlen, reflen, guess, correct = table_bleu_stats(table)
                rows = np.column_stack([testlen, reflen, np.array(guess), np.array(correct)])
                stat = bleu_statistic(rows, int(metric[5:]))
            _same(metric, name, stat.score(), result.system)
        else:
            _every_item_scored(metric, name, ids, result)
            items = np.array([result.items[i] for i in ids], dtype=np.float64)
            check_mean(metric, result.system, items)
            stat = mean_statistic(items)
        out[metric] = stat
    return out, report


def _same(metric: str, name: str, rebuilt: float, system: float) -> None:
    if not math.isclose(rebuilt, system, rel_tol=1e-12, abs_tol=1e-15):
        raise InputError(f"compare: {metric} of {name!r} rebuilt from its statistics ({rebuilt!r}) differs from its "
                         f"score ({system!r}); options that change its statistics are not supported by compare")


def _meteor(ids: list[str], cands: dict[str, str], refs: dict[str, list[str]],
            options: Mapping[str, Mapping[str, Any]] | None) -> Any:
    from capeval.metrics.meteor.metric import Meteor
    from capeval.metrics.text import TextChunk


    opts = dict((options or {}).get("meteor") or {})
    scorer = Meteor(**{k: v for k, v in opts.items() if k in ("tokenizer", "cache_dir")})
    hyps, tok_refs = scorer.tokenize(ids, cands, refs)
    return meteor_statistic([st for st, _ in scorer.item_stats(TextChunk(hyps, tok_refs))])


def _ngram_table(ids: list[str], cands: dict[str, str], refs: dict[str, list[str]],
                 options: Mapping[str, Mapping[str, Any]] | None) -> Any:
    from capeval.metrics.bleu import Bleu
    from capeval.metrics.ngrams import NgramTable

    tokenizer = ((options or {}).get("bleu") or {}).get("tokenizer", "ptb")
    hyps, tok_refs = Bleu(tokenizer=tokenizer).tokenize(ids, cands, refs)
    return NgramTable(hyps, tok_refs, 4)


def compare(systems: Mapping[str, Any], references: Mapping[Any, Any], metrics: str | Sequence[str] = "bleu-4",
            *, method: str = "bs", samples: int | None = None, seed: int | None = DEFAULT_SEED,
            confidence: float = 0.95, options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Paired significance of every system against the first (the baseline), per metric.

    ``systems``: ``{name: {id: caption}}`` in order, the first is the baseline; all must cover
    the same ids. ``method``: ``"bs"`` (paired bootstrap, sacreBLEU ``--paired-bs``) or ``"ar"``
    (approximate randomisation, ``--paired-ar``); ``samples``: resamples or trials (default 1,000
    / 10,000, range [1, 10^6]); ``seed``: numpy ``default_rng`` seed (default 12345 as sacreBLEU;
    ``None`` draws fresh entropy); ``confidence``: of the bootstrap interval of the difference.

    Returns JSON-ready data: ``{"baseline", "method", "samples", "seed", "confidence",
    "signatures": {metric: str}, "systems": {name: {metric: {"score", "diff", "p_value", ...}}}}``;
    for the bootstrap also the system's bootstrap ``mean``, ``ci`` (sacreBLEU's half-width) and
    ``diff_ci`` ``[low, high]``. Raises :class:`~capeval.errors.InputError` (one line) on bad input.
    """
    from capeval.registry import expand

    samples = _check(method, samples, seed, confidence)
    names_metrics = expand(metrics)
    cands = _systems(systems)
    refs = normalize_references(references)
    names = list(cands)
    stats: dict[str, dict[str, Any]] = {}
    signatures: dict[str, str] = {}
    for name in names:
        stats[name], report = _statistics(name, cands[name], refs, names_metrics, options)
        if not signatures:
            signatures = {m: f"{report[m].signature}|paired:{method}|samples:{samples}|seed:{str(seed).lower()}"
                          for m in names_metrics}
    baseline = names[0]
    out: dict[str, Any] = {"baseline": baseline, "method": method, "samples": samples, "seed": seed,
                           "confidence": confidence if method == "bs" else None, "signatures": signatures,
                           "systems": {baseline: {m: {"score": stats[baseline][m].score()} for m in names_metrics}}}
    for name in names[1:]:
        row = {}
        for metric in names_metrics:
            base, other = stats[baseline][metric], stats[name][metric]
            if method == "bs":
                res = paired_bootstrap(base, other, samples, seed, confidence)
            else:
                res = approximate_randomization(base, other, samples, seed)
            row[metric] = _row(res)
        out["systems"][name] = row
    return out


def _row(res: PairedResult) -> dict[str, Any]:
    row: dict[str, Any] = {"score": res.system, "diff": res.system - res.baseline, "p_value": res.p_value}
    if res.mean is not None:
        row.update(mean=res.mean, ci=res.ci, diff_ci=[res.diff_low, res.diff_high])
    return row
