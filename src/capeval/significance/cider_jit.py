"""The CIDEr-D resampling kernels of :mod:`capeval.significance.cider_resample`, compiled by numba.

Imported only when numba is installed (the ``fast`` extra) and a job is large enough. The
loops do exactly the numpy kernel's operations (and so :func:`capeval.metrics.cider.cider_table_scores`'s),
in the same order: sums from 0.0 in the scorer's order, ``min(vh, vr) * vr``, ``sqrt``,
``v / (nh * nr)``, ``* factor``; squares come from the tables computed in Python. The innermost
loop runs over the resamples of a block (independent lanes: vectorising it changes no sum's
order); numba compiles with strict IEEE semantics (no fast-math, no contraction into fused
multiply-adds), so the doubles are the same. Compiled once per machine (numba's cache, next to
this module or in numba's user cache folder); the kernels release the GIL and run on the
chunks in threads.

Where the time goes decided the shapes: a block's squares and products are computed once per
row into arrays the sums then read whole (``weights_block``, ``hits_block``), so the sum loops
have no branch per entry; a sum over a run of entries or hits is held in a small array that
stays in the first-level cache, and an item's sums are written together (item-major ``out``):
the former kernels' accumulators in the block's large arrays and their scattered writes cost
three to four times the arithmetic (measured at 40,000 items, 32 resamples a block). The rows
a loop reads are picked by index arrays, so each kernel asks for the rows of a few steps ahead
(``_prefetch``, a hint that changes no value): at 40,000 items the df kernel took 13% less
time, items_block 12% less, weights_block (in isolation) 38% less. The norms add each run of
squares that sentences share at their start once (:func:`.cider_arrays._shared_prefixes`): at 40,000 items of bench_compare (the
second system is the first with one word deleted) 30% fewer additions, 16% fewer for the
human references alone; with the prefetching, norms_block took 27% less time. The loops index
the 2-d and 3-d arrays directly (``a[i, r]``) instead of taking a row's view (``row = a[i]``) per
step: a view is an object whose reference count numba's code keeps (two calls per view), and
with none in the loops the kernels took 10% less time at 40,000 items (items_block 13%).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: how far ahead the kernels ask for the rows they will read (entries, items of a set, runs of
#: hits, sets' df rows): far enough for a row to arrive from memory meanwhile, near enough to
#: stay cached
_AHEAD_ENTRIES = 12
_AHEAD_ITEMS = 16
_AHEAD_RUNS = 8
_AHEAD_ROWS = 8
#: bytes and doubles per cache line: one request per line of a row (a df row's: 64 // its itemsize)
_LINE_BYTES = 64
_LINE_DOUBLES = 8
#: lanes (resamples) compiled into the kernels: 0, any (read from their arrays); the built module's ``*64`` kernels have 64, a full block of draws, so LLVM knows each
#: lane loop's trip count (at 40,000 items df 13% and norms 15% less time; the same operations
#: in the same order: the same doubles and integers)
_LANES = 0


def _prefetch_code(context, builder, signature, args):  # pragma: no cover - compiled
    """``llvm.prefetch`` of the element of array ``args[0]`` at the indices ``args[1:]``: a read
    (0), kept in every cache level (3), of data (1)."""
    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, list(args[1:]), wraparound=False)
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]))
    builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
    return context.get_dummy_value()


@intrinsic
def _prefetch(typingctx, array, row, col):  # pragma: no cover - compiled
    """Ask the CPU to bring ``array[row, col]``'s cache line in (``llvm.prefetch``: a hint, no
    effect on any value). The rows the kernels read are picked by index arrays, so the
    hardware's prefetchers cannot foresee them: a read would wait for memory."""
    return types.void(array, row, col), _prefetch_code


@intrinsic
def _prefetch3(typingctx, array, i, j, col):  # pragma: no cover - compiled
    """:func:`_prefetch` of ``array[i, j, col]`` (a 3-d array)."""
    return types.void(array, i, j, col), _prefetch_code


