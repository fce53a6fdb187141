"""METEOR 1.5 word alignment (``edu.cmu.meteor.aligner.Aligner``), in Python.

Two token sequences are aligned in two phases:

1. *Matching*: every candidate match between hypothesis (``line1``) and reference
   (``line2``) words is collected by four modules, in this order per reference position:
   exact (same word), stem (same Snowball stem), synonym (shared WordNet synset) and
   paraphrase (a phrase of one side whose table paraphrase occurs in the other side).
   Modules do not exclude each other; every match is kept.
2. *Resolution*: matches that are the only candidate for all the words they cover are
   fixed; the rest are chosen by a left-to-right beam search over reference positions
   (beam 40) that prefers, in order, more weighted matched words, fewer chunks and a
   smaller summed position distance.

Everything that can change a tie is kept as in the Java code: words are compared by
``String.hashCode``; candidate order is module, then position (paraphrases: phrase
length, then table order); the beam is re-sorted with a stable sort; the beam's match
weights truncate to int (``(int)(len * 0.5)`` so a one-word stem or synonym match adds
0); and a quirk of the Java search is reproduced on purpose: when a partial alignment is
extended, the position distance of the new match is added to the *parent* (which then
continues as the "skip this position" branch), not to the child.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Sequence

# Java Aligner.updateModuleWeights as MeteorScorer sets them: exact 1.0, others 0.5.
BEAM_WEIGHTS = (1.0, 0.5, 0.5, 0.5)
BEAM_SIZE = 40
N_MODULES = 4
EXACT, STEM, SYNONYM, PARAPHRASE = range(4)


@dataclass
class SentenceInfo:
    """Per-sentence data the matchers need; built once per distinct normalised sentence."""

    words: tuple[str, ...]
    hashes: tuple[int, ...]  # String.hashCode of each word
    stem_hashes: tuple[int, ...]  # hashCode of each word's stem
    synsets: tuple[frozenset, ...]  # synsets ∪ stem synsets of each word
    function: tuple[bool, ...]  # word is in the function-word list
    # paraphrase table view of the sentence (filled by the scorer):
    ngram_positions: dict[int, list[int]] = field(default_factory=dict)  # table string id -> starts
    # (start, phrase length, paraphrase id, paraphrase length) per reachable table entry
    paths: list[tuple[int, int, int, int]] = field(default_factory=list)
    # indexes for matching this sentence as the hypothesis side
    hash_pos: dict[int, list[int]] = field(default_factory=dict)
    stem_pos: dict[int, list[int]] = field(default_factory=dict)
    syn_mask: dict[int, int] = field(default_factory=dict)  # synset -> bitmask of positions
    syn_keys: frozenset = frozenset()
    path_ids: frozenset = frozenset()  # paraphrase ids in ``paths``
    ngram_ids: frozenset = frozenset()  # keys of ``ngram_positions``

    def __post_init__(self) -> None:
        for j, h in enumerate(self.hashes):
            self.hash_pos.setdefault(h, []).append(j)
        for j, h in enumerate(self.stem_hashes):
            self.stem_pos.setdefault(h, []).append(j)
        for j, ss in enumerate(self.synsets):
            bit = 1 << j
            for s in ss:
                self.syn_mask[s] = self.syn_mask.get(s, 0) | bit
        self.syn_keys = frozenset(self.syn_mask)

    def set_paraphrases(self, positions: dict[int, list[int]], paths: list[tuple[int, int, int, int]]) -> None:
        self.ngram_positions = positions
        self.ngram_ids = frozenset(positions)
        self.paths = paths
        self.path_ids = frozenset(p[2] for p in paths)


class Match:
    """One candidate match: ``line2[start:start+length]`` ~ ``line1[match_start:+match_length]``."""

    __slots__ = ("start", "length", "match_start", "match_length", "module", "mask1", "mask2", "gain", "dist")

    def __init__(self, start: int, length: int, match_start: int, match_length: int, module: int):
        self.start = start
        self.length = length
        self.match_start = match_start
        self.match_length = match_length
        self.module = module
        self.mask2 = ((1 << length) - 1) << start
        self.mask1 = ((1 << match_length) - 1) << match_start
        w = BEAM_WEIGHTS[module]
        self.gain = int(match_length * w) + int(length * w)  # Java casts each product to int
        self.dist = abs(start - match_start)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Match({self.start}:{self.length} {self.match_start}:{self.match_length} m{self.module})"


@dataclass
class Alignment:
    """Result of aligning hypothesis (line1) with reference (line2)."""

    len1: int
    len2: int
    function1: int
    function2: int
    content1: list[int]  # per module: matched hypothesis content words
    content2: list[int]
    func1: list[int]  # per module: matched hypothesis function words
    func2: list[int]
    chunks: int
    matches: list[Match | None]


def _paraphrase_matches(h: SentenceInfo, r: SentenceInfo, stage: list[list[Match]]) -> None:
    """ParaphraseMatcher: reference phrases whose paraphrase occurs in the hypothesis
    (in reference-position order), then hypothesis phrases whose paraphrase occurs in
    the reference (in hypothesis-position order)."""
    common = r.path_ids & h.ngram_ids
    if common:
        found = h.ngram_positions
        for k, length, pid, plen in r.paths:
            if pid in common:
                row = stage[k]
                for m in found[pid]:
                    row.append(Match(k, length, m, plen, PARAPHRASE))
    common = h.path_ids & r.ngram_ids
    if common:
        found = r.ngram_positions
        for m, mlen, pid, plen in h.paths:
            if pid in common:
                for n8 in found[pid]:
                    stage[n8].append(Match(n8, plen, m, mlen, PARAPHRASE))


def align(h: SentenceInfo, r: SentenceInfo, paraphrases: bool = True) -> Alignment:
    """Align hypothesis ``h`` (line1) to reference ``r`` (line2) like ``Aligner.align``."""
    n1, n2 = len(h.words), len(r.words)
    stage: list[list[Match]] = [[] for _ in range(n2)]
    h_hash, r_hash = h.hashes, r.hashes
    # Identical sentences (by hash): Java runs the exact module only.
    only_exact = n1 == n2 and h_hash == r_hash
    hash_pos, stem_pos, syn_mask, syn_keys = h.hash_pos, h.stem_pos, h.syn_mask, h.syn_keys
    for i in range(n2):
        ri = r_hash[i]
        row = stage[i]
        js = hash_pos.get(ri)
        if js:
            for j in js:
                row.append(Match(i, 1, j, 1, EXACT))
        if only_exact:
            continue
        js = stem_pos.get(r.stem_hashes[i])
        if js:
            for j in js:
                if h_hash[j] != ri:
                    row.append(Match(i, 1, j, 1, STEM))
        ss = r.synsets[i]
        if ss:
            mask = 0
            for s in ss & syn_keys:
                mask |= syn_mask[s]
            while mask:  # hypothesis positions sharing a synset, ascending
                low = mask & -mask
                j = low.bit_length() - 1
                mask ^= low
                if h_hash[j] != ri:
                    row.append(Match(i, 1, j, 1, SYNONYM))
    if paraphrases and not only_exact:
        _paraphrase_matches(h, r, stage)

    # Coverage: how many candidate matches touch each word.
    cov1 = [0] * n1
    cov2 = [0] * n2
    n_matches = 0
    for row in stage:
        n_matches += len(row)
        for m in row:
            if m.match_length == 1:
                cov1[m.match_start] += 1
            else:
                for x in range(m.match_start, m.match_start + m.match_length):
                    cov1[x] += 1
            if m.length == 1:
                cov2[m.start] += 1
            else:
                for x in range(m.start, m.start + m.length):
                    cov2[x] += 1

    # Fix matches that are the only candidate for every word they cover.
    fixed: list[Match | None] = [None] * n2
    used1 = used2 = 0
    for j, row in enumerate(stage):
        if len(row) == 1:
            m = row[0]
            if all(cov2[j + k] == 1 for k in range(m.length)) and all(
                cov1[m.match_start + k] == 1 for k in range(m.match_length)
            ):
                fixed[j] = m
                used2 |= m.mask2
                used1 |= m.mask1

    final = list(fixed)
    if n_matches > sum(m is not None for m in fixed):  # something left to choose
        # distance can only grow by one match distance per candidate per step
        bound = (n_matches + n2 + 1) * (max(n1, n2) + 1) * (n2 + 2)
        node = _resolve(stage, fixed, used1, used2, n2, bound.bit_length() + 1)
        while node is not None:
            m, node = node
            final[m.start] = m

    f1 = h.function
    f2 = r.function
    content1 = [0] * N_MODULES
    content2 = [0] * N_MODULES
    func1 = [0] * N_MODULES
    func2 = [0] * N_MODULES
    for m in final:
        if m is None:
            continue
        mod = m.module
        for x in range(m.match_start, m.match_start + m.match_length):
            if f1[x]:
                func1[mod] += 1
            else:
                content1[mod] += 1
        for x in range(m.start, m.start + m.length):
            if f2[x]:
                func2[mod] += 1
            else:
                content2[mod] += 1
    return Alignment(
        len1=n1,
        len2=n2,
        function1=sum(f1),
        function2=sum(f2),
        content1=content1,
        content2=content2,
        func1=func1,
        func2=func2,
        chunks=_count_chunks(final),
        matches=final,
    )


def _count_chunks(matches: Sequence[Match | None]) -> int:
    """Aligner.getCountAndChunks: contiguous runs of matches in both sentences."""
    chunks = 0
    i = 0
    last_end = -1
    n = len(matches)
    while i < n:
        m = matches[i]
        if m is None:
            if last_end != -1:
                chunks += 1
                last_end = -1
            i += 1
        else:
            if last_end != -1 and m.match_start != last_end:
                chunks += 1
            i = m.start + m.length
            last_end = m.match_start + m.match_length
    if last_end != -1:
        chunks += 1
    return chunks


# Partial alignment state, a mutable list (Java mutates these objects in place):
# [sort key, weighted matches, chunks, distance, idx, last match end, used1, used2, chain]
# The sort key packs Constants.PARTIAL_COMPARE_TOTAL (more weighted matches, then fewer
# chunks, then less distance) into one int kept up to date with every change, so the
# stable sort on it orders exactly like Java's stable sort with the comparator.
_KEY, _SCORE, _CHUNKS, _DIST, _IDX, _LAST, _USED1, _USED2, _CHAIN = range(9)
_by_key = itemgetter(0)


def _resolve(stage: list[list[Match]], fixed: list[Match | None], used1: int, used2: int, n2: int, width: int):
    """Aligner.resolve: beam search over reference positions; returns the chosen-match chain.

    ``width`` bits per key field must exceed any chunk count or distance reached.
    """
    w2 = 2 * width
    one_chunk = 1 << width
    beam = [[0, 0, 0, 0, 0, -1, used1, used2, None]]
    for i in range(n2 + 1):
        prev = beam
        if len(prev) > 1:
            prev.sort(key=_by_key)
            if len(prev) > BEAM_SIZE:
                prev = prev[:BEAM_SIZE]
        beam = []
        append = beam.append
        if i == n2:
            for p in prev:
                if p[_LAST] != -1:
                    p[_CHUNKS] += 1
                    p[_KEY] += one_chunk
                append(p)
            break
        bit = 1 << i
        row = stage[i]
        for p in prev:
            if p[_USED2] & bit:
                if i < p[_IDX]:
                    append(p)
                else:
                    m = fixed[p[_IDX]]
                    if m is not None:
                        key = p[_KEY] - (m.gain << w2) + m.dist
                        p[_SCORE] += m.gain
                        if p[_LAST] != -1 and m.match_start != p[_LAST]:
                            p[_CHUNKS] += 1
                            key += one_chunk
                        p[_KEY] = key
                        p[_IDX] = m.start + m.length
                        p[_LAST] = m.match_start + m.match_length
                        p[_DIST] += m.dist
                        append(p)
            else:
                last = p[_LAST]
                u1 = p[_USED1]
                u2 = p[_USED2]
                for m in row:
                    if u1 & m.mask1 or u2 & m.mask2:
                        continue
                    key = p[_KEY] - (m.gain << w2)
                    chunks = p[_CHUNKS]
                    if last != -1 and m.match_start != last:
                        chunks += 1
                        key += one_chunk
                    append(
                        [
                            key,
                            p[_SCORE] + m.gain,
                            chunks,
                            p[_DIST],
                            m.start + m.length,
                            m.match_start + m.match_length,
                            u1 | m.mask1,
                            u2 | m.mask2,
                            (m, p[_CHAIN]),
                        ]
                    )
                    # sic: Java adds the new match's distance to the parent, not the child
                    p[_DIST] += m.dist
                    p[_KEY] += m.dist
                if last != -1:
                    p[_CHUNKS] += 1
                    p[_KEY] += one_chunk
                    p[_LAST] = -1
                p[_IDX] += 1
                append(p)
        if not beam:
            beam.append(prev[0])
    if len(beam) > 1:
        beam.sort(key=_by_key)
    return beam[0][_CHAIN]
