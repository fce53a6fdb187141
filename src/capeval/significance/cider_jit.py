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
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(nogil=True, cache=True, error_model="numpy")
def df_block(ct, item, ptr, a, b, out):  # pragma: no cover - compiled
    """``out[u, r] = sum(ct[item[ptr[u]:ptr[u + 1]], r])`` for u in [a, b) (int32: exact)."""
    k = ct.shape[1]
    for u in range(a, b):
        row = out[u]
        for p in range(ptr[u], ptr[u + 1]):
            c = ct[item[p]]
            for r in range(k):
                row[r] += c[r]


@njit(nogil=True, cache=True, error_model="numpy")
def norms_block(df, weights, table, row_one, loc_g, ent_ptr, ent_loc, ent_order, ent_row, ent_rare, rare, w, ww,
                norms):  # pragma: no cover - compiled
    """Per set of the group and resample r: ``w`` the weight, ``ww`` its product with itself;
    per sentence s, order o: ``norms[s, o, r]``, the root of the sum of the squares in entry order."""
    k = df.shape[1]
    n_loc = loc_g.shape[0]
    n_sent = ent_ptr.shape[0] - 1
    n_ord = norms.shape[1]
    sq_one = np.zeros((n_loc, k))
    for j in range(n_loc):
        g = loc_g[j]
        for r in range(k):
            d = df[g, r]
            x = weights[d]
            w[j, r] = x
            ww[j, r] = x * x
            if row_one >= 0:
                sq_one[j, r] = table[row_one, d]
    acc = np.empty((n_ord, k))
    for s in range(n_sent):
        acc[:, :] = 0.0
        for e in range(ent_ptr[s], ent_ptr[s + 1]):
            row = ent_row[e]
            a = acc[ent_order[e]]
            if row == row_one and row >= 0:
                x = sq_one[ent_loc[e]]
                for r in range(k):
                    a[r] += x[r]
            elif row >= 0:
                g = loc_g[ent_loc[e]]
                for r in range(k):
                    a[r] += table[row, df[g, r]]
            else:
                x = rare[ent_rare[e]]
                for r in range(k):
                    a[r] += x[r]
        for o in range(n_ord):
            for r in range(k):
                norms[s, o, r] = math.sqrt(acc[o, r])


@njit(nogil=True, cache=True, error_model="numpy")
def items_block(w, ww, norms, hyp_u, slot_ptr, slot_u, factor, seg_ptr, seg_order, hit_ptr, hit_j, hit_th, hit_tr,
                hit_ones, out):  # pragma: no cover - compiled
    """``out[r, i, o]``: item i's sum over its references of the order-o similarity times the
    length penalty on resample r (cider_table_scores' ``per_item``); a (reference, order)
    without hits adds 0.0, so is skipped."""
    k = w.shape[1]
    n_items = hyp_u.shape[0]
    n_ord = norms.shape[1]
    per = np.empty((n_ord, k))
    val = np.empty(k)
    for i in range(n_items):
        h = hyp_u[i]
        per[:, :] = 0.0
        for sl in range(slot_ptr[i], slot_ptr[i + 1]):
            rs = slot_u[sl]
            f = factor[sl]
            for sg in range(seg_ptr[sl], seg_ptr[sl + 1]):
                o = seg_order[sg]
                val[:] = 0.0
                for x in range(hit_ptr[sg], hit_ptr[sg + 1]):
                    j = hit_j[x]
                    if hit_ones[x]:
                        wwj = ww[j]
                        for r in range(k):
                            val[r] += wwj[r]
                    else:
                        wj = w[j]
                        th = hit_th[x]
                        tr = hit_tr[x]
                        for r in range(k):
                            wr = wj[r]
                            vh = th * wr
                            vr = tr * wr
                            m = vr if vr < vh else vh
                            val[r] += m * vr
                nho = norms[h, o]
                nro = norms[rs, o]
                po = per[o]
                for r in range(k):
                    nh = nho[r]
                    nr = nro[r]
                    v = val[r]
                    # a select, not a branch (vectorised): the other lanes' quotient is unused
                    q = v / (nh * nr)
                    v = q if (nh != 0.0) & (nr != 0.0) else v
                    po[r] += v * f
        for o in range(n_ord):
            for r in range(k):
                out[r, i, o] = per[o, r]
