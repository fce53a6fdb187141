"""The matching phase of the fast METEOR 1.5 path: candidate matches and score bounds.

For a hypothesis and a reference :class:`~.sentences.Sentence`, :func:`match` collects
every candidate match the Java matchers would (exact, stem, synonym, then paraphrase, in
their order): per reference position the hypothesis "template" of its word (its exact /
stem / synonym candidates, kept by the hypothesis and reused across all the references
it meets) and the paraphrase matches, with bitmask coverage, and an upper bound of the
pair's score (:func:`upper_bound`); :func:`chain_bound` is a tighter bound, worth its
cost only for references that the first one does not rule out. The matcher relations
are symmetric, so a pair whose mirror was matched gets its bound (:func:`mirrored`) and
its candidates (:func:`transposed`) from the mirror's. :func:`.fast_align.finish`
resolves the matches. :func:`.reference_align.align` is the specification.
"""

from __future__ import annotations

import math

from capeval.metrics.meteor.sentences import EXACT, STEM, SYNONYM, Sentence, bits
from capeval.metrics.meteor.stats import ALPHA, BETA, DELTA, GAMMA, MODULE_WEIGHTS

# The state :func:`match` hands to :func:`.fast_align.finish`:
# (h, r, singles, paras, n_matches, dup, fmean, masks, n_first) where ``singles`` lists
# (i, candidates, hypothesis mask) per reference position i with one-word candidates, the
# candidates being template entries (j, module, gain) in the Java order (no per-candidate
# bitmask: one would take j bits, memory quadratic in the length for long sentences); ``paras``
# lists the paraphrase matches (start, length, match_start, match_length) in the Java
# order, the first ``n_first`` from reference phrases; ``dup`` is the bitmask of the words
# covered by more than one candidate (hypothesis position j is bit j, reference position i
# bit n1 + i); ``fmean`` the Fmean bound of :func:`upper_bound` and ``masks`` the positions
# it is computed from (None without candidates).


def _template(h: Sentence, w: str, wh: int, ws: int, nb: frozenset) -> tuple:
    """Exact, stem and synonym candidates of a reference word ``w`` (hash ``wh``, stem
    hash ``ws``, synonym neighbours ``nb``) in hypothesis ``h``, in the order the Java
    matchers add them (by module, then position): ``((j, module, gain), ...)``,
    with (as bitmasks) the union of their hypothesis positions, the positions that occur
    more than once, and the positions of the exact and of the exact or synonym ones."""
    ex = bits(h.hash_pos.get(wh))
    st = bits(h.stem_pos.get(ws)) & ~ex  # a stem match needs a different word (hash)
    sy = 0
    if nb:
        common = h.wordset & nb
        # the word itself is its own neighbour, but not a synonym candidate (same hash)
        if common and (len(common) > 1 or w not in common):
            word_mask = h.word_mask
            for x in common:
                sy |= bits(word_mask[x])
            sy &= ~ex
    if not (st or sy):  # exact candidates only (the usual case)
        if not ex:
            return ()
        if not ex & (ex - 1):  # one position
            return ((ex.bit_length() - 1, EXACT, 2),), ex, 0, ex, ex
    cands = []
    for module, mask, gain in ((EXACT, ex, 2), (STEM, st, 0), (SYNONYM, sy, 0)):
        while mask:  # ascending hypothesis positions
            low = mask & -mask
            cands.append((low.bit_length() - 1, module, gain))
            mask ^= low
    return tuple(cands), ex | st | sy, st & sy, ex, ex | sy


