"""CIDEr-D's resampling kernels built ahead of time (``capeval.significance.cider_aot``, issue 47
item 2): the built module gives the former implementation's p-values, means and intervals bit
for bit (``benchmarks/_compare_before.py``, a full rescoring per resample), loads without numba,
releases the GIL (large jobs run it on threads), is built per CPU, is never imported when it is
not the file built here, and hands arguments of other layouts to numba's JIT."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import capeval
from capeval.significance import cider_aot, cider_resample, cider_squares
from capeval.significance.compare import compare

from _reference import require_module, unavailable
from test_compare_fast import _assert_same, _former_cider, _quiet, _random_set


class _Counting:
    """The built module, counting calls per kernel (the proof that it, not the JIT, ran)."""

    def __init__(self, module):
        self.module, self.calls = module, {}

    def __getattr__(self, name):
        fn = getattr(self.module, name)

        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*args)

        return call


@pytest.fixture(scope="module")
def built() -> cider_aot.Kernels:
    """The module built into the session's cache (as a job's first large compare builds it)."""
    require_module("numba", "numba.pycc builds the kernels (the fast extra)")
    if not (shutil.which("cc") or shutil.which("gcc")):
        unavailable("no C compiler: numba.pycc cannot build the kernels ahead of time")
    if cider_aot.check()[0] != "ok":
        assert cider_aot.start_build(), cider_aot.failure()
        cider_aot.finish_build()
    cider_aot._loaded.clear()
    kernels = cider_aot.load()
    assert kernels is not None, (cider_aot.check(), cider_aot.failure())
    return kernels


@pytest.fixture
def counting(built, monkeypatch) -> _Counting:
    """Jobs of this test use the built module (whatever their size), through a counter."""
    spy = _Counting(built._module)
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    monkeypatch.setattr(cider_resample, "_built_kernels", lambda work: cider_aot.Kernels(spy))
    return spy


@pytest.mark.parametrize("narrow", [True, False], ids=["df-uint16", "df-int32"])
@pytest.mark.parametrize("n, seed, rare", [(1, 10, False), (5, 11, True), (64, 12, False), (160, 13, True)])
def test_built_kernels_equal_the_former_rescoring(counting, monkeypatch, n, seed, rare, narrow):
    """Random systems (identical captions, empty candidates: zero norms, words in no reference,
    repeated words), squares from the tables or per block, against the former implementation;
    the df as uint16 (up to 65,535 items) and as int32 (above: forced here)."""
    if rare:
        monkeypatch.setattr(cider_squares, "_ROW_FACTOR", float("inf"))
    if not narrow:
        monkeypatch.setattr(cider_resample, "_NARROW_DF_ITEMS", 0)
    systems, refs = _random_set(n, seed)
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=seed)
    _assert_same(_former_cider(n, seed, 70), new)
    # every kernel of that df type ran, on a full block and on the last; the df kernel on bytes
    # (no multiplicity above 255 in these draws)
    df = np.dtype(np.uint16 if narrow else np.int32)

    def expected(name: str, specs: tuple) -> bool:
        base = cider_aot.VARIANT_OF[name][0]
        if base == "df_block":
            return specs[0][0] == np.uint8 and specs[5][0] == df
        return base in ("norms_block", "items_block") or specs[0][0] == df

    want = [name for name, (_, specs) in cider_aot.KERNELS.items() if expected(name, specs)]
    assert len(want) == 10 and all(counting.calls.get(name) for name in want), (want, counting.calls)
    assert not any(counting.calls.get(name) for name in set(cider_aot.KERNELS) - set(want)), counting.calls


def test_built_kernels_on_chunks_equal_the_former_rescoring(counting):
    """Chunks of 7 items: each chunk's item sums are written into its own rows of the block, a
    contiguous part of it (the built ``items_block``'s layout)."""
    systems, refs = _random_set(64, 12)
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=12,
                 options={"cider-d": {"chunk_size": 7}})
    _assert_same(_former_cider(64, 12, 70), new)
    assert counting.calls["items_block"] >= 2 * 10


