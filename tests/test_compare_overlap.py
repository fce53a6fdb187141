"""capeval compare's set-up work done beside other work, with the same numbers (issue 47 item 2).

- ``map_tasks(meanwhile=...)``: run once in the parent after the workers are forked and before
  the first result is awaited; an error in it ends the pool (no worker is left).
- CIDEr-D's index of the references by the items holding each n-gram is built from the first
  system's corpus pass (``ReferenceSets``) while its scoring workers run, once; without that
  (the first system's chunks keep the pairs) ``CiderResampling.prepare`` builds it while the next
  system's scoring workers run; either way the comparison still equals the former implementation
  (``benchmarks/_compare_before.py``) bit for bit.
- The per-chunk groups of the resampling are built on several threads (the squares table's rows
  added from them one at a time): item scores still equal the definition (``cider_table_scores``
  on the whole table with the resample's df) bit for bit.
- The compiled kernels' norms buffer is not cleared between blocks: handed NaN-filled buffers,
  the comparison still equals the former implementation (every norm read is written first).
- A block's multiplicities are transposed for the df kernel on the thread that draws the block,
  and a sub-block's scores are reduced while the next sub-block's df is summed: the same numbers.
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

import numpy as np
import pytest

from capeval.metrics import workers
from capeval.significance import cider_groups, cider_resample, cider_squares
from capeval.significance.compare import compare

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import _compare_before as before  # noqa: E402
from test_compare_fast import _assert_definition, _assert_same, _quiet, _random_set  # noqa: E402


@pytest.mark.parametrize("n_workers", [1, 2])
def test_meanwhile_runs_once_before_the_first_result(n_workers):
    seen: list[tuple[int, int]] = []
    got: list[int] = []

    def meanwhile() -> None:
        seen.append((len(got), len(multiprocessing.active_children())))

    for out in workers.map_tasks(abs, range(-20, 0), n_workers, recycle=3, meanwhile=meanwhile):
        got.append(out)
    assert got == [abs(x) for x in range(-20, 0)]
    assert len(seen) == 1 and seen[0][0] == 0
    # with workers, they are forked (and working) when it runs
    assert (seen[0][1] > 0) == (n_workers > 1)


def test_an_error_meanwhile_ends_the_pool():
    def meanwhile() -> None:
        raise RuntimeError("meanwhile failed")

    with pytest.raises(RuntimeError, match="meanwhile failed"):
        list(workers.map_tasks(abs, range(200), 2, meanwhile=meanwhile))
    assert multiprocessing.active_children() == []


def _marking_passes(monkeypatch, passes: list[int]) -> None:
    """map_tasks whose meanwhile, while it runs, leaves its pass's number of workers in ``passes``."""
    real_map = workers.map_tasks

    def map_tasks(job, tasks, n_workers, recycle=None, meanwhile=None):
        def marked():
            passes.append(n_workers)
            try:
                meanwhile()
            finally:
                passes.pop()
        return real_map(job, tasks, n_workers, recycle, None if meanwhile is None else marked)

    monkeypatch.setattr(workers, "map_tasks", map_tasks)


class _ThreeSystems:
    """compare of three systems of 128 random items on two workers (chunks of 16, 40
    resamples), whose output ``assert_same_as_before`` checks against the former implementation."""

    def __init__(self, seed: int):
        systems, refs = _random_set(128, seed)
        self.systems, self.refs = {k: systems[k] for k in "ABD"}, refs
        self.opts = {"cider-d": {"workers": 2, "chunk_size": 16}}
        self.new = _quiet(compare, self.systems, self.refs, "cider-d", samples=40, options=self.opts)

    def assert_same_as_before(self) -> None:
        old = _quiet(before.compare, self.systems, self.refs, "cider-d", samples=40, options=self.opts)
        _assert_same(old, self.new)


def test_reference_sets_built_while_the_first_system_is_scored(monkeypatch):
    from capeval.significance import reference_sets

    runs: list[tuple[bool, int | None, int]] = []
    passes: list[int] = []
    real = reference_sets.ReferenceSets.get

    def get(self):
        runs.append((self._index is None, passes[-1] if passes else None, len(multiprocessing.active_children())))
        return real(self)

    monkeypatch.setattr(reference_sets.ReferenceSets, "get", get)
    _marking_passes(monkeypatch, passes)
    run = _ThreeSystems(seed=48)
    built = [(in_pass, alive) for fresh, in_pass, alive in runs if fresh]
    # built once, by the first system's scoring pass once its workers were started (one worker
    # where this process may not fork: another thread runs, as under pytest-xdist); later calls
    # (the resampling's prepare) find it built
    assert len(built) == 1 and len(runs) >= 2
    in_pass, alive = built[0]
    assert in_pass is not None
    assert (alive > 0) == (in_pass > 1)
    monkeypatch.undo()
    run.assert_same_as_before()


