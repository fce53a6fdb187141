"""The beam search of the fast METEOR 1.5 aligner (:mod:`.fast_align`): partial alignments
over the reference positions that have a choice to make, with Java's beam order and ties
(see the comment above :func:`_resolve`). Masks of used positions are Python ints: for
short pairs (``EAGER_BITS``) made with each partial, otherwise only for the partials that
survive each cut to the beam size. The extension at the last free position picks the final
alignment without making its partials (:func:`_last_step`)."""

from __future__ import annotations

from operator import itemgetter

import numpy as np

BEAM_SIZE = 40

_by_key = itemgetter(0)
_by_key_order = itemgetter(1, 2)

# A candidate match here is a tuple (masks, gain << 2 * width, dist, match_start, end,
# match_end, start, module). For short pairs (n1 + n2 <= EAGER_BITS, nearly all captions)
# ``masks`` is the int of the positions covered (hypothesis position j is bit j, reference
# position i bit n1 + i) and every partial carries its used-position mask from its
# creation ("eager"): cheaper than the lazy scheme below, and small. Otherwise ``masks`` is
# (hypothesis run, reference run) as low-bit masks
# ((1 << match_length) - 1, (1 << length) - 1); shifted to match_start and n1 + start they
# give the positions covered (hypothesis position j is bit j, reference position i bit
# n1 + i). Masks are not stored shifted: one per candidate would take O(n1 + n2) bits,
# memory quadratic in the caption length (issue 25); gain is Java's beam weight (int(len1 * w) + int(len2 * w), so
# a one-word stem/synonym match gains 0), shifted into the key's first field; dist is
# |start - match_start|; end = start + length; match_end = match_start + match_length.
_MASK, _GAIN, _DIST, _MSTART, _END, _MEND, _START, _MODULE = range(8)


_ONE_ONE = (1, 1)  # the masks of a one-word match (lazy scheme)

#: pairs with at most this many words in all take the eager scheme: a candidate's mask and a
#: partial's take at most this many bits, so memory stays linear in the length (issue 25)
EAGER_BITS = 256


