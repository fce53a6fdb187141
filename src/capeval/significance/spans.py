"""Index arithmetic over runs of long arrays, in blocks of bounded work arrays.

CIDEr-D's resampling index (:mod:`.reference_sets`, :mod:`.cider_arrays`) works on millions of
(item, n-gram) pairs at 40,000 items. A whole-array numpy step makes a fresh array of that length,
and a fresh array's pages are zeroed by the kernel at first touch: about half of the index's time,
on a core the scoring pass's workers need. The steps here that would make such arrays (keys
shifted, hashes gathered, the positions of merged runs) run over blocks of :data:`BLOCK` elements
in work arrays reused from block to block, and give the arrays the whole-array steps gave
(integers, and sums modulo 2^64, which are the same in any grouping: ``tests/test_spans.py``).
"""

from __future__ import annotations

import numpy as np

#: elements per block (work arrays of half a megabyte)
BLOCK = 1 << 16


def spans_take(starts: np.ndarray, lengths: np.ndarray, total: int) -> np.ndarray:
    """The indices ``starts[u] .. starts[u] + lengths[u] - 1`` of every span u, one after the other."""
    out = np.arange(total, dtype=np.int64)
    out += np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)  # in place: fresh pages cost
    return out


def _pieces(lengths: np.ndarray) -> list[tuple[int, int, int]]:
    """(first span, end span, first element) of consecutive pieces of the spans, each of at most
    :data:`BLOCK` elements or a single span."""
    ends = np.cumsum(lengths)
    cuts = [0]
    while cuts[-1] < len(lengths):
        u = cuts[-1]
        at = int(ends[u - 1]) if u else 0
        cuts.append(max(u + 1, int(np.searchsorted(ends, at + BLOCK, side="right"))))
    return [(u, v, int(ends[u - 1]) if u else 0) for u, v in zip(cuts[:-1], cuts[1:])]


def take_spans(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``values[starts[u]:starts[u] + lengths[u]]`` of every span u, one after the other (int64)."""
    out = np.empty(int(lengths.sum()), dtype=np.int64)
    for u, v, at in _pieces(lengths):
        size = lengths[u:v]
        n = int(size.sum())
        out[at:at + n] = values[spans_take(starts[u:v], size, n)]
    return out


def spans_equal(values: np.ndarray, a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether ``values[a[u]:a[u] + lengths[u]]`` equals ``values[b[u]:b[u] + lengths[u]]`` for every u."""
    for u, v, _ in _pieces(lengths):
        size = lengths[u:v]
        n = int(size.sum())
        if not np.array_equal(values[spans_take(a[u:v], size, n)], values[spans_take(b[u:v], size, n)]):
            return False
    return True


def run_starts(key: np.ndarray, bits: int) -> np.ndarray:
    """The first position of each run of equal ``key >> bits`` in ``key`` (int64, 0 first when
    ``key`` is not empty): ``np.flatnonzero(np.r_[True, h[1:] != h[:-1]])`` of ``h = key >> bits``."""
    n = len(key)
    if not n:
        return np.zeros(0, dtype=np.int64)
    shift = np.int64(bits)
    found = [np.zeros(1, dtype=np.int64)]
    high = np.empty(min(BLOCK, n - 1) + 1, dtype=np.int64)
    change = np.empty(min(BLOCK, n - 1), dtype=bool)
    for a in range(0, n - 1, BLOCK):
        b = min(n - 1, a + BLOCK)  # the neighbours (j, j + 1) for j in [a, b)
        h = high[:b - a + 1]
        np.right_shift(key[a:b + 1], shift, out=h)
        c = change[:b - a]
        np.not_equal(h[1:], h[:-1], out=c)
        found.append(np.flatnonzero(c) + (a + 1))
    return np.concatenate(found)


def run_sums(table: np.ndarray, index: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """``table[index[ptr[u]:ptr[u + 1]]].sum()`` modulo 2^64 of every run u (uint64 ``table``;
    0 for an empty run), as differences of the running sum at the runs' ends. ``index``: within
    ``table`` (not checked)."""
    n_runs = max(len(ptr) - 1, 0)
    total = int(ptr[-1]) if len(ptr) else 0
    at_end = np.zeros(n_runs, dtype=np.uint64)  # the running sum at each run's end
    if total:
        last = np.asarray(ptr[1:], dtype=np.int64)
        work = np.empty(min(BLOCK, total), dtype=np.uint64)
        carry = np.uint64(0)
        u = int(np.searchsorted(last, 0, side="right"))  # runs that end before any element
        with np.errstate(over="ignore"):
            for a in range(0, total, BLOCK):
                b = min(total, a + BLOCK)
                h = work[:b - a]
                np.take(table, index[a:b], out=h, mode="clip")
                np.cumsum(h, out=h)
                h += carry
                v = int(np.searchsorted(last, b, side="right"))
                at_end[u:v] = h[last[u:v] - 1 - a]
                carry = h[-1]
                u = v
    sums = at_end.copy()
    with np.errstate(over="ignore"):
        sums[1:] -= at_end[:-1]
    return sums
