"""The fast METEOR 1.5 path: batch sentence preparation and a lean, exact aligner.

This computes exactly what :mod:`.aligner` (the reference implementation, a line-by-line
port of ``edu.cmu.meteor.aligner.Aligner``) computes, with less work per pair:

* words are prepared once per distinct word (hash, stem hash, synsets, function flag),
  sentences once per distinct normalised sentence, and the paraphrase-table lookups of
  all new sentences of a batch are done in one sorted, vectorised search; n-grams of
  two or more words are only looked up when every adjacent word pair occurs in some
  table phrase (the index stores those pairs), which cannot drop a table phrase;
* a hypothesis sentence keeps, per reference word, the list of its exact / stem /
  synonym candidates ("templates"), reused across all the references it meets;
* candidate matches are tuples and coverage is tracked with bitmasks;
* the beam search (:func:`_resolve`) does the Java steps only at reference positions
  that have a choice to make. Positions in between (fixed matches and unmatched words)
  change every partial alignment the same way except for one chunk increment that
  depends on the partial's last matched hypothesis position; their effect is applied
  in one go. See :func:`_resolve` for why the beam order (hence every tie) is the same;
* per item, the references are aligned in order of decreasing score upper bound
  (:func:`upper_bound`, from the candidate matches) and the beam search is skipped for
  references whose bound is below the best score found (they cannot be the first best).

The reference implementation stays the specification; ``tests/test_meteor.py`` checks
that both give identical statistics lines on thousands of natural and adversarial pairs.
"""

from __future__ import annotations

import math
from operator import itemgetter

from capeval.metrics.meteor.stats import ALPHA, BETA, DELTA, GAMMA, MODULE_WEIGHTS

BEAM_SIZE = 40
EXACT, STEM, SYNONYM, PARAPHRASE = range(4)

# A candidate match is a tuple:
# (mask1, mask2, gain, dist, match_start, match_end, end, module, start, length, match_length)
# mask1/mask2: covered hypothesis/reference positions as bits; gain: Java's beam weight
# (int(len1 * w) + int(len2 * w), so a one-word stem/synonym match gains 0); dist:
# |start - match_start|; end = start + length; match_end = match_start + match_length.
_M1, _M2, _GAIN, _DIST, _MS, _ME, _END, _MOD, _START = range(9)

_by_key = itemgetter(0)


class Sentence:
    """Per-sentence data of the fast path (built once per distinct normalised sentence)."""

    __slots__ = (
        "words", "n", "hashes", "stem_hashes", "fmask", "nfunc", "hash_pos", "stem_pos",
        "word_mask", "wordset", "tmpl", "ngram_positions", "ngram_ids", "ngram_len", "hits",
        "path_ids", "nbs", "nbv",
    )  # fmt: skip

    def __init__(self, words: tuple[str, ...], winfo: dict) -> None:
        self.words = words
        self.n = len(words)
        infos = [winfo[w] for w in words]
        self.hashes = hashes = tuple([x[0] for x in infos])
        self.stem_hashes = stems = tuple([x[1] for x in infos])
        fmask = 0
        hash_pos: dict[int, list] = {}  # hash -> exact candidate data per position
        stem_pos: dict[int, list] = {}  # stem hash -> (position, word hash)
        word_mask: dict[str, int] = {}
        bit = 1
        for j, w in enumerate(words):
            if infos[j][3]:
                fmask |= bit
            hw = hashes[j]
            c = (j, EXACT, bit, 2)
            lst = hash_pos.get(hw)
            if lst is None:
                hash_pos[hw] = [c]
            else:
                lst.append(c)
            hs = stems[j]
            lst = stem_pos.get(hs)
            if lst is None:
                stem_pos[hs] = [(j, hw)]
            else:
                lst.append((j, hw))
            word_mask[w] = word_mask.get(w, 0) | bit
            bit <<= 1
        self.fmask = fmask
        self.nfunc = fmask.bit_count()
        self.hash_pos = hash_pos
        self.stem_pos = stem_pos
        self.word_mask = word_mask
        self.wordset = frozenset(word_mask)
        self.nbs: tuple = ()  # per word: known words sharing a synset (see Meteor15)
        self.nbv = -1  # vocabulary version ``nbs`` was computed for
        self.tmpl: dict[str, tuple] = {}  # reference word -> candidate (j, module) data
        # Paraphrase table view (see set_paraphrases); the reference implementation's
        # ``paths`` (start, length, paraphrase id, paraphrase length) are generated on
        # demand from ``hits`` for the few paraphrase ids a pair has in common.
        self.ngram_positions: dict[int, list[int]] = {}  # table string id -> starts
        self.ngram_ids: frozenset = frozenset()
        self.ngram_len: dict[int, int] = {}  # table string id -> its number of words (shared)
        self.hits: list = []  # (start, length, {paraphrase id: index in the phrase's entries})
        self.path_ids: frozenset = frozenset()  # paraphrase ids of all phrases in ``hits``

    def set_paraphrases(self, positions: dict, lengths: dict, hits: list, path_ids: frozenset) -> None:
        self.ngram_positions = positions
        self.ngram_ids = frozenset(positions)
        self.ngram_len = lengths
        self.hits = hits
        self.path_ids = path_ids


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


