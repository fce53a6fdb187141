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

from typing import TYPE_CHECKING, Any

import numpy as np
from capeval.significance.cider_arrays import (JIT_MIN_WORK, _DF_BUDGET, _PER_ITEM_BUDGET, CiderChunk, _df_numpy,
                                               _in_threads, _start_threads, _threads, _weights, numba_available,
                                               orders_mean_is_sequential)
from capeval.significance.blas_dot import BlasDot
from capeval.significance.buffers import BufferPool, Buffers, Once
from capeval.significance.cider_groups import _Group, _groups
from capeval.significance.cider_squares import SquaresTable
from capeval.significance.reference_sets import ReferenceSets, _df_pairs, _pairs_digest, sets_for
from capeval.significance.run_groups import item_sets

if TYPE_CHECKING:
    from capeval.significance.cider_statistic import CiderStatistic


#: the largest multiplicity read by the df kernel as a byte (uint8); a block with a larger one
#: (an item drawn 256 times or more) reads int32 rows
_BYTE_MAX = 255
#: the most items for which the compiled kernels' df is uint16 (a resample draws N items, so no
#: set's df exceeds N): half the bytes of int32 rows to write and to gather by set (the weights
#: kernel a third faster at 40,000 items); int32 above, and for numpy's kernel
_NARROW_DF_ITEMS = 65535
#: the df kernel's time per set beyond its items' sums (writing its df and squares rows), in
#: items' worth: measured at 40,000 items, 64 resamples a block (splits the sets between threads)
_SET_COST = 4