def test_resampling_index_built_while_the_next_system_is_scored(monkeypatch):
    from capeval.significance import keep

    runs: list[tuple[bool, int | None, int]] = []
    passes: list[int] = []  # the workers of the pass whose meanwhile is running, else empty
    real = cider_resample.CiderResampling.prepare
    # the former path: no index from the corpus pass, each later system scored in its own pass
    monkeypatch.setattr(keep, "wants_reference_sets", lambda: False)
    monkeypatch.setattr(keep, "score_ahead", lambda candidates: None)

    def prepare(self):
        runs.append((self._pending is not None, passes[-1] if passes else None,
                     len(multiprocessing.active_children())))
        real(self)

    monkeypatch.setattr(cider_resample.CiderResampling, "prepare", prepare)
    _marking_passes(monkeypatch, passes)
    run = _ThreeSystems(seed=46)
    indexed = [(in_pass, alive) for pending, in_pass, alive in runs if pending]
    # built once, by a later pass once its workers were started (one worker where this process
    # may not fork: another thread runs, as under pytest-xdist); later calls find it built
    assert len(indexed) == 1
    in_pass, alive = indexed[0]
    assert in_pass is not None
    assert (alive > 0) == (in_pass > 1)
    monkeypatch.undo()
    run.assert_same_as_before()


def test_resampling_built_at_once_outside_a_comparison():
    from capeval.significance.compare import _statistics

    systems, refs = _random_set(30, 47)
    stats, _ = _quiet(_statistics, "A", systems["A"], refs, ["cider-d"], None)
    shared = stats["cider-d"].shared
    assert shared._pending is None and shared.n_sets > 0  # no sharing block: nothing waits


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
def test_groups_built_on_threads_equal_the_definition(monkeypatch, kernel):
    from capeval.significance.compare import _statistics

    if kernel == "numba":
        pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0 if kernel == "numba" else 1 << 62)
    monkeypatch.setattr(cider_resample, "_threads", lambda: 4)
    from capeval.significance import cider_aot

    monkeypatch.setattr(cider_aot, "THREADS_MIN_WORK", 0)
    # every count gets a row of the squares table: rows are added from several groups' threads
    monkeypatch.setattr(cider_squares, "_ROW_FACTOR", 0.0)
    used: list[int] = []
    real_threads = cider_groups._in_threads

    def spy(threads, calls, pool=None):
        used.append(threads)
        return real_threads(threads, calls, pool)

    monkeypatch.setattr(cider_groups, "_in_threads", spy)
    systems, refs = _random_set(90, 48)
    cands = systems["B"]
    stats, _ = _quiet(_statistics, "B", cands, refs, ["cider-d"], {"cider-d": {"chunk_size": 5}})
    rng = np.random.default_rng(5)
    counts = np.stack([np.bincount(rng.choice(90, 90), minlength=90) for _ in range(9)]).astype(np.float64)
    got = stats["cider-d"].item_scores(counts)
    assert used == [4]  # the 18 groups on 4 threads
    assert len(stats["cider-d"].shared.table) > 2  # rows of several counts
    _assert_definition(got, counts, cands, refs)


@pytest.mark.parametrize("n, seed", [(3, 50), (40, 51), (90, 52)])
def test_every_norm_read_is_written(monkeypatch, n, seed):
    """The compiled kernels' norms buffer is not cleared between blocks: every (sentence, order)
    a similarity divides by is written by norms_block first. Handed NaN-filled buffers (a norm
    read before it is written would make a score NaN), the comparison still equals the former
    implementation bit for bit, with short sentences (orders without n-grams), empty candidates
    and candidates sharing nothing with their references."""
    pytest.importorskip("numba")
    from capeval.significance.buffers import Buffers

    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    real_get = Buffers.get
    poisoned: list[str] = []

    def get(self, name, shape, dtype=np.float64):
        out = real_get(self, name, shape, dtype)
        if name == "norms":
            out.fill(np.nan)
            poisoned.append(name)
        return out

    monkeypatch.setattr(Buffers, "get", get)
    systems, refs = _random_set(n, seed)
    opts = {"cider-d": {"chunk_size": 16}}
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=seed, options=opts)
    assert poisoned
    monkeypatch.setattr(Buffers, "get", real_get)
    _assert_same(_quiet(before.compare, systems, refs, "cider-d", samples=70, seed=seed, options=opts), new)


