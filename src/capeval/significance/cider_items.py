"""One system's items of one chunk in CIDEr-D resampling's groups (:mod:`.cider_groups`): their
sentences in the group's numbering, their hits as runs, their numpy kernel; and which of them
have the first system's very candidate, whose scores are copied rather than computed.

Comparing two checkpoints, many items get the very same caption from both. Such an item has the
same entries (the same sentence id in the group, whose sentences are deduplicated) and the same
references in both systems, so the same score on every resample, to the last bit: the later
system's is copied (:func:`_different_candidates`). With half the captions the same, at 40,000
items the kernels took 17% less time (items_block 26%).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from capeval.significance.cider_arrays import CiderChunk, _runs, _sequential


#: the share of a chunk's items whose candidates must be the first system's for their scores to
#: be copied rather than computed: the copies' scattered writes (0.23-0.29 ms per block for a
#: chunk of 2,000 items at 40,000, whatever the number copied) cost about as much as computing
#: 200 of its items (1.1-1.3 us per item and block), a tenth; below, every item is computed
_COPY_MIN = 1 / 8


def _different_candidates(first: tuple[CiderChunk, np.ndarray], other: tuple[CiderChunk, np.ndarray]
                          ) -> np.ndarray | None:
    """Which items of ``other`` (a chunk, its sentences' ids in the group) have a candidate other
    than ``first``'s, when at least :data:`_COPY_MIN` of them have the same one (the same
    sentence id: the same entries, so the same length) and the chunks' references are the
    same sentences; else None (every item computed)."""
    (c0, u0), (c1, u1) = first, other
    if c0.n_items != c1.n_items or not np.array_equal(c0.ref_counts, c1.ref_counts) \
            or not np.array_equal(u0[c0.slot_sid], u1[c1.slot_sid]):
        return None
    keep = u1[c1.hyp_sid] != u0[c0.hyp_sid]
    return keep if c1.n_items - int(keep.sum()) >= max(1.0, _COPY_MIN * c1.n_items) else None


class _Items:
    """One system's items of one chunk: their sentences in the group's numbering, and the hits
    (candidate n-grams found in a reference) as runs of one (reference, order), in the scorer's
    order; an (item, reference, order) without hits adds 0 and is skipped. With ``keep``, only
    the items it marks (``kept``, the chunk's item numbers; the others, ``copied``, take the
    first system's scores: :meth:`place`); without, ``kept`` and ``copied`` are None."""

    def __init__(self, c: CiderChunk, sent_u: np.ndarray, ent_loc: np.ndarray, n_ord: int,
                 keep: np.ndarray | None = None):
        hyp_sid, slot_sid, ref_counts, factor = c.hyp_sid, c.slot_sid, c.ref_counts, c.factor
        hit_slot, hit_h, hit_r = c.hit_slot, c.hit_h, c.hit_r
        self.kept: np.ndarray | None = None
        self.copied: np.ndarray | None = None
        if keep is not None:
            self.kept, self.copied = np.flatnonzero(keep), np.flatnonzero(~keep)
            slot_keep = np.repeat(keep, ref_counts)
            hit_keep = slot_keep[hit_slot]
            new_slot = np.cumsum(slot_keep) - 1
            hyp_sid, slot_sid, ref_counts, factor = hyp_sid[keep], slot_sid[slot_keep], ref_counts[keep], \
                factor[slot_keep]
            hit_slot, hit_h, hit_r = new_slot[hit_slot[hit_keep]], hit_h[hit_keep], hit_r[hit_keep]
        self.n_items = len(hyp_sid)
        self.n_ord = n_ord
        self.hyp_u = sent_u[hyp_sid]
        self.slot_u = sent_u[slot_sid]
        self.slot_ptr = np.r_[0, np.cumsum(ref_counts)].astype(np.int64)
        self.factor = factor.astype(np.float64)
        hit_order = c.ent_order[hit_h]
        key = hit_slot.astype(np.int64) * n_ord + hit_order  # runs: hits are by slot, then order
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
        self.hit_ptr = np.r_[starts, len(key)].astype(np.int64)
        self.seg_order = hit_order[starts].astype(np.int64)
        seg_slot = hit_slot[starts]
        self.seg_ptr = _starts_of(seg_slot, len(slot_sid))
        self.hit_j = ent_loc[hit_h]  # the hit's n-gram is the same on both sides
        self.hit_th = c.ent_tf[hit_h].astype(np.float64)
        self.hit_tr = c.ent_tf[hit_r].astype(np.float64)
        # min(1 * w, 1 * w) * (1 * w) is w * w: one product, shared by all such hits
        self.hit_ones = (c.ent_tf[hit_h] == 1) & (c.ent_tf[hit_r] == 1)
        self.others = np.flatnonzero(~self.hit_ones).astype(np.int64)
        self.ref_counts = ref_counts.astype(np.float64)
        self._numpy: dict[str, Any] | None = None

    def place(self, dest: np.ndarray, first: np.ndarray, base: int, computed: np.ndarray) -> None:
        """Put the kept items' ``computed`` rows and the copied items' rows of ``first`` (the first
        system's) in ``dest`` (items on the first axis, this chunk's from ``base`` on)."""
        dest[base + self.kept] = computed
        dest[base + self.copied] = first[base + self.copied]

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
            others = self.others
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


def _starts_of(values: np.ndarray, n: int) -> np.ndarray:
    """``np.searchsorted(values, np.arange(n + 1))`` of non-decreasing ``values`` in ``[0, n)``
    (where each value's run starts), by counting them: int64."""
    out = np.zeros(n + 1, dtype=np.int64)
    if len(values):
        np.cumsum(np.bincount(values, minlength=n)[:n], out=out[1:])
    return out


def _first_use_order(first_use: np.ndarray, n: int) -> np.ndarray:
    """``np.argsort(first_use, kind="stable")`` where the values below ``n`` are distinct
    positions (each set's first entry: one set per entry) and the others ``n`` (no entry): the
    positions are scattered into place rather than sorted."""
    used = first_use < n
    at = np.full(n, -1, dtype=np.int64)
    at[first_use[used]] = np.flatnonzero(used)
    return np.concatenate([at[at >= 0], np.flatnonzero(~used)])
