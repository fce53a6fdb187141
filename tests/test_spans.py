"""The blocked run arithmetic of CIDEr-D's resampling index (issue 47 item 2).

:mod:`capeval.significance.spans` replaced whole-array numpy steps over millions of (item,
n-gram) pairs by the same steps over blocks of reused work arrays, and
:func:`~capeval.significance.run_groups.group_sums` replaced a lexsort of the runs' keys by one
sort of a mixed word. Each is checked here against a plain Python construction written from the
definition (not against the code it replaced), on random runs with empty runs, one-element runs,
identical runs, sums that wrap past 2^64 and block sizes of 1, 2, 3, 7 and the default, so that
every block boundary falls inside, at the start and at the end of runs. A forced hash collision
must not merge runs (exactness does not rest on the hashes).
"""

from __future__ import annotations

import numpy as np
import pytest

from capeval.significance import run_groups, spans
from capeval.significance.reference_sets import ReferenceSets, _parts_digest

BLOCKS = [1, 2, 3, 7, spans.BLOCK]


@pytest.fixture(params=BLOCKS)
def block(request, monkeypatch):
    monkeypatch.setattr(spans, "BLOCK", request.param)
    return request.param


def _runs(rng: np.random.Generator, n_runs: int, max_len: int, empty: bool = True) -> np.ndarray:
    lengths = rng.integers(0 if empty else 1, max_len + 1, n_runs)
    return np.r_[0, np.cumsum(lengths)].astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_run_sums_are_each_runs_sum_modulo_2_64(seed, block):
    rng = np.random.default_rng(seed)
    ptr = _runs(rng, int(rng.integers(0, 40)), int(rng.integers(0, 9)))
    table = rng.integers(0, 2**64, 50, dtype=np.uint64)
    index = rng.integers(0, 50, int(ptr[-1]))
    got = spans.run_sums(table, index, ptr)
    want = [sum(int(table[j]) for j in index[ptr[u]:ptr[u + 1]]) % 2**64 for u in range(len(ptr) - 1)]
    assert got.dtype == np.uint64
    assert got.tolist() == want


def test_run_sums_of_no_runs():
    assert spans.run_sums(np.arange(3, dtype=np.uint64), np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)).tolist() == []
    assert spans.run_sums(np.arange(3, dtype=np.uint64), np.zeros(0, dtype=np.int64), np.zeros(3, dtype=np.int64)).tolist() == [0, 0]


@pytest.mark.parametrize("seed", range(6))
def test_run_starts_are_where_the_high_bits_change(seed, block):
    rng = np.random.default_rng(seed)
    bits = int(rng.integers(1, 8))
    key = np.sort(rng.integers(0, 2**(bits + 3), int(rng.integers(0, 60)))).astype(np.int64)
    got = spans.run_starts(key, bits)
    want = [j for j in range(len(key)) if j == 0 or int(key[j]) >> bits != int(key[j - 1]) >> bits]
    assert got.dtype == np.int64
    assert got.tolist() == want


@pytest.mark.parametrize("seed", range(6))
def test_take_spans_and_spans_equal_read_each_span(seed, block):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 3, 40)
    n = int(rng.integers(0, 12))
    lengths = rng.integers(0, 6, n)
    a = rng.integers(0, 40 - lengths, n) if n else np.zeros(0, dtype=np.int64)
    b = rng.integers(0, 40 - lengths, n) if n else np.zeros(0, dtype=np.int64)
    taken = spans.take_spans(values, a, lengths)
    assert taken.dtype == np.int64
    assert taken.tolist() == [int(values[s + o]) for s, n_ in zip(a, lengths) for o in range(n_)]
    want = all(values[s:s + n_].tolist() == values[t:t + n_].tolist() for s, t, n_ in zip(a, b, lengths))
    assert spans.spans_equal(values, a, b, lengths) is want
    assert spans.spans_equal(values, a, a, lengths) is True


def _first_of_each_content(runs: list[tuple[int, ...]]) -> tuple[list[int], list[int]]:
    """(id of each run, the runs kept), ids numbered by first occurrence: the definition."""
    seen: dict[tuple[int, ...], int] = {}
    ids, kept = [], []
    for u, content in enumerate(runs):
        if content not in seen:
            seen[content] = len(kept)
            kept.append(u)
        ids.append(seen[content])
    return ids, kept


