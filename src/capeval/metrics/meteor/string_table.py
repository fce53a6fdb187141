"""Sorted 64-bit-key string tables: how the METEOR index stores and finds strings.

Every distinct string (for phrases: tokens joined by one space) gets a 64-bit key
(:func:`key64`, a multiply-xorshift hash over its little-endian 8-byte words, chosen
because numpy computes it for millions of strings at once, :func:`range_keys`); keys
are stored sorted and found with binary search, and each hit is confirmed against the
stored bytes, so a key collision cannot create a false match. The index builders
(:mod:`.index_build`, :mod:`.paraphrase_build`), the loader (:mod:`.resources`) and the
sentence preparation (:mod:`.sentences`) share these helpers.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

_M = (1 << 64) - 1
_SEED = 0x27D4EB2F165667C5
_K_LEN = 0x165667B19E3779F9
_K_WORD = 0x9E3779B97F4A7C15
_K_MIX = 0xC2B2AE3D27D4EB4F
_F1 = 0xFF51AFD7ED558CCD  # MurmurHash3's 64-bit finaliser
_F2 = 0xC4CEB9FE1A85EC53


def key64(data: bytes) -> int:
    """The 64-bit lookup key of a UTF-8 string (see module docstring); equals :func:`keys64`.

    The string's whole 8-byte words but the last are mixed in one by one, then its last
    8 bytes (the whole string when shorter, zero-extended), then the length's mix is
    finalised.
    """
    n = len(data)
    h = _SEED ^ ((n * _K_LEN) & _M)
    for i in range(0, 8 * ((n - 1) // 8) if n > 8 else 0, 8):
        h = _mix(h, int.from_bytes(data[i : i + 8], "little"))
    h = _mix(h, int.from_bytes(data[max(n - 8, 0) :], "little"))
    h ^= h >> 33
    h = (h * _F1) & _M
    h ^= h >> 33
    h = (h * _F2) & _M
    return h ^ (h >> 33)


def _mix(h: int, w: int) -> int:
    v = (w * _K_WORD) & _M
    v ^= v >> 31
    h = ((h ^ v) * _K_MIX) & _M
    return h ^ (h >> 29)


def padded(data: bytes | bytearray | memoryview) -> np.ndarray:
    """``data`` as uint8 followed by 8 zero bytes, the layout :func:`range_keys` reads."""
    out = np.empty(len(data) + 8, dtype=np.uint8)
    out[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    out[len(data) :] = 0
    return out


def _words(buf: np.ndarray) -> np.ndarray:
    """Every unaligned little-endian 8-byte word of ``buf``: ``out[i]`` is ``buf[i:i + 8]``."""
    return np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))


def edge_words(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) words of each string: its first 8 bytes and its last 8 bytes (for a
    string of up to 8 bytes both are the string itself, zero-extended)."""
    words = _words(buf)
    first = words[starts]
    at = np.maximum(lengths, 8)
    at -= 8
    at += starts
    last = words[at]
    del at
    short = np.flatnonzero(lengths < 8)
    if short.size:
        sl = np.asarray(lengths[short], dtype=np.int64)
        mask = np.uint64(_M) >> (np.uint64(8) * (8 - sl).astype(np.uint64))
        last[short] = first[short] = first[short] & mask
    return first, last


def _n_inner(lengths: np.ndarray) -> np.ndarray:
    """Whole words of each string before its last 8 bytes (0 up to 8 bytes)."""
    return np.maximum((lengths - 1) >> 3, 0)


def _mix_into(h: np.ndarray, w: np.ndarray) -> None:
    w *= np.uint64(_K_WORD)
    w ^= w >> np.uint64(31)
    h ^= w
    h *= np.uint64(_K_MIX)
    h ^= h >> np.uint64(29)