def pair_stats(h: Sentence, r: Sentence) -> tuple:
    """Alignment statistics of hypothesis ``h`` against reference ``r``.

    Returns ``(len1, len2, func1, func2, content1[4], content2[4], fmatch1[4], fmatch2[4],
    chunks)`` as ints, the numbers of ``MeteorStats`` (the word-match totals follow).
    """
    return finish(match(h, r))


def match(h: Sentence, r: Sentence) -> tuple:
    """The matching phase of :func:`pair_stats`: ``(upper bound of the score, state)``;
    :func:`finish` does the rest. See :func:`upper_bound`."""
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


def finish(matched: tuple) -> tuple:
    """Resolution and statistics (see :func:`pair_stats`) of a :func:`match` result."""
    h, r, rows, occ, n_matches, dup1, dup2 = matched[1]
    n1, n2 = h.n, r.n

    final = []
    fixed: list = [None] * n2
    used1 = used2 = 0
    n_fixed = 0
    if n_matches:
        free = []
        for i in occ:
            row = rows[i]
            if len(row) == 1:
                m = row[0]
                if not (m[0] & dup1 or m[1] & dup2):
                    fixed[i] = m
                    used1 |= m[0]
                    used2 |= m[1]
                    n_fixed += 1
                    continue
            free.append(i)
        if free:
            bound = (n_matches + n2 + 1) * (max(n1, n2) + 1) * (n2 + 2)
            chain = _resolve(rows, fixed, free, used1, used2, n2, bound.bit_length() + 1)
            while chain is not None:
                m, chain = chain
                fixed[m[_START]] = m
        final = [m for m in fixed if m is not None]

    # statistics of the final alignment (Aligner.getCountAndChunks and the module counts)
    f1, f2 = h.fmask, r.fmask
    a1 = [0, 0, 0, 0]
    a2 = [0, 0, 0, 0]
    chunks = 0
    last_end = -1
    prev_end = -1
    for m in final:
        mod = m[_MOD]
        a1[mod] |= m[0]
        a2[mod] |= m[1]
        if last_end != -1 and (m[_START] != prev_end or m[_MS] != last_end):
            chunks += 1
        last_end = m[_ME]
        prev_end = m[_END]
    if last_end != -1:
        chunks += 1
    fn1 = [(x & f1).bit_count() for x in a1]
    fn2 = [(x & f2).bit_count() for x in a2]
    c1 = [x.bit_count() - y for x, y in zip(a1, fn1)]
    c2 = [x.bit_count() - y for x, y in zip(a2, fn2)]
    return (n1, n2, h.nfunc, r.nfunc, c1, c2, fn1, fn2, chunks)


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
    """ParaphraseMatcher, as in :func:`.aligner._paraphrase_matches` (same order).

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


def _resolve(rows: list, fixed: list, free: list, used1: int, used2: int, n2: int, width: int):
    """``Aligner.resolve`` (beam search), equal to :func:`.aligner._resolve`; returns the chain.

    Partial alignments are ``[key, idx, last, used1, used2, chain]``; ``key`` packs
    (-weighted matches, chunks, distance) as in the reference implementation.

    The Java search visits every reference position; at each it stable-sorts the beam,
    keeps the best 40 and extends every partial. Only "free" positions (not fixed, with
    candidates) create new partials. Over a run of other positions that every partial
    enters at the run's first position (``idx == pos``), a partial's key changes by the
    same amount for all partials, plus one chunk when its last hypothesis position is
    set and does not continue into the run's first position (an unmatched word closes
    the chunk; a fixed match continues it only when it starts there); from the first
    position on, every partial has the same last position. So the key differences
    between partials are the same after each position of the run: the stable sorts
    the Java code does at the run's later positions all give the order of the first
    one, the beam neither grows nor is truncated, and doing the run in one step then
    sorting once gives the same beam in the same order. Runs that some partial enters
    inside a multi-word match (``idx > pos``) are done position by position.
    """
    w2 = 2 * width
    one = 1 << width
    free.append(n2)
    beam = [[0, 0, -1, used1, used2, None]]
    pos = 0
    multi = False  # some partial chose a match of several reference words
    for f in free:
        if pos < f:
            if len(beam) > 1:
                beam.sort(key=_by_key)
                if len(beam) > BEAM_SIZE:
                    del beam[BEAM_SIZE:]
            if not multi or all(p[1] == pos for p in beam):
                # the run's effect on a partial that enters it with last == -1
                base = 0
                last = -1
                first_ms = None
                i = pos
                while i < f:
                    m = fixed[i]
                    if m is None:
                        if last != -1:
                            base += one
                            last = -1
                        i += 1
                    else:
                        if i == pos:
                            first_ms = m[_MS]
                        base += m[_DIST] - (m[_GAIN] << w2)
                        if last != -1 and m[_MS] != last:
                            base += one
                        last = m[_ME]
                        i = m[_END]
                for p in beam:
                    lp = p[2]
                    if lp != -1 and lp != first_ms:
                        p[0] += base + one
                    else:
                        p[0] += base
                    p[1] = f
                    p[2] = last
            else:
                for i in range(pos, f):
                    if i > pos and len(beam) > 1:
                        beam.sort(key=_by_key)
                    bit = 1 << i
                    for p in beam:
                        if p[4] & bit:
                            if i < p[1]:
                                continue
                            m = fixed[p[1]]
                            key = p[0] - (m[_GAIN] << w2) + m[_DIST]
                            if p[2] != -1 and m[_MS] != p[2]:
                                key += one
                            p[0] = key
                            p[1] = m[_END]
                            p[2] = m[_ME]
                        else:  # an unmatched word
                            if p[2] != -1:
                                p[0] += one
                                p[2] = -1
                            p[1] += 1
        if f == n2:
            # Java: sort (keep 40), close open chunks, sort again, take the first. The
            # first of the final order is the first partial of the current order with
            # the least (final key, current key): the current order is either sorted
            # already (after a truncation) or the one the first sort would be stable to.
            if len(beam) > BEAM_SIZE:
                beam.sort(key=_by_key)
                del beam[BEAM_SIZE:]
            best = None
            bf = bk = 0
            for p in beam:
                k = p[0]
                kf = k + one if p[2] != -1 else k
                if best is None or kf < bf or (kf == bf and k < bk):
                    best, bf, bk = p, kf, k
            return best[5]
        if len(beam) > 1:
            beam.sort(key=_by_key)
            if len(beam) > BEAM_SIZE:
                del beam[BEAM_SIZE:]
        row = rows[f]
        new = []
        append = new.append
        for p in beam:
            key, idx, last, u1, u2, chain = p
            if idx > f:  # inside a multi-word match this partial chose
                append(p)
                continue
            for m in row:
                if u1 & m[0] or u2 & m[1]:
                    continue
                k = key - (m[_GAIN] << w2)
                if last != -1 and m[_MS] != last:
                    k += one
                end = m[_END]
                if end > f + 1:
                    multi = True
                append([k, end, m[_ME], u1 | m[0], u2 | m[1], (m, chain)])
                key += m[_DIST]  # sic: Java adds the new match's distance to the parent
            if last != -1:
                key += one
                p[2] = -1
            p[0] = key
            p[1] = idx + 1
            append(p)
        beam = new
        pos = f + 1
    raise AssertionError("unreachable")  # pragma: no cover


def score_of(st: tuple) -> float:
    """``stats.compute(stats).score`` of a :func:`pair_stats` tuple, same float operations."""
    tl, rl, tfw, rfw, c1, c2, fn1, fn2, chunks = st
    tl = float(tl)
    rl = float(rl)
    tfw = float(tfw)
    rfw = float(rfw)
    d = DELTA
    test_wlen = d * (tl - tfw) + (1.0 - d) * tfw
    ref_wlen = d * (rl - rfw) + (1.0 - d) * rfw
    w0, w1, w2, w3 = MODULE_WEIGHTS
    test_wm = 0.0
    test_wm += float(c1[0]) * w0 * d
    test_wm += float(c1[1]) * w1 * d
    test_wm += float(c1[2]) * w2 * d
    test_wm += float(c1[3]) * w3 * d
    ref_wm = 0.0
    ref_wm += float(c2[0]) * w0 * d
    ref_wm += float(c2[1]) * w1 * d
    ref_wm += float(c2[2]) * w2 * d
    ref_wm += float(c2[3]) * w3 * d
    e = 1.0 - d
    test_wm += float(fn1[0]) * w0 * e
    test_wm += float(fn1[1]) * w1 * e
    test_wm += float(fn1[2]) * w2 * e
    test_wm += float(fn1[3]) * w3 * e
    ref_wm += float(fn2[0]) * w0 * e
    ref_wm += float(fn2[1]) * w1 * e
    ref_wm += float(fn2[2]) * w2 * e
    ref_wm += float(fn2[3]) * w3 * e
    if test_wlen == 0.0 or ref_wlen == 0.0 or test_wm == 0.0 or ref_wm == 0.0:
        # the IEEE corner cases (0/0, x/0, 1/inf ...): the reference formula handles them
        from capeval.metrics.meteor.stats import compute

        return compute(to_stats(st)).score
    precision = test_wm / test_wlen
    recall = ref_wm / ref_wlen
    fmean = 1.0 / ((1.0 - ALPHA) / precision + ALPHA / recall)
    m1 = sum(c1) + sum(fn1)
    m2 = sum(c2) + sum(fn2)
    if m1 == tl and m2 == rl and chunks == 1:
        frag = 0.0
    else:
        frag = float(chunks) / ((float(m1) + float(m2)) / 2.0)
    penalty = GAMMA * math.pow(frag, BETA)
    value = fmean * (1.0 - penalty)
    return value if value > 0.0 else 0.0


def to_stats(st: tuple):
    """``MeteorStats`` of a :func:`pair_stats` tuple."""
    from capeval.metrics.meteor.stats import MeteorStats

    tl, rl, tfw, rfw, c1, c2, fn1, fn2, chunks = st
    s = MeteorStats(float(tl), float(rl), float(tfw), float(rfw))
    s.test_content = [float(x) for x in c1]
    s.reference_content = [float(x) for x in c2]
    s.test_function = [float(x) for x in fn1]
    s.reference_function = [float(x) for x in fn2]
    s.chunks = float(chunks)
    s.test_word_matches = float(sum(c1) + sum(fn1))
    s.reference_word_matches = float(sum(c2) + sum(fn2))
    return s