@njit(nogil=True, cache=True, error_model="numpy")
def df_block(ct, item, ptr, a, b, out, squares_one, ones):  # pragma: no cover - compiled
    """``out[u, r] = sum(ct[item[ptr[u]:ptr[u + 1]], r])`` for u in [a, b) (summed in ``out``'s
    integer type, int32 or uint16: exact where no sum exceeds it), and when ``ones`` has rows,
    ``ones[u, r] = squares_one[out[u, r]]``: the square of a count-1 entry of set u, read from
    the table once per set rather than once per group using it."""
    k = _LANES if _LANES else ct.shape[1]
    acc = np.empty(k, dtype=out.dtype)
    with_ones = ones.shape[0] > 0
    n_p = item.shape[0]
    for u in range(a, b):
        for r in range(k):
            acc[r] = 0
        for p in range(ptr[u], ptr[u + 1]):
            if p + _AHEAD_ITEMS < n_p:
                _prefetch(ct, item[p + _AHEAD_ITEMS], 0)
            i = item[p]
            for r in range(k):
                acc[r] += ct[i, r]
        for r in range(k):
            out[u, r] = acc[r]
        if with_ones:
            for r in range(k):
                ones[u, r] = squares_one[acc[r]]


@njit(nogil=True, cache=True, error_model="numpy")
def weights_block(df, weights, table, loc_g, combo_loc, combo_row, ones_loc, squares, products):  # pragma: no cover - compiled
    """Per (set, count row) pair c and resample r: ``squares[c, r]``, the square read from the
    table at the set's df; per set h of hits of counts 1 and 1: ``products[h, r] = w * w``, its
    weight ``w = weights[df]`` times itself (the scorer's ``min(w, w) * w``)."""
    k = _LANES if _LANES else df.shape[1]
    per_line = _LINE_BYTES // df.itemsize  # int32 or uint16 df
    n_combos = combo_loc.shape[0]
    for c in range(n_combos):
        if c + _AHEAD_ROWS < n_combos:
            for line in range(0, k, per_line):
                _prefetch(df, loc_g[combo_loc[c + _AHEAD_ROWS]], line)
        g = loc_g[combo_loc[c]]
        t = combo_row[c]
        for r in range(k):
            squares[c, r] = table[t, df[g, r]]
    n_ones = ones_loc.shape[0]
    for h in range(n_ones):
        if h + _AHEAD_ROWS < n_ones:
            for line in range(0, k, per_line):
                _prefetch(df, loc_g[ones_loc[h + _AHEAD_ROWS]], line)
        g = loc_g[ones_loc[h]]
        for r in range(k):
            x = weights[df[g, r]]
            products[h, r] = x * x


@njit(nogil=True, cache=True, error_model="numpy")
def norms_block(ones, squares, node_src, node_depth, max_depth, emit_ptr, emit_len, emit_sent, emit_order,
                norms):  # pragma: no cover - compiled
    """``norms[s, o, r]``: the root of the sum of the squares of sentence s's order-o entries, in
    entry order from 0.0, for every (sentence, order) the similarities read. The runs of entries
    come as :func:`.cider_arrays._shared_prefixes` gives them: one partial sum per depth
    (``stack[d]``, the sum of a run's first d squares; 0.0 for none), a node adding its square to
    the partial sum one depth up, so a run takes the partial sums it shares with the run before
    it and every run's sum is the one of its own squares one after the other. After node u the
    sums of runs ``emit_ptr[u]:emit_ptr[u + 1]`` are complete (``stack[emit_len[e]]``). A
    square is row ``node_src[u]`` of ``ones`` (count 1: its set's, from :func:`df_block`) or,
    below 0, row ``-1 - node_src[u]`` of ``squares`` (the group's other counts, then its rare
    entries)."""
    k = _LANES if _LANES else norms.shape[2]
    n_nodes = node_src.shape[0]
    stack = np.empty((max_depth + 2, k))
    for r in range(k):
        stack[0, r] = 0.0
    for u in range(n_nodes):
        if u + _AHEAD_ENTRIES < n_nodes:
            ahead = node_src[u + _AHEAD_ENTRIES]
            for line in range(0, k, _LINE_DOUBLES):
                if ahead >= 0:
                    _prefetch(ones, ahead, line)
                else:
                    _prefetch(squares, -1 - ahead, line)
        j = node_src[u]
        d = node_depth[u]
        if j >= 0:
            for r in range(k):
                stack[d + 1, r] = stack[d, r] + ones[j, r]
        else:
            q = -1 - j
            for r in range(k):
                stack[d + 1, r] = stack[d, r] + squares[q, r]
        for e in range(emit_ptr[u], emit_ptr[u + 1]):
            t = emit_len[e]
            s = emit_sent[e]
            o = emit_order[e]
            for r in range(k):
                norms[s, o, r] = math.sqrt(stack[t, r])