def _by_inner(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Strings sorted by their number of inner words, most first: (inner words, order, and
    how many strings have more than k inner words, for each k)."""
    inner = _n_inner(lengths)
    top = int(inner.max(initial=0))
    # a stable sort of bytes is a radix sort: far faster than of 64-bit integers
    order = np.argsort((top - inner).astype(np.uint8 if top < 256 else np.int64), kind="stable")
    more = np.cumsum(np.bincount(inner)[::-1])[::-1][1:]  # more[k]: strings with > k inner words
    return inner, order, more


def range_keys(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, last: np.ndarray | None = None) -> np.ndarray:
    """:func:`key64` of the strings ``buf[starts[i]:starts[i] + lengths[i]]``, as uint64.

    ``buf`` is uint8 with at least 8 readable bytes after every string (:func:`padded`);
    ``last``, when given, is their last words (:func:`edge_words`).
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    h = lengths.astype(np.uint64)
    h *= np.uint64(_K_LEN)
    h ^= np.uint64(_SEED)
    words = _words(buf)
    if len(lengths) and int(lengths.max()) > 8:
        # strings sorted by word count, so that those with a k-th word are a prefix
        _, order, more = _by_inner(lengths)
        hs, ss = h[order], starts[order]
        for k, c in enumerate(more.tolist()):
            _mix_into(hs[:c], words[ss[:c] + 8 * k])
        h[order] = hs
        del hs, ss, order
    _mix_into(h, (edge_words(buf, starts, lengths)[1] if last is None else last.copy()))
    h ^= h >> np.uint64(33)
    h *= np.uint64(_F1)
    h ^= h >> np.uint64(33)
    h *= np.uint64(_F2)
    h ^= h >> np.uint64(33)
    return h


def ranges_equal(
    buf_a: np.ndarray, starts_a: np.ndarray, buf_b: np.ndarray, starts_b: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Whether ``buf_a[starts_a[i]:][:lengths[i]] == buf_b[starts_b[i]:][:lengths[i]]`` (bool array).

    Both buffers padded as for :func:`range_keys`; compared 8 bytes at a time (first and
    last 8 bytes, then the words between them of the longer strings).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    fa, la = edge_words(buf_a, starts_a, lengths)
    fb, lb = edge_words(buf_b, starts_b, lengths)
    same = (fa == fb) & (la == lb)
    del fa, la, fb, lb
    return same & middles_equal(buf_a, starts_a, buf_b, starts_b, lengths)


def middles_equal(
    buf_a: np.ndarray, starts_a: np.ndarray, buf_b: np.ndarray, starts_b: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Whether the strings agree between their first and last 8 bytes (only strings of more
    than 16 bytes have bytes there; see :func:`ranges_equal`)."""
    same = np.ones(len(lengths), dtype=bool)
    long = np.flatnonzero(np.asarray(lengths) > 16)
    if long.size:
        lengths = np.asarray(lengths[long], dtype=np.int64)
        _, order, more = _by_inner(lengths)
        wa, wb = _words(buf_a), _words(buf_b)
        sa, sb = starts_a[long[order]], starts_b[long[order]]
        eq = np.ones(len(long), dtype=bool)
        for k, c in enumerate(more.tolist()[1:], 1):
            eq[:c] &= wa[sa[:c] + 8 * k] == wb[sb[:c] + 8 * k]
        same[long[order]] = eq
    return same


def copy_ranges(
    src: np.ndarray, starts: np.ndarray, lengths: np.ndarray, dst: np.ndarray, dst_starts: np.ndarray
) -> None:
    """``dst[dst_starts[i]:][:lengths[i]] = src[starts[i]:][:lengths[i]]`` for every i.

    Both buffers padded as for :func:`range_keys`; the ranges in ``dst`` must not overlap.
    Copies 8 bytes at a time: the whole words of each string, then its last 8 bytes
    (overlapping), so no write leaves a string's own range; strings under 8 bytes byte
    by byte.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    sw, dw = _words(src), _words(dst)
    inner = _n_inner(lengths)
    total = int(inner.sum())
    if total:  # every inner word at once: word k of string i is 8 * k bytes after its start
        first = np.cumsum(inner) - inner
        step = np.arange(total, dtype=np.int64) - np.repeat(first, inner)
        step *= 8
        dw[np.repeat(dst_starts, inner) + step] = sw[np.repeat(starts, inner) + step]
        del first, step
    long = np.flatnonzero(lengths >= 8)
    tail = lengths[long] - 8
    dw[dst_starts[long] + tail] = sw[starts[long] + tail]
    short = np.flatnonzero(lengths < 8)
    for j in range(7):
        short = short[lengths[short] > j]
        if short.size == 0:
            break
        dst[dst_starts[short] + j] = src[starts[short] + j]


def keys64(strings: Iterable[bytes]) -> np.ndarray:
    """:func:`key64` of each string, as a uint64 array."""
    strings = strings if isinstance(strings, list) else list(strings)
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    starts = np.zeros(len(strings), dtype=np.int64)
    if len(strings) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    return range_keys(padded(b"".join(strings)), starts, lengths)


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
