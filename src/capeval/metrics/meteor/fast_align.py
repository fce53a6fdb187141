"""The fast METEOR 1.5 path: a lean, exact aligner (resolution and statistics).

This computes exactly what :mod:`.reference_align` (the reference implementation, a
line-by-line port of ``edu.cmu.meteor.aligner.Aligner``) computes, with less work per pair:

* words are prepared once per distinct word (hash, stem hash, synsets, function flag),
  sentences once per distinct normalised sentence, and the paraphrase-table lookups of
  all new sentences of a batch are done in one sorted, vectorised search; n-grams of
  two or more words are only looked up when every adjacent word pair occurs in some
  table phrase (the index stores those pairs), which cannot drop a table phrase
  (:mod:`.sentences`);
* a hypothesis sentence keeps, per reference word, the list of its exact / stem /
  synonym candidates ("templates"), reused across all the references it meets;
  candidate matches are tuples and coverage is tracked with bitmasks (:mod:`.fast_match`);
* the beam search (:func:`_resolve`) does the Java steps only at reference positions
  that have a choice to make. Positions in between (fixed matches and unmatched words)
  change every partial alignment the same way except for one chunk increment that
  depends on the partial's last matched hypothesis position; their effect is applied
  in one go. See :func:`_resolve` for why the beam order (hence every tie) is the same;
* per item, the references are aligned in order of decreasing score upper bound
  (:func:`.fast_match.upper_bound`, from the candidate matches) and the beam search is
  skipped for references whose bound is below the best score found (they cannot be the
  first best; see :class:`.engine.Meteor15`).

The reference implementation stays the specification; ``tests/test_meteor.py`` checks
that both give identical statistics lines on thousands of natural and adversarial pairs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from operator import itemgetter

from capeval.metrics.meteor.fast_match import DIST, END, GAIN, MEND, MODULE, MSTART, START, match
from capeval.metrics.meteor.sentences import Sentence
from capeval.metrics.meteor.stats import ALPHA, BETA, DELTA, GAMMA, MODULE_WEIGHTS, MeteorStats, compute

BEAM_SIZE = 40

_by_key = itemgetter(0)


def pair_stats(h: Sentence, r: Sentence) -> tuple:
    """Alignment statistics of hypothesis ``h`` against reference ``r``.

    Returns ``(len1, len2, func1, func2, content1[4], content2[4], fmatch1[4], fmatch2[4],
    chunks)`` as ints, the numbers of ``MeteorStats`` (the word-match totals follow).
    """
    return finish(match(h, r))


def finish(matched: tuple) -> tuple:
    """Resolution and statistics (see :func:`pair_stats`) of a :func:`.fast_match.match` result."""
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
                fixed[m[START]] = m
        final = [m for m in fixed if m is not None]

    # statistics of the final alignment (Aligner.getCountAndChunks and the module counts)
    f1, f2 = h.fmask, r.fmask
    a1 = [0, 0, 0, 0]
    a2 = [0, 0, 0, 0]
    chunks = 0
    last_end = -1
    prev_end = -1
    for m in final:
        mod = m[MODULE]
        a1[mod] |= m[0]
        a2[mod] |= m[1]
        if last_end != -1 and (m[START] != prev_end or m[MSTART] != last_end):
            chunks += 1
        last_end = m[MEND]
        prev_end = m[END]
    if last_end != -1:
        chunks += 1
    fn1 = [(x & f1).bit_count() for x in a1]
    fn2 = [(x & f2).bit_count() for x in a2]
    c1 = [x.bit_count() - y for x, y in zip(a1, fn1)]
    c2 = [x.bit_count() - y for x, y in zip(a2, fn2)]
    return (n1, n2, h.nfunc, r.nfunc, c1, c2, fn1, fn2, chunks)


def _resolve(rows: list, fixed: list, free: list, used1: int, used2: int, n2: int, width: int):
    """``Aligner.resolve`` (beam search), equal to :func:`.reference_align._resolve`; returns the chain.

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
                            first_ms = m[MSTART]
                        base += m[DIST] - (m[GAIN] << w2)
                        if last != -1 and m[MSTART] != last:
                            base += one
                        last = m[MEND]
                        i = m[END]
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
                            key = p[0] - (m[GAIN] << w2) + m[DIST]
                            if p[2] != -1 and m[MSTART] != p[2]:
                                key += one
                            p[0] = key
                            p[1] = m[END]
                            p[2] = m[MEND]
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
                k = key - (m[GAIN] << w2)
                if last != -1 and m[MSTART] != last:
                    k += one
                end = m[END]
                if end > f + 1:
                    multi = True
                append([k, end, m[MEND], u1 | m[0], u2 | m[1], (m, chain)])
                key += m[DIST]  # sic: Java adds the new match's distance to the parent
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


def to_stats(st: tuple) -> MeteorStats:
    """``MeteorStats`` of a :func:`pair_stats` tuple."""
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


def sum_stats(stats: Iterable[tuple]) -> MeteorStats:
    """Summed ``MeteorStats`` of many :func:`pair_stats` tuples, as ``MeteorStats.add`` sums
    them (a perfectly matched item adds no chunks); integer sums, so exact in any grouping.

    Add such totals with :func:`.stats.add_totals`, not ``MeteorStats.add``.
    """
    tl = rl = tf = rf = ch = m1 = m2 = 0
    c1 = [0, 0, 0, 0]
    c2 = [0, 0, 0, 0]
    f1 = [0, 0, 0, 0]
    f2 = [0, 0, 0, 0]
    for a, b, c, d, x1, x2, y1, y2, chunks in stats:
        tl += a
        rl += b
        tf += c
        rf += d
        for i in range(4):
            c1[i] += x1[i]
            c2[i] += x2[i]
            f1[i] += y1[i]
            f2[i] += y2[i]
        t1 = sum(x1) + sum(y1)
        t2 = sum(x2) + sum(y2)
        if not (t1 == a and t2 == b and chunks == 1):
            ch += chunks
        m1 += t1
        m2 += t2
    s = MeteorStats(float(tl), float(rl), float(tf), float(rf))
    s.test_content = [float(x) for x in c1]
    s.reference_content = [float(x) for x in c2]
    s.test_function = [float(x) for x in f1]
    s.reference_function = [float(x) for x in f2]
    s.chunks = float(ch)
    s.test_word_matches = float(m1)
    s.reference_word_matches = float(m2)
    return s
