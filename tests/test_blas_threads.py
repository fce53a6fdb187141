"""BLAS's threads in ``capeval compare``'s resamples (issue 47 item 2).

A threaded OpenBLAS call wakes its threads, which then spin for about a tenth of a second before
sleeping: BLEU's and METEOR's per-block matrix products kept a core spinning beside the CIDEr-D
kernels (16% of a ``-m bleu-4,cider-d`` comparison's CPU at 40,000 items). Those products are
exact (whole statistics, whole multiplicities, sums below 2^53), so one BLAS thread gives the
threaded call's doubles: checked here against the threaded call itself, on random statistics
with the edge cases (zeros, an item drawn n times, bools), and refused for anything not exact.
The resample means' BLAS check is made before the scoring pass (whose fork ends the spinning),
and compare keeps numpy's BLAS on one thread from before that pass's forks (a thread created
after a fork spins too), while the means and any inexact product keep the threads, and the
split, that numpy's call has outside.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from capeval.significance import blas_dot, blas_threads
from capeval.significance.statistics import (SumStatistic, _largest_whole_row, bleu_statistic,
                                             mean_statistic, meteor_statistic)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import require_module  # noqa: E402


def _blas():
    require_module("threadpoolctl", "threadpoolctl finds numpy's BLAS (installed with scikit-learn)")
    lib = blas_threads._openblas()
    if lib is None:
        pytest.skip("numpy's BLAS is not OpenBLAS here: no threads to keep asleep")
    return lib


def _draws(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    counts = np.empty((k, n), dtype=np.float64)
    for r in range(k):
        counts[r] = np.bincount(rng.integers(0, n, n), minlength=n)
    counts[0] = 0.0
    counts[0, n // 2] = n  # one item drawn n times
    return counts


def _threads_seen(stat: SumStatistic, lib) -> tuple[list[int], object]:
    """(BLAS's threads at each aggregate of ``stat``, its own aggregate)."""
    seen: list[int] = []
    aggregate = stat.aggregate

    def spy(sums: np.ndarray) -> np.ndarray:
        seen.append(lib.get_num_threads())
        return aggregate(sums)

    stat.aggregate = spy
    return seen, aggregate


@contextmanager
def _blas_threads(lib, threads: int):
    before = lib.get_num_threads()
    lib.set_num_threads(threads)
    try:
        yield
    finally:
        lib.set_num_threads(before)


@pytest.mark.parametrize("n", [50, 12_001, 40_460])
def test_whole_statistics_run_on_one_blas_thread_with_the_threaded_calls_doubles(n):
    lib = _blas()
    rng = np.random.default_rng(n)
    bleu_rows = rng.integers(0, 30, (n, 10)).astype(np.float64)
    bleu_rows[: n // 3] = 0.0  # items with no overlap at all
    meteor_rows = rng.integers(0, 12, (n, 23)).astype(np.float64)
    counts = _draws(rng, 64, n)
    take = rng.integers(0, 2, (64, n)).astype(bool)
    before = lib.get_num_threads()
    with _blas_threads(lib, 2):
        for stat, other in ((bleu_statistic(bleu_rows, 4), bleu_statistic(bleu_rows[::-1].copy(), 4)),
                            (meteor_statistic(meteor_rows), meteor_statistic(meteor_rows[::-1].copy()))):
            seen, aggregate = _threads_seen(stat, lib)
            got = stat.resampled(counts)
            mixed = stat.mixed(take, other)
            assert seen == [1, 1]
            assert lib.get_num_threads() == 2  # restored
            # the threaded call (numpy's, two BLAS threads) gives the same doubles
            sums = counts @ stat.stats
            assert np.array_equal(got, aggregate(sums), equal_nan=True)
            assert np.array_equal(mixed, aggregate(take @ stat.stats + (~take) @ other.stats), equal_nan=True)
            # and so does one thread on the whole product: the sums are exact
            with _blas_threads(lib, 1):
                assert np.array_equal(counts @ stat.stats, sums)
    assert lib.get_num_threads() == before


def test_statistics_or_weights_not_whole_keep_the_threaded_call():
    """Item means (ROUGE-L, CLIP-S, ...) and fractional weights: sums whose last bits depend on
    BLAS's split stay numpy's threaded call, as the former implementation made it."""
    lib = _blas()
    rng = np.random.default_rng(3)
    n = 20_000
    with _blas_threads(lib, 2):
        means = mean_statistic(rng.random(n))
        seen, _ = _threads_seen(means, lib)
        means.resampled(_draws(rng, 8, n))
        whole = bleu_statistic(rng.integers(0, 5, (n, 10)).astype(np.float64), 4)
        seen_whole, _ = _threads_seen(whole, lib)
        whole.resampled(_draws(rng, 8, n) * 0.5 + 0.25)  # fractional weights
        whole.resampled(-_draws(rng, 8, n))  # negative weights
        big = bleu_statistic(np.full((n, 10), 2.0**45), 4)  # sums past 2^53
        seen_big, _ = _threads_seen(big, lib)
        big.resampled(_draws(rng, 4, n))
        assert seen == [2] and seen_whole == [2, 2] and seen_big == [2]


def test_largest_whole_row():
    assert _largest_whole_row(np.array([[1.0, 2.0], [0.0, 5.0]])) == 5.0
    assert _largest_whole_row(np.array([[1.0, 2.5]])) is None
    assert _largest_whole_row(np.array([[1.0, -1.0]])) is None
    assert _largest_whole_row(np.array([[1.0, np.nan]])) is None
    assert _largest_whole_row(np.array([[1.0, np.inf]])) is None
    assert _largest_whole_row(np.ones((3, 7), dtype=bool)) == 7.0
    assert _largest_whole_row(np.zeros((0, 4))) == 4.0
    # the answer is kept for the very array only: a new array is checked again
    first = np.array([[1.0, 1.0]])
    assert _largest_whole_row(first) == 2.0
    assert _largest_whole_row(np.array([[1.0, 0.5]])) is None
    # and that array is not kept alive by it (a block's multiplicities are reused once let go)
    import weakref

    block = np.ones((2, 3))
    alive = weakref.ref(block)
    assert _largest_whole_row(block) == 3.0 and _largest_whole_row(block) == 3.0
    del block
    assert alive() is None
    assert _largest_whole_row([[1.0, 4.0]]) == 5.0  # not an array: answered, not remembered


def test_whole_max_of_statistics():
    assert bleu_statistic(np.array([[3.0] * 10, [1.0] * 10]), 4)._whole_max == 3.0
    assert mean_statistic(np.array([0.5, 1.0]))._whole_max is None
    assert bleu_statistic(np.array([[np.inf] + [1.0] * 9]), 4)._whole_max is None


def test_blas_check_made_before_the_scoring_pass(monkeypatch):
    """compare checks the resample means' BLAS emulation before scoring (the check's threaded
    calls wake BLAS's threads; the pass's fork shuts them down), once per process and length."""
    import importlib

    from capeval.evaluator import Evaluator

    compare_module = importlib.import_module("capeval.significance.compare")

    events: list[str] = []
    real_check = blas_dot.check_ahead
    real_score = Evaluator.score
    monkeypatch.setattr(blas_dot, "check_ahead", lambda n: (events.append(f"check {n}"), real_check(n))[1])
    monkeypatch.setattr(Evaluator, "score", lambda self, *a, **k: (events.append("score"), real_score(self, *a, **k))[1])
    refs = {str(i): [f"a dog runs in the park {i}", "a dog plays"] for i in range(12)}
    a = {str(i): "a dog runs" for i in range(12)}
    b = {str(i): "a cat sits" for i in range(12)}
    compare_module.compare({"a": a, "b": b}, refs, "cider-d", samples=8)
    assert events[0] == "check 12" and events.count("check 12") == 1 and "score" in events
    events.clear()
    compare_module.compare({"a": a, "b": b}, refs, "bleu-4", samples=8)
    assert not any(e.startswith("check") for e in events)  # no CIDEr-D: no means to check
    events.clear()
    compare_module.compare({"a": a, "b": b}, refs, "cider-d", samples=8, method="ar")
    assert not any(e.startswith("check") for e in events)  # no resampled CIDEr-D means


def test_check_ahead_is_the_check_blas_dot_then_uses():
    lib = _blas()
    with _blas_threads(lib, 2):
        n = 30_011
        blas_dot._CHECKED.pop(n, None)
        blas_dot.check_ahead(n)
        assert blas_dot._CHECKED[n] == {2: True}
        dot = blas_dot.BlasDot(n)
        calls: list[int] = []
        dot._check = lambda threads: calls.append(threads) or True  # must not be called again
        rng = np.random.default_rng(1)
        cs, ss = rng.integers(0, 3, (3, n)).astype(np.float64), rng.random((3, n))
        assert dot.rows(cs, ss) == [float(c @ s.copy()) for c, s in zip(cs, ss)]
        assert calls == []


def test_quiet_blas_keeps_one_thread_and_the_natural_split():
    """Within quiet_blas numpy's BLAS is on one thread; BlasDot still emulates the split of the
    threads numpy's call had outside (the former implementation's means), an item mean's product
    is made on those threads, and both are restored after."""
    lib = _blas()
    rng = np.random.default_rng(11)
    n = 40_460
    cs, ss = rng.integers(0, 4, (5, n)).astype(np.float64), rng.random((5, n)) * 10.0
    with _blas_threads(lib, 2):
        outside = [float(c @ s.copy()) for c, s in zip(cs, ss)]
        means = mean_statistic(rng.random(n))
        seen, _ = _threads_seen(means, lib)
        counts = _draws(rng, 4, n)
        plain = counts @ means.stats
        with blas_threads.quiet_blas():
            assert lib.get_num_threads() == 1 and blas_threads.natural_threads() == 2
            assert blas_dot.BlasDot(n).rows(cs, ss) == outside
            got = means.resampled(counts)
            assert lib.get_num_threads() == 1
            with blas_threads.quiet_blas():  # nested: nothing changes
                assert lib.get_num_threads() == 1 and blas_threads.natural_threads() == 2
        assert lib.get_num_threads() == 2 and blas_threads.natural_threads() == 2
        assert seen == [2]
        assert np.array_equal(got, plain[:, 0] / n)
        with blas_threads.quiet_blas(False):
            assert lib.get_num_threads() == 2


def test_compare_scores_and_resamples_on_one_blas_thread(monkeypatch):
    """compare's text metrics are scored and resampled with numpy's BLAS on one thread (set before
    the scoring pass forks); a metric whose scorer may call BLAS (CLIP-S and the like) keeps it."""
    import importlib

    lib = _blas()
    from capeval.evaluator import Evaluator

    compare_module = importlib.import_module("capeval.significance.compare")
    seen: list[int] = []
    real_score = Evaluator.score
    monkeypatch.setattr(Evaluator, "score",
                        lambda self, *a, **k: (seen.append(lib.get_num_threads()), real_score(self, *a, **k))[1])
    refs = {str(i): [f"a dog runs in the park {i}", "a dog plays"] for i in range(12)}
    a = {str(i): "a dog runs" for i in range(12)}
    b = {str(i): "a cat sits" for i in range(12)}
    with _blas_threads(lib, 2):
        compare_module.compare({"a": a, "b": b}, refs, ["bleu-4", "cider-d", "rouge-l"], samples=8)
        assert seen and set(seen) == {1}
        assert lib.get_num_threads() == 2
        seen.clear()
        compare_module.compare({"a": a, "b": b}, refs, ["bleu-4"], samples=8, method="ar")
        assert set(seen) == {2}


def test_rows_read_in_place_give_the_threaded_calls_doubles_on_fresh_copies():
    """Where the check finds the emulation's doubles the same at other alignments, the rows are
    read where they lie (no copy per row); on rows of arrays at several alignments, each result
    equals numpy's threaded call on a fresh copy (the former implementation's call)."""
    lib = _blas()
    rng = np.random.default_rng(21)
    n, k = 40_460, 6
    with _blas_threads(lib, 2):
        blas_dot._CHECKED.pop(n, None)
        blas_dot._IN_PLACE.pop((n, 2), None)
        dot = blas_dot.BlasDot(n)
        assert dot.checked() == 2
        assert (n, 2) in blas_dot._IN_PLACE
        for shift in (0, 1, 3):
            cs = np.empty(k * n + shift)[shift:].reshape(k, n)
            ss = np.empty(k * n + shift + 1)[shift + 1:].reshape(k, n)
            cs[...] = rng.integers(0, 4, (k, n))
            ss[...] = rng.random((k, n)) * rng.choice([1e-3, 1.0, 10.0], (k, n))
            assert dot.rows(cs, ss) == [float(c @ s.copy()) for c, s in zip(cs, ss)]
