"""METEOR items scored in forked worker processes (the ``workers`` option).

The items are cut into contiguous spans, twice as many as workers; each worker scores
its spans with the parent's scorer, inherited through ``fork`` (nothing is pickled but
the results). Everything is deterministic, so the results are those of one process, in
input order.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

#: with ``workers=None``, items up to this many are scored in this process
PARALLEL_MIN_ITEMS = 2000


def resolve_workers(workers: int | None, n_items: int) -> int:
    """Worker processes to use for ``n_items`` items (1: score in this process).

    None: ``min(available cores, 4)`` for more than :data:`PARALLEL_MIN_ITEMS` items,
    else 1. Never more than ``n_items``; 1 where ``fork`` is unavailable or unsafe.
    """
    if workers is None:
        if n_items <= PARALLEL_MIN_ITEMS:
            return 1
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            cpus = os.cpu_count() or 1
        workers = min(cpus, 4)
    workers = max(1, min(int(workers), n_items))
    if workers > 1:
        import multiprocessing
        import threading

        # fork only where it exists, not from a multi-threaded program (a forked child
        # could inherit a lock held by another thread) and not from a daemon process
        if (
            "fork" not in multiprocessing.get_all_start_methods()
            or threading.active_count() > 1
            or multiprocessing.current_process().daemon  # a pool worker cannot have children
        ):
            return 1
    return workers


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
    import multiprocessing

    global _FORKED
    n = len(hyps)
    n_spans = workers * 2
    bounds = [n * k // n_spans for k in range(n_spans + 1)]
    spans = [(bounds[k], bounds[k + 1]) for k in range(n_spans) if bounds[k + 1] > bounds[k]]
    _FORKED = (score_items, hyps, refs)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_worker, spans, chunksize=1)
    finally:
        _FORKED = None
    return [x for part in parts for x in part]
