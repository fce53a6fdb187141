"""Compiled (numba) resolution and statistics of the fast METEOR path, for pairs of at most
63 words in all: :func:`.fast_align.finish` step by step on fixed-width integers.

Imported only through :mod:`.jit_align` (numba is optional). Each function here is the
Python one it names, with the same operations in the same order: partial alignments are
rows of parallel arrays (a pool), beams are arrays of pool rows, masks of used positions
are int64 (hypothesis position j is bit j, reference position i bit n1 + i), keys int64
(the caller checks that they fit). Candidate matches are rows of ``cand`` (see
:func:`_candidates`); "no match" is -1 where the Python code has None, and a first
position of "none" is -2 (never a position, never -1).
"""

from __future__ import annotations

import numba
import numpy as np

BEAM_SIZE = 40

# columns of a candidate row (the Python tuple's fields, see fast_beam)
_MASK, _GAIN, _DIST, _MSTART, _END, _MEND, _START, _MODULE = range(8)
# columns of a partial alignment (the Python list [key, idx, last, used, match, parent])
_KEY, _IDX, _LAST, _USED, _MATCH, _PARENT = range(6)

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _popcount(x: int) -> int:
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@_jit
def _candidates(single, para, n1, n2, w2):
    """The candidate rows of :func:`.fast_align.finish` (singles in order, then paraphrases
    in order, grouped by reference position as ``rows``), with ``row_start`` / ``row_len``."""
    n_single = single.shape[0] // 4
    n_para = para.shape[0] // 4
    count = np.zeros(n2, dtype=np.int64)
    for s in range(n_single):
        count[single[4 * s]] += 1
    for p in range(n_para):
        count[para[4 * p]] += 1
    row_start = np.zeros(n2 + 1, dtype=np.int64)
    for i in range(n2):
        row_start[i + 1] = row_start[i] + count[i]
    fill = row_start[:n2].copy()
    cand = np.empty((n_single + n_para, 8), dtype=np.int64)
    for s in range(n_single):
        i = single[4 * s]
        j = single[4 * s + 1]
        c = fill[i]
        fill[i] += 1
        cand[c, _MASK] = (1 << j) | (1 << (n1 + i))
        cand[c, _GAIN] = single[4 * s + 3] << w2
        cand[c, _DIST] = abs(i - j)
        cand[c, _MSTART] = j
        cand[c, _END] = i + 1
        cand[c, _MEND] = j + 1
        cand[c, _START] = i
        cand[c, _MODULE] = single[4 * s + 2]
    for p in range(n_para):
        k = para[4 * p]
        length = para[4 * p + 1]
        ms = para[4 * p + 2]
        mlength = para[4 * p + 3]
        c = fill[k]
        fill[k] += 1
        cand[c, _MASK] = (((1 << mlength) - 1) << ms) | (((1 << length) - 1) << (n1 + k))
        cand[c, _GAIN] = ((mlength >> 1) + (length >> 1)) << w2  # int(x * 0.5), BEAM_WEIGHTS[PARAPHRASE]
        cand[c, _DIST] = abs(k - ms)
        cand[c, _MSTART] = ms
        cand[c, _END] = k + length
        cand[c, _MEND] = ms + mlength
        cand[c, _START] = k
        cand[c, _MODULE] = 3  # PARAPHRASE
    return cand, row_start, count


@_jit
def _sort_beam(beam, n, pool, cut):
    """Stable sort of ``beam[:n]`` by key (``list.sort(key=...)``), then keep the first
    ``BEAM_SIZE`` if ``cut``; returns the new length."""
    if n > 1:
        keys = np.empty(n, dtype=np.int64)
        for a in range(n):
            keys[a] = pool[beam[a], _KEY]
        order = np.argsort(keys, kind="mergesort")
        tmp = beam[:n].copy()
        for a in range(n):
            beam[a] = tmp[order[a]]
        if cut and n > BEAM_SIZE:
            n = BEAM_SIZE
    return n


@_jit
def _new(pool, size, key, idx, last, used, match, parent):
    pool[size, _KEY] = key
    pool[size, _IDX] = idx
    pool[size, _LAST] = last
    pool[size, _USED] = used
    pool[size, _MATCH] = match
    pool[size, _PARENT] = parent
    return size + 1


@_jit
def _first_least(beam, n, pool, first_ms, one):
    best = beam[0]
    lp = pool[best, _LAST]
    bk = pool[best, _KEY] + one if lp != -1 and lp != first_ms else pool[best, _KEY]
    for a in range(n):
        p = beam[a]
        k = pool[p, _KEY]
        if k >= bk:
            break
        lp = pool[p, _LAST]
        if lp != -1 and lp != first_ms:
            k += one
        if k < bk:
            best = p
            bk = k
    return best


@_jit
def _final(beam, n, pool, one):
    n = _sort_beam(beam, n, pool, True) if n > BEAM_SIZE else n
    best = -1
    bf = 0
    bk = 0
    for a in range(n):
        p = beam[a]
        k = pool[p, _KEY]
        kf = k + one if pool[p, _LAST] != -1 else k
        if best == -1 or kf < bf or (kf == bf and k < bk):
            best = p
            bf = kf
            bk = k
    return best


