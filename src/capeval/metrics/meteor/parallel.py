"""METEOR items scored in forked worker processes (the ``workers`` option).

The items are cut into contiguous spans, twice as many as workers; each worker scores
its spans with the parent's scorer, inherited through ``fork`` (nothing is pickled but
the results). Everything is deterministic, so the results are those of one process, in
input order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capeval.metrics.workers import PARALLEL_MIN_ITEMS, forked_pool, resolve_workers

__all__ = ["PARALLEL_MIN_ITEMS", "resolve_workers", "run_forked"]


_FORKED: tuple | None = None  # (score_items, hypotheses, references) inherited by forked workers


def _worker(span: tuple[int, int]) -> list:
    score_items, hyps, refs = _FORKED  # type: ignore[misc]
    a, b = span
    return score_items(hyps[a:b], refs[a:b])


def run_forked(
    score_items: Callable[[list[str], list[list[str]]], list[Any]],
    hyps: list[str],
    refs: list[list[str]],
    workers: int,
) -> list[Any]:
    """``score_items(hyps, refs)`` computed over contiguous spans in ``workers`` forked
    processes; the results, in input order.

    Each worker prepares the sentences of its spans itself (in parallel, and keeping
    them for its next spans).
    """
    global _FORKED
    n = len(hyps)
    n_spans = workers * 2
    bounds = [n * k // n_spans for k in range(n_spans + 1)]
    spans = [(bounds[k], bounds[k + 1]) for k in range(n_spans) if bounds[k + 1] > bounds[k]]
    _FORKED = (score_items, hyps, refs)
    try:
        with forked_pool(workers) as pool:
            parts = pool.map(_worker, spans, chunksize=1)
    finally:
        _FORKED = None
    return [x for part in parts for x in part]
