"""Per-block kernels of CIDEr-D resampling (:mod:`capeval.significance.cider_resample`): systems
grouped by shared chunks, each block's norms and item sums (numpy, or numba via ``cider_jit``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from capeval.significance.cider_arrays import (
    CiderChunk,
    _in_threads,
    _squares,
    _shared_prefixes,
    _runs,
    _sequential,
    _spans_take,
    _unique_small,
)
from capeval.significance.run_groups import dedupe_runs
from capeval.significance.cider_items import _different_candidates, _first_use_order, _Items, _starts_of


def _groups(shared: CiderResampling, systems: list[CiderStatistic]) -> list["_Group"]:
    """The systems' chunks side by side (chunk j of every system covers the same items when
    their partitions agree; otherwise each system's chunks form groups of their own)."""
    if any(s.chunks is None for s in systems):
        raise ValueError("CiderResampling: a system was registered after the resampling began (the others' "
                         "n-gram tables were released); register every system first")
    sizes = [[c.n_items for c in s.chunks] for s in systems]
    # each chunk is let go once its group holds what it needs: the n-gram tables of all the
    # systems (a third of a comparison's memory at 100,000 items) are not held beside the groups
    if all(z == sizes[0] for z in sizes):
        jobs = [([(s, j) for s in systems], [sum(sizes[0][:j])] * len(systems), list(range(len(systems))))
                for j in range(len(sizes[0]))]
    else:
        jobs = []
        for j, s in enumerate(systems):
            base = 0
            for u, c in enumerate(s.chunks):
                jobs.append(([(s, u)], [base], [j]))
                base += c.n_items

    # the squares table's rows for the counts common over all the chunks, before any group asks
    tfs = [np.bincount(c.ent_tf) for s in systems for c in s.chunks if len(c.ent_tf)]
    if tfs:
        per_count = np.zeros(max(len(t) for t in tfs), dtype=np.int64)
        for t in tfs:
            per_count[:len(t)] += t
        shared.squares.plan(per_count)

    def build(job: tuple) -> _Group:
        where, bases, which = job
        group = _Group(shared, [s.chunks[u] for s, u in where], bases, which)
        for s, u in where:
            s.chunks[u] = None
        return group

    # the groups are built on the kernels' threads (numpy's work on a chunk's arrays releases
    # the GIL; at 40,000 items 0.36-0.43 s instead of 0.5-0.7 s one after the other)
    out = _in_threads(shared.threads, [(build, (job,)) for job in jobs], shared.pool)
    for s in systems:
        s.chunks = None
    # the sets keep the order of their first n-gram (numbering them in order of first use, group
    # after group, so that a group's df rows lie together, cost 0.15 s of one core at 40,000
    # items and saved nothing in the kernels: bootstrap 1.70 s with, 1.54 s without)
    for g in out:
        if g._kernels is not None:
            # count 1's row is given by the first group with count-1 entries and never changes
            # after (rows are only added, and count 1 is always asked for): every index built
            # with count-1 entries saw the final row
            if g._kernels.has_count_one and g._kernels.one != shared.row_one:
                raise RuntimeError(f"CiderResampling: count 1's squares row changed ({g._kernels.one} -> "
                                   f"{shared.row_one}) after a group's index was built")
            g._kernels.globalise(g.loc_g)
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
        sent_base, ent_base = [], []
        ent0 = nsent = 0
        # chunks scored on one joint table (compare's later systems, text_share.joint_scores)
        # hold the same sentences: the first one's stand for the others
        tables: dict[tuple[str, int, int], tuple[int, int]] = {}
        for c in chunks:
            same = tables.get((c.table_token, len(c.ent_ptr), len(c.ent_gid))) if c.table_token else None
            if same is not None:
                sent_base.append(same[0])
                ent_base.append(same[1])
                continue
            tables[(c.table_token, len(c.ent_ptr), len(c.ent_gid))] = (nsent, ent0)
            sent_base.append(nsent)
            ent_base.append(ent0)
            ptrs.append(c.ent_ptr[:-1] + ent0)
            gids.append(c.ent_gid)
            tfs.append(c.ent_tf)
            ords.append(c.ent_order)
            ent0 += len(c.ent_gid)
            nsent += len(c.ent_ptr) - 1
        ptr = np.r_[np.concatenate(ptrs), ent0].astype(np.int64)
        gid, tf, order = np.concatenate(gids), np.concatenate(tfs), np.concatenate(ords)
        sent_id, kept = dedupe_runs(ptr, [gid, tf, order])
        lengths = np.diff(ptr)[kept]
        self.ent_ptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        take = _spans_take(ptr[kept], lengths, int(self.ent_ptr[-1]))
        self.n_sent = len(kept)
        sets = shared.set_of[np.where(gid < 0, shared.n_ids, gid)]
        self.loc_g, ent_loc_all = _unique_small(sets, shared.n_sets + 1)  # np.unique's, without a sort
        # the group's sets numbered in order of first use by its sentences: the rows a sentence
        # reads lie near each other (its own n-grams' sets were first used by it or a neighbour)
        first_use = np.full(len(self.loc_g), len(take), dtype=np.int64)
        np.minimum.at(first_use, ent_loc_all[take], np.arange(len(take), dtype=np.int64))
        by_use = _first_use_order(first_use, len(take))
        renumber = np.empty_like(by_use)
        renumber[by_use] = np.arange(len(by_use), dtype=np.int64)
        self.loc_g = self.loc_g[by_use]
        ent_loc_all = renumber[ent_loc_all]
        self.ent_loc = ent_loc_all[take]
        self.ent_order = order[take].astype(np.int64)
        self.tf_f = tf[take].astype(np.float64)
        self.ent_row = shared.rows_for(tf[take])
        rare = np.flatnonzero(self.ent_row < 0)
        self.n_rare = len(rare)
        self.rare_loc = self.ent_loc[rare]  # the rare entries' sets (the group's numbering) and counts
        self.rare_tf = self.tf_f[rare]
        self.ent_rare = np.full(len(self.ent_row), -1, dtype=np.int64)
        self.ent_rare[rare] = np.arange(len(rare), dtype=np.int64)
        # a later system's items with the first system's very candidate (same entries, same
        # references: the same scores on every resample) copy its scores (_Items.copied)
        self.items = []
        first = None
        for c, sb, eb in zip(chunks, sent_base, ent_base):
            sent_u = sent_id[sb:sb + len(c.ent_ptr) - 1]
            keep = None
            if first is None:
                first = (c, sent_u)
            else:
                keep = _different_candidates(first, (c, sent_u))
            self.items.append(_Items(c, sent_u, ent_loc_all[eb:eb + len(c.ent_gid)], n_ord, keep))
        self._numpy: dict[str, Any] | None = None
        self._kernels: _KernelIndex | None = None
        if shared.jit:
            # the compiled kernels read their index only: built now, and the per-entry arrays it
            # is built from (40 bytes an entry, the largest part of a comparison's memory) let go
            # before the next group is built rather than held beside every group's index
            self._kernels = _KernelIndex(self)
            self.ent_loc = self.ent_order = self.tf_f = self.ent_row = self.ent_rare = self.ent_ptr = None

    def _rare_squares(self, df: np.ndarray) -> np.ndarray:
        """``(rare entries, k)`` squares of the entries whose count has no table row."""
        if not self.n_rare:
            return np.zeros((0, df.shape[1]), dtype=np.float64)
        d = df[self.loc_g[self.rare_loc]]
        return _squares(self.rare_tf[:, None] * self.shared.weights[d])

    def block(self, df: np.ndarray, per: np.ndarray | None, scores: list[np.ndarray] | None = None) -> None:
        """``per[s, base + i, r, o]`` for system s (``self.which``), resample r of the ``(n_sets + 1,
        k)`` df, item i of the chunk: the item's sum over its references of the order-o similarity
        times the length penalty (cider_table_scores' ``per_item``); or, with ``scores`` (the
        compiled kernels only), ``scores[s][r, base + i]``, the item's CIDEr-D (see
        :func:`.cider_jit.items_block`)."""
        shared = self.shared
        rare = self._rare_squares(df)
        if shared.jit:
            with shared.buffers.lend() as buffers:
                self._block_compiled(df, per, scores, rare, buffers)
        else:
            w, ww, norms = self._norms_numpy(df, rare)
            for s, base, it in zip(self.which, self.bases, self.items):
                sums = it.block_numpy(w, ww, norms).transpose(0, 2, 1)
                if it.copied is None:
                    per[s, base:base + it.n_items] = sums
                else:
                    it.place(per[s], per[self.which[0]], base, sums)

    def _block_compiled(self, df: np.ndarray, per: np.ndarray | None, scores: list[np.ndarray] | None,
                        rare: np.ndarray, buffers: Any) -> None:
        """:meth:`block` by the compiled kernels, in work arrays reused from block to block."""
        shared = self.shared
        ix = self._kernel_index()
        k = df.shape[1]
        kernels = shared.kernels_for(k)  # built ahead of time (for k lanes) or numba's JIT, the same functions
        # rows: the w * w of each set of hits of counts 1 and 1, then every system's other hits
        products = buffers.get("products", (len(ix.ones_loc) + ix.n_products, k))
        squares = buffers.get("squares", (len(ix.combo_loc) + len(rare), k))
        kernels.weights_block(df, shared.weights, shared.table, self.loc_g, ix.combo_loc, ix.combo_row, ix.ones_loc,
                              squares, products)
        squares[len(ix.combo_loc):] = rare
        norms = buffers.get("norms", (self.n_sent, self.n_ord, k))
        # not cleared: norms_block writes every (sentence, order) that items_block reads (those of
        # a pair with hits of that order, so with entries of it: _KernelIndex keeps just those),
        # and clearing the whole buffer per chunk and block was megabytes of writes each time
        kernels.norms_block(shared.ones, squares, ix.node_src, ix.node_depth, ix.max_depth, ix.emit_ptr, ix.emit_len,
                            ix.emit_sent, ix.emit_order, norms)
        no_scores = np.empty((k, 0), dtype=np.float64)
        no_sums = np.empty((0, k, self.n_ord), dtype=np.float64)
        first = self.which[0]
        for s, base, it, start, hit_src in zip(self.which, self.bases, self.items, ix.starts, ix.hit_src):
            kernels.hits_block(df, shared.weights, self.loc_g, it.hit_j, it.hit_th, it.hit_tr, it.others, products,
                               start)
            if it.copied is None:
                part = slice(base, base + it.n_items)
                out_scores = no_scores if scores is None else scores[s][:, part]
                out_sums = no_sums if per is None else per[s, part]
            else:  # the kept items' into work arrays, then put in place beside the copied ones
                out_scores = no_scores if scores is None else buffers.get("kept_scores", (k, it.n_items))
                out_sums = no_sums if per is None else buffers.get("kept_sums", (it.n_items, k, self.n_ord))
            if it.n_items:
                kernels.items_block(
                    products, hit_src, norms, it.hyp_u, it.slot_ptr, it.slot_u, it.factor, it.seg_ptr, it.seg_order,
                    it.hit_ptr, it.ref_counts, out_scores, out_sums)
            if it.copied is not None:
                if scores is not None:  # (resamples, items): items on the first axis of the transposes
                    it.place(scores[s].T, scores[first].T, base, out_scores.T)
                else:
                    it.place(per[s], per[first], base, out_sums)

    def _kernel_index(self) -> "_KernelIndex":
        """What the compiled kernels read besides the block's df (computed at the first block)."""
        if self._kernels is None:
            self._kernels = _KernelIndex(self)
            self._kernels.globalise(self.loc_g)
        return self._kernels

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