@pytest.mark.parametrize("seed", range(8))
def test_dedupe_runs_merges_exactly_the_equal_runs(seed, block):
    rng = np.random.default_rng(seed)
    # few distinct contents, so that many runs repeat; empty and one-element runs among them
    pool = [tuple(rng.integers(-2, 3, int(rng.integers(0, 5))).tolist()) for _ in range(6)]
    picks = [pool[int(i)] for i in rng.integers(0, len(pool), int(rng.integers(1, 30)))]
    ptr = np.r_[0, np.cumsum([len(p) for p in picks])].astype(np.int64)
    flat = np.array([x for p in picks for x in p], dtype=np.int64)
    cols = [flat, (flat * 7) % 5]
    ids, kept = run_groups.dedupe_runs(ptr, cols)
    want_ids, want_kept = _first_of_each_content([tuple(zip(*(c[ptr[u]:ptr[u + 1]].tolist() for c in cols)))
                                                  for u in range(len(picks))])
    assert ids.tolist() == want_ids and kept.tolist() == want_kept


@pytest.mark.parametrize("seed", range(8))
def test_item_sets_are_the_distinct_item_lists_in_order_of_first_use(seed, block):
    rng = np.random.default_rng(seed)
    n_items, n_ids = int(rng.integers(1, 9)), int(rng.integers(1, 25))
    pairs = sorted({(int(g), int(i)) for g, i in zip(rng.integers(0, n_ids, 60), rng.integers(0, n_items, 60))})
    gid = np.array([g for g, _ in pairs], dtype=np.int64)
    item = np.array([i for _, i in pairs], dtype=np.int64)
    set_of, set_items, set_ptr = run_groups.item_sets(item, gid, n_ids)
    lists: dict[int, tuple[int, ...]] = {}
    for g, i in pairs:
        lists[g] = lists.get(g, ()) + (i,)
    ids, kept = _first_of_each_content([lists[g] for g in sorted(lists)])
    grams = sorted(lists)
    want_of = [len(kept)] * (n_ids + 1)
    for g, s in zip(grams, ids):
        want_of[g] = s
    assert set_of.tolist() == want_of
    assert set_ptr.tolist() == np.r_[0, np.cumsum([len(lists[grams[u]]) for u in kept])].tolist()
    assert set_items.tolist() == [i for u in kept for i in lists[grams[u]]]


def test_a_hash_collision_merges_nothing():
    # equal lengths and equal sums, different content: checked element by element, not merged
    ptr = np.array([0, 2, 4, 6], dtype=np.int64)
    values = np.array([1, 2, 1, 3, 1, 2], dtype=np.int64)
    zero = np.zeros(3, dtype=np.uint64)
    ids, kept = run_groups.group_sums(ptr, np.diff(ptr), [zero], [values])
    assert ids.tolist() == [0, 1, 2] and kept.tolist() == [0, 1, 2]
    # a mixed key equal for runs of different lengths (the second run's sum made to collide)
    lengths = np.array([1, 2], dtype=np.int64)
    mul = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        sums = np.array([0, (np.uint64(1) * mul) ^ (np.uint64(2) * mul)], dtype=np.uint64)
    ids, kept = run_groups.group_sums(np.array([0, 1, 3]), lengths, [sums], [np.array([5, 5, 5])])
    assert kept.tolist() == [0, 1]
    # and without the forced collision, equal runs are merged
    ids, kept = run_groups.group_sums(ptr, np.diff(ptr), [np.array([7, 8, 7], dtype=np.uint64)], [values])
    assert ids.tolist() == [0, 1, 0] and kept.tolist() == [0, 1]


class _Corpus:
    """The part of a corpus index ReferenceSets reads."""

    keeps_pairs = True
    token = "t"

    def __init__(self, parts, n_items, n_ids):
        self.parts, self.n_docs, self._n_ids = parts, n_items, n_ids

    def iter_reference_pairs(self):
        yield from self.parts

    def reference_pair_count(self):
        return sum(len(g) for g, _, _ in self.parts)

    def drop_reference_pairs(self):
        self.parts = []

    def n_ids(self):
        return self._n_ids


@pytest.mark.parametrize("seed", range(4))
def test_reference_sets_from_parts_equal_the_definition(seed, block):
    rng = np.random.default_rng(seed)
    parts, base, pairs = [], 0, set()
    for _ in range(int(rng.integers(1, 4))):
        n = int(rng.integers(1, 5))
        local = sorted({(int(i), int(g)) for i, g in zip(rng.integers(0, n, 20), rng.integers(0, 12, 20))})
        parts.append((np.array([g for _, g in local], dtype=np.int64), np.array([i for i, _ in local], dtype=np.int32), base))
        pairs |= {(g, i + base) for i, g in local}
        base += n
    digest = _parts_digest(parts, base)
    n_ids, set_of, set_items, set_ptr = ReferenceSets(_Corpus(parts, base, 12)).get()
    ordered = sorted(pairs)
    want = run_groups.item_sets(np.array([i for _, i in ordered]), np.array([g for g, _ in ordered]), n_ids)
    assert n_ids == 12
    for x, y in zip((set_of, set_items, set_ptr), want):
        assert x.tolist() == y.tolist()
    sets = ReferenceSets(_Corpus(parts, base, 12))
    assert sets.digest() == digest
