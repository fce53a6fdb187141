"""The blocks' multiplicities of the paired bootstrap are written into reused arrays (issue 47
item 2: a fresh array per block had its pages zeroed by the kernel, 0.17 s of CPU per 1,000
resamples at 40,000 items). An array is reused only once nothing else refers to it, a view
included: a statistic that keeps every block it is given still sees each block's own draws,
equal to sacreBLEU's single ``rng.choice(n, size=(samples, n))`` draw counted row by row."""

from __future__ import annotations

import numpy as np
import pytest

from capeval.significance import paired
from capeval.significance.paired import _CountsArrays, bootstrap_scores


def test_an_array_is_reused_only_when_nothing_refers_to_it():
    arrays = _CountsArrays(10)
    a, b = arrays.get(64), arrays.get(64)
    first = id(a.base)
    assert a.base is not b.base and a.shape == (64, 10)
    del a
    c = arrays.get(3)
    assert id(c.base) == first and c.shape == (3, 10)
    view = c[1:2]
    del c
    d = arrays.get(64)
    assert id(d.base) != first  # the view still refers to it
    del view
    assert id(arrays.get(64).base) == first


def test_at_most_a_few_arrays_are_kept():
    arrays = _CountsArrays(4)
    held = [arrays.get(64) for _ in range(paired._KEPT_ARRAYS + 3)]
    assert len(arrays._arrays) == paired._KEPT_ARRAYS
    assert len({id(h.base) for h in held}) == len(held)  # every held block its own array


class _Keeper:
    """A statistic that keeps every block of multiplicities it is given (as a view)."""

    def __init__(self, n: int, keep: bool):
        self.n = n
        self.keep = keep
        self.seen: list[np.ndarray] = []
        self.copies: list[np.ndarray] = []

    def score(self) -> float:
        return 0.0

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        if self.keep:
            self.seen.append(counts[:, :])
        self.copies.append(counts.copy())
        return counts[:, 0].copy()


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("n, samples", [(7, 200), (6_000, 300)])
def test_every_block_holds_its_own_draws(monkeypatch, keep, n, samples):
    """Blocks kept by a statistic are never overwritten by later blocks, and every block is the
    one a single draw of all the resamples gives (drawn ahead on a second thread from 5,000 items)."""
    monkeypatch.setattr(paired, "_DRAW_AHEAD_ITEMS", 5000)
    stat = _Keeper(n, keep)
    out = bootstrap_scores([stat], samples=samples, seed=3)
    idx = np.random.default_rng(3).choice(n, size=(samples, n), replace=True)
    expected = paired._counts(idx, n)
    got = np.concatenate(stat.copies)
    assert np.array_equal(got, expected)
    assert np.array_equal(out[0], expected[:, 0])
    if keep:
        assert np.array_equal(np.concatenate(stat.seen), expected)  # still intact at the end