def _unpack(bits: int, n: int) -> bytes:
    """Bits 0 .. n-1 of ``bits`` as one byte (0 or 1) per position."""
    if not bits:
        return bytes(n)
    packed = np.frombuffer(bits.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(packed, bitorder="little")[:n].tobytes()


def _pack(flags: bytearray) -> int:
    """Inverse of :func:`_unpack`: the int with bit p set where ``flags[p]`` is 1."""
    if not any(flags):
        return 0
    arr = np.frombuffer(bytes(flags), dtype=np.uint8)
    return int.from_bytes(np.packbits(arr, bitorder="little").tobytes(), "little")


def _mask(m: tuple, n1: int) -> int:
    """The positions candidate ``m`` covers (hypothesis j: bit j; reference i: bit n1 + i)."""
    hm, rm = m[_MASK]
    return (hm << m[_MSTART]) | (rm << (n1 + m[_START]))


def _settle(beam: list, parents: list | None, n1: int) -> None:
    """Give the partials of the (sorted, truncated) beam their used-position masks, and
    drop those of the previous beam's partials that left it.

    A new partial's mask (its parent's plus its match's) is only made once it survives
    the truncation to ``BEAM_SIZE``: making it for every candidate extension, and keeping
    it in every ancestor, would take memory quadratic in the caption length (issue 25).
    """
    for p in beam:
        if p[3] is None:
            p[3] = p[5][3] | _mask(p[4], n1)
    if parents:
        keep = {id(p) for p in beam}
        for p in parents:
            if id(p) not in keep:
                p[3] = None


# How the beam search below equals :func:`.reference_align._resolve`.
#
# The Java search visits every reference position; at each it stable-sorts the beam,
# keeps the best 40 and extends every partial. Only "free" positions (not fixed, with
# candidates) create new partials. Over a run of other positions that every partial
# enters at the run's first position (``idx == pos``), a partial's key changes by the
# same amount for all partials, plus one chunk when its last hypothesis position is set
# and does not continue into the run's first position (an unmatched word closes the
# chunk; a fixed match continues it only when it starts there); from the first position
# on, every partial has the same last position. So the key differences between partials
# are the same after each position of the run: the stable sorts the Java code does at the
# run's later positions all give the order of the first one, the beam neither grows nor
# is truncated, and doing the run in one step then sorting once gives the same beam in
# the same order. Only the key differences matter (sorts, the final choice), so the
# amount common to all partials is not added at all. Runs that some partial enters
# inside a multi-word match (``idx > pos``) are done position by position.
#
# Partial alignments are lists ``[key, idx, last, used, match, parent]``: ``key`` packs
# (-weighted matches, chunks, distance) as in the reference implementation, up to that
# common amount; ``match`` is the match the partial was created with and ``parent`` the
# partial it extends: a parent only goes on as the "skip" branch, so its own match and
# parent never change, and following parents gives the reference implementation's chain.


def _resolve(rows: list, fixed: list, free: list, used: int, n1: int, one: int, multi_rows: bool,
             eager: bool = False):
    """``Aligner.resolve`` (beam search), equal to :func:`.reference_align._resolve`; returns the best partial.

    ``free`` ends with n2; ``one`` is one chunk in the key (see the comment above);
    ``multi_rows``: some candidate covers several reference words; ``eager``: the
    candidates' masks are ints of the positions covered (see ``EAGER_BITS``).
    """
    n2 = free[-1]
    last_free = free[-2]
    beam = [[0, 0, -1, used, None, None]]
    parents = None  # the beam the current one was extended from (see _settle)
    pos = 0
    multi = False  # some row seen so far offers a match of several reference words
    for f in free:
        if pos < f:
            if len(beam) > 1:
                beam.sort(key=_by_key)
                if len(beam) > BEAM_SIZE:
                    del beam[BEAM_SIZE:]
            if not multi or all(p[1] == pos for p in beam):
                m = fixed[pos]
                first_ms = None if m is None else m[_MSTART]
                last = -1
                i = pos
                while i < f:
                    m = fixed[i]
                    if m is None:
                        last = -1
                        i += 1
                    else:
                        last = m[_MEND]
                        i = m[_END]
                if f == n2:  # every partial ends with the same last position
                    return _first_least(beam, first_ms, one)
                for p in beam:
                    lp = p[2]
                    if lp != -1 and lp != first_ms:
                        p[0] += one
                    p[1] = f
                    p[2] = last
            else:
                if not eager:
                    _settle(beam, parents, n1)
                    parents = None
                for i in range(pos, f):
                    if i > pos and len(beam) > 1:
                        beam.sort(key=_by_key)
                    bit = 1 << (n1 + i)
                    for p in beam:
                        if p[3] & bit:
                            if i < p[1]:
                                continue
                            m = fixed[p[1]]
                            key = p[0] - m[_GAIN] + m[_DIST]
                            if p[2] != -1 and m[_MSTART] != p[2]:
                                key += one
                            p[0] = key
                            p[1] = m[_END]
                            p[2] = m[_MEND]
                        else:  # an unmatched word
                            if p[2] != -1:
                                p[0] += one
                                p[2] = -1
                            p[1] += 1
        if f == n2:
            return _final(beam, one)
        if len(beam) > 1:
            beam.sort(key=_by_key)
            if len(beam) > BEAM_SIZE:
                del beam[BEAM_SIZE:]
        if not eager:
            _settle(beam, parents, n1)
        row = rows[f]
        if multi_rows and not multi:
            nxt = f + 1
            multi = any(x[_END] > nxt for x in row)
        if f == last_free and not multi:
            return _last_step(beam, row, f, fixed, n2, n1, one, eager)
        new = []
        append = new.append
        for p in beam:
            key, idx, last, u, _, _ = p
            if idx > f:  # inside a multi-word match this partial chose
                append(p)
                continue
            if eager:
                if last == -1:  # no open chunk: no chunk increment
                    for m in row:
                        cm = m[0]
                        if not u & cm:
                            append([key - m[1], m[4], m[5], u | cm, m, p])
                            key += m[2]  # sic: Java adds the new match's distance to the parent
                else:
                    for m in row:
                        cm = m[0]
                        if u & cm:
                            continue
                        _, gain, dist, ms, end, mend, _, _ = m
                        if ms != last:
                            append([key - gain + one, end, mend, u | cm, m, p])
                        else:
                            append([key - gain, end, mend, u | cm, m, p])
                        key += dist
            else:
                for m in row:
                    (hm, rm), gain, dist, ms, end, mend, start, _ = m
                    if (u >> ms) & hm or (u >> (n1 + start)) & rm:
                        continue
                    # the used mask is made by _settle if the partial survives
                    if last != -1 and ms != last:
                        append([key - gain + one, end, mend, None, m, p])
                    else:
                        append([key - gain, end, mend, None, m, p])
                    key += dist  # sic: Java adds the new match's distance to the parent
            if last != -1:
                key += one
                p[2] = -1
            p[0] = key
            p[1] = idx + 1
            append(p)
        if not eager:
            parents = beam
        beam = new
        pos = f + 1
    raise AssertionError("unreachable")  # pragma: no cover


def _last_step(beam: list, row: list, f: int, fixed: list, n2: int, n1: int, one: int, eager: bool) -> list:
    """The extension at the last free position ``f`` and the final choice, without making
    the new partials (no partial sits inside a multi-word match: see ``_resolve``).

    What follows is the last run (if ``f + 1 < n2``: :func:`_first_least`) or nothing
    (:func:`_final`). Either way the beam is cut to its first ``BEAM_SIZE`` partials by
    (key, order of creation) and the choice is the first partial of that order with the
    least key after closing the chunks: the least (closed key, key, order of creation),
    where closing adds one chunk to a partial whose last match does not continue into the
    run (always, with no run). Each new partial is here just that triple.
    """
    m = fixed[f + 1] if f + 1 < n2 else None
    first_ms = None if m is None else m[_MSTART]
    out = []
    append = out.append
    order = 0
    for p in beam:
        key, _, last, u, _, _ = p
        for m in row:
            if eager:
                if u & m[0]:
                    continue
            else:
                hm, rm = m[0]
                if (u >> m[_MSTART]) & hm or (u >> (n1 + m[_START])) & rm:
                    continue
            k = key - m[_GAIN] + one if last != -1 and m[_MSTART] != last else key - m[_GAIN]
            append((k + one if m[_MEND] != first_ms else k, k, order, m, p))
            order += 1
            key += m[_DIST]  # sic, as in _resolve
        if last != -1:
            key += one
        append((key, key, order, None, p))  # p itself, unmatched here: no open chunk
        order += 1
    if len(out) > BEAM_SIZE:
        out.sort(key=_by_key_order)
        del out[BEAM_SIZE:]
    _, k, _, m, p = min(out)  # orders differ: the matches are never compared
    return p if m is None else [k, m[_END], m[_MEND], None, m, p]


def _first_least(beam: list, first_ms, one: int) -> list:
    """The final choice after a last run of fixed or unmatched positions (the beam was
    sorted and truncated before it): every partial then has the same last position, so
    closing the open chunks adds the same to every key, and the first of the final
    order is the first partial with the least key after the run (see ``_resolve``).
    The run adds 0 or ``one`` to a key, and the beam is sorted: once a key is not below
    the best found, neither is any later key after the run."""
    best = beam[0]
    lp = best[2]
    bk = best[0] + one if lp != -1 and lp != first_ms else best[0]
    for p in beam:
        k = p[0]
        if k >= bk:
            break
        lp = p[2]
        if lp != -1 and lp != first_ms:
            k += one
        if k < bk:
            best, bk = p, k
    return best


def _final(beam: list, one: int) -> list:
    """Java: sort (keep 40), close open chunks, sort again, take the first. The first of
    the final order is the first partial of the current order with the least (final key,
    current key): the current order is either sorted already (after a truncation) or the
    one the first sort would be stable to."""
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
    return best  # type: ignore[return-value]