def match(h: Sentence, r: Sentence) -> tuple:
    """The matching phase of :func:`.fast_align.pair_stats`: ``(upper bound of the score,
    state)``; :func:`.fast_align.finish` does the rest. See :func:`upper_bound`."""
    n1 = h.n
    only_exact = n1 == r.n and h.hashes == r.hashes  # Java runs the exact module only
    tcache = h.tmpl
    if tcache is None:
        tcache = h.index()
    hash_pos, stem_pos, wordset = h.hash_pos, h.stem_pos, h.wordset
    r_hashes, r_stems, r_nbs = r.hashes, r.stem_hashes, r.nbs
    singles = []
    n_matches = 0
    # covered positions: by any candidate (seen), by an exact or synonym one (xy), by an exact one (ex)
    seen1 = dup1 = seen2 = dup2 = 0
    ex1 = xy1 = ex2 = xy2 = 0
    for i, w in enumerate(r.words):
        t = tcache.get(w)
        if t is None:
            # most reference words have no candidate: rule that out without a call
            wh = r_hashes[i]
            nb = r_nbs[i]
            if wh in hash_pos or r_stems[i] in stem_pos or (nb and not wordset.isdisjoint(nb)):
                t = _template(h, w, wh, r_stems[i], nb)
            else:
                t = ()
            tcache[w] = t
        if t:
            cands, tmask, tdup, te, txy = t
            b = 1 << i
            if only_exact:
                cands = tuple([c for c in cands if c[1] == EXACT])
                if not cands:
                    continue
                tmask = txy = te  # exact candidates are at distinct positions
                tdup = 0
            singles.append((i, cands, tmask))
            n_matches += len(cands)
            if len(cands) > 1:
                dup2 |= b
            seen2 |= b
            dup1 |= (seen1 & tmask) | tdup
            seen1 |= tmask
            if txy:
                xy1 |= txy
                xy2 |= b
                if te:
                    ex1 |= te
                    ex2 |= b
    paras: list = []
    n_first = 0
    if not only_exact and (r.path_ids or h.path_ids):
        paras, n_first = _paraphrase_matches(h, r)
        if paras:
            n_matches += len(paras)
            for k, length, ms, mlength in paras:
                m1 = ((1 << mlength) - 1) << ms
                dup1 |= seen1 & m1
                seen1 |= m1
                m2 = ((1 << length) - 1) << k
                dup2 |= seen2 & m2
                seen2 |= m2
    if not n_matches:
        return 0.0, (h, r, singles, paras, 0, 0, 0.0, None, 0)
    ub, fm = upper_bound(h, r, seen1, xy1, ex1, seen2, xy2, ex2)
    return ub, (h, r, singles, paras, n_matches, dup1 | (dup2 << n1), fm, (seen1, xy1, ex1, seen2, xy2, ex2), n_first)


def mirrored(reverse: tuple) -> tuple:
    """``match(h, r)``'s bound from ``reverse = match(r, h)``: ``(upper bound, None,
    reverse, Fmean bound)``; :func:`transposed` makes the state, once it is needed
    (:func:`chain_bound` and the compiled resolution take this form as it is).

    Every matcher relation is symmetric (equal hashes; equal stems and different hashes;
    a shared synset and different hashes; the paraphrase matcher looks both ways, and
    the identical-sentences rule is symmetric), so the pair has the candidates of the
    reverse pair, transposed, and the same positions covered by each kind of candidate.
    """
    _, (r, h, _, _, _, _, _, masks, _) = reverse
    if masks is None:
        return 0.0, None, reverse, 0.0
    c2, xy2, ex2, c1, xy1, ex1 = masks
    ub, fm = upper_bound(h, r, c1, xy1, ex1, c2, xy2, ex2)
    return ub, None, reverse, fm


def transposed(reverse: tuple) -> tuple:
    """``match(h, r)`` from ``reverse = match(r, h)``: the same candidates, transposed, in
    the order the Java matchers add them (see :func:`mirrored`).

    One-word candidates of a reference position come by module (exact, stem, synonym),
    then by hypothesis position; the paraphrase matcher first takes the reference's
    phrases (found in the hypothesis), then the hypothesis's (found in the reference),
    each in the order of the phrase's sentence, so the two halves swap.
    """
    _, (r, h, rsingles, rparas, n_matches, rdup, _, masks, rfirst) = reverse
    n1 = h.n
    if masks is None:
        return 0.0, (h, r, [], [], 0, 0, 0.0, None, 0)
    by_pos: dict[int, list] = {}
    for i, cands, _ in rsingles:  # reverse: i in h, j in r
        for c in cands:
            lst = by_pos.get(c[0])
            if lst is None:
                by_pos[c[0]] = [(c[1], i, c[2])]
            else:
                lst.append((c[1], i, c[2]))
    singles = []
    for j in sorted(by_pos):
        lst = by_pos[j]
        if len(lst) > 1:
            lst.sort()
        tmask = 0
        cands = []
        for mod, i, g in lst:
            tmask |= 1 << i
            cands.append((i, mod, g))
        singles.append((j, tuple(cands), tmask))
    paras = transposed_paras(rparas, rfirst)
    c2, xy2, ex2, c1, xy1, ex1 = masks
    ub, fm = upper_bound(h, r, c1, xy1, ex1, c2, xy2, ex2)
    dup = transposed_dup(rdup, n1, r.n)
    return ub, (h, r, singles, paras, n_matches, dup, fm, (c1, xy1, ex1, c2, xy2, ex2), len(rparas) - rfirst)