class _Hooks:
    """A statistic recording the bootstrap's calls of its optional hooks."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n = n
        self.calls: list[str] = []
        self.fail_at = fail_at
        self.blocks = 0

    def score(self) -> float:
        return 0.0

    def start_resamples(self) -> None:
        self.calls.append("start")

    def end_resamples(self) -> None:
        self.calls.append("end")

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        self.blocks += 1
        self.calls.append("block")
        if self.fail_at is not None and self.blocks == self.fail_at:
            raise RuntimeError("boom")
        return counts[:, 0].copy()


def test_end_resamples_is_called_after_the_last_block_and_on_an_error():
    ok = _Hooks(5)
    bootstrap_scores([ok], samples=130, seed=1)
    assert ok.calls == ["start", "block", "block", "block", "end"]
    bad = _Hooks(5, fail_at=2)
    with pytest.raises(RuntimeError, match="boom"):
        bootstrap_scores([bad], samples=130, seed=1)
    assert bad.calls == ["start", "block", "block", "end"]


def test_cider_kernel_threads_live_only_during_the_bootstrap(monkeypatch):
    """The kernels' threads are started once for the bootstrap (not per call) and stopped at its
    end: a later scoring pass forks its workers only from a process of one thread."""
    import threading

    from capeval.significance import cider_resample
    from capeval.significance.compare import compare

    pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    opened: list[object] = []
    real_open = cider_resample.CiderResampling.open_threads

    def spy(self):
        self.threads = 2  # threads even on a one-core machine
        real_open(self)
        opened.append(self.pool)

    monkeypatch.setattr(cider_resample.CiderResampling, "open_threads", spy)
    started: list[int] = []
    real_start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (started.append(1), real_start(self))[1])
    rng = np.random.default_rng(4)
    words = "a man dog runs sits on the grass red ball".split()
    caption = lambda: " ".join(rng.choice(words, size=int(rng.integers(2, 8))))  # noqa: E731
    refs = {str(i): [caption() for _ in range(3)] for i in range(80)}
    systems = {name: {i: caption() for i in refs} for name in ("a", "b")}
    before = threading.active_count()
    compare(systems, refs, "cider-d", samples=200, seed=2)
    assert opened and all(p is opened[0] for p in opened) and opened[0] is not None  # one pool for both systems
    assert opened[0]._shutdown  # stopped
    assert threading.active_count() == before
    assert len(started) <= 2 + 1 + 1  # the pool's two threads, the draw-ahead thread, a spare


def test_first_block_arrays_written_ahead_are_the_ones_the_kernels_use(monkeypatch):
    """The df, count-1 squares and score arrays are written once on the drawing thread before
    the first block (their new pages off the df kernel's threads); the blocks then use those
    very arrays, and the results equal the former implementation's (test_compare_fast)."""
    import threading

    from capeval.significance import cider_resample
    from capeval.significance.compare import compare

    pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    warmed: list[tuple[str, dict[str, int]]] = []
    real_warm = cider_resample.CiderResampling._warm

    def spy(self, k):
        real_warm(self, k)
        arrays = {**self._df_out._arrays, **self._scores._arrays}
        warmed.append((threading.current_thread().name, {name: id(a) for name, a in arrays.items()}))
        self._spied = arrays

    monkeypatch.setattr(cider_resample.CiderResampling, "_warm", spy)
    used: list[dict[str, int]] = []
    real_all = cider_resample.CiderResampling._all

    def all_spy(self, *a, **k):
        out = real_all(self, *a, **k)
        used.append({name: id(x) for name, x in {**self._df_out._arrays, **self._scores._arrays}.items()})
        return out

    monkeypatch.setattr(cider_resample.CiderResampling, "_all", all_spy)
    monkeypatch.setattr(paired, "_DRAW_AHEAD_ITEMS", 0)
    rng = np.random.default_rng(8)
    words = "a man dog runs sits on the grass red ball".split()
    caption = lambda: " ".join(rng.choice(words, size=int(rng.integers(1, 8))))  # noqa: E731
    refs = {str(i): [caption() for _ in range(3)] for i in range(60)}
    systems = {name: {i: caption() for i in refs} for name in ("a", "b")}
    compare(systems, refs, "cider-d", samples=200, seed=5)
    assert len(warmed) == 1 and warmed[0][0].startswith("capeval-draws")
    assert set(warmed[0][1]) == {"df", "ones", "scores0", "scores1"}
    assert used and all(u == warmed[0][1] for u in used)


def test_squares_rows_planned_from_every_groups_counts():
    """A count with few entries in each group but many over all of them gets a row of the
    squares table before the groups are built (not squared per group and block); its row holds
    Python's pow of ``t * w`` at every df, as the per-block squares would."""
    from capeval.significance.cider_arrays import _squares, _weights
    from capeval.significance.cider_squares import SquaresTable

    n, samples = 1000, 1000
    table = SquaresTable(n, _weights(n), samples)
    per_group = np.array([0, 50, 3, 1])  # one group: count 1 has 50 entries, 2 has 3, 3 has 1
    assert table.rows_for(np.repeat(np.arange(4), per_group)).tolist() == [0] * 50 + [1] * 3 + [-1]
    # count 1 always has a row, 2 too (3 entries x 1,000 resamples >= a row's 1,001 squares), not 3
    assert table._rows == {1: 0, 2: 1}
    fresh = SquaresTable(n, _weights(n), samples)
    fresh.plan(np.array([0, 500, 0, 0, 0, 0, 40]))  # count 6: 40 entries over all groups
    assert fresh._rows == {1: 0, 6: 1}
    rows = fresh.rows_for(np.array([6, 1, 6, 5]))
    assert rows.tolist() == [1, 0, 1, -1]  # count 5: one entry, 1,000 squares < a row's 1,001: rare
    assert np.array_equal(fresh.table[1], _squares(6.0 * _weights(n)))


def test_few_entries_of_a_count_stay_rare():
    from capeval.significance.cider_arrays import _weights
    from capeval.significance.cider_squares import SquaresTable

    table = SquaresTable(1000, _weights(1000), 1000)
    table.plan(np.array([0, 10, 0, 0, 0, 0, 0, 1]))  # count 7: one entry, 1,000 squares < a row's 1,001
    assert table._rows == {1: 0}
    assert table.rows_for(np.array([7, 1])).tolist() == [-1, 0]


def test_group_index_helpers_equal_the_numpy_calls_they_replace():
    """_starts_of is np.searchsorted(values, arange(n + 1)) of sorted values in [0, n);
    _first_use_order the stable argsort of distinct first positions (and n for the unused)."""
    from capeval.significance.cider_items import _first_use_order, _starts_of

    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 300):
        for size in (0, 1, 5, 2000):
            values = np.sort(rng.integers(0, n, size))
            assert np.array_equal(_starts_of(values, n), np.searchsorted(values, np.arange(n + 1)))
    assert _starts_of(np.zeros(0, dtype=np.int64), 0).tolist() == [0]
    for n_take in (1, 5, 50, 500):
        for n_sets in (1, 3, 40):
            positions = rng.permutation(n_take)[:min(n_sets, n_take)]
            first_use = np.full(n_sets, n_take, dtype=np.int64)
            used = rng.random(n_sets) < 0.8
            first_use[used] = positions[:used.sum()] if used.sum() <= len(positions) else first_use[used]
            assert np.array_equal(_first_use_order(first_use, n_take), np.argsort(first_use, kind="stable"))