def test_other_layouts_go_to_the_jit(built):
    """A strided ``out`` or int64 counts are not the built signature's: numba's JIT computes them
    (a pycc function would read the memory as declared)."""
    ct = np.arange(12, dtype=np.int32).reshape(3, 4)
    items, ptr = np.array([0, 2, 1], dtype=np.int64), np.array([0, 2, 3], dtype=np.int64)
    want = np.array([[8, 10, 12, 14], [4, 5, 6, 7]], dtype=np.int32)
    out = np.zeros((2, 4), dtype=np.int32)
    built.df_block(ct, items, ptr, 0, 2, out, np.zeros(0), np.zeros((0, 4)))
    assert (out == want).all()
    wide = np.zeros((2, 8), dtype=np.int32)
    built.df_block(ct, items, ptr, 0, 2, wide[:, ::2], np.zeros(0), np.zeros((0, 4)))
    assert (wide[:, ::2] == want).all() and not wide[:, 1::2].any()
    assert not cider_aot._fits(ct.astype(np.int64), cider_aot.KERNELS["df_block"][1][0])
    assert not cider_aot._fits(True, None) and cider_aot._fits(3, None)


def test_the_built_module_loads_without_numba(built):
    code = ("import sys\nfrom capeval.significance import cider_aot\nassert cider_aot.load() is not None\n"
            "assert not {'numba', 'llvmlite'} & set(sys.modules), 'numba imported'\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_changed_or_unrecorded_module_is_never_imported(built, tmp_path):
    where = tmp_path / "kernels"
    where.mkdir(mode=0o755)
    path = cider_aot.built_path(where)
    shutil.copy(cider_aot.built_path(), path)
    assert cider_aot.check(where) == ("bad", "its sha256 is not the one recorded when it was built")
    record = cider_aot._side(where, ".sha256")
    shutil.copy(cider_aot._side(None, ".sha256"), record)
    assert cider_aot.check(where) == ("ok", None)
    with open(path, "r+b") as f:  # one byte changed after the record was written
        f.seek(4096)
        byte = f.read(1)
        f.seek(4096)
        f.write(bytes([byte[0] ^ 1]))
    assert cider_aot.check(where)[0] == "bad" and cider_aot.load(where) is None
    os.chmod(where, 0o777)
    assert cider_aot.check(where)[0] == "unsafe"
    os.chmod(where, 0o755)
    assert cider_aot.check(tmp_path / "none") == ("missing", None)


def test_a_failed_build_is_kept_and_not_tried_again(monkeypatch, tmp_path):
    """A build that fails (no C compiler, say) leaves its reason in ``<name>.failed``; later jobs
    use numba's JIT without starting another build."""
    from capeval.significance import cider_arrays

    where = tmp_path / "kernels"
    monkeypatch.setattr(cider_aot, "folder", lambda: where)
    monkeypatch.setattr(cider_arrays, "numba_available", lambda: True)
    monkeypatch.setattr(cider_aot, "_CHILD", "import sys\nprint('RuntimeError: no C compiler', file=sys.stderr)\n"
                                             "sys.exit(1)")
    assert cider_aot.start_build()
    cider_aot.finish_build()
    assert cider_aot.failure(where) == "RuntimeError: no C compiler"
    assert not cider_aot.start_build() and cider_aot.check(where) == ("missing", None)
    monkeypatch.setattr(cider_aot, "_loaded", [])
    assert cider_resample._built_kernels(10**6) is None and not cider_aot._child


def test_fused_scores_follow_this_numpys_mean_over_the_orders():
    """The compiled items kernel ends each item with its score only where numpy's mean over the
    orders is the sum from the first order on: true for CIDEr-D's 4 orders (so the fused path is
    the one the other tests exercise), false from 8 values on, where numpy sums pairwise and the
    kernel hands numpy the sums (test_compare_fast's 9-order case checks that path)."""
    from capeval.significance.cider_resample import orders_mean_is_sequential

    assert all(orders_mean_is_sequential(n) for n in range(1, 5))
    assert not orders_mean_is_sequential(9)


def test_df_kernel_on_int32_rows_and_on_bytes(built):
    """The df kernel takes int32 multiplicities (df_block) and bytes (df_block8), into an int32 or
    a uint16 df (``_16``), all to the numpy sums, with each set's count-1 squares."""
    spy = _Counting(built._module)
    kernels = cider_aot.Kernels(spy)
    assert kernels.takes_bytes
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 4, (50, 8))
    items = np.array([0, 3, 7, 9, 2, 5, 49], dtype=np.int64)
    ptr = np.array([0, 3, 4, 7], dtype=np.int64)
    squares = rng.random(50 * 3 + 1)
    want = np.stack([counts[items[a:b]].sum(axis=0) for a, b in zip(ptr[:-1], ptr[1:])]).astype(np.int32)
    for dtype, df, name in ((np.int32, np.int32, "df_block"), (np.uint8, np.int32, "df_block8"),
                            (np.int32, np.uint16, "df_block_16"), (np.uint8, np.uint16, "df_block8_16")):
        out = np.zeros((3, 8), dtype=df)
        ones = np.zeros((3, 8))
        kernels.df_block(counts.astype(dtype), items, ptr, 0, 3, out, squares, ones)
        assert np.array_equal(out, want) and np.array_equal(ones, squares[want])
        assert spy.calls.get(name) == 1, spy.calls
    # uint16 sums up to its largest value (a set's df never exceeds the items drawn, N <= 65,535)
    big = np.full((2, 64), 255, dtype=np.uint8)
    out = np.zeros((1, 64), dtype=np.uint16)
    kernels.df_block(big, np.array([0, 1], dtype=np.int64), np.array([0, 2], dtype=np.int64), 0, 1, out,
                     np.zeros(0), np.zeros((0, 64)))
    assert (out == 510).all() and spy.calls.get("df_block64_16", 0) == 0  # 0 lanes asked: any-lanes build