def transposed_paras(rparas: list, rfirst: int) -> list:
    """The paraphrase candidates of the reverse pair as this pair's, in the Java order: the
    paraphrase matcher's two halves (reference phrases, then hypothesis phrases) swap."""
    return ([(m, mlen, k, length) for k, length, m, mlen in rparas[rfirst:]]
            + [(m, mlen, k, length) for k, length, m, mlen in rparas[:rfirst]])


def transposed_dup(rdup: int, n1: int, n2: int) -> int:
    """The reverse pair's duplicate-position mask (its hypothesis, ``n2`` words, in the low
    bits) as this pair's (hypothesis of ``n1`` words low, reference above)."""
    return (rdup >> n2) | ((rdup & ((1 << n2) - 1)) << n1)


# The bounds below use the English parameters: module weights exact 1.0, synonym 0.8,
# stem and paraphrase 0.6, delta 0.75, alpha 0.85 (checked here).
if MODULE_WEIGHTS != (1.0, 0.6, 0.8, 0.6) or DELTA != 0.75 or ALPHA != 0.85:  # pragma: no cover
    raise AssertionError("fast_match.upper_bound assumes METEOR 1.5's English parameters")


def _penalty_factor(c: int) -> float:
    """``1 - gamma * (2 / c) ** beta``: the fragmentation factor with one chunk per ``c / 2`` words."""
    return 1.0 - GAMMA * math.pow(2.0 / c, BETA)


_PEN = [0.0] + [_penalty_factor(c) for c in range(1, 257)]


def upper_bound(h: Sentence, r: Sentence, c1: int, xy1: int, ex1: int, c2: int, xy2: int, ex2: int) -> tuple:
    """``(upper bound of the pair's METEOR score, upper bound of its Fmean)``, from the
    positions with any candidate (``c``), with an exact or synonym one (``xy``) and with
    an exact one (``ex``), in the hypothesis (1) and the reference (2).

    Every word the final alignment matches is covered by some candidate, with a module
    weight at most the best among the candidates covering it (exact 1.0, synonym 0.8,
    stem and paraphrase 0.6), so the weighted matches, precision, recall and Fmean are
    at most those computed from these best weights; and unless every word of both
    sentences has a candidate, the alignment is not perfect and has at least one
    chunk, so the fragmentation is at least ``1 / (mean covered words)``.

    With ``g(S) = 3 |S| - 2 |S & function words|`` (4x the delta-weighted word count),
    a covered word weighs 0.6 + 0.2 [in xy] + 0.2 [in ex], so the weighted matches are
    ``0.05 G`` with ``G = 3 g(c) + g(xy) + g(ex)``, the weighted length ``0.25 L`` with
    ``L = g(all words)``, precision ``0.2 G1 / L1`` (recall alike) and
    ``Fmean = 1 / (0.15 / P + 0.85 / R) = 4 G1 G2 / (3 L1 G2 + 17 L2 G1)``: integers, so
    this Fmean is the correctly rounded exact value.
    """
    f1, f2 = h.fmask, r.fmask
    g1 = 3 * (3 * c1.bit_count() + xy1.bit_count() + ex1.bit_count())
    g1 -= 2 * (3 * (c1 & f1).bit_count() + (xy1 & f1).bit_count() + (ex1 & f1).bit_count())
    g2 = 3 * (3 * c2.bit_count() + xy2.bit_count() + ex2.bit_count())
    g2 -= 2 * (3 * (c2 & f2).bit_count() + (xy2 & f2).bit_count() + (ex2 & f2).bit_count())
    fmean = (4 * g1 * g2) / (3 * (3 * h.n - 2 * h.nfunc) * g2 + 17 * (3 * r.n - 2 * r.nfunc) * g1)
    cov = c1.bit_count() + c2.bit_count()
    if cov == h.n + r.n:
        return fmean, fmean
    return fmean * (_PEN[cov] if cov < 257 else _penalty_factor(cov)), fmean


def chain_bound(matched: tuple) -> float:
    """A tighter upper bound of the pair's METEOR score than :func:`upper_bound`.

    Why it holds: a chunk of the final alignment is a run of its matches, in reference
    order, each starting (in both sentences) where the previous one ends, so it is a
    chain of candidates; let C be the largest number of words (both sentences) a chain
    of candidates covers. With T >= 1 chunks and m1 + m2 matched words, m1 + m2 <= T * C,
    so the fragmentation T / ((m1 + m2) / 2) is at least 2 / C, unless the alignment is
    perfect (one chunk covering all n1 + n2 words, which needs C = n1 + n2). The penalty
    grows with the fragmentation, and the Fmean is bounded as in :func:`upper_bound`.
    A :func:`mirrored` pair takes C from the reverse pair: a chain read the other way
    round is a chain of the transposed candidates, so C is the same.
    """
    if matched[1] is None:
        ub, _, reverse, fm = matched
        state = reverse[1]
    else:
        ub, state = matched
        fm = state[6]
    if ub == 0.0:
        return 0.0
    c = chain_words(state)
    if c >= state[0].n + state[1].n:
        return fm
    return fm * (_PEN[c] if c < 257 else _penalty_factor(c))