class _KernelIndex:
    """A group's entries and hits as the compiled kernels read them: the square of an entry is
    row ``src`` of the block's count-1 squares (count 1: its set's) or row ``-1 - src`` of the
    group's squares (one per distinct (set, other count row) pair, then the rare entries'); the
    runs of entries of one (sentence, order), in an order where runs that begin alike follow each
    other, share those entries (``node_*``, ``emit_*``: see :func:`.cider_jit.norms_block`); system j's hits read row
    ``hit_src[j]`` of a block's products (for counts 1 and 1 the ``w * w`` of its set, row
    ``ones_loc``'s, else its own row from ``starts[j]`` on)."""

    def __init__(self, group: _Group):
        # count 1: the set's row of the block's count-1 squares (CiderResampling.df_block);
        # other counts: one row per distinct (set, count row) pair, then the rare entries
        one = group.shared.row_one
        count_one = (group.ent_row == one) & (one >= 0)
        tab = (group.ent_row >= 0) & ~count_one
        # read once: another group's thread may add rows to the table meanwhile
        width = len(group.shared.table) + 1
        pair = group.ent_loc[tab] * width + group.ent_row[tab]
        pairs, inverse = np.unique(pair, return_inverse=True)
        self.combo_loc = (pairs // width).astype(np.int64)
        self.combo_row = (pairs % width).astype(np.int64)
        #: the count row that was count 1's when this index was built (checked by _groups), and
        #: whether the group has count-1 entries at all
        self.one, self.has_count_one = one, bool(count_one.any())
        src = np.empty(len(group.ent_row), dtype=np.int64)
        # a count-1 entry's set in the group's numbering for now: globalise() gives it the set's
        # number in the block's df once every group is built
        src[count_one] = group.ent_loc[count_one]
        src[tab] = -1 - inverse.reshape(-1)
        rare = ~count_one & ~tab
        src[rare] = -1 - (len(pairs) + group.ent_rare[rare])
        ent_sent = np.repeat(np.arange(group.n_sent, dtype=np.int64), np.diff(group.ent_ptr))
        key = ent_sent * group.n_ord + group.ent_order
        # a sentence's entries are by order already (pycocoevalcap counts unigrams first); a
        # stable sort keeps each order's entries in their order, the order of its sum
        by_key = np.argsort(key, kind="stable")
        key, src = key[by_key], src[by_key]
        # only the norms a similarity divides by: a (sentence, order) of no (candidate, reference)
        # pair with hits of that order is never read (a fourth of the entries at 40,000 items)
        read = np.zeros(group.n_sent * group.n_ord + 1, dtype=bool)
        for it in group.items:
            slot = np.repeat(np.arange(len(it.slot_u), dtype=np.int64), np.diff(it.seg_ptr))
            item = np.repeat(np.arange(it.n_items, dtype=np.int64), np.diff(it.slot_ptr))[slot]
            read[it.hyp_u[item] * group.n_ord + it.seg_order] = True
            read[it.slot_u[slot] * group.n_ord + it.seg_order] = True
        kept = read[key]
        key, src = key[kept], src[kept]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
        # runs that begin with the same squares (the same sets and counts: sentences that begin
        # alike, a candidate and its edit) add them once (_shared_prefixes, norms_block).
        # Count-1 entries' sets (src >= 0) are numbered within the group until globalise(): one
        # number per set either way, so the same runs share the same additions
        run_ptr = np.r_[starts, len(key)].astype(np.int64)
        self.node_src, self.node_depth, runs, done = _shared_prefixes(src, run_ptr)
        self._set_entries: np.ndarray | None = np.flatnonzero(self.node_src >= 0)
        self.max_depth = int(self.node_depth.max()) if len(self.node_depth) else 0
        # each run's (sentence, order) and length, listed by the node after which its sum is complete
        self.emit_ptr = _starts_of(done, len(self.node_src))
        self.emit_sent = key[starts][runs] // group.n_ord
        self.emit_order = key[starts][runs] % group.n_ord
        self.emit_len = np.diff(run_ptr)[runs]
        # the sets of hits of counts 1 and 1 (their product is the set's w * w), over all systems
        ones = [it.hit_j[it.hit_ones] for it in group.items]
        # np.unique's sorted sets and each hit's rank among them, by a table of the group's sets
        self.ones_loc, ranks = _unique_small(np.concatenate(ones) if ones else np.zeros(0, dtype=np.int64),
                                             len(group.loc_g))
        self.starts: list[int] = []
        self.hit_src: list[np.ndarray] = []
        at = len(self.ones_loc)
        done = 0
        for it, one in zip(group.items, ones):
            self.starts.append(at)
            src = np.empty(len(it.hit_j), dtype=np.int64)
            src[it.hit_ones] = ranks[done:done + len(one)]
            done += len(one)
            src[it.others] = at + np.arange(len(it.others), dtype=np.int64)
            self.hit_src.append(src)
            at += len(it.others)
        self.n_products = at - len(self.ones_loc)

    def globalise(self, loc_g: np.ndarray) -> None:
        """Count-1 entries: from the group's set numbers to the block's (``loc_g``, final)."""
        if self._set_entries is not None:
            self.node_src[self._set_entries] = loc_g[self.node_src[self._set_entries]]
            self._set_entries = None
