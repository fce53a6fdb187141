"""The matching phase of the fast METEOR 1.5 path: candidate matches and a score bound.

For a hypothesis and a reference :class:`~.sentences.Sentence`, :func:`match` collects
every candidate match the Java matchers would (exact, stem, synonym, then paraphrase, in
their order), as tuples with bitmask coverage, and an upper bound of the pair's score
(:func:`upper_bound`); :func:`.fast_align.finish` resolves them. A hypothesis keeps, per
reference word, its exact / stem / synonym candidates ("templates"), reused across all
the references it meets. :func:`.reference_align.align` is the specification.
"""

from __future__ import annotations

import math

from capeval.metrics.meteor.sentences import EXACT, PARAPHRASE, STEM, SYNONYM, Sentence
from capeval.metrics.meteor.stats import ALPHA, BETA, DELTA, GAMMA, MODULE_WEIGHTS

# A candidate match is a tuple:
# (mask1, mask2, gain, dist, match_start, match_end, end, module, start, length, match_length)
# mask1/mask2: covered hypothesis/reference positions as bits; gain: Java's beam weight
# (int(len1 * w) + int(len2 * w), so a one-word stem/synonym match gains 0); dist:
# |start - match_start|; end = start + length; match_end = match_start + match_length.
MASK1, MASK2, GAIN, DIST, MSTART, MEND, END, MODULE, START = range(9)  # its fields


def _template(h: Sentence, wh: int, ws: int, nb: frozenset) -> tuple:
    """Exact, stem and synonym candidates of a reference word (hash ``wh``, stem hash
    ``ws``, synonym neighbours ``nb``) in hypothesis ``h``, in the order the Java
    matchers add them: ``((j, module, mask1, gain), ...)``, with (as bitmasks) the union
    of their hypothesis positions, the positions that occur more than once, and the
    positions of the exact, synonym and stem candidates."""
    out = h.hash_pos.get(wh)
    out = list(out) if out else []
    js = h.stem_pos.get(ws)
    if js:
        for j, hj in js:
            if hj != wh:
                out.append((j, STEM, 1 << j, 0))
    if nb:
        common = h.wordset & nb
        if common:
            word_mask = h.word_mask
            mask = 0
            for x in common:
                mask |= word_mask[x]
            hashes = h.hashes
            while mask:  # ascending hypothesis positions
                low = mask & -mask
                j = low.bit_length() - 1
                mask ^= low
                if hashes[j] != wh:
                    out.append((j, SYNONYM, low, 0))
    if not out:
        return ()
    seen = dup = 0
    by_mod = [0, 0, 0, 0]
    for c in out:
        dup |= seen & c[2]
        seen |= c[2]
        by_mod[c[1]] |= c[2]
    return tuple(out), seen, dup, by_mod[EXACT], by_mod[SYNONYM], by_mod[STEM]


def _para_match(start: int, length: int, mstart: int, mlength: int) -> tuple:
    # BEAM_WEIGHTS[PARAPHRASE] = 0.5; Java casts each product to int
    return (
        ((1 << mlength) - 1) << mstart,
        ((1 << length) - 1) << start,
        int(mlength * 0.5) + int(length * 0.5),
        abs(start - mstart),
        mstart,
        mstart + mlength,
        start + length,
        PARAPHRASE,
        start,
        length,
        mlength,
    )


def match(h: Sentence, r: Sentence) -> tuple:
    """The matching phase of :func:`.fast_align.pair_stats`: ``(upper bound of the score,
    state)``; :func:`.fast_align.finish` does the rest. See :func:`upper_bound`."""
    n1, n2 = h.n, r.n
    only_exact = n1 == n2 and h.hashes == r.hashes  # Java runs the exact module only
    rows: list = [None] * n2
    tcache = h.tmpl
    n_matches = 0
    seen1 = dup1 = seen2 = dup2 = 0
    ex1 = sy1 = ot1 = ex2 = sy2 = ot2 = 0  # positions with exact / synonym / other candidates
    occ = []  # reference positions with candidates
    for i, w in enumerate(r.words):
        t = tcache.get(w)
        if t is None:
            t = tcache[w] = _template(h, r.hashes[i], r.stem_hashes[i], r.nbs[i])
        if t:
            cands, tmask, tdup, te, ty, to = t
            b = 1 << i
            if only_exact:
                row = [(m1, b, g, abs(i - j), j, j + 1, i + 1, mod, i, 1, 1) for j, mod, m1, g in cands if mod == EXACT]
                if not row:
                    continue
                tmask = te  # exact candidates are at distinct positions
                tdup = ty = to = 0
            else:
                row = [(m1, b, g, abs(i - j), j, j + 1, i + 1, mod, i, 1, 1) for j, mod, m1, g in cands]
            rows[i] = row
            occ.append(i)
            n_matches += len(row)
            if len(row) > 1:
                dup2 |= b
            seen2 |= b
            dup1 |= (seen1 & tmask) | tdup
            seen1 |= tmask
            if te:
                ex1 |= te
                ex2 |= b
            if ty:
                sy1 |= ty
                sy2 |= b
            if to:
                ot1 |= to
                ot2 |= b
    if not only_exact and (r.path_ids or h.path_ids):
        added = _paraphrase_matches(h, r, rows)
        if added:
            n_matches += len(added)
            for m in added:
                m1 = m[0]
                dup1 |= seen1 & m1
                seen1 |= m1
                m2 = m[1]
                dup2 |= seen2 & m2
                seen2 |= m2
            for m in added:
                ot1 |= m[0]
                ot2 |= m[1]
            occ = [i for i in range(n2) if rows[i] is not None]
    ub = upper_bound(h, r, ex1, sy1, ot1, ex2, sy2, ot2) if n_matches else 0.0
    return ub, (h, r, rows, occ, n_matches, dup1, dup2)