@njit(nogil=True, cache=True, error_model="numpy")
def hits_block(df, weights, loc_g, hit_j, hit_th, hit_tr, others, products, start):  # pragma: no cover - compiled
    """``products[start + q, r] = min(vh, vr) * vr`` of hit ``others[q]`` (counts other than 1 and
    1), ``vh = th * w``, ``vr = tr * w``, ``w = weights[df]`` of its set: the scorer's clipped product."""
    k = _LANES if _LANES else df.shape[1]
    for q in range(others.shape[0]):
        x = others[q]
        g = loc_g[hit_j[x]]
        th = hit_th[x]
        tr = hit_tr[x]
        row = start + q
        for r in range(k):
            wr = weights[df[g, r]]
            vh = th * wr
            vr = tr * wr
            m = vr if vr < vh else vh
            products[row, r] = m * vr


@njit(nogil=True, cache=True, error_model="numpy")
def items_block(products, hit_src, norms, hyp_u, slot_ptr, slot_u, factor, seg_ptr, seg_order, hit_ptr, ref_counts,
                scores, sums):  # pragma: no cover - compiled
    """Item i's sum over its references of the order-o similarity times the length penalty on
    resample r (cider_table_scores' ``per_item``). A (reference, order)'s similarity sums its
    hits' clipped products (``products[hit_src[x]]``: the set's ``w * w`` for counts 1 and 1,
    else :func:`hits_block`'s) in order from 0.0; one without hits adds 0.0, so is skipped.

    With ``scores`` of ``(k, items)``: ``scores[r, i]``, the item's CIDEr-D, the sum over the
    orders from the first one by one divided by their number (numpy's mean over the orders of an
    (items, orders) array: the caller checks that this numpy's is that), then by the item's
    reference count, times 10. Else (``scores`` of no items) ``sums[i, r, o]``, the sums."""
    k = _LANES if _LANES else products.shape[1]
    n_ord = norms.shape[1]
    fused = scores.shape[1] > 0
    per = np.empty((n_ord, k))
    val = np.empty(k)
    total = np.empty(k)
    n_slots = slot_u.shape[0]
    n_seg = seg_order.shape[0]
    ahead_slot = 0  # the slot of run sg + _AHEAD_RUNS
    for i in range(hyp_u.shape[0]):
        h = hyp_u[i]
        for o in range(n_ord):
            for r in range(k):
                per[o, r] = 0.0
        for sl in range(slot_ptr[i], slot_ptr[i + 1]):
            rs = slot_u[sl]
            f = factor[sl]
            for sg in range(seg_ptr[sl], seg_ptr[sl + 1]):
                ahead = sg + _AHEAD_RUNS
                if ahead < n_seg:
                    while ahead_slot + 1 < n_slots and seg_ptr[ahead_slot + 1] <= ahead:
                        ahead_slot += 1
                    first = hit_src[hit_ptr[ahead]]
                    rs_ahead = slot_u[ahead_slot]
                    o_ahead = seg_order[ahead]
                    for line in range(0, k, _LINE_DOUBLES):
                        _prefetch3(norms, rs_ahead, o_ahead, line)
                        _prefetch(products, first, line)
                o = seg_order[sg]
                a = hit_ptr[sg]
                src = hit_src[a]
                for r in range(k):
                    val[r] = 0.0 + products[src, r]
                for x in range(a + 1, hit_ptr[sg + 1]):
                    src = hit_src[x]
                    for r in range(k):
                        val[r] += products[src, r]
                for r in range(k):
                    nh = norms[h, o, r]
                    nr = norms[rs, o, r]
                    v = val[r]
                    # a select, not a branch (vectorised): the other lanes' quotient is unused
                    q = v / (nh * nr)
                    v = q if (nh != 0.0) & (nr != 0.0) else v
                    per[o, r] += v * f
        if fused:
            # lane by lane as before, in a contiguous row (vectorised); then the strided writes
            count = ref_counts[i]
            for r in range(k):
                total[r] = per[0, r]
            for o in range(1, n_ord):
                for r in range(k):
                    total[r] += per[o, r]
            for r in range(k):
                total[r] = total[r] / n_ord / count * 10.0
            for r in range(k):
                scores[r, i] = total[r]
        else:
            for r in range(k):
                for o in range(n_ord):
                    sums[i, r, o] = per[o, r]


def with_lanes(kernel: Any, lanes: int, name: str) -> Any:
    """``kernel``'s Python function with ``_LANES`` fixed (for ``numba.pycc``): the same code
    object under another name, its globals a copy with ``_LANES = lanes``."""
    import types

    fn = kernel.py_func
    namespace = dict(fn.__globals__)
    namespace["_LANES"] = int(lanes)
    out = types.FunctionType(fn.__code__, namespace, name, fn.__defaults__, fn.__closure__)
    out.__qualname__ = name
    return out