def test_the_built_module_releases_the_gil_and_large_jobs_use_threads(built, monkeypatch):
    """The module calls PyEval_SaveThread (built with numba's release_gil flag), so a job of at
    least THREADS_MIN_WORK items x resamples runs it on the scorers' threads and a smaller one on
    one; a module that would hold the GIL is not loaded."""
    from capeval.significance.cider_arrays import _threads

    assert cider_aot.releases_gil(cider_aot.built_path())
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    monkeypatch.setattr(cider_resample, "_built_kernels", lambda work: built)
    systems, refs = _random_set(20, 3)
    from capeval.significance.keep import keeping

    with keeping() as kept:
        capeval.score(systems["A"], refs, "cider-d")
    chunks = kept["cider-d"]
    monkeypatch.setattr(cider_aot, "THREADS_MIN_WORK", 20 * 1000)
    assert cider_resample.CiderResampling(20, chunks, samples_hint=1000).threads == _threads()
    assert cider_resample.CiderResampling(20, chunks, samples_hint=999).threads == 1
    monkeypatch.setattr(cider_aot, "releases_gil", lambda path: False)
    monkeypatch.setattr(cider_aot, "_loaded", [])
    assert cider_aot.load() is None


def test_the_module_is_named_for_this_cpu(monkeypatch):
    """A cache folder shared between machines holds one module per CPU: the name changes with
    the CPU read from /proc/cpuinfo (a generic build where it cannot be read)."""
    real = cider_aot.module_name()
    try:
        for cpu in ("vendor_id : Other\nflags : fpu sse2", None):
            cider_aot.module_name.cache_clear()
            monkeypatch.setattr(cider_aot, "host_cpu", lambda cpu=cpu: cpu)
            assert cider_aot.module_name() != real
    finally:
        monkeypatch.undo()
        cider_aot.module_name.cache_clear()
    assert cider_aot.module_name() == real
    if os.path.exists("/proc/cpuinfo") and "flags" in open("/proc/cpuinfo").read(1 << 16):
        assert cider_aot.host_cpu() and "flags" in cider_aot.host_cpu()


def test_the_df_is_uint16_up_to_65535_items(built, monkeypatch):
    """A resample draws N items, so no set's df exceeds N: the compiled kernels sum it as uint16
    up to N = 65,535 (no sum can wrap), int32 above; numpy's kernel always int32."""
    from capeval.significance.keep import keeping

    monkeypatch.setattr(cider_resample, "_built_kernels", lambda work: built)
    systems, refs = _random_set(20, 3)
    with keeping() as kept:
        capeval.score(systems["A"], refs, "cider-d")
    chunks = kept["cider-d"]
    assert cider_resample._NARROW_DF_ITEMS == np.iinfo(np.uint16).max
    assert cider_resample.CiderResampling(20, chunks, jit=True).df_dtype is np.uint16
    assert cider_resample.CiderResampling(20, chunks, jit=False).df_dtype is np.int32
    monkeypatch.setattr(cider_resample, "_NARROW_DF_ITEMS", 20)
    assert cider_resample.CiderResampling(20, chunks, jit=True).df_dtype is np.uint16
    monkeypatch.setattr(cider_resample, "_NARROW_DF_ITEMS", 19)
    assert cider_resample.CiderResampling(20, chunks, jit=True).df_dtype is np.int32
