"""The references' n-grams indexed by the sets of items holding them: what CIDEr-D's resampled
document frequencies are counted from (:class:`~capeval.significance.cider_resample.CiderResampling`).

The index is built from the distinct (item, n-gram) pairs of the references, either those the
first system's scoring pass kept with its chunk statistics, or those its corpus pass kept with
the corpus index (:meth:`capeval.metrics.ngrams.GramIndex.part` with ``pairs=True``): the same
pairs, numbered by the same index. From the corpus pass the index is built while the scoring
pass's workers score (:class:`ReferenceSets`, left with :func:`capeval.significance.keep.defer`),
instead of after it, on one core, while the other waits.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from capeval.significance.cider_arrays import CiderChunk
from capeval.significance.run_groups import run_sets
from capeval.significance.spans import run_starts

#: one part of the pairs: (n-gram ids over the corpus index, items within the part, the part's first item)
Part = tuple[np.ndarray, np.ndarray, int]


def _chunk_parts(chunks: list[CiderChunk]) -> list[Part]:
    bases = np.cumsum([0] + [c.n_items for c in chunks])
    return [(c.df_gid, c.df_item, int(b)) for c, b in zip(chunks, bases)]


def _df_pairs(chunks: list[CiderChunk], n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (item, n-gram) pairs of the chunks' references, sorted by n-gram, then item."""
    return _sorted_pairs(_chunk_parts(chunks), n_items)


def _sorted_pairs(parts: list[Part], n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """(items, n-gram ids) of the parts' pairs, sorted by n-gram, then item."""
    key, bits, _ = _sorted_keys(parts, sum(len(gid) for gid, _, _ in parts), n_items)
    gid = key >> bits
    np.bitwise_and(key, (np.int64(1) << bits) - 1, out=key)  # the item
    return key, gid


def _sorted_keys(parts: Iterable[Part], total: int, n_items: int) -> tuple[np.ndarray, np.int64, tuple[int, ...]]:
    """(the ``total`` pairs of the parts as keys ``n-gram << bits | item``, sorted; ``bits``, those
    of the largest item; :func:`_parts_digest` of the pairs). Written part by part into one array
    (fresh pages cost more than the arithmetic; shifts and masks, not a division), the digest
    taken meanwhile: a part's arrays can be let go before the next is made."""
    bits = np.int64(max(n_items - 1, 1).bit_length())
    key = np.empty(total, dtype=np.int64)
    sums = (np.uint64(0), np.uint64(0))
    at = 0
    for gid, item, base in parts:
        if at + len(gid) > total:
            raise ValueError(f"ReferenceSets: more than the {total} (item, n-gram) pairs counted")
        sums = _digest_part(gid, item, base, *sums)
        seg = key[at:at + len(gid)]
        np.left_shift(gid, bits, out=seg, casting="unsafe")
        seg += item
        seg += base
        at += len(seg)
    if at != total:
        raise ValueError(f"ReferenceSets: {at} (item, n-gram) pairs where {total} were counted")
    key.sort()
    return key, bits, (int(sums[0]), int(sums[1]), total, n_items)


def _pairs_digest(chunks: list[CiderChunk]) -> tuple[int, ...]:
    """The (item, n-gram id) pairs of the chunks' references, in any order, as two 64-bit sums of
    mixed hashes, their count and the items': equal for two systems scored on the same references
    in the same chunks (their n-gram ids then agree), without sorting millions of pairs per system."""
    return _parts_digest(_chunk_parts(chunks), sum(c.n_items for c in chunks))


def _parts_digest(parts: list[Part], n_items: int) -> tuple[int, ...]:
    sums = (np.uint64(0), np.uint64(0))
    for gid, item, base in parts:
        sums = _digest_part(gid, item, base, *sums)
    return int(sums[0]), int(sums[1]), sum(len(gid) for gid, _, _ in parts), n_items


def _digest_part(gid: np.ndarray, item: np.ndarray, base: int, s1: np.uint64,
                 s2: np.uint64) -> tuple[np.uint64, np.uint64]:
    """The two sums of :func:`_parts_digest` with one part's pairs added (modulo 2^64)."""
    with np.errstate(over="ignore"):
        x = (item.astype(np.int64) + base).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + \
            gid.astype(np.uint64)
        x ^= x >> np.uint64(29)
        s1 = s1 + (x * np.uint64(0xBF58476D1CE4E5B9)).sum(dtype=np.uint64)
        x ^= np.uint64(0x94D049BB133111EB)
        x *= np.uint64(0xD6E8FEB86659FD93)
        s2 = s2 + x.sum(dtype=np.uint64)
    return s1, s2


class ReferenceSets:
    """The set index of a corpus index's reference pairs (a :class:`~capeval.metrics.ngrams.GramIndex`
    whose parts kept them), built at the first :meth:`get` (from any thread: once), after which
    the corpus lets its pairs go."""

    def __init__(self, corpus: Any):
        if not corpus.keeps_pairs:
            raise ValueError("ReferenceSets: the corpus index kept no (item, n-gram) pairs")
        self.token = corpus.token
        self.n_items = int(corpus.n_docs)
        self._corpus: Any = corpus
        self._lock = threading.Lock()
        self._index: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._digest: tuple[int, ...] | None = None

    def get(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """``(n_ids, set of each n-gram id, the sets' items, their pointers)`` as
        :meth:`~capeval.significance.cider_resample.CiderResampling.prepare` builds them from
        chunks with pairs (the same arrays)."""
        with self._lock:
            if self._index is None:
                corpus, self._corpus = self._corpus, None
                key, bits, self._digest = _sorted_keys(corpus.iter_reference_pairs(), corpus.reference_pair_count(),
                                                       self.n_items)
                corpus.drop_reference_pairs()
                starts = run_starts(key, int(bits))
                run_gid = key[starts] >> bits
                np.bitwise_and(key, (np.int64(1) << bits) - 1, out=key)  # the item
                n_ids = max(int(corpus.n_ids()), int(run_gid[-1]) + 1 if len(run_gid) else 0)
                self._index = (n_ids,) + run_sets(key, starts, run_gid, n_ids)
            return self._index

    def digest(self) -> tuple[int, ...]:
        """:func:`_pairs_digest` of the same pairs (to match a system whose chunks kept them)."""
        self.get()
        assert self._digest is not None
        return self._digest


def sets_for(chunks: list[CiderChunk], n_items: int, token: str) -> ReferenceSets | None:
    """None for chunks that kept the references' pairs (the first system's, scored without a
    corpus pass that kept them); else the :class:`ReferenceSets` of their corpus index
    (``token``), left by its pass (:func:`capeval.significance.keep.reference_sets`)."""
    if all(c.df_item is not None and c.df_gid is not None for c in chunks):
        return None
    from capeval.significance.keep import reference_sets

    found = reference_sets(token)
    if found is None or found.n_items != n_items or any(c.df_item is not None for c in chunks):
        raise ValueError("CiderResampling: built from chunks without the references' (item, n-gram) pairs (those of "
                         "a later system of a comparison) and no index of them: build it from the first system's")
    return found
