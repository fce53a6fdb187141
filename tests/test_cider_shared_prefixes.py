"""CIDEr-D resampling's norms with the additions that runs share made once (issue 47 item 2).

The compiled kernels add a run's squares (a sentence's entries of one order) one after the other
from 0.0; runs that begin alike (sentences that begin alike; a system and its edit) are put next
to each other and a run takes the partial sums it shares with the run before it. Checked here:

- :func:`_shared_prefixes` walked as the kernel walks it (a partial sum per depth) on random runs
  with shared prefixes longer and shorter than the ordering depth, runs that are prefixes of
  others, identical runs, one-element runs and negative values: every run's sum is made of its
  own values in order, and runs sharing a start do share nodes.
- a comparison of systems that share prefixes (one word deleted, words appended, the same
  caption twice) equals the former implementation (``benchmarks/_compare_before.py``, a full
  rescoring per resample) bit for bit, while its tries do share nodes (fewer nodes than entries).
"""

from __future__ import annotations

import random
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from capeval.significance import cider_groups, cider_resample
from capeval.significance.cider_arrays import _ORDER_DEPTH, _shared_prefixes
from capeval.significance.compare import compare

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import _compare_before as before  # noqa: E402
from test_compare_fast import WORDS, _assert_same, _spy_groups  # noqa: E402


def _sums(values: np.ndarray, depth: np.ndarray, length: np.ndarray, last: np.ndarray) -> list[tuple[int, ...]]:
    """Each run's "sum" as the kernel makes it, with tuples for numbers: a partial sum per depth,
    node u extends the one of its depth, the runs complete after node u read their length's."""
    stack: list[tuple[int, ...] | None] = [()] + [None] * (int(length.max()) + 1)
    done: dict[int, tuple[int, ...]] = {}
    after = sorted(range(len(length)), key=lambda q: last[q])
    e = 0
    for u, (v, d) in enumerate(zip(values.tolist(), depth.tolist())):
        assert stack[d] is not None, "a node before the partial sum it extends"
        stack[d + 1] = stack[d] + (v,)
        while e < len(after) and last[after[e]] == u:
            done[after[e]] = stack[int(length[after[e]])]
            e += 1
    assert e == len(after)
    return [done[q] for q in range(len(length))]


@pytest.mark.parametrize("seed", range(40))
def test_every_run_sums_its_own_values_in_order(seed):
    rng = np.random.default_rng(seed)
    runs: list[list[int]] = []
    for _ in range(int(rng.integers(1, 40))):
        if runs and rng.random() < 0.5:  # the start of an earlier run, then maybe more
            base = runs[int(rng.integers(len(runs)))]
            run = base[:int(rng.integers(1, len(base) + 1))] + rng.integers(-4, 5, int(rng.integers(0, 14))).tolist()
        else:
            run = rng.integers(-4, 5, int(rng.integers(1, 2 * _ORDER_DEPTH))).tolist()
        runs.append(run)
    values = np.array([v for run in runs for v in run], dtype=np.int64)
    ptr = np.r_[0, np.cumsum([len(run) for run in runs])].astype(np.int64)
    node_value, depth, order, done = _shared_prefixes(values, ptr)
    assert sorted(order.tolist()) == list(range(len(runs))) and np.all(np.diff(done) >= 0)
    last = np.empty(len(runs), dtype=np.int64)
    last[order] = done
    length = np.diff(ptr)
    assert _sums(node_value, depth, length, last) == [tuple(run) for run in runs]
    # every distinct start shorter than the ordering depth is added once
    starts = {tuple(run[:i + 1]) for run in runs for i in range(min(len(run), _ORDER_DEPTH))}
    assert int((depth < _ORDER_DEPTH).sum()) == len(starts)


def test_no_runs():
    out = _shared_prefixes(np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
    assert all(len(a) == 0 for a in out)


def _edited_set(n: int, seed: int) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """A: captions that begin alike; B: A with one word deleted; C: A with words appended;
    D: B's caption for even items, A's for odd ones. References: other captions of the same
    kind, one of them the item's A caption with a word appended."""
    rng = random.Random(seed)
    starts = ["a man", "a dog", "a woman", "the cat"]

    def caption() -> str:
        return " ".join([rng.choice(starts)] + rng.choices(WORDS, k=rng.randint(0, 8)))

    a = {str(i): caption() for i in range(n)}
    b, c = {}, {}
    for i, text in a.items():
        words = text.split()
        del words[rng.randrange(len(words))]
        b[i] = " ".join(words)
        c[i] = text + " " + " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
    d = {i: b[i] if int(i) % 2 == 0 else a[i] for i in a}
    refs = {i: [caption() for _ in range(rng.randint(1, 4))] + [a[i] + " " + rng.choice(WORDS)] for i in a}
    return {"A": a, "B": b, "C": c, "D": d}, refs


@pytest.mark.parametrize("n, seed", [(6, 60), (50, 61), (130, 62)])
def test_shared_prefixes_equal_the_former_implementation(monkeypatch, n, seed):
    pytest.importorskip("numba")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)  # the compiled kernels at any size
    shared = _spy_groups(monkeypatch)
    systems, refs = _edited_set(n, seed)
    opts = {"cider-d": {"chunk_size": 32}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = compare(systems, refs, "cider-d", samples=70, seed=seed, options=opts)
        old = before.compare(systems, refs, "cider-d", samples=70, seed=seed, options=opts)
    _assert_same(old, new)
    indexes = [g._kernels for g in shared]
    assert indexes and all(isinstance(ix, cider_groups._KernelIndex) for ix in indexes)
    nodes = sum(len(ix.node_src) for ix in indexes)
    entries = sum(int(ix.emit_len.sum()) for ix in indexes)
    assert 0 < nodes < entries  # shared additions: fewer nodes than the runs' entries
