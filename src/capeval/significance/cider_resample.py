"""CIDEr-D on bootstrap resamples from the statistics of one scoring pass, bit for bit.

On a resample the document frequencies are those of the resample (``df_r(g)``: the summed
multiplicities of the items whose references hold ``g``; ``N`` the number of items), so every
drawn item is scored again with the weights ``w = log N - log max(1, df_r)``. What does not
depend on ``df`` is taken from the scoring pass once (:func:`chunk_statistics`, called by the
``cider-d`` scorer of each chunk when :mod:`capeval.significance.compare` asks for it): each
sentence's n-grams (global ids, counts, orders, in pycocoevalcap's order), every candidate
n-gram found in a reference (the clipped products), the length penalty of every (candidate,
reference) pair. Per resample only the weighted sums are redone, in exactly the order and
with exactly the operations of :func:`capeval.metrics.cider.cider_table_scores` (sequential
sums per sentence and order, ``min(vh, vr) * vr``, ``pow(v, 2)`` as Python computes it, the
division by the norms, the penalty, the item's sum over its references, numpy's mean over the
orders), so every item score, and so every resample's score, is the one a full rescoring of
the resample gives, to the last bit (``tests/test_compare_fast.py`` compares with the former
implementation, which rescored the whole table per resample).

The resamples of a block are computed together, the resample being the innermost (contiguous)
axis of every array: each n-gram's ``df`` over the block is one row, and a sentence's sums run
over its n-grams in order with one row of the block at a time, so the order of every sum is the
scorer's while the work per n-gram is shared by the block. Two kernels give the same numbers:
numpy (any install) and numba's JIT (the ``fast`` extra, for large jobs: :data:`JIT_MIN_WORK`;
compiled once and cached by numba), run on the chunks in threads. The resample's ``df`` is
shared by every system (the references are the same), and so are the squares: ``pow(v, 2)`` of
``v = tf * w[df]`` looked up in a table per count ``tf`` (Python's ``pow``, which is libm's and
differs from ``v * v`` in the last bit now and then), the few entries of rare counts squared
per block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

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
    references (items numbered within the chunk).
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
    df_item: np.ndarray
    df_gid: np.ndarray
    n_ids: int = 0


def table_ids(table: Any, corpus: Any) -> tuple[np.ndarray, np.ndarray]:
    """(id of every n-gram of ``table`` in the :class:`~capeval.metrics.ngrams.GramIndex`
    ``corpus``, -1 for one of no reference; its df as floats): the df is the one
    :func:`capeval.metrics.cider.document_frequencies` gives (the same integers), from one lookup."""
    gid = corpus.ids_of(table)
    flat = corpus.df_by_id()
    df = np.zeros(len(gid), dtype=np.float64)
    found = gid >= 0
    df[found] = flat[gid[found]]
    return gid, df


def chunk_statistics(table: Any, gid: np.ndarray, n_ids: int, sigma: float) -> CiderChunk:
    """The resampling statistics of one chunk's :class:`~capeval.metrics.ngrams.NgramTable`,
    ``gid`` its n-grams' ids over all references (:func:`table_ids`), ``n_ids`` their number."""
    n = table.n
    n_sent = table.n_sent
    # the length penalty exactly as cider_table_scores computes it (df plays no part)
    length = np.bincount(table.ent_sent, weights=np.where(table.ent_order == 1, table.ent_tf, 0), minlength=n_sent)
    hyp_of_slot = table.hyp_sid[table.slot_item]
    delta = (length[hyp_of_slot] - length[table.slot_sid]).tolist()
    factor = {d: np.e ** (-(d**2) / (2 * sigma**2)) for d in set(delta)}
    h_slot, h_ent, r_ent = table.pairs()
    hit = r_ent >= 0
    item, gram = table.item_grams()
    return CiderChunk(
        n_items=int(table.n_items), n_ord=n, ref_counts=table.ref_counts.astype(np.int64),
        ent_ptr=table.ent_ptr.astype(np.int64), ent_gid=gid[table.ent_gram], ent_tf=table.ent_tf.astype(np.int64),
        ent_order=table.ent_order.astype(np.int64), hyp_sid=table.hyp_sid.astype(np.int64),
        slot_sid=table.slot_sid.astype(np.int64), hit_slot=h_slot[hit], hit_h=h_ent[hit], hit_r=r_ent[hit],
        factor=np.array([factor[d] for d in delta], dtype=np.float64), df_item=item, df_gid=gid[gram],
        n_ids=n_ids)


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


