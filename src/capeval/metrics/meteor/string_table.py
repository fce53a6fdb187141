"""Sorted 64-bit-key string tables: how the METEOR index stores and finds strings.

Every distinct string (for phrases: tokens joined by one space) gets the 64-bit key
``blake2b(utf8, digest_size=8)``; keys are stored sorted and found with binary search,
and each hit is confirmed against the stored bytes, so a key collision cannot create a
false match. The index builders (:mod:`.index_build`, :mod:`.paraphrase_build`), the
loader (:mod:`.resources`) and the sentence preparation (:mod:`.sentences`) share these
helpers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np


def key64(data: bytes) -> int:
    """The 64-bit lookup key of a UTF-8 string (see module docstring)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def keys64(strings: Iterable[bytes]) -> np.ndarray:
    """:func:`key64` of each string, as a uint64 array."""
    blake = hashlib.blake2b
    joined = b"".join(blake(s, digest_size=8).digest() for s in strings)
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64)


class StringTable:
    """Memory-mapped set of UTF-8 strings: sorted 64-bit keys, offsets and bytes."""

    def __init__(self, keys: np.ndarray, off: np.ndarray, blob: np.ndarray):
        self.keys = keys
        self.off = off
        self.blob = blob
        self._n = int(keys.shape[0])

    def __len__(self) -> int:
        return self._n

    def string(self, i: int) -> str:
        return self.blob[int(self.off[i]) : int(self.off[i + 1])].tobytes().decode("utf-8")

    def lookup(self, s: str) -> int:
        """Index of ``s`` or -1."""
        data = s.encode("utf-8")
        k = np.uint64(key64(data))
        i = int(np.searchsorted(self.keys, k))
        if i < self._n and self.keys[i] == k and self.blob[int(self.off[i]) : int(self.off[i + 1])].tobytes() == data:
            return i
        return -1

    def lookup_many(self, strings: list[str]) -> list[int]:
        """Indices of ``strings`` (-1 where absent), one vectorised search."""
        if not strings:
            return []
        return self.lookup_encoded([s.encode("utf-8") for s in strings]).tolist()

    def lookup_encoded(self, encoded: list[bytes], keys: np.ndarray | None = None) -> np.ndarray:
        """Indices (int64 array, -1 where absent) of UTF-8 strings whose keys may be given.

        The keys are searched in sorted order (much faster on the big mapped table) and
        the hits are confirmed against the stored bytes all at once.
        """
        n = len(encoded)
        out = np.full(n, -1, dtype=np.int64)
        if n == 0 or self._n == 0:
            return out
        if keys is None:
            keys = keys64(encoded)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        pos = np.searchsorted(self.keys, sorted_keys)
        inside = pos < self._n
        hit = inside & (self.keys[np.where(inside, pos, 0)] == sorted_keys)
        sel = np.flatnonzero(hit)
        if sel.size == 0:
            return out
        cand = pos[sel]
        which = order[sel]
        lo = self.off[cand].astype(np.int64)
        hi = self.off[cand + 1].astype(np.int64)
        want = [encoded[j] for j in which.tolist()]
        lens = np.fromiter(map(len, want), dtype=np.int64, count=len(want))
        if np.array_equal(hi - lo, lens) and gather_ranges(self.blob, lo, hi).tobytes() == b"".join(want):
            out[which] = cand
        else:  # some key matched a different string: check one by one
            for j, i, a, b, data in zip(which.tolist(), cand.tolist(), lo.tolist(), hi.tolist(), want):
                if self.blob[a:b].tobytes() == data:
                    out[j] = i
        return out


def contains_sorted(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Boolean array: which ``keys`` occur in the sorted array ``sorted_keys``."""
    if len(sorted_keys) == 0 or len(keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    pos = np.searchsorted(sorted_keys, sk)
    pos[pos >= len(sorted_keys)] = 0
    out = np.empty(len(keys), dtype=bool)
    out[order] = sorted_keys[pos] == sk
    return out


def gather_ranges(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``np.concatenate([values[a:b] for a, b in zip(lo, hi)])`` without a Python loop."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return values[:0]
    ends = np.cumsum(counts)
    idx = np.arange(total, dtype=np.int64) + np.repeat(lo - (ends - counts), counts)
    return values[idx]