def test_counts_transposed_on_the_drawing_thread_and_used(monkeypatch):
    """With the next block drawn ahead, CIDEr-D's transposed multiplicities (the df kernel's
    input) are made on the drawing thread and taken by the block they belong to (none is made
    again on the scoring thread), and the comparison equals the former implementation bit for bit."""
    pytest.importorskip("numba")
    import threading

    from capeval.significance import paired

    monkeypatch.setattr(paired, "_DRAW_AHEAD_ITEMS", 0)
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    made: list[str] = []
    real = cider_resample.CiderResampling.transposed_counts

    def spy(self, counts):
        made.append(threading.current_thread().name)
        return real(self, counts)

    monkeypatch.setattr(cider_resample.CiderResampling, "transposed_counts", spy)
    systems, refs = _random_set(40, 70)
    samples = 200  # four blocks of draws
    new = _quiet(compare, systems, refs, "cider-d", samples=samples, seed=70)
    assert len(made) == 4 and all(name.startswith("capeval-draws") for name in made)
    _assert_same(_quiet(before.compare, systems, refs, "cider-d", samples=samples, seed=70), new)


@pytest.mark.parametrize("sub_block", [1, 5, 64])
def test_reductions_beside_the_next_df_equal_the_former_implementation(monkeypatch, sub_block):
    """A sub-block's scores are reduced (the resample means) while the next sub-block's df is
    summed, before the item kernels overwrite them: with sub-blocks of 1, 5 and 64 resamples (and
    blocks of draws of 64) the comparison equals the former implementation bit for bit."""
    pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    real_prepare = cider_resample.CiderResampling.prepare

    def prepare(self):
        real_prepare(self)
        self.sub_block = sub_block

    monkeypatch.setattr(cider_resample.CiderResampling, "prepare", prepare)
    systems, refs = _random_set(30, 71)
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=71)
    _assert_same(_quiet(before.compare, systems, refs, "cider-d", samples=70, seed=71), new)


def test_a_blocks_last_means_are_taken_beside_the_next_blocks_df(monkeypatch):
    """The means of a block's resamples (a dot product per resample and system) are taken once
    the next block's df kernel is started, not before it (the last block's at the end), and
    the comparison equals the former implementation bit for bit."""
    pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    events: list[str] = []
    real_df, real_means = cider_resample.CiderResampling._df_start, cider_resample.CiderResampling._means
    monkeypatch.setattr(cider_resample.CiderResampling, "_df_start",
                        lambda self, *a: events.append("df") or real_df(self, *a))
    monkeypatch.setattr(cider_resample.CiderResampling, "_means",
                        lambda self, *a: events.append("mean") or real_means(self, *a))
    systems, refs = _random_set(40, 72)
    two = {"A": systems["A"], "B": systems["B"]}
    new = _quiet(compare, two, refs, "cider-d", samples=200, seed=72)  # four blocks of draws
    assert events == ["df", "df", "mean", "mean", "df", "mean", "mean", "df", "mean", "mean", "mean", "mean"]
    _assert_same(_quiet(before.compare, two, refs, "cider-d", samples=200, seed=72), new)


def test_counts_transposed_ahead_serve_the_unfused_path_too(monkeypatch):
    """With 9 orders (numpy's mean over them is pairwise, so the compiled kernels hand numpy the
    sums) the block's transposed multiplicities made on the drawing thread are used as well, and
    the comparison equals the numpy kernels' bit for bit."""
    pytest.importorskip("numba")
    from capeval.significance import paired

    monkeypatch.setattr(paired, "_DRAW_AHEAD_ITEMS", 0)
    systems, refs = _random_set(40, 73)
    opts = {"cider-d": {"n": 9}}
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 1 << 62)
    numpy_path = _quiet(compare, systems, refs, "cider-d", samples=200, seed=73, options=opts)
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    made = []
    real = cider_resample.CiderResampling.transposed_counts
    monkeypatch.setattr(cider_resample.CiderResampling, "transposed_counts",
                        lambda self, counts: made.append(len(counts)) or real(self, counts))
    compiled = _quiet(compare, systems, refs, "cider-d", samples=200, seed=73, options=opts)
    assert made == [64, 64, 64, 8]  # once per block, on the drawing thread
    _assert_same(numpy_path, compiled)


def test_pool_pipes_widened():
    """The forked pools' task and result pipes hold up to a megabyte (Linux's F_SETPIPE_SZ, capped
    by /proc/sys/fs/pipe-max-size) so that a worker's chunk of statistics is not written 64 KiB at
    a time while the parent's reader waits for the interpreter lock; elsewhere they are left alone."""
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("no F_GETPIPE_SZ here")
    try:
        with open("/proc/sys/fs/pipe-max-size", encoding="ascii") as fh:
            cap = int(fh.read())
    except OSError:
        pytest.skip("no /proc/sys/fs/pipe-max-size")
    with workers.forked_pool(2) as pool:
        sizes = [fcntl.fcntl(q._reader.fileno(), fcntl.F_GETPIPE_SZ) for q in (pool._outqueue, pool._inqueue)]
        assert pool.map(abs, range(-5, 0)) == [5, 4, 3, 2, 1]
    assert sizes == [min(workers._PIPE_BYTES, cap)] * 2
