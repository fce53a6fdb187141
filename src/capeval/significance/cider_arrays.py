"""Array work of CIDEr-D resampling (:mod:`capeval.significance.cider_resample`): the per-chunk
statistics, the document-frequency pairs and their numpy kernel, run and thread helpers."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from capeval.metrics.cider_penalty import slot_penalties
from capeval.significance.spans import spans_take as _spans_take

#: resamples x items from which the numba kernels are used when numba is installed (below,
#: importing numba and loading the compiled kernels, about half a second, cost more than they save)
JIT_MIN_WORK = 500_000
#: bytes of a sub-block's document frequencies (n-grams x resamples, int32): bounds memory
_DF_BUDGET = 64 << 20
#: elements of the numpy kernel's per-entry work arrays (entries x resamples; ~40 bytes each)
_NUMPY_BUDGET = 1 << 21
#: a count gets a row of squares when its entries need this many times the row's squares over
#: the resamples (see :meth:`CiderResampling.rows_for`)
_ROW_FACTOR = 1.0
#: bytes of a sub-block's per-item sums, all systems together (bounds memory on large sets)
_PER_ITEM_BUDGET = 256 << 20
#: doubles in the squares table (one row of N + 1 per tabulated count, at most 64 rows)
_TABLE_BUDGET = 1 << 24


@dataclass
class CiderChunk:
    """What one chunk's CIDEr-D needs on a resample, apart from ``df`` (see the module docs).

    Sentences are the chunk table's (distinct sentences, entries in pycocoevalcap's order);
    ``ent_gid``: the n-gram's id in the corpus index (-1: in no reference, so ``df`` is 0 on
    every resample); hits: (slot, candidate entry, reference entry) of every candidate n-gram
    found in a reference, in the order the scorer sums them; ``factor``: the length penalty of
    each (item, reference) slot; ``df_item``/``df_gid``: the distinct (item, n-gram) pairs of the
    references (items numbered within the chunk), None in the chunks of a later system of a
    comparison scored on the first one's corpus index (the same pairs: ``refs_token``, the index's
    token, says which). Indices and ids are int32 where the chunk's sizes allow (int64
    otherwise), orders int8 (:func:`chunk_statistics`).
    """

    n_items: int
    n_ord: int
    ref_counts: np.ndarray
    ent_ptr: np.ndarray
    ent_gid: np.ndarray
    ent_tf: np.ndarray
    ent_order: np.ndarray
    hyp_sid: np.ndarray
    slot_sid: np.ndarray
    hit_slot: np.ndarray
    hit_h: np.ndarray
    hit_r: np.ndarray
    factor: np.ndarray
    df_item: np.ndarray | None
    df_gid: np.ndarray | None
    n_ids: int = 0
    refs_token: str = ""
    #: names the n-gram table the chunk was computed on: chunks of one joint table (views of it,
    #: NgramTable.view) have the same sentences and entries ("": unknown)
    table_token: str = ""


def table_ids(table: Any, corpus: Any) -> tuple[np.ndarray, np.ndarray]:
    """(id of every n-gram of ``table`` in the :class:`~capeval.metrics.ngrams.GramIndex`
    ``corpus``, -1 for one of no reference; its df as floats): the df is the one
    :func:`capeval.metrics.cider.document_frequencies` gives (the same integers), from one lookup;
    once for a table and its views (``NgramTable.shared_cache``)."""
    cached = table.shared_cache.get(("corpus-ids", id(corpus)))
    if cached is not None and cached[0] is corpus:
        return cached[1]
    gid = corpus.ids_of(table)
    flat = corpus.df_by_id()
    df = np.zeros(len(gid), dtype=np.float64)
    found = gid >= 0
    df[found] = flat[gid[found]]
    table.shared_cache[("corpus-ids", id(corpus))] = (corpus, (gid, df))
    return gid, df


def chunk_statistics(table: Any, gid: np.ndarray, n_ids: int, sigma: float, pairs: bool = True,
                     refs_token: str = "") -> CiderChunk:
    """The resampling statistics of one chunk's :class:`~capeval.metrics.ngrams.NgramTable`,
    ``gid`` its n-grams' ids over all references (:func:`table_ids`), ``n_ids`` their number;
    without ``pairs``, no (item, n-gram) pairs of the references (another system's chunk on the
    same index, ``refs_token``, holds them)."""
    n = table.n
    small, sentences = _sentence_arrays(table, gid, n_ids)
    hit_slot, hit_h, hit_r = table.hits()
    item, gram = table.item_grams() if pairs else (None, None)
    return CiderChunk(
        n_items=int(table.n_items), n_ord=n, **sentences, hyp_sid=table.hyp_sid.astype(np.int64),
        hit_slot=hit_slot.astype(_narrow_type(len(table.slot_sid))),
        hit_h=hit_h.astype(small), hit_r=hit_r.astype(small),
        factor=slot_penalties(table, sigma),  # the scorer's, as cider_table_scores multiplies by them
        df_item=None if item is None else item.astype(_narrow_type(int(table.n_items))),
        df_gid=None if gram is None else gid[gram].astype(small), n_ids=n_ids, refs_token=refs_token,
        table_token=table.token)


def _sentence_arrays(table: Any, gid: np.ndarray, n_ids: int) -> tuple[type, dict[str, np.ndarray]]:
    """(the index type, the chunk's sentence and slot arrays): what does not depend on the
    candidates, once for a table and its views (``NgramTable.shared_cache``; a comparison's
    systems scored on one joint table then send the same arrays, pickled once)."""
    key = ("cider-sentences", id(gid), n_ids)
    cached = table.shared_cache.get(key)
    if cached is not None and cached[0] is gid:
        return cached[1]
    # the narrowest exact types: the statistics cross from the worker processes to the parent
    # and are held for every system until the resampling groups them (half the bytes of int64)
    small = _narrow_type(max(len(table.ent_tf), n_ids + 1, len(table.slot_sid), int(table.n_items)), np.int32)
    # counts within one sentence, slots and items within one chunk: most fit 8 or 16 bits
    tf_type = _narrow_type(int(table.ent_tf.max()) + 1 if len(table.ent_tf) else 1)
    arrays = {"ref_counts": table.ref_counts.astype(np.int64), "ent_ptr": table.ent_ptr.astype(np.int64),
              "ent_gid": gid[table.ent_gram].astype(small), "ent_tf": table.ent_tf.astype(tf_type),
              "ent_order": table.ent_order.astype(np.int8 if table.n <= 127 else np.int64),
              "slot_sid": table.slot_sid.astype(np.int64)}
    out = (small, arrays)
    table.shared_cache[key] = (gid, out)
    return out


def _narrow_type(bound: int, narrowest: type = np.int8) -> type:
    """The narrowest of int8, int16, int32, int64, from ``narrowest`` on, holding every integer
    in ``[0, bound)``."""
    for kind in (np.int8, np.int16, np.int32):
        if np.iinfo(kind).bits >= np.iinfo(narrowest).bits and bound <= np.iinfo(kind).max:
            return kind
    return np.int64


def _weights(n: int) -> np.ndarray:
    """``w[d] = log N - log max(1, d)`` for d = 0..N, the expression of ``cider_table_scores``
    (numpy's log of the same values, so the same doubles)."""
    df = np.arange(n + 1, dtype=np.float64)
    return np.log(float(n)) - np.log(np.maximum(1.0, df))


def _squares(values: np.ndarray) -> np.ndarray:
    """``v ** 2`` of every value as Python computes it (libm's ``pow``), each distinct value once,
    as ``cider_table_scores`` squares them."""
    uniq, inv = np.unique(values, return_inverse=True)
    return np.array([v**2 for v in uniq.tolist()], dtype=np.float64)[inv.reshape(values.shape)]


def _unique_small(values: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of integers in ``[0, bound)``, by a table of
    ``bound`` flags instead of a sort (the same arrays, int64)."""
    present = np.zeros(bound, dtype=bool)
    present[values] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present).astype(np.int64), rank[values]


def numba_available() -> bool:
    """Is numba importable (found, not imported; nor is METEOR's engine, whose jit_align asks the same)?"""
    from capeval._optional import available

    return available("numba")


def _threads() -> int:
    """Threads for the kernels: the cores this process may use, at most 4 (as the scorers' workers)."""
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _in_threads(threads: int, calls: list[tuple[Any, tuple]], pool: Any = None) -> list[Any]:
    """``fn(*args)`` for each call, on ``threads`` threads (numba's kernels release the GIL)."""
    return _start_threads(threads, calls, pool)()


def _start_threads(threads: int, calls: list[tuple[Any, tuple]], pool: Any = None) -> Any:
    """:func:`_in_threads` started: returns the call that waits for the calls and gives their
    results (re-raising the first error); on one thread, or for one call, they are made before
    returning. ``pool``: a running executor of ``threads`` threads to use (else one is started
    for these calls and shut down after them)."""
    if threads <= 1 or len(calls) <= 1:
        results = [fn(*args) for fn, args in calls]
        return lambda: results
    own = None
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = own = ThreadPoolExecutor(threads)
    futures = [pool.submit(fn, *args) for fn, args in calls]

    def wait() -> list[Any]:
        try:
            return [f.result() for f in futures]
        finally:
            if own is not None:
                own.shutdown(wait=True)

    return wait


def _df_numpy(ct: np.ndarray, item: np.ndarray, ptr: np.ndarray, out: np.ndarray) -> None:
    """``out[u] = sum(ct[item[ptr[u]:ptr[u + 1]]])`` for every set u (integers: exact in any order)."""
    k = ct.shape[1]
    step = max(1, _NUMPY_BUDGET // max(k, 1))
    starts, ends = ptr[:-1], ptr[1:]
    n_sets = len(starts)
    a = 0
    while a < n_sets:
        # whole sets, at most ``step`` items at a time (one set at least)
        b = max(a + 1, int(np.searchsorted(ends, starts[a] + step, side="right")))
        lo, hi = int(starts[a]), int(ends[b - 1])
        out[a:b] = np.add.reduceat(ct[item[lo:hi]], starts[a:b] - lo, axis=0)
        a = b


def _runs(seg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal values of ``seg`` (sorted): (value, start, length) of each, longest first."""
    if not len(seg):
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    lengths = np.diff(np.r_[starts, len(seg)])
    order = np.argsort(-lengths, kind="stable")
    return seg[starts[order]], starts[order], lengths[order]


def _sequential(runs: tuple[np.ndarray, np.ndarray, np.ndarray], x: np.ndarray,
                rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(run values, sums): each run's elements summed one after the other from 0.0 (the order of
    ``np.bincount`` and ``np.add.at``, not numpy's pairwise sum), whole rows at a time. Element j
    is row ``x[j]``, or ``x[rows[j]]`` (read where it lies, not copied per element)."""
    values, starts, lengths = runs
    acc = np.zeros((len(values),) + x.shape[1:], dtype=np.float64)
    if not len(values):
        return values, acc
    # step p adds the p-th element of every run longer than p: a prefix, runs being longest first
    longer = np.searchsorted(-lengths, -np.arange(1, int(lengths[0]) + 1), side="right")
    for p in range(int(lengths[0])):
        m = int(longer[p])
        at = starts[:m] + p
        acc[:m] += x[at if rows is None else rows[at]]
    return values, acc



#: the first values of the runs that order them for :func:`_shared_prefixes` (three per 64-bit key)
_ORDER_DEPTH = 9


def _shared_prefixes(values: np.ndarray, ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The runs ``values[ptr[q]:ptr[q + 1]]`` (each non-empty) put in an order where runs that
    begin alike follow each other (sorted by their first :data:`_ORDER_DEPTH` values), each run
    reduced to what it does not share with the run before it. A sum over every run from its first
    element on, kept as one partial sum per depth (``stack[d]``: the sum of the first d elements),
    then adds each shared prefix once for all the runs that share it, in the same order (the same
    doubles): a run keeps the partial sums of the run before it up to their common length.

    Returns ``(node value, node depth, runs, run's node)``: the nodes (the runs' elements not
    shared with the run before, run after run in that order), the runs' numbers in that order,
    and for each of them the node after which its sum is complete (its last node; for a run equal
    to the start of the run before, that run's last node), non-decreasing."""
    n_runs = len(ptr) - 1
    none = np.zeros(0, dtype=np.int64)
    if n_runs <= 0:
        return none, none, none, none
    lengths = np.diff(ptr)
    starts = ptr[:-1]
    lo = int(values.min())
    bits = max(1, (int(values.max()) - lo + 1).bit_length())  # value - lo + 1 (0: past the run's end)
    per_key = max(1, 63 // bits)
    keys = []
    for k0 in range(0, _ORDER_DEPTH, per_key):
        key = np.zeros(n_runs, dtype=np.int64)
        for d in range(k0, min(k0 + per_key, _ORDER_DEPTH)):
            there = lengths > d
            v = np.where(there, values[np.where(there, starts + d, 0)] - lo + 1, 0)
            key <<= np.int64(bits)
            key |= v
        keys.append(key)
    order = np.lexsort(keys[::-1])  # the first key is the first depths: the primary one
    o_start, o_len = starts[order], lengths[order]
    # the common length of each run (in that order) with the run before it
    common = np.zeros(n_runs, dtype=np.int64)
    alike = np.ones(n_runs - 1, dtype=bool)
    for d in range(int(o_len.max())):
        alike &= (o_len[1:] > d) & (o_len[:-1] > d)
        if not alike.any():
            break
        here = np.flatnonzero(alike)
        alike[here] = values[o_start[1:][here] + d] == values[o_start[:-1][here] + d]
        common[1:][alike] += 1
    fresh = o_len - common
    node = _spans_take(o_start + common, fresh, int(fresh.sum()))
    depth = np.arange(len(node), dtype=np.int64)
    depth -= np.repeat(np.cumsum(fresh) - fresh - common, fresh)
    return values[node], depth, order, np.cumsum(fresh) - 1


@functools.lru_cache(maxsize=None)
def orders_mean_is_sequential(n_ord: int) -> bool:
    """Whether numpy's mean over the last axis of an ``(m, n_ord)`` array is, to the last bit,
    ``(((x0 + x1) + x2) + ...) / n_ord`` (the compiled kernels' fused score): checked on 4,099
    random rows whose values make the other orders of addition differ."""
    rng = np.random.default_rng(n_ord)
    x = rng.random((4099, n_ord)) * np.exp2(rng.integers(-30, 30, size=(4099, n_ord)))
    total = x[:, 0].copy()
    for o in range(1, n_ord):
        total += x[:, o]
    return bool(np.array_equal(x.mean(axis=1), total / n_ord))