@_jit
def _last_step(beam, n, pool, size, cand, rs, rl, f, fixed, n2, one):
    """:func:`.fast_beam._last_step` (eager masks); returns (chosen partial, pool size)."""
    first_ms = -2
    if f + 1 < n2 and fixed[f + 1] != -1:
        first_ms = cand[fixed[f + 1], _MSTART]
    cap = n * (rl + 1)
    closed = np.empty(cap, dtype=np.int64)
    keyed = np.empty(cap, dtype=np.int64)
    which = np.empty(cap, dtype=np.int64)
    owner = np.empty(cap, dtype=np.int64)
    o = 0
    for a in range(n):
        p = beam[a]
        key = pool[p, _KEY]
        last = pool[p, _LAST]
        u = pool[p, _USED]
        for c in range(rs, rs + rl):
            if u & cand[c, _MASK]:
                continue
            if last != -1 and cand[c, _MSTART] != last:
                k = key - cand[c, _GAIN] + one
            else:
                k = key - cand[c, _GAIN]
            closed[o] = k + one if cand[c, _MEND] != first_ms else k
            keyed[o] = k
            which[o] = c
            owner[o] = p
            o += 1
            key += cand[c, _DIST]
        if last != -1:
            key += one
        closed[o] = key
        keyed[o] = key
        which[o] = -1
        owner[o] = p
        o += 1
    if o > BEAM_SIZE:  # the first BEAM_SIZE by (key, order of creation)
        keep = np.argsort(keyed[:o], kind="mergesort")[:BEAM_SIZE]
    else:
        keep = np.arange(o)
    best = keep[0]
    for x in keep:  # least (closed key, key, order)
        if closed[x] < closed[best] or (closed[x] == closed[best] and (keyed[x] < keyed[best] or
                                                                       (keyed[x] == keyed[best] and x < best))):
            best = x
    c = which[best]
    if c == -1:
        return owner[best], size
    size = _new(pool, size, keyed[best], cand[c, _END], cand[c, _MEND], 0, c, owner[best])
    return size - 1, size


@_jit
def _resolve(cand, row_start, row_len, fixed, free, n_free, used, n1, one, multi_rows):
    """:func:`.fast_beam._resolve` with eager masks; returns (pool, best partial)."""
    n2 = free[n_free - 1]
    last_free = free[n_free - 2]
    total = 0
    for x in range(n_free - 1):
        total += row_len[free[x]]
    pool = np.empty((2 + BEAM_SIZE * (total + 1), 6), dtype=np.int64)
    size = _new(pool, 0, 0, 0, -1, used, -1, -1)
    beam = np.empty(BEAM_SIZE * (cand.shape[0] + 1) + 1, dtype=np.int64)
    new = np.empty_like(beam)
    beam[0] = 0
    n = 1
    pos = 0
    multi = False
    for x in range(n_free):
        f = free[x]
        if pos < f:
            n = _sort_beam(beam, n, pool, True)
            all_at = True
            if multi:
                for a in range(n):
                    if pool[beam[a], _IDX] != pos:
                        all_at = False
                        break
            if not multi or all_at:
                first_ms = -2 if fixed[pos] == -1 else cand[fixed[pos], _MSTART]
                last = -1
                i = pos
                while i < f:
                    m = fixed[i]
                    if m == -1:
                        last = -1
                        i += 1
                    else:
                        last = cand[m, _MEND]
                        i = cand[m, _END]
                if f == n2:
                    return pool, _first_least(beam, n, pool, first_ms, one)
                for a in range(n):
                    p = beam[a]
                    lp = pool[p, _LAST]
                    if lp != -1 and lp != first_ms:
                        pool[p, _KEY] += one
                    pool[p, _IDX] = f
                    pool[p, _LAST] = last
            else:
                for i in range(pos, f):
                    if i > pos:
                        n = _sort_beam(beam, n, pool, False)
                    bit = 1 << (n1 + i)
                    for a in range(n):
                        p = beam[a]
                        if pool[p, _USED] & bit:
                            if i < pool[p, _IDX]:
                                continue
                            m = fixed[pool[p, _IDX]]
                            key = pool[p, _KEY] - cand[m, _GAIN] + cand[m, _DIST]
                            if pool[p, _LAST] != -1 and cand[m, _MSTART] != pool[p, _LAST]:
                                key += one
                            pool[p, _KEY] = key
                            pool[p, _IDX] = cand[m, _END]
                            pool[p, _LAST] = cand[m, _MEND]
                        else:
                            if pool[p, _LAST] != -1:
                                pool[p, _KEY] += one
                                pool[p, _LAST] = -1
                            pool[p, _IDX] += 1
        if f == n2:
            return pool, _final(beam, n, pool, one)
        n = _sort_beam(beam, n, pool, True)
        rs = row_start[f]
        rl = row_len[f]
        if multi_rows and not multi:
            for c in range(rs, rs + rl):
                if cand[c, _END] > f + 1:
                    multi = True
        if f == last_free and not multi:
            best, size = _last_step(beam, n, pool, size, cand, rs, rl, f, fixed, n2, one)
            return pool, best
        k_new = 0
        for a in range(n):
            p = beam[a]
            key = pool[p, _KEY]
            idx = pool[p, _IDX]
            last = pool[p, _LAST]
            u = pool[p, _USED]
            if idx > f:  # inside a multi-word match this partial chose
                new[k_new] = p
                k_new += 1
                continue
            for c in range(rs, rs + rl):
                cm = cand[c, _MASK]
                if u & cm:
                    continue
                if last != -1 and cand[c, _MSTART] != last:
                    k = key - cand[c, _GAIN] + one
                else:
                    k = key - cand[c, _GAIN]
                size = _new(pool, size, k, cand[c, _END], cand[c, _MEND], u | cm, c, p)
                new[k_new] = size - 1
                k_new += 1
                key += cand[c, _DIST]  # sic: Java adds the new match's distance to the parent
            if last != -1:
                key += one
                pool[p, _LAST] = -1
            pool[p, _KEY] = key
            pool[p, _IDX] = idx + 1
            new[k_new] = p
            k_new += 1
        beam, new = new, beam
        n = k_new
        pos = f + 1
    return pool, -1  # unreachable: free ends with n2