class CiderResampling:
    """What the systems of one comparison share: the resamples' ``df`` (from the references, the
    same for every system), the weights and squares tables, per chunk the sentences' norms (a
    reference is weighed once per resample, whichever system it serves), the kernel choice; and
    each block's item scores, computed for every system at once."""

    def __init__(self, n_items: int, chunks: list[CiderChunk], samples_hint: int = 1000, jit: bool | None = None,
                 threads: int | None = None):
        self.n = n_items
        item, gid = _df_pairs(chunks, n_items)
        self.df_signature = _pairs_digest(chunks)
        self.n_ids = max([c.n_ids for c in chunks] + [int(gid.max()) + 1 if len(gid) else 0])
        # n-grams held by the same items' references have the same df on every resample: one
        # sum per distinct set of items (the n-grams of a caption used as a reference by the
        # same items, say); set n_sets: the n-grams of no reference (df 0)
        self.set_of, self._set_items, self._set_ptr = _item_sets(item, gid, self.n_ids)
        self.n_sets = len(self._set_ptr) - 1
        self.weights = _weights(n_items)
        self._rows: dict[int, int] = {}  # tf -> row of self._table
        self._table = np.zeros((0, n_items + 1), dtype=np.float64)
        self.samples_hint = samples_hint
        if jit is None:
            from capeval.metrics.meteor.jit_align import available

            jit = available() and n_items * samples_hint >= JIT_MIN_WORK
        self.jit = bool(jit)
        self.threads = threads if threads is not None else _threads()
        #: resamples computed together (their df rows stay within _DF_BUDGET)
        self.sub_block = int(min(32, max(4, _DF_BUDGET // (4 * (self.n_sets + 1)))))
        self._systems: list[CiderStatistic] = []
        self._groups: list[_Group] | None = None
        self._done: tuple[Any, dict[int, np.ndarray]] = (None, {})

    def same_references(self, chunks: list[CiderChunk]) -> bool:
        """Do ``chunks`` (another system's) hold the same reference n-grams per item?"""
        return _pairs_digest(chunks) == self.df_signature

    def register(self, stat: "CiderStatistic") -> None:
        """Compute ``stat``'s resamples with the others' (the same blocks, shared norms)."""
        self._systems.append(stat)
        self._groups = None

    # -- squares ---------------------------------------------------------------
    def rows_for(self, tf: np.ndarray) -> np.ndarray:
        """Per entry the row of the squares table of its count ``tf`` (-1: squared per block).

        A count gets a row (``N + 1`` squares, computed once) when its entries, over the
        resamples, would need more squares than the row holds; count 1 always has one."""
        values, counts = np.unique(tf, return_counts=True)
        by_count = sorted(zip(counts.tolist(), values.tolist()), reverse=True)
        want = [int(v) for c, v in by_count if v == 1 or c * self.samples_hint >= _ROW_FACTOR * (self.n + 1)]
        room = max(1, _TABLE_BUDGET // (self.n + 1)) - len(self._rows)
        new = [t for t in want if t not in self._rows][:max(0, min(room, 64 - len(self._rows)))]
        if new:
            # float(t) * w as numpy multiplies them in cider_table_scores, then Python's pow
            rows = np.array([_squares(float(t) * self.weights) for t in new], dtype=np.float64)
            for t in new:
                self._rows[t] = len(self._rows)
            self._table = np.concatenate([self._table, rows]) if len(self._table) else rows
        lookup = np.full(len(tf), -1, dtype=np.int64)
        for t, row in self._rows.items():
            lookup[tf == t] = row
        return lookup

    @property
    def table(self) -> np.ndarray:
        """The squares table: row ``rows_for(tf)``, column ``df``."""
        return self._table

    @property
    def row_one(self) -> int:
        """The table's row of count 1 (-1 when no entry has count 1)."""
        return self._rows.get(1, -1)

    # -- a block of resamples ------------------------------------------------------
    def df_block(self, counts: np.ndarray) -> np.ndarray:
        """``(n_sets + 1, k)`` int32: the df of each set of items on each resample of ``counts``
        (``(k, N)`` multiplicities); the last row, of the n-grams of no reference, is 0."""
        ct = np.ascontiguousarray(np.asarray(counts).T, dtype=np.int32)  # (N, k)
        out = np.zeros((self.n_sets + 1, ct.shape[1]), dtype=np.int32)
        if not self.n_sets:
            return out
        if self.jit:
            from capeval.significance import cider_jit

            parts = np.linspace(0, self.n_sets, self.threads + 1).astype(np.int64)
            _in_threads(self.threads, [(cider_jit.df_block, (ct, self._set_items, self._set_ptr, int(a), int(b), out))
                                       for a, b in zip(parts[:-1], parts[1:]) if b > a])
        else:
            _df_numpy(ct, self._set_items, self._set_ptr, out)
        return out

    def resampled(self, stat: "CiderStatistic", counts: np.ndarray) -> np.ndarray:
        """``stat``'s CIDEr-D on each resample of ``counts`` (``(k, N)`` multiplicities). Every
        registered system's are computed at the first call for a block (one df per sub-block)."""
        last, done = self._done
        if last is not counts or id(stat) not in done:
            if stat not in self._systems:
                self.register(stat)
            done = self._all(counts, self._systems, lambda s, rows, scores: np.array(
                # the mean over the drawn items as the rescoring did it: counts . scores / N, the
                # same dot product (BLAS's, on a fresh array; its last bits depend on BLAS's
                # threads, as before)
                [float(c @ s_.copy()) / s.n for c, s_ in zip(rows, scores)]))
            self._done = (counts, done)
        return done[id(stat)]

    def item_scores(self, stat: "CiderStatistic", counts: np.ndarray) -> np.ndarray:
        """``(k, N)`` item scores of ``stat`` on each resample of ``counts`` (an item not drawn
        scores 0)."""
        if stat not in self._systems:
            self.register(stat)
        return self._all(counts, [stat], lambda s, rows, scores: scores)[id(stat)]

    def _all(self, counts: np.ndarray, systems: list["CiderStatistic"], reduce: Any) -> dict[int, np.ndarray]:
        """Per system, ``reduce(system, counts rows, their item scores)`` concatenated over the
        sub-blocks (only a sub-block's item scores are held at a time)."""
        if self._groups is None:
            self._groups = _groups(self, self._systems)
        k, n = counts.shape
        n_ord = self._systems[0].n_ord
        which = [self._systems.index(s) for s in systems]
        # a sub-block's per-item sums of every system within _PER_ITEM_BUDGET
        step = int(max(1, min(self.sub_block, _PER_ITEM_BUDGET // max(1, len(self._systems) * n * n_ord * 8))))
        parts: dict[int, list[np.ndarray]] = {id(s): [] for s in systems}
        per_item = np.empty((len(self._systems), step, n, n_ord), dtype=np.float64)
        for a in range(0, k, step):
            b = min(k, a + step)
            df = self.df_block(counts[a:b])
            per = per_item[:, :b - a]
            _in_threads(self.threads if self.jit else 1, [(g.block, (df, per)) for g in self._groups])
            for j, s in zip(which, systems):
                # numpy's mean over the orders on an (items, orders) array, as cider_table_scores
                means = per[j].reshape((b - a) * n, n_ord).mean(axis=1).reshape(b - a, n)
                parts[id(s)].append(reduce(s, counts[a:b], means / s.ref_counts * 10.0))
        return {key: np.concatenate(v) for key, v in parts.items()}


def _dedupe_runs(ptr: np.ndarray, cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(id of each run, the runs kept): runs ``ptr[u]:ptr[u + 1]`` of the rows of ``cols`` with
    the same content get one id (the first such run is kept). Told apart by length and two
    64-bit hashes, then checked element by element (after a collision, never seen, no run is
    merged)."""
    n_runs = len(ptr) - 1
    if n_runs <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lengths = np.diff(ptr)
    total = int(ptr[-1])
    starts = ptr[:-1]
    pos = (np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)).astype(np.uint64)
    h1 = np.zeros(total, dtype=np.uint64)
    h2 = np.zeros(total, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j, c in enumerate(cols):
            x = c.astype(np.int64).astype(np.uint64) + np.uint64(j + 1)
            h1 = (h1 ^ x) * np.uint64(0x9E3779B97F4A7C15) + pos
            h2 = (h2 + x * np.uint64(0xC2B2AE3D27D4EB4F)) ^ (x >> np.uint64(7)) ^ (pos * np.uint64(0x165667B19E3779F9))
        nonempty = lengths > 0
        r1 = np.zeros(n_runs, dtype=np.uint64)
        r2 = np.zeros(n_runs, dtype=np.uint64)
        if total:
            r1[nonempty] = np.add.reduceat(h1, starts[nonempty])
            r2[nonempty] = np.add.reduceat(h2, starts[nonempty])
    order = np.lexsort((r2, r1, lengths))
    new = np.r_[True, (np.diff(lengths[order]) != 0) | (r1[order][1:] != r1[order][:-1])
                | (r2[order][1:] != r2[order][:-1])]
    group = np.cumsum(new) - 1
    first = np.full(int(group[-1]) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, group, order)  # the first run of each group, in run order
    rep = np.empty(n_runs, dtype=np.int64)
    rep[order] = first[group]
    idx = np.repeat(starts[rep], lengths) + pos.astype(np.int64)
    if not all(np.array_equal(c, c[idx]) for c in cols):
        return np.arange(n_runs, dtype=np.int64), np.arange(n_runs, dtype=np.int64)
    kept = np.unique(rep)
    ids = np.searchsorted(kept, rep)
    return ids, kept


def _item_sets(item: np.ndarray, gid: np.ndarray, n_ids: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(set of each n-gram id, the sets' items, their pointers): the distinct item lists of the
    n-grams (``item``/``gid`` sorted by n-gram, then item); ids of no reference get set ``n_sets``."""
    set_of = np.full(n_ids + 1, -1, dtype=np.int64)
    if not len(gid):
        set_of[:] = 0
        return set_of, np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    ptr = np.r_[starts, len(gid)].astype(np.int64)
    ids, kept = _dedupe_runs(ptr, [item])
    set_of[gid[starts]] = ids
    set_of[set_of < 0] = len(kept)
    lengths = np.diff(ptr)[kept]
    set_ptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    take = np.repeat(ptr[kept], lengths) + (np.arange(int(set_ptr[-1]), dtype=np.int64) - np.repeat(set_ptr[:-1], lengths))
    return set_of, item[take].astype(np.int64), set_ptr


def _threads() -> int:
    """Threads for the kernels: the cores this process may use, at most 4 (as the scorers' workers)."""
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _in_threads(threads: int, calls: list[tuple[Any, tuple]]) -> list[Any]:
    """``fn(*args)`` for each call, on ``threads`` threads (numba's kernels release the GIL)."""
    if threads <= 1 or len(calls) <= 1:
        return [fn(*args) for fn, args in calls]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(fn, *args) for fn, args in calls]
        return [f.result() for f in futures]


def _df_pairs(chunks: list[CiderChunk], n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (item, n-gram) pairs of the references, sorted by n-gram, then item."""
    keys = []
    base = 0
    for c in chunks:
        keys.append(c.df_gid.astype(np.int64) * max(n_items, 1) + (c.df_item + base))
        base += c.n_items
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key = np.sort(np.concatenate(keys))
    return key % max(n_items, 1), key // max(n_items, 1)


def _pairs_digest(chunks: list[CiderChunk]) -> tuple[int, ...]:
    """The (item, n-gram id) pairs of the references, in any order, as two 64-bit sums of mixed
    hashes and their count: equal for two systems scored on the same references in the same
    chunks (their n-gram ids then agree), without sorting millions of pairs per system."""
    s1 = s2 = np.uint64(0)
    count = 0
    base = 0
    with np.errstate(over="ignore"):
        for c in chunks:
            x = (c.df_item + base).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + c.df_gid.astype(np.uint64)
            x ^= x >> np.uint64(29)
            s1 += (x * np.uint64(0xBF58476D1CE4E5B9)).sum(dtype=np.uint64)
            s2 += ((x ^ np.uint64(0x94D049BB133111EB)) * np.uint64(0xD6E8FEB86659FD93)).sum(dtype=np.uint64)
            count += len(x)
            base += c.n_items
    return int(s1), int(s2), count, base


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


class CiderStatistic:
    """CIDEr-D of one system on resamples (``resampled``) and on mixed item sets (``mixed``)."""

    def __init__(self, chunks: list[CiderChunk], items: np.ndarray, shared: CiderResampling | None):
        self.n = len(items)
        self.items = np.asarray(items, dtype=np.float64)
        self.shared = shared
        self.chunks = chunks
        self.n_ord = chunks[0].n_ord if chunks else 4
        self.ref_counts = (np.concatenate([c.ref_counts for c in chunks]) if chunks
                           else np.zeros(0, dtype=np.int64))
        if shared is not None:
            shared.register(self)

    def score(self) -> float:
        return float(np.mean(self.items))

    def item_scores(self, counts: np.ndarray) -> np.ndarray:
        """``(k, N)`` item scores on each resample (an item not drawn scores 0)."""
        if self.shared is None:
            raise ValueError("CiderStatistic.item_scores needs the shared CiderResampling")
        return self.shared.item_scores(self, np.asarray(counts, dtype=np.float64))

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        if self.shared is None:
            raise ValueError("CiderStatistic.resampled needs the shared CiderResampling")
        return self.shared.resampled(self, np.asarray(counts, dtype=np.float64))

    def mixed(self, take_self: np.ndarray, other: "CiderStatistic") -> np.ndarray:
        # the approximate randomisation swaps outputs; the references, hence df, do not change
        return (take_self @ self.items + (~take_self) @ other.items) / self.n


def _groups(shared: CiderResampling, systems: list[CiderStatistic]) -> list["_Group"]:
    """The systems' chunks side by side (chunk j of every system covers the same items when
    their partitions agree; otherwise each system's chunks form groups of their own)."""
    sizes = [[c.n_items for c in s.chunks] for s in systems]
    if all(z == sizes[0] for z in sizes):
        return [_Group(shared, [s.chunks[j] for s in systems], [sum(sizes[0][:j])] * len(systems),
                       list(range(len(systems)))) for j in range(len(sizes[0]))]
    out = []
    for j, s in enumerate(systems):
        base = 0
        for c in s.chunks:
            out.append(_Group(shared, [c], [base], [j]))
            base += c.n_items
    return out


class _Group:
    """Chunk j of every system: their distinct sentences (a reference, or a candidate that is also
    a reference, once), whose norms are computed once per block, and each system's items.

    Entries point to the group's own list of sets of items (``loc_g``), whose weights and squares
    are looked up once per block; a sentence's entries are in pycocoevalcap's order."""

    def __init__(self, shared: CiderResampling, chunks: list[CiderChunk], bases: list[int], which: list[int]):
        self.shared = shared
        self.n_ord = chunks[0].n_ord
        self.which = which
        self.bases = bases
        n_ord = self.n_ord
        # all sentences of all chunks, then the distinct ones (same n-grams, counts, orders, order)
        ptrs, gids, tfs, ords = [], [], [], []
        sent_base = []
        ent0 = nsent = 0
        for c in chunks:
            sent_base.append(nsent)
            ptrs.append(c.ent_ptr[:-1] + ent0)
            gids.append(c.ent_gid)
            tfs.append(c.ent_tf)
            ords.append(c.ent_order)
            ent0 += len(c.ent_gid)
            nsent += len(c.ent_ptr) - 1
        ptr = np.r_[np.concatenate(ptrs), ent0].astype(np.int64)
        gid, tf, order = np.concatenate(gids), np.concatenate(tfs), np.concatenate(ords)
        sent_id, kept = _dedupe_runs(ptr, [gid, tf, order])
        lengths = np.diff(ptr)[kept]
        self.ent_ptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        take = np.repeat(ptr[kept], lengths) + (np.arange(int(self.ent_ptr[-1]), dtype=np.int64)
                                                 - np.repeat(self.ent_ptr[:-1], lengths))
        self.n_sent = len(kept)
        sets = shared.set_of[np.where(gid < 0, shared.n_ids, gid)]
        self.loc_g, ent_loc_all = np.unique(sets, return_inverse=True)
        ent_loc_all = ent_loc_all.reshape(-1).astype(np.int64)
        # the group's sets numbered in order of first use by its sentences: the rows a sentence
        # reads lie near each other (its own n-grams' sets were first used by it or a neighbour)
        first_use = np.full(len(self.loc_g), len(take), dtype=np.int64)
        np.minimum.at(first_use, ent_loc_all[take], np.arange(len(take), dtype=np.int64))
        by_use = np.argsort(first_use, kind="stable")
        renumber = np.empty_like(by_use)
        renumber[by_use] = np.arange(len(by_use), dtype=np.int64)
        self.loc_g = self.loc_g[by_use]
        ent_loc_all = renumber[ent_loc_all]
        self.ent_loc = ent_loc_all[take]
        self.ent_order = order[take].astype(np.int64)
        self.tf_f = tf[take].astype(np.float64)
        self.ent_row = shared.rows_for(tf[take])
        self.rare = np.flatnonzero(self.ent_row < 0)
        self.ent_rare = np.full(len(self.ent_row), -1, dtype=np.int64)
        self.ent_rare[self.rare] = np.arange(len(self.rare), dtype=np.int64)
        self.items = []
        ent0 = 0
        for c, sb in zip(chunks, sent_base):
            self.items.append(_Items(c, sent_id[sb:sb + len(c.ent_ptr) - 1], ent_loc_all[ent0:ent0 + len(c.ent_gid)],
                                     n_ord))
            ent0 += len(c.ent_gid)
        self._numpy: dict[str, Any] | None = None

    def _rare_squares(self, df: np.ndarray) -> np.ndarray:
        """``(rare entries, k)`` squares of the entries whose count has no table row."""
        if not len(self.rare):
            return np.zeros((0, df.shape[1]), dtype=np.float64)
        d = df[self.loc_g[self.ent_loc[self.rare]]]
        return _squares(self.tf_f[self.rare][:, None] * self.shared.weights[d])

    def block(self, df: np.ndarray, per: np.ndarray) -> None:
        """``per[s, r, base + i, o]`` for system s (``self.which``), resample r of the ``(n_sets + 1,
        k)`` df, item i of the chunk: the item's sum over its references of the order-o similarity
        times the length penalty (cider_table_scores' ``per_item``)."""
        shared = self.shared
        k = df.shape[1]
        rare = self._rare_squares(df)
        if shared.jit:
            from capeval.significance import cider_jit

            w = np.empty((len(self.loc_g), k), dtype=np.float64)
            ww = np.empty((len(self.loc_g), k), dtype=np.float64)
            norms = np.empty((self.n_sent, self.n_ord, k), dtype=np.float64)
            cider_jit.norms_block(df, shared.weights, shared.table, shared.row_one, self.loc_g, self.ent_ptr,
                                  self.ent_loc, self.ent_order, self.ent_row, self.ent_rare, rare, w, ww, norms)
            for s, base, it in zip(self.which, self.bases, self.items):
                cider_jit.items_block(w, ww, norms, it.hyp_u, it.slot_ptr, it.slot_u, it.factor, it.seg_ptr,
                                      it.seg_order, it.hit_ptr, it.hit_j, it.hit_th, it.hit_tr, it.hit_ones,
                                      per[s, :, base:base + it.n_items])
        else:
            w, ww, norms = self._norms_numpy(df, rare)
            for s, base, it in zip(self.which, self.bases, self.items):
                per[s, :, base:base + it.n_items] = it.block_numpy(w, ww, norms).transpose(2, 0, 1)

    def _norms_numpy(self, df: np.ndarray, rare: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights of the group's sets, their products with themselves, norms of its sentences)
        for the df of k resamples; each entry's square is read from its count's table row (per
        set) or from the rare squares, where it lies, never copied per entry."""
        shared = self.shared
        if self._numpy is None:
            ent_sent = np.repeat(np.arange(self.n_sent, dtype=np.int64), np.diff(self.ent_ptr))
            rows = np.unique(self.ent_row[self.ent_row >= 0])
            n_loc = len(self.loc_g)
            source = np.empty(len(self.ent_row), dtype=np.int64)  # row of the stacked squares
            tab = self.ent_row >= 0
            source[tab] = np.searchsorted(rows, self.ent_row[tab]) * n_loc + self.ent_loc[tab]
            source[~tab] = len(rows) * n_loc + self.ent_rare[~tab]
            self._numpy = {"ent": _runs(ent_sent * self.n_ord + self.ent_order), "rows": rows, "source": source}
        ix = self._numpy
        k = df.shape[1]
        d = df[self.loc_g]  # (sets of the group, k)
        w = shared.weights[d]
        stacked = np.concatenate([shared.table[row][d] for row in ix["rows"].tolist()] + [rare])
        norms = np.zeros((self.n_sent * self.n_ord, k), dtype=np.float64)
        seg, sums = _sequential(ix["ent"], stacked, ix["source"])
        norms[seg] = np.sqrt(sums)
        return w, w * w, norms.reshape(self.n_sent, self.n_ord, k)


class _Items:
    """One system's items of one chunk: their sentences in the group's numbering, and the hits
    (candidate n-grams found in a reference) as runs of one (reference, order), in the scorer's
    order; an (item, reference, order) without hits adds 0 and is skipped."""

    def __init__(self, c: CiderChunk, sent_u: np.ndarray, ent_loc: np.ndarray, n_ord: int):
        self.n_items = c.n_items
        self.n_ord = n_ord
        self.hyp_u = sent_u[c.hyp_sid]
        self.slot_u = sent_u[c.slot_sid]
        self.slot_ptr = np.r_[0, np.cumsum(c.ref_counts)].astype(np.int64)
        self.factor = c.factor.astype(np.float64)
        hit_order = c.ent_order[c.hit_h]
        key = c.hit_slot * n_ord + hit_order  # runs: hits are by slot, then order
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
        self.hit_ptr = np.r_[starts, len(key)].astype(np.int64)
        self.seg_order = hit_order[starts].astype(np.int64)
        seg_slot = c.hit_slot[starts]
        self.seg_ptr = np.searchsorted(seg_slot, np.arange(len(c.slot_sid) + 1, dtype=np.int64)).astype(np.int64)
        self.hit_j = ent_loc[c.hit_h]  # the hit's n-gram is the same on both sides
        self.hit_th = c.ent_tf[c.hit_h].astype(np.float64)
        self.hit_tr = c.ent_tf[c.hit_r].astype(np.float64)
        # min(1 * w, 1 * w) * (1 * w) is w * w: one product, shared by all such hits
        self.hit_ones = (c.ent_tf[c.hit_h] == 1) & (c.ent_tf[c.hit_r] == 1)
        self._numpy: dict[str, Any] | None = None

    def block_numpy(self, w: np.ndarray, ww: np.ndarray, norms: np.ndarray) -> np.ndarray:
        """``(items, orders, k)`` per-item sums (see :meth:`_Group.block`), over the (reference,
        order) runs of hits only: one without hits adds 0.0 to its item's sum."""
        n_ord = self.n_ord
        k = w.shape[1]
        n_seg = len(self.seg_order)
        if self._numpy is None:
            seg_of_hit = np.repeat(np.arange(n_seg, dtype=np.int64), np.diff(self.hit_ptr))
            seg_slot = np.repeat(np.arange(len(self.slot_u), dtype=np.int64), np.diff(self.seg_ptr))
            slot_item = np.repeat(np.arange(self.n_items, dtype=np.int64), np.diff(self.slot_ptr))
            seg_item = slot_item[seg_slot]
            # the runs' order within an (item, order): by reference, as the scorer adds them
            by_item = np.lexsort((seg_slot, self.seg_order, seg_item))
            others = np.flatnonzero(~self.hit_ones)
            source = self.hit_j.copy()  # ones: the set's w * w; others: their own row after the sets
            source[others] = len(w) + np.arange(len(others), dtype=np.int64)
            self._numpy = {
                "hit": _runs(seg_of_hit), "source": source, "others": others,
                "nh": (self.hyp_u[seg_item], self.seg_order), "nr": (self.slot_u[seg_slot], self.seg_order),
                "factor": self.factor[seg_slot][:, None],
                "item": _runs((seg_item * n_ord + self.seg_order)[by_item]), "by_item": by_item,
            }
        ix = self._numpy
        o = ix["others"]
        wo = w[self.hit_j[o]]
        vh = self.hit_th[o][:, None] * wo
        vr = self.hit_tr[o][:, None] * wo
        stacked = np.concatenate([ww, np.minimum(vh, vr) * vr])
        val = np.zeros((n_seg, k), dtype=np.float64)
        seg, sums = _sequential(ix["hit"], stacked, ix["source"])
        val[seg] = sums
        nh = norms[ix["nh"]]
        nr = norms[ix["nr"]]
        ok = (nh != 0) & (nr != 0)
        np.divide(val, nh * nr, out=val, where=ok)
        val *= ix["factor"]
        per = np.zeros((self.n_items * n_ord, k), dtype=np.float64)
        seg, sums = _sequential(ix["item"], val, ix["by_item"])
        per[seg] = sums
        return per.reshape(self.n_items, n_ord, k)


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
