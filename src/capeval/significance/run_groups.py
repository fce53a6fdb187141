"""Runs of equal content among many (an n-gram's items, a sentence's entries), found by hashes
and merged only where checked element by element: the sets of items of CIDEr-D's resampled
document frequencies (:mod:`.reference_sets`) and the distinct sentences of its groups
(:mod:`.cider_groups`)."""

from __future__ import annotations

import numpy as np

from capeval.significance.spans import run_starts, run_sums, spans_equal, take_spans


def dedupe_runs(ptr: np.ndarray, cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(id of each run, the runs kept): runs ``ptr[u]:ptr[u + 1]`` of the rows of ``cols`` with
    the same content get one id (the first such run is kept). Told apart by length and two
    64-bit hashes, then every merged run is checked element by element against the run it is
    merged into (after a collision, never seen, no run is merged)."""
    n_runs = len(ptr) - 1
    if n_runs <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lengths = np.diff(ptr)
    total = int(ptr[-1])
    starts = ptr[:-1]
    with np.errstate(over="ignore"):
        # a row's columns folded into one word, mixed with its position in the run
        v = np.zeros(total, dtype=np.uint64)
        for j, c in enumerate(cols):
            v = (v ^ (c.astype(np.int64).astype(np.uint64) + np.uint64(j + 1))) * np.uint64(0x9E3779B97F4A7C15)
        pos = np.arange(total, dtype=np.uint64)
        pos -= np.repeat(starts.astype(np.uint64), lengths)
        v ^= pos * np.uint64(0xD6E8FEB86659FD93)
        v ^= v >> np.uint64(29)
        h1 = v * np.uint64(0xBF58476D1CE4E5B9)
        h1 ^= h1 >> np.uint64(32)
        h2 = (v ^ np.uint64(0x94D049BB133111EB)) * np.uint64(0xC2B2AE3D27D4EB4F)
        h2 ^= h2 >> np.uint64(31)
        return group_runs(ptr, lengths, [h1, h2], cols)


def group_runs(ptr: np.ndarray, lengths: np.ndarray, hashes: list[np.ndarray],
                cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dedupe_runs` from hashes per row, summed per run."""
    n_runs = len(ptr) - 1
    starts = ptr[:-1]
    nonempty = lengths > 0
    sums = []
    for h in hashes:
        r = np.zeros(n_runs, dtype=np.uint64)
        if int(ptr[-1]):
            with np.errstate(over="ignore"):
                r[nonempty] = np.add.reduceat(h, starts[nonempty])
        sums.append(r)
    return group_sums(ptr, lengths, sums, cols)


def group_sums(ptr: np.ndarray, lengths: np.ndarray, sums: list[np.ndarray],
                cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`group_runs` from the runs' hash sums."""
    n_runs = len(ptr) - 1
    starts = ptr[:-1]
    # runs grouped by one 64-bit key mixing the length and the sums: one sort of a word (a
    # lexsort of two or three took four times as long). Runs merged on a key are checked below
    # for the same sums (then, the key being a bijection of the length for given sums, the same
    # length), then element by element
    key = lengths.astype(np.uint64)
    with np.errstate(over="ignore"):
        for r in sums:
            key *= np.uint64(0x9E3779B97F4A7C15)
            key ^= r
    order = np.argsort(key)
    ordered = key[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]]
    group = np.cumsum(new) - 1
    # each group's first run in run order (the sort is not stable)
    rep = np.empty(n_runs, dtype=np.int64)
    rep[order] = np.minimum.reduceat(order, np.flatnonzero(new))[group] if n_runs else order
    every = np.arange(n_runs, dtype=np.int64)
    dup = np.flatnonzero(rep != every)
    if len(dup):
        into = rep[dup]
        if not (all(np.array_equal(r[into], r[dup]) for r in sums)
                and all(spans_equal(c, starts[into], starts[dup], lengths[dup]) for c in cols)):
            return every, every
    is_kept = rep == every
    return (np.cumsum(is_kept) - 1)[rep], np.flatnonzero(is_kept)


def item_sets(item: np.ndarray, gid: np.ndarray, n_ids: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(set of each n-gram id, the sets' items, their pointers): the distinct item lists of the
    n-grams (``item``/``gid`` sorted by n-gram, then item); ids of no reference get set ``n_sets``.
    Sets are numbered in order of their first n-gram, each kept as that n-gram's list."""
    starts = run_starts(gid, 0)
    return run_sets(item, starts, gid[starts], n_ids)


def run_sets(item: np.ndarray, starts: np.ndarray, run_gid: np.ndarray,
              n_ids: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`item_sets` from the first position of each n-gram's run and its n-gram."""
    set_of = np.full(n_ids + 1, -1, dtype=np.int64)
    if not len(item):
        set_of[:] = 0
        return set_of, np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    ptr = np.r_[starts, len(item)].astype(np.int64)
    ids, kept = dedupe_sets(ptr, item)
    set_of[run_gid] = ids
    set_of[set_of < 0] = len(kept)
    lengths = np.diff(ptr)[kept]
    set_ptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    return set_of, take_spans(item, ptr[kept], lengths), set_ptr


def dedupe_sets(ptr: np.ndarray, item: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dedupe_runs` of runs that are sets (each run's items strictly increasing, so a run
    is known by its items whatever their order): each item's 64-bit hash looked up in a table of
    the items (one lookup per row instead of a hash computed per row), summed per run; one hash
    and the length tell runs apart, the element-by-element check of every merge makes it exact."""
    n_vals = int(item.max()) + 1 if len(item) else 1
    with np.errstate(over="ignore"):
        x = np.arange(1, n_vals + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(31)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
    return group_sums(ptr, np.diff(ptr), [run_sums(x, item, ptr)], [item])