@_jit
def _transpose(single, n1):
    """The one-word candidates of the reverse pair, (i, j, module, gain) with i in the
    hypothesis and j in the reference, as this pair's in :func:`.fast_match.transposed`'s
    order: by reference position, then module, then hypothesis position."""
    n = single.shape[0] // 4
    order_key = np.empty(n, dtype=np.int64)
    for s in range(n):
        order_key[s] = (single[4 * s + 1] * 4 + single[4 * s + 2]) * (n1 + 1) + single[4 * s]
    order = np.argsort(order_key, kind="mergesort")
    out = np.empty_like(single)
    for a in range(n):
        s = order[a]
        out[4 * a] = single[4 * s + 1]
        out[4 * a + 1] = single[4 * s]
        out[4 * a + 2] = single[4 * s + 2]
        out[4 * a + 3] = single[4 * s + 3]
    return out


@_jit
def finish_kernel(single, para, n1, n2, width, dup, f1, f2, flip):
    """:func:`.fast_align.finish` of one pair as 17 ints: content1[4], content2[4],
    function1[4], function2[4], chunks (``single``: (i, j, module, gain) per one-word
    candidate in order; ``para``: (k, length, ms, mlength) per paraphrase candidate;
    ``width``: :func:`.fast_align.key_width`; ``flip``: ``single`` holds the reverse
    pair's candidates, see :func:`_transpose`)."""
    if flip:
        single = _transpose(single, n1)
    w2 = 2 * width
    cand, row_start, row_len = _candidates(single, para, n1, n2, w2)
    multi_rows = False
    for p in range(para.shape[0] // 4):
        if para[4 * p + 1] > 1:
            multi_rows = True
    fixed = np.full(n2, -1, dtype=np.int64)
    free = np.empty(n2 + 1, dtype=np.int64)
    n_free = 0
    used = 0
    for i in range(n2):
        if row_len[i] == 0:
            continue
        c = row_start[i]
        if row_len[i] == 1 and not (dup & cand[c, _MASK]):
            fixed[i] = c
            used |= cand[c, _MASK]
        else:
            free[n_free] = i
            n_free += 1
    if n_free:
        free[n_free] = n2
        n_free += 1
        pool, node = _resolve(cand, row_start, row_len, fixed, free, n_free, used, n1, 1 << width, multi_rows)
        while node != -1:  # the partial's chosen matches: its own, then its parent's
            m = pool[node, _MATCH]
            if m != -1:
                fixed[cand[m, _START]] = m
            node = pool[node, _PARENT]
    out = np.zeros(17, dtype=np.int64)  # c1[4], c2[4], fn1[4], fn2[4], chunks
    n1m = np.zeros(4, dtype=np.int64)
    n2m = np.zeros(4, dtype=np.int64)
    chunks = 0
    last_end = -1
    prev_end = -1
    for i in range(n2):
        m = fixed[i]
        if m == -1:
            continue
        mod = cand[m, _MODULE]
        ms = cand[m, _MSTART]
        mend = cand[m, _MEND]
        k = cand[m, _START]
        end = cand[m, _END]
        n1m[mod] += mend - ms
        n2m[mod] += end - k
        out[8 + mod] += _popcount((f1 >> ms) & ((1 << (mend - ms)) - 1))
        out[12 + mod] += _popcount((f2 >> k) & ((1 << (end - k)) - 1))
        if last_end != -1 and (k != prev_end or ms != last_end):
            chunks += 1
        last_end = mend
        prev_end = end
    if last_end != -1:
        chunks += 1
    for x in range(4):
        out[x] = n1m[x] - out[8 + x]
        out[4 + x] = n2m[x] - out[12 + x]
    out[16] = chunks
    return out
