"""The fast METEOR 1.5 path: a lean, exact aligner (resolution and statistics).

This computes exactly what :mod:`.reference_align` (the reference implementation, a
line-by-line port of ``edu.cmu.meteor.aligner.Aligner``) computes, with less work per pair:

* words are prepared once per distinct word (hash, stem hash, synsets, function flag),
  sentences once per distinct normalised sentence, and the paraphrase-table lookups of
  all new sentences of a batch are done in one sorted, vectorised search; n-grams of
  three or more words are only looked up when every adjacent word pair occurs in some
  table phrase (the index stores those pairs), which cannot drop a table phrase
  (:mod:`.sentences`);
* a hypothesis sentence keeps, per reference word, the list of its exact / stem /
  synonym candidates ("templates"), reused across all the references it meets;
  coverage is tracked with bitmasks (:mod:`.fast_match`); a pair whose mirror (the
  reference against the hypothesis) was matched before gets its candidates transposed;
* the beam search (:func:`.fast_beam._resolve`) does the Java steps only at reference positions
  that have a choice to make. Positions in between (fixed matches and unmatched words)
  change every partial alignment the same way except for one chunk increment that
  depends on the partial's last matched hypothesis position; their effect is applied
  in one go (the comment above :func:`.fast_beam._resolve` says why the beam order, hence every
  tie, is the same); the last free position's extensions are not made as partials, only
  ranked (:func:`.fast_beam._last_step`); pairs of up to 256 words in all keep each
  partial's used positions as one int (``EAGER_BITS``);
* per item, the references are aligned in order of decreasing score upper bound
  (:func:`.fast_match.upper_bound`, from the candidate matches) and the beam search is
  skipped for references whose bound, or tighter :func:`.fast_match.chain_bound`, is
  below the best score found (they cannot be the first best; see
  :class:`.engine.Meteor15`).

The reference implementation stays the specification; ``tests/test_meteor.py`` checks
that both give identical statistics lines on thousands of natural and adversarial pairs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from capeval.metrics.meteor.fast_beam import (  # the candidate-match fields, the beam search
    _END, _MEND, _MODULE, _MSTART, _ONE_ONE, _START, EAGER_BITS, _pack, _resolve, _unpack,
)
from capeval.metrics.meteor.fast_match import match
from capeval.metrics.meteor.sentences import PARAPHRASE, Sentence
from capeval.metrics.meteor.stats import ALPHA, BETA, DELTA, GAMMA, MODULE_WEIGHTS, MeteorStats, compute



def pair_stats(h: Sentence, r: Sentence) -> tuple:
    """Alignment statistics of hypothesis ``h`` against reference ``r``.

    Returns ``(len1, len2, func1, func2, content1[4], content2[4], fmatch1[4], fmatch2[4],
    chunks)`` as ints, the numbers of ``MeteorStats`` (the word-match totals follow).
    """
    return finish(match(h, r))




def key_width(n1: int, n2: int, n_matches: int) -> int:
    """Bits of each field of a beam key (chunk counts and distances stay below 2**width)."""
    return ((n_matches + n2 + 1) * (max(n1, n2) + 1) * (n2 + 2)).bit_length() + 1


def finish(matched: tuple) -> tuple:
    """Resolution and statistics (see :func:`pair_stats`) of a :func:`.fast_match.match` result."""
    h, r, singles, paras, n_matches, dup, _, _, _ = matched[1]
    n1, n2 = h.n, r.n
    if not n_matches:
        return (n1, n2, h.nfunc, r.nfunc, [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], 0)
    width = key_width(n1, n2, n_matches)
    w2 = 2 * width
    eager = n1 + n2 <= EAGER_BITS  # masks as ints of the positions covered (see fast_beam)
    rows: list = [None] * n2
    for i, cands, _ in singles:
        if eager:
            bi = 1 << (n1 + i)
            if len(cands) == 1:
                j, mod, g = cands[0]
                row = [((1 << j) | bi, g << w2, abs(i - j), j, i + 1, j + 1, i, mod)]
            else:
                row = [((1 << j) | bi, g << w2, abs(i - j), j, i + 1, j + 1, i, mod) for j, mod, g in cands]
        else:
            row = [(_ONE_ONE, g << w2, abs(i - j), j, i + 1, j + 1, i, mod) for j, mod, g in cands]
        rows[i] = row
    multi = False  # some candidate covers several reference words
    if paras:
        for k, length, ms, mlength in paras:
            hm, rm = (1 << mlength) - 1, (1 << length) - 1
            m = (
                (hm << ms) | (rm << (n1 + k)) if eager else (hm, rm),
                (int(mlength * 0.5) + int(length * 0.5)) << w2,  # BEAM_WEIGHTS[PARAPHRASE] = 0.5
                abs(k - ms), ms, k + length, ms + mlength, k, PARAPHRASE,
            )  # fmt: skip
            if length > 1:
                multi = True
            row = rows[k]
            if row is None:
                rows[k] = [m]
            else:
                row.append(m)
        occ = [i for i in range(n2) if rows[i] is not None]
    else:
        occ = [x[0] for x in singles]

    fixed: list = [None] * n2
    free = []
    if eager:
        used = 0
        for i in occ:
            row = rows[i]
            if len(row) == 1 and not dup & row[0][0]:
                fixed[i] = row[0]
                used |= row[0][0]
            else:
                free.append(i)
    else:
        # dup and used as one byte per position: O(1) tests, O(n1 + n2) memory
        dupb = _unpack(dup, n1 + n2)
        usedb = bytearray(n1 + n2)
        for i in occ:
            row = rows[i]
            if len(row) == 1:
                m = row[0]
                ms, mend, k, end = m[_MSTART], m[_MEND], n1 + m[_START], n1 + m[_END]
                if not (any(dupb[ms:mend]) or any(dupb[k:end])):
                    fixed[i] = m
                    usedb[ms:mend] = b"\x01" * (mend - ms)
                    usedb[k:end] = b"\x01" * (end - k)
                    continue
            free.append(i)
        del dupb
        used = _pack(usedb) if free else 0
        del usedb
    if free:
        free.append(n2)
        one = 1 << width
        node = _resolve(rows, fixed, free, used, n1, one, multi, eager)
        while node is not None:  # the partial's chosen matches: its own, then its parent's
            m = node[-2]
            if m is not None:
                fixed[m[_START]] = m
            node = node[-1]

    # statistics of the final alignment (Aligner.getCountAndChunks and the module counts);
    # the alignment's matches cover disjoint positions, so the words of each module are
    # counted match by match
    n1m = [0, 0, 0, 0]
    n2m = [0, 0, 0, 0]
    fn1 = [0, 0, 0, 0]
    fn2 = [0, 0, 0, 0]
    chunks = 0
    last_end = -1
    prev_end = -1
    if eager:
        f1 = h.fmask
        f2 = r.fmask
    else:
        b1 = _unpack(h.fmask, n1)
        b2 = _unpack(r.fmask, n2)
    for m in fixed:
        if m is None:
            continue
        mod = m[_MODULE]
        ms, mend, k, end = m[_MSTART], m[_MEND], m[_START], m[_END]
        n1m[mod] += mend - ms
        n2m[mod] += end - k
        if eager:
            fn1[mod] += ((f1 >> ms) & ((1 << (mend - ms)) - 1)).bit_count()
            fn2[mod] += ((f2 >> k) & ((1 << (end - k)) - 1)).bit_count()
        else:
            fn1[mod] += sum(b1[ms:mend])
            fn2[mod] += sum(b2[k:end])
        if last_end != -1 and (k != prev_end or ms != last_end):
            chunks += 1
        last_end = mend
        prev_end = end
    if last_end != -1:
        chunks += 1
    c1 = [n1m[x] - fn1[x] for x in range(4)]
    c2 = [n2m[x] - fn2[x] for x in range(4)]
    return (n1, n2, h.nfunc, r.nfunc, c1, c2, fn1, fn2, chunks)


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
