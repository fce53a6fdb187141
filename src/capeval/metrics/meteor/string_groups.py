"""Grouping equal strings among millions, with numpy: what builds the paraphrase index.

:func:`dedupe` groups strings by their 64-bit keys (:mod:`.string_table`) with one sort
and confirms every group byte for byte; :func:`sort_order`, :func:`sorted_distinct`
and :func:`key_order` are the sorts around it, done as sorts of packed 64-bit words
(``np.sort`` is far faster than ``np.argsort`` or ``np.unique`` on this scale).
:func:`map_slices` runs a function over slices of an array on two threads (numpy
releases the GIL); :func:`release_freed_memory` hands freed heap memory back to the OS.
Used by :mod:`.paraphrase_build`.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.string_table import key64, middles_equal, ranges_equal

SLICE = 1 << 18  # strings compared or copied at a time (bounds the temporaries)
COLLISION = "64-bit key collision while indexing METEOR resources (please report this)"
WORKERS = max(1, min(2, os.cpu_count() or 1))


def release_freed_memory() -> None:
    """Hand freed heap memory back to the OS where the C library keeps it (glibc keeps
    what worker threads freed in their own arenas); a no-op elsewhere."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


def map_slices(fn: Callable[[int, int], Any], n: int, size: int = SLICE) -> list[Any]:
    """``[fn(a, b) for a, b in slices of range(n) of length size]``, on up to two threads."""
    bounds = [(a, min(n, a + size)) for a in range(0, n, size)]
    if WORKERS < 2 or len(bounds) < 2:
        return [fn(a, b) for a, b in bounds]
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="capeval-meteor-slices") as pool:
        return list(pool.map(lambda ab: fn(*ab), bounds))


def bits(n: int) -> int:
    """Bits needed for the numbers 0 .. n - 1 (at least 1)."""
    return max(1, (n - 1).bit_length())


def dedupe(
    buf: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    keys: np.ndarray,
    edges: tuple[np.ndarray, np.ndarray] | None = None,
    consume: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Group equal strings ``buf[starts[i]:][:lengths[i]]`` whose 64-bit keys are ``keys``
    (and whose first and last words are ``edges``, when known: :func:`.string_table.edge_words`).

    Returns ``(reps, group)``: ``reps[g]`` is the first string of group ``g``, ``group[i]``
    the group of string ``i``. Groups come in ascending key order, except where two keys
    share their high bits (then ``reps``' keys are out of order; see :func:`key_order`).
    One ``np.sort`` of (high key bits | index) words does the grouping; every member is
    then compared with its group's first string byte by byte. ``consume``: sort in the
    memory of ``keys``, which is garbage afterwards.
    """
    n = len(keys)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ib = bits(n)
    if ib > 40:
        raise ResourceError(f"too many strings to index at once ({n})")
    low = np.uint64((1 << ib) - 1)
    packed = keys if consume else keys.copy()
    packed &= ~low
    for c0 in range(0, n, SLICE):
        packed[c0 : c0 + SLICE] |= np.arange(c0, min(n, c0 + SLICE), dtype=np.uint64)
    packed.sort()
    first = np.empty(n, dtype=bool)
    first[0] = True
    for c0 in range(1, n, SLICE):  # a new group where the high bits change
        c1 = min(n, c0 + SLICE)
        np.not_equal(packed[c0:c1] >> np.uint64(ib), packed[c0 - 1 : c1 - 1] >> np.uint64(ib), out=first[c0:c1])
    packed &= low
    idx = packed.view(np.int64)  # string numbers in group order
    itype = np.int32 if n < 2**31 else np.int64
    gid = np.cumsum(first, dtype=itype)
    gid -= 1
    group = np.empty(n, dtype=itype)
    group[idx] = gid
    del gid
    reps = idx[first]
    members = idx[~first]  # every string that is not the first of its group
    del packed, idx, first
    rep_of = reps[group[members]]

    def differ(a: int, b: int) -> np.ndarray:
        m, r = members[a:b], rep_of[a:b]
        if edges is None:
            same = ranges_equal(buf, starts[m], buf, starts[r], lengths[m])
        else:
            same = (edges[0][m] == edges[0][r]) & (edges[1][m] == edges[1][r])
            same &= middles_equal(buf, starts[m], buf, starts[r], lengths[m])
        same &= lengths[m] == lengths[r]
        return m[~same]

    # the big (final) grouping is checked on two threads; a block's in its own thread
    parts = map_slices(differ, len(members)) if edges is None else [differ(0, len(members))]
    odd = np.concatenate([np.zeros(0, np.int64), *parts])
    if odd.size:  # high key bits equal, strings not: split those groups (rare)
        reps, group = _split_groups(buf, starts, lengths, reps, group, np.sort(odd))
    return reps, group


def _split_groups(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, reps: np.ndarray, group: np.ndarray, odd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Give the strings ``odd`` (ascending), which differ from their group's first string,
    groups of their own by content; two different strings with one key are a collision."""
    new_reps: list[int] = []
    made: dict[tuple[int, bytes], int] = {}
    text = {}  # group -> its first string
    for i in odd.tolist():
        data = buf[int(starts[i]) : int(starts[i]) + int(lengths[i])].tobytes()
        g = int(group[i])
        if g not in text:
            r = int(reps[g])
            text[g] = buf[int(starts[r]) : int(starts[r]) + int(lengths[r])].tobytes()
        if key64(data) == key64(text[g]):
            raise ResourceError(COLLISION)
        new = made.get((g, data))
        if new is None:
            new = made[(g, data)] = len(reps) + len(new_reps)
            new_reps.append(i)
        group[i] = new
    return np.concatenate((reps, np.asarray(new_reps, dtype=reps.dtype))), group


def key_order(keys: np.ndarray) -> np.ndarray | None:
    """None when the distinct ``keys`` are ascending, else the order sorting them (equal
    keys: a collision).

    :func:`dedupe` leaves its groups ascending but for a few split off at the end: those
    are merged in rather than the whole array sorted again.
    """
    n = len(keys)
    up = np.flatnonzero(keys[1:] <= keys[:-1]) if n > 1 else np.zeros(0, np.int64)
    if up.size == 0:
        return None
    head = int(up[0]) + 1  # keys[:head] ascending
    if n - head > max(1024, n // 64):
        order = np.argsort(keys, kind="stable")
    else:
        tail = np.argsort(keys[head:], kind="stable") + head
        order = np.insert(np.arange(head, dtype=np.int64), np.searchsorted(keys[:head], keys[tail]), tail)
    sk = keys[order]
    if bool(np.any(sk[1:] == sk[:-1])):
        raise ResourceError(COLLISION)
    return order


def sort_order(values: np.ndarray, value_bits: int = 32) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of non-negative integers below ``2**value_bits``,
    as one sort of (value | position) words."""
    n = len(values)
    pb = bits(n)
    if n == 0 or pb + value_bits > 64 or int(values.max()) >= 2**value_bits or int(values.min()) < 0:
        return np.argsort(values, kind="stable")
    packed = values.astype(np.uint64)
    packed <<= np.uint64(pb)
    for c0 in range(0, n, SLICE):
        packed[c0 : c0 + SLICE] |= np.arange(c0, min(n, c0 + SLICE), dtype=np.uint64)
    packed.sort()
    packed &= np.uint64((1 << pb) - 1)
    return packed.view(np.int64)


def sorted_distinct(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` (which is much slower on uint64 in recent numpy)."""
    keys = np.sort(keys)
    keep = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]