class CiderResampling:
    """What the systems of one comparison share: the resamples' ``df`` (from the references, the
    same for every system), the weights and squares tables, per chunk the sentences' norms (a
    reference is weighed once per resample, whichever system it serves), the kernel choice; and
    each block's item scores, computed for every system at once."""

    def __init__(self, n_items: int, chunks: list[CiderChunk], samples_hint: int = 1000, jit: bool | None = None,
                 threads: int | None = None, defer: bool = False):
        self.n = n_items
        tokens = {c.refs_token for c in chunks}
        #: the corpus index the chunks were scored on (see same_references), "" when unknown
        self.refs_token = tokens.pop() if len(tokens) == 1 else ""
        #: the index of the references' pairs built from the corpus pass (else from the chunks' pairs)
        self._sets: ReferenceSets | None = sets_for(chunks, n_items, self.refs_token)
        self._df_signature = None if self._sets is not None else _pairs_digest(chunks)
        self._chunk_items = [c.n_items for c in chunks]
        self.weights = _weights(n_items)
        self.samples_hint = samples_hint
        #: the squares of the counts' entries at every df (rows of the counts that pay for one)
        self.squares = SquaresTable(n_items, self.weights, samples_hint)
        if jit is None:
            jit = numba_available() and n_items * samples_hint >= JIT_MIN_WORK
        self.jit = bool(jit)
        self.df_dtype: type = np.uint16 if self.jit and n_items <= _NARROW_DF_ITEMS else np.int32
        self.threads = threads if threads is not None else _threads()
        #: the kernels built ahead of time (cider_aot: no numba import) where they are built,
        #: else None (numba's JIT, cider_jit)
        self._built = _built_kernels(n_items * samples_hint) if self.jit else None
        if self._built is not None and threads is None:
            from capeval.significance.cider_aot import THREADS_MIN_WORK

            if n_items * samples_hint < THREADS_MIN_WORK:
                self.threads = 1  # blocks this small do not pay for threads
        self._systems: list[CiderStatistic] = []
        self._groups: list[_Group] | None = None
        #: the last block's results (counts, the call giving them, the systems they cover)
        self._done: tuple[Any, Any, set[int]] = (None, None, set())
        #: the last block's last reduction, when left to be done beside the next block's df
        self._carried: Any = None
        #: the resample means' dot products, as numpy's BLAS call gives them (see blas_dot)
        self.dot = BlasDot(n_items)
        #: the blocks' work arrays, reused (one set per thread running blocks), and the df's
        self.buffers = BufferPool()
        self._df_out = Buffers()
        self._scores = Buffers()
        #: blocks' multiplicities transposed ahead (prepare_counts): id -> (counts, transposed)
        self._transposed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: the last df block's count-1 squares per set (compiled kernels), see df_block
        self.ones = np.zeros((0, 0), dtype=np.float64)
        #: the chunks whose reference pairs prepare() has yet to index (deferred: see prepare)
        self._pending: list[CiderChunk] | None = list(chunks)
        #: whether the first block's work arrays were written ahead (_warm)
        self._warmed = False
        #: the kernels' threads during a bootstrap (open_threads), else None: each call starts its own
        self.pool: Any = None
        if not defer:
            self.prepare()

    def prepare(self) -> None:
        """Index the references' (item, n-gram) pairs by the sets of items holding each n-gram
        (a second of one core at 40,000 items). Done at construction, or with ``defer=True``
        when called (:mod:`.compare` runs it while the next system's scoring workers run), at
        the latest by the first resample; idempotent."""
        chunks = self._pending
        if chunks is None:
            return
        # n-grams held by the same items' references have the same df on every resample: one
        # sum per distinct set of items (the n-grams of a caption used as a reference by the
        # same items, say); set n_sets: the n-grams of no reference (df 0)
        if self._sets is not None:
            self.n_ids, self.set_of, self._set_items, self._set_ptr = self._sets.get()
            if any(c.n_ids > self.n_ids for c in chunks):
                raise ValueError("CiderResampling: chunks scored on a larger corpus index than the references' pairs")
        else:
            item, gid = _df_pairs(chunks, self.n)
            self.n_ids = max([c.n_ids for c in chunks] + [int(gid.max()) + 1 if len(gid) else 0])
            self.set_of, self._set_items, self._set_ptr = item_sets(item, gid, self.n_ids)
        self.n_sets = len(self._set_ptr) - 1
        #: resamples computed together (their df rows stay within _DF_BUDGET): 64, a block of
        #: draws, where that fits (at 40,000 items about a tenth less kernel time than 32: each
        #: entry's and hit's index is read once for twice the lanes)
        self.sub_block = int(min(64, max(4, _DF_BUDGET // (4 * (self.n_sets + 1)))))
        self._pending = None

    def same_references(self, chunks: list[CiderChunk]) -> bool:
        """Do ``chunks`` (another system's) hold the same reference n-grams per item? Chunks
        without the pairs were scored on a corpus index shared by the comparison's systems
        (:mod:`capeval.metrics.text_share`: same references, texts and chunks): they do when that
        index is the one these resamples were built on and the chunks cover the same items."""
        if any(c.df_item is None or c.df_gid is None for c in chunks):
            return (bool(self.refs_token) and all(c.refs_token == self.refs_token for c in chunks)
                    and [c.n_items for c in chunks] == self._chunk_items)
        return _pairs_digest(chunks) == self.df_signature

    @property
    def df_signature(self) -> tuple[int, ...]:
        """The digest of the references' (item, n-gram) pairs the resamples' df are counted from."""
        if self._df_signature is None:
            assert self._sets is not None
            self._df_signature = self._sets.digest()
        return self._df_signature

    def register(self, stat: "CiderStatistic") -> None:
        """Compute ``stat``'s resamples with the others' (the same blocks, shared norms)."""
        self._systems.append(stat)
        self._groups = None

    @property
    def kernels(self) -> Any:
        """The compiled kernels: built ahead of time (:mod:`.cider_aot`) or numba's JIT (:mod:`.cider_jit`)."""
        if self._built is not None:
            return self._built
        from capeval.significance import cider_jit

        return cider_jit

    def kernels_for(self, lanes: int) -> Any:
        """:attr:`kernels` for blocks of ``lanes`` resamples (:meth:`.cider_aot.Kernels.for_lanes`)."""
        return self._built.for_lanes(lanes) if self._built is not None else self.kernels

    def rows_for(self, tf: np.ndarray) -> np.ndarray:
        """:meth:`.cider_squares.SquaresTable.rows_for` of this resampling's table."""
        return self.squares.rows_for(tf)

    @property
    def table(self) -> np.ndarray:
        """The squares table: row ``rows_for(tf)``, column ``df``."""
        return self.squares.table

    @property
    def row_one(self) -> int:
        """The table's row of count 1 (-1 when no entry has count 1)."""
        return self.squares.row_one

    def transposed_counts(self, counts: np.ndarray) -> np.ndarray:
        """``counts`` (``(k, N)`` multiplicities) as the df kernel reads them: ``(N, k)``, bytes
        where the kernel takes them (the compiled kernels; every multiplicity at most 255: every
        bootstrap block in practice), else int32. A new array, so that the next block's can be
        made (:meth:`prepare_counts`, on the thread drawing it) while this one is read."""
        counts = np.asarray(counts)
        small = (self.jit and (self._built is None or self._built.takes_bytes)
                 and (not counts.size or counts.max() <= _BYTE_MAX))
        ct = np.empty((counts.shape[1], counts.shape[0]), dtype=np.uint8 if small else np.int32)
        ct[...] = counts.T
        return ct

    def prepare_counts(self, counts: np.ndarray) -> None:
        """Transpose a block's multiplicities for its df now (:func:`.paired.bootstrap_scores`
        calls it on the thread that draws the next block while this one is scored: off the
        path that waits for the kernels); :meth:`_all` takes it for that block."""
        if self.jit and np.ndim(counts) == 2 and id(counts) not in self._transposed:  # once for all systems
            self._transposed[id(counts)] = (counts, self.transposed_counts(counts))
            if not self._warmed:
                self._warmed = True
                self._warm(counts.shape[0])

    def _warm(self, k: int) -> None:
        """The blocks' df, count-1 squares and score arrays written once now, on the thread drawing
        the first block while the groups are built (their new pages cost a df thread 0.1 s)."""
        if self._pending is not None or k > self.sub_block:  # not prepared yet, or sub-blocks
            return
        self._df_out.get("df", (self.n_sets + 1, k), self.df_dtype).fill(0)
        self._df_out.get("ones", (self.n_sets + 1, k)).fill(0.0)
        for j in range(len(self._systems)):
            self._scores.get(f"scores{j}", (k, self.n)).fill(0.0)

    def df_block(self, counts: np.ndarray, ct: np.ndarray | None = None) -> np.ndarray:
        """``(n_sets + 1, k)`` (:attr:`df_dtype`): the df of each set of items on each resample of ``counts``
        (``(k, N)`` multiplicities); the last row, of the n-grams of no reference, is 0. ``ct``:
        the multiplicities as :meth:`transposed_counts` gives them, when already made."""
        return self._df_start(counts, ct)()

    def _df_start(self, counts: np.ndarray, ct: np.ndarray | None = None) -> Any:
        """:meth:`df_block` with its kernel's threads started: returns the call that waits for
        them and gives the df (the caller may work meanwhile, on other arrays)."""
        self.prepare()
        if ct is None:
            # the df kernel's time is its reads of these rows (one per item of every set):
            # multiplicities read as bytes are a quarter of the int32 rows (sums stay int32, exact)
            ct = self.transposed_counts(counts)
        # every row but the last (the n-grams of no reference, 0) is written below; reused from
        # block to block: fresh pages cost more than the sums
        out = self._df_out.get("df", (self.n_sets + 1, ct.shape[1]), self.df_dtype)
        out[self.n_sets] = 0
        if not self.n_sets and not self.jit:
            return lambda: out
        if not self.jit:
            _df_numpy(ct, self._set_items, self._set_ptr, out)
            return lambda: out
        # the compiled kernels' count-1 squares of every set, read by every group using it
        one = self.row_one
        ones = self._df_out.get("ones", (self.n_sets + 1 if one >= 0 else 0, ct.shape[1]))
        squares_one = self.squares.table[one] if one >= 0 else np.zeros(0, dtype=np.float64)
        if one >= 0:
            ones[self.n_sets] = squares_one[0]
        self.ones = ones
        kernel = self.kernels_for(ct.shape[1]).df_block
        # parts of equal work, not of equal numbers of sets: the sets of the common n-grams,
        # by far the largest, come first in the order of first use. A set's work: its items
        # summed, and its rows written (_SET_COST items' worth: by the items alone, the part
        # of the small sets took twice the time of the other at 40,000 items)
        work = self._set_ptr + _SET_COST * np.arange(self.n_sets + 1, dtype=np.int64)
        cut = np.linspace(0, int(work[-1]), self.threads + 1)
        parts = np.searchsorted(work, cut).astype(np.int64)
        parts[0], parts[-1] = 0, self.n_sets
        wait = _start_threads(self.threads, [(kernel, (ct, self._set_items, self._set_ptr, int(a), int(b), out,
                                                       squares_one, ones))
                                             for a, b in zip(parts[:-1], parts[1:]) if b > a], self.pool)

        def done() -> np.ndarray:
            wait()
            return out

        return done

    def resampled(self, stat: "CiderStatistic", counts: np.ndarray) -> np.ndarray:
        """``stat``'s CIDEr-D on each resample of ``counts`` (``(k, N)`` multiplicities). Every
        registered system's are computed at the first call for a block (one df per sub-block)."""
        return self.resampled_later(stat, counts)()

    def resampled_later(self, stat: "CiderStatistic", counts: np.ndarray) -> Any:
        """:meth:`resampled` as a call that gives the scores: the block is scored now, but the
        means of its last sub-block (each a dot product of the multiplicities and the item
        scores) are taken while the next block's df kernel runs, or when the call is made, if
        first (:func:`.paired.bootstrap_scores` makes the calls once every block is scored)."""
        last, results, ids = self._done
        if last is not counts or id(stat) not in ids:
            if stat not in self._systems:
                self.register(stat)
            results = self._all(counts, self._systems, self._means, later=True)
            self._done = (counts, results, {id(s) for s in self._systems})
        return lambda: results()[id(stat)]

    def _means(self, stat: "CiderStatistic", rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        # the mean over the drawn items as the rescoring did it: counts . scores / N, the same dot
        # product (BLAS's, on a fresh array; its last bits depend on BLAS's threads, as before),
        # computed part by part as BLAS's threads would (blas_dot)
        return np.array([d / stat.n for d in self.dot.rows(rows, scores)])

    def open_threads(self) -> None:
        """Start the kernels' threads for the blocks to come (until :meth:`close_threads`), instead
        of threads per call (73 thread starts at 40,000 items, each up to milliseconds)."""
        if self.pool is None and self.threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="capeval-cider")

    def close_threads(self) -> None:
        """Stop them (a scoring pass forks its workers only from a process of one thread)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def build_groups(self) -> None:
        """Group every registered system's chunks for the kernels (once; a system registered
        after this is refused)."""
        if self._groups is None:
            self.prepare()
            self._groups = _groups(self, self._systems)

    def _run_carried(self) -> None:
        """The last block's reduction left to be done beside the next block's df, done now."""
        carried, self._carried = self._carried, None
        if carried is not None:
            carried()

    def item_scores(self, stat: "CiderStatistic", counts: np.ndarray) -> np.ndarray:
        """``(k, N)`` item scores of ``stat`` on each resample of ``counts`` (an item not drawn
        scores 0)."""
        if stat not in self._systems:
            self.register(stat)
        return self._all(counts, [stat], lambda s, rows, scores: scores.copy())[id(stat)]

    def _all(self, counts: np.ndarray, systems: list["CiderStatistic"], reduce: Any, later: bool = False) -> Any:
        """Per system, ``reduce(system, counts rows, their item scores)`` concatenated over the
        sub-blocks (only a sub-block's item scores are held at a time, in arrays ``reduce`` must
        not keep). ``later``: a call giving them, the last sub-block's reduction left to be done
        beside the next block's df kernel (or by that call, if first)."""
        self.build_groups()
        k, n = counts.shape
        n_ord = self._systems[0].n_ord
        which = [self._systems.index(s) for s in systems]
        # the compiled kernels end each item with its score where numpy's mean over the orders
        # is the sum from the first order on (checked on this numpy); else the sums, then numpy
        fused = self.jit and orders_mean_is_sequential(n_ord)
        # a sub-block's per-item sums of every system within _PER_ITEM_BUDGET
        step = int(max(1, min(self.sub_block, _PER_ITEM_BUDGET // max(1, len(self._systems) * n * n_ord * 8))))
        parts: dict[int, list[np.ndarray]] = {id(s): [] for s in systems}
        # the block's multiplicities transposed beforehand by the drawing thread, when it did
        ready = self._transposed.pop(id(counts), None)
        whole = ready[1] if ready is not None and ready[0] is counts and step >= k else None
        # the previous (sub-)block's reduction, done while this one's df is summed
        pending, self._carried = self._carried, None
        for a in range(0, k, step):
            b = min(k, a + step)
            if fused:
                # the df kernel's threads read only the multiplicities and write the df and
                # count-1 squares: the previous sub-block's scores are reduced meanwhile, before
                # the item kernels write this one's into the same arrays
                df_done = self._df_start(counts[a:b], whole)
                try:
                    if pending is not None:
                        pending()
                finally:
                    df = df_done()
                scores = [self._scores.get(f"scores{j}", (b - a, n)) for j in range(len(self._systems))]
                _in_threads(self.threads, [(g.block, (df, None, scores)) for g in self._groups], self.pool)
                pending = Once(self._reduce, parts, which, systems, reduce, counts[a:b], scores)
                continue
            if pending is not None:
                pending()
                pending = None
            df = self.df_block(counts[a:b], whole)
            # item-major (system, item, resample, order): an item's sums are written together
            per = self._scores.get("sums", (len(self._systems), n, b - a, n_ord))
            _in_threads(self.threads if self.jit else 1, [(g.block, (df, per)) for g in self._groups], self.pool)
            for j, s in zip(which, systems):
                # numpy's mean over the orders on an (items, orders) array, as cider_table_scores
                means = per[j].reshape(n * (b - a), n_ord).mean(axis=1).reshape(n, b - a)
                parts[id(s)].append(reduce(s, counts[a:b], np.ascontiguousarray(means.T) / s.ref_counts * 10.0))
        if pending is not None and not later:
            pending()
            pending = None
        self._carried = pending
        joined: dict[int, np.ndarray] = {}

        def results() -> dict[int, np.ndarray]:
            if not joined:
                if self._carried is pending:  # this block's last reduction is still left: now
                    self._run_carried()
                joined.update((key, np.concatenate(v)) for key, v in parts.items())
            return joined

        return results if later else results()

    @staticmethod
    def _reduce(parts: dict[int, list[np.ndarray]], which: list[int], systems: list["CiderStatistic"], reduce: Any,
                counts: np.ndarray, scores: list[np.ndarray]) -> None:
        for j, s in zip(which, systems):
            parts[id(s)].append(reduce(s, counts, scores[j]))


def _built_kernels(work: int) -> Any:
    """The kernels built ahead of time, else None (and :func:`.cider_aot.start_build` for a job of
    ``work`` items x resamples large enough to have imported numba)."""
    from capeval.significance import cider_aot

    built = cider_aot.load()
    if built is None and work >= cider_aot.BUILD_MIN_WORK:
        cider_aot.start_build()
    return built

