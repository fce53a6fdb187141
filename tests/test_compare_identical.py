"""CIDEr-D resampling copies the scores of items whose candidate is the baseline's (issue 47 item 2).

Comparing two checkpoints, many items get the very same caption from both. Such an item has the
same entries and the same references in both systems, so the same score on every resample: the
later system's score is copied from the first system's instead of being computed
(``cider_items._different_candidates``). Checked here, with the compiled kernels and with numpy:

- comparisons where a system shares half its captions with the baseline, all of them, or those
  of another system that shares some with the baseline equal the former implementation
  (``benchmarks/_compare_before.py``, a full rescoring per resample) bit for bit, and the copies
  were made (so the path is exercised);
- with 9 orders (the unfused path, where the kernels hand numpy the per-order sums) the result
  equals the one computed without copies;
- a copy taken for an item whose candidate differs makes the comparison differ (the test can
  fail), and below the threshold no copy is made.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from capeval.significance import cider_groups, cider_items, cider_resample
from capeval.significance.compare import compare

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import _compare_before as before  # noqa: E402
from test_compare_fast import _assert_same, _kernels, _quiet, _random_set, _spy_groups  # noqa: E402


def _with_copies(n: int, seed: int) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """A (the baseline) and B random; H: A's caption for every other item, B's otherwise; S: A's
    for all; T: H's for the first half, B's after (some of A's captions through H's)."""
    systems, refs = _random_set(n, seed)
    a, b = systems["A"], systems["B"]
    ids = list(a)
    h = {i: a[i] if k % 2 else b[i] for k, i in enumerate(ids)}
    t = {i: h[i] if k < n // 2 else b[i] for k, i in enumerate(ids)}
    return {"A": a, "B": b, "H": h, "S": dict(a), "T": t}, refs


def _copied(groups: list) -> dict[int, int]:
    """Items copied per system index, over the groups."""
    out: dict[int, int] = {}
    for g in groups:
        for s, it in zip(g.which, g.items):
            if it.copied is not None:
                out[s] = out.get(s, 0) + len(it.copied)
    return out


@pytest.mark.parametrize("kernel", _kernels()[::2])
@pytest.mark.parametrize("n, seed, chunk", [(8, 80, 2048), (90, 81, 16), (150, 82, 64)])
def test_copied_scores_equal_the_former_implementation(monkeypatch, kernel, n, seed, chunk):
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0 if kernel.startswith("numba") else 1 << 62)
    groups = _spy_groups(monkeypatch)
    systems, refs = _with_copies(n, seed)
    opts = {"cider-d": {"chunk_size": chunk}}
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=seed, options=opts)
    old = _quiet(before.compare, systems, refs, "cider-d", samples=70, seed=seed, options=opts)
    _assert_same(old, new)
    copied = _copied(groups)
    assert copied.get(4, 0) > 0 and copied.get(2, 0) > 0  # H's and T's items of A's captions
    assert copied.get(3) == n  # S: every item, none computed
    assert 1 not in copied  # B shares no caption with A (random captions)


def test_copied_sums_of_the_unfused_path_equal_the_computed_ones(monkeypatch):
    """9 orders: the compiled kernels write per-order sums (numpy's mean over 9 is pairwise)."""
    pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    systems, refs = _with_copies(60, 83)
    opts = {"cider-d": {"n": 9, "chunk_size": 32}}
    groups = _spy_groups(monkeypatch)
    copying = _quiet(compare, systems, refs, "cider-d", samples=100, seed=83, options=opts)
    assert _copied(groups).get(3) == 60
    monkeypatch.setattr(cider_items, "_COPY_MIN", 2.0)  # never copy
    groups.clear()
    computing = _quiet(compare, systems, refs, "cider-d", samples=100, seed=83, options=opts)
    assert _copied(groups) == {}
    _assert_same(computing, copying)


@pytest.mark.parametrize("kernel", _kernels()[::2])
def test_a_wrong_copy_is_seen(monkeypatch, kernel):
    """Mutation check: copying the baseline's score for one item whose candidate differs."""
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0 if kernel.startswith("numba") else 1 << 62)
    real = cider_groups._different_candidates

    def wrong(first, other):
        keep = real(first, other)
        if keep is not None and keep.any():
            keep = keep.copy()
            keep[int(np.flatnonzero(keep)[0])] = False
        return keep

    monkeypatch.setattr(cider_groups, "_different_candidates", wrong)
    systems, refs = _with_copies(40, 84)
    systems = {k: systems[k] for k in ("A", "H")}
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=84)
    old = _quiet(before.compare, systems, refs, "cider-d", samples=70, seed=84)
    with pytest.raises(AssertionError):
        _assert_same(old, new)


def test_no_copies_below_the_threshold(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    groups = _spy_groups(monkeypatch)
    systems, refs = _random_set(64, 85)
    a, b = systems["A"], systems["B"]
    ids = list(a)
    few = {i: a[i] if k == 0 else b[i] for k, i in enumerate(ids)}  # 1 of 64: under an eighth
    systems = {"A": a, "F": few}
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=85)
    assert _copied(groups) == {}
    _assert_same(_quiet(before.compare, systems, refs, "cider-d", samples=70, seed=85), new)
