"""Statistic builders shared by the benchmarks (values are x100, as papers print them)."""

from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np

from capeval.bench import statistics as stats
from capeval.bench.base import StatSpec


def _rows_of(units: np.ndarray | None, rows_per_unit: np.ndarray) -> np.ndarray | None:
    """Row indices of the selected units (``rows_per_unit``: (n_units, k) row index table)."""
    if units is None:
        return None
    return rows_per_unit[units].ravel()


def kendall_specs(
    metric_rows: np.ndarray,
    human_rows: np.ndarray,
    setting: str,
    rows_per_unit: np.ndarray | None = None,
    suffix: str = "",
    variants: tuple[str, ...] = ("b", "c"),
    headline: str = "c",
) -> list[StatSpec]:
    """tau-b / tau-c x100 between per-row metric and human scores, resampling units."""
    n = metric_rows.size
    table = rows_per_unit if rows_per_unit is not None else np.arange(n)[:, None]
    ranks = stats.KendallRanks(metric_rows, human_rows)
    cache: dict[bytes, tuple[float, float]] = {}

    def taus(units: np.ndarray | None) -> tuple[float, float]:
        # tau-b and tau-c come from one pass; the two specs walk the same seeded resamples,
        # so the second finds every resample's result here (keyed by the resample's content)
        key = b"all" if units is None else hashlib.blake2b(np.ascontiguousarray(units).tobytes(), digest_size=16).digest()
        if key not in cache:
            if len(cache) > 20000:
                cache.clear()
            cache[key] = ranks(_rows_of(units, table))
        return cache[key]

    out = []
    for v in variants:
        pos = 0 if v == "b" else 1

        def fn(units: np.ndarray | None, pos: int = pos) -> float:
            return 100.0 * taus(units)[pos]

        out.append(
            StatSpec(
                name=f"kendall_tau_{v}{suffix}",
                fn=fn,
                n=n,
                n_units=table.shape[0],
                setting=setting,
                headline=(v == headline),
            )
        )
    return out


def correlation_spec(
    name: str,
    func: Callable[[np.ndarray, np.ndarray], float],
    metric_rows: np.ndarray,
    human_rows: np.ndarray,
    setting: str,
    headline: bool = False,
) -> StatSpec:
    """x100 correlation over rows, each row its own resampling unit."""

    def fn(units: np.ndarray | None) -> float:
        if units is None:
            return 100.0 * func(metric_rows, human_rows)
        return 100.0 * func(metric_rows[units], human_rows[units])

    return StatSpec(name=name, fn=fn, n=metric_rows.size, n_units=metric_rows.size, setting=setting, headline=headline)


def accuracy_spec(
    name: str,
    correct: np.ndarray,
    setting: str,
    strata: np.ndarray | None = None,
    headline: bool = False,
) -> StatSpec:
    """x100 mean of per-pair correctness (0..1, may be averaged over reference draws).

    With ``strata`` the statistic is the mean of the per-stratum accuracies (Pascal-50S's
    mean over categories) and bootstrap resamples within strata.
    """
    correct = np.asarray(correct, dtype=float)
    if strata is None:

        def fn(units: np.ndarray | None) -> float:
            return 100.0 * float(correct.mean() if units is None else correct[units].mean())

    else:
        labels = np.unique(strata)

        def fn(units: np.ndarray | None) -> float:
            sel = np.arange(correct.size) if units is None else units
            vals, st = correct[sel], strata[sel]
            return 100.0 * float(np.mean([vals[st == s].mean() for s in labels]))

    return StatSpec(
        name=name, fn=fn, n=correct.size, n_units=correct.size, setting=setting, strata=strata, headline=headline
    )


def count_spec(name: str, value: float, n: int, setting: str) -> StatSpec:
    return StatSpec(name=name, fn=lambda units: float(value), n=n, n_units=n, setting=setting, bootstrap=False)


#: Protocol option of the benchmarks with more pairs than MID's official ``limit`` (30000;
#: Flickr8k-CF 47,830, FOIL): the papers correlate MID over every pair, which the official cap
#: would leave unscored (``_compute_pmi`` drops candidates past it), so the Gaussian is fitted
#: to all the benchmark's pairs. A user's ``-O mid.limit`` still wins (``Loaded.metric_options``).
MID_ALL_PAIRS: dict[str, dict[str, int]] = {"mid": {"limit": 10**9}}