def upper_bound(h: Sentence, r: Sentence, ex1: int, sy1: int, ot1: int, ex2: int, sy2: int, ot2: int) -> float:
    """An upper bound of the METEOR score of the pair, from its candidate matches.

    Every word the final alignment matches is covered by some candidate, with a module
    weight at most the best among the candidates covering it (exact 1.0, synonym 0.8,
    stem and paraphrase 0.6), so the weighted matches, precision, recall and Fmean are
    at most those computed from these best weights; and unless every word of both
    sentences has a candidate, the alignment is not perfect and has at least one
    chunk, so the fragmentation is at least ``1 / (mean covered words)``.
    """
    d = DELTA
    e = 1.0 - d
    w_ex, w_st, w_sy, w_pa = MODULE_WEIGHTS
    w_ot = max(w_st, w_pa)
    f1, f2 = h.fmask, r.fmask
    sy1 &= ~ex1
    ot1 &= ~(ex1 | sy1)
    sy2 &= ~ex2
    ot2 &= ~(ex2 | sy2)
    wm1 = d * (w_ex * (ex1 & ~f1).bit_count() + w_sy * (sy1 & ~f1).bit_count() + w_ot * (ot1 & ~f1).bit_count())
    wm1 += e * (w_ex * (ex1 & f1).bit_count() + w_sy * (sy1 & f1).bit_count() + w_ot * (ot1 & f1).bit_count())
    wm2 = d * (w_ex * (ex2 & ~f2).bit_count() + w_sy * (sy2 & ~f2).bit_count() + w_ot * (ot2 & ~f2).bit_count())
    wm2 += e * (w_ex * (ex2 & f2).bit_count() + w_sy * (sy2 & f2).bit_count() + w_ot * (ot2 & f2).bit_count())
    wlen1 = d * (h.n - h.nfunc) + e * h.nfunc
    wlen2 = d * (r.n - r.nfunc) + e * r.nfunc
    if wm1 <= 0.0 or wm2 <= 0.0 or wlen1 <= 0.0 or wlen2 <= 0.0:
        return 0.0
    p = wm1 / wlen1
    rc = wm2 / wlen2
    fmean = 1.0 / ((1.0 - ALPHA) / p + ALPHA / rc)
    cov1 = (ex1 | sy1 | ot1).bit_count()
    cov2 = (ex2 | sy2 | ot2).bit_count()
    if cov1 == h.n and cov2 == r.n:
        return fmean
    return fmean * (1.0 - GAMMA * math.pow(2.0 / (cov1 + cov2), BETA))


def _common_paths(hits: list, common: frozenset) -> list:
    """The reference ``paths`` entries whose paraphrase id is in ``common``, in its order
    (start, phrase length, table order): ``(start, length, index, paraphrase id)``."""
    sel = []
    for k, length, eidx in hits:
        if len(common) < len(eidx):
            for e in common:
                ix = eidx.get(e)
                if ix is not None:
                    if type(ix) is int:
                        sel.append((k, length, ix, e))
                    else:  # the phrase lists this paraphrase more than once
                        sel.extend((k, length, x, e) for x in ix)
        else:
            for e, ix in eidx.items():
                if e in common:
                    if type(ix) is int:
                        sel.append((k, length, ix, e))
                    else:
                        sel.extend((k, length, x, e) for x in ix)
    if len(sel) > 1:
        sel.sort()
    return sel


def _paraphrase_matches(h: Sentence, r: Sentence, rows: list) -> list:
    """ParaphraseMatcher, as in :func:`.reference_align._paraphrase_matches` (same order).

    A paraphrase's length is that of the n-gram it was found as (table strings are
    single-space joined tokens, so the table's token count equals the n-gram length).
    """
    added = []
    common = r.path_ids & h.ngram_ids
    if common:
        found = h.ngram_positions
        plens = h.ngram_len
        for k, length, _, pid in _common_paths(r.hits, common):
            plen = plens[pid]
            row = rows[k]
            if row is None:
                row = rows[k] = []
            for m in found[pid]:
                mt = _para_match(k, length, m, plen)
                row.append(mt)
                added.append(mt)
    common = h.path_ids & r.ngram_ids
    if common:
        found = r.ngram_positions
        plens = r.ngram_len
        for m, mlen, _, pid in _common_paths(h.hits, common):
            plen = plens[pid]
            for n8 in found[pid]:
                row = rows[n8]
                if row is None:
                    row = rows[n8] = []
                mt = _para_match(n8, plen, m, mlen)
                row.append(mt)
                added.append(mt)
    return added