def chain_words(state: tuple) -> int:
    """C of :func:`chain_bound`: the most words (both sentences) a chain of the pair's
    candidates covers (``state``: a :func:`match` result's second field)."""
    h, _, singles, paras = state[:4]
    if not paras:
        # one-word candidates only: chains are diagonal runs; prev[k] holds the
        # hypothesis positions (at the previous reference position) ending a run of k + 1
        top = 0
        prev: list = []
        last_i = -2
        for i, _, tmask in singles:
            cur = [tmask]
            if i == last_i + 1:
                x = tmask
                for pm in prev:
                    x &= pm << 1
                    if not x:
                        break
                    cur.append(x)
            top = max(top, len(cur))
            prev = cur
            last_i = i
        c = 2 * top
    else:
        # longest chain over all candidates, by reference start (a predecessor starts
        # strictly before); best[(end2, end1)] = most words of a chain ending there
        width = h.n + 1
        best: dict[int, int] = {}
        get = best.get
        ps = sorted(paras)
        a = 0
        c = 0
        for i, cands, _ in singles:
            while a < len(ps) and ps[a][0] < i:
                c = _chain_step(best, ps[a], width, c)
                a += 1
            base = i * width
            nxt = base + width + 1
            for cand in cands:
                j = cand[0]
                v = get(base + j, 0) + 2
                if v > get(nxt + j, 0):
                    best[nxt + j] = v
                    c = max(c, v)
        while a < len(ps):
            c = _chain_step(best, ps[a], width, c)
            a += 1
    return c


def _chain_step(best: dict, para: tuple, width: int, c: int) -> int:
    k, length, ms, mlength = para
    v = best.get(k * width + ms, 0) + length + mlength
    key = (k + length) * width + ms + mlength
    if v > best.get(key, 0):
        best[key] = v
    return max(c, v)


def _common_paths(s: Sentence, common: frozenset) -> list:
    """The reference implementation's ``paths`` entries of ``s`` whose paraphrase id is in
    ``common``, in its order (start, phrase length, table order): ``(start, length, index,
    paraphrase id)``. The entries of each id are kept by the sentence (a sentence meets
    the same ids again in the other sentences of its item)."""
    cache = s.paths
    if len(common) == 1:
        (e,) = common
        sel = cache.get(e)
        if sel is None:
            sel = cache[e] = _paths_with(s.hits, e)
        return sel
    sel = []
    for e in common:
        x = cache.get(e)
        if x is None:
            x = cache[e] = _paths_with(s.hits, e)
        sel += x
    sel.sort()
    return sel


def _paths_with(hits: list, e: int) -> list:
    sel = []
    for k, length, eidx in hits:  # in (start, length) order
        ix = eidx.get(e)
        if ix is not None:
            if type(ix) is int:
                sel.append((k, length, ix, e))
            else:  # the phrase lists this paraphrase more than once (ascending)
                sel.extend([(k, length, x, e) for x in ix])
    return sel


def _paraphrase_matches(h: Sentence, r: Sentence) -> tuple:
    """ParaphraseMatcher, as in :func:`.reference_align._paraphrase_matches` (same order):
    ``(start, length, match_start, match_length)`` per match, and how many come first from
    reference phrases.

    A paraphrase's length is that of the n-gram it was found as (table strings are
    single-space joined tokens, so the table's token count equals the n-gram length).
    """
    added: list = []
    common = r.path_ids & h.ngram_ids
    if common:
        found = h.ngram_positions
        plens = h.ngram_len
        for k, length, _, pid in _common_paths(r, common):
            plen = plens[pid]
            for m in found[pid]:
                added.append((k, length, m, plen))
    n_first = len(added)
    common = h.path_ids & r.ngram_ids
    if common:
        found = r.ngram_positions
        plens = r.ngram_len
        for m, mlen, _, pid in _common_paths(h, common):
            plen = plens[pid]
            for n8 in found[pid]:
                added.append((n8, plen, m, mlen))
    return added, n_first
