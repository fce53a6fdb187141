"""The paraphrase-table arrays of a few sentences, from one scan of ``paraphrase-en.gz``.

What a first small run uses instead of the full index (:mod:`.partial_index`): the table
is streamed once, as the index build reads it (:func:`.paraphrase_text.triple_blocks`,
strict: every line in the canonical form Java's ``StringTokenizer`` gives it), and only
the lines equal to one of the given n-grams are kept:

* a phrase line equal to an n-gram keeps its triple (the paraphrase is that phrase's
  entry, in file order);
* a paraphrase line equal to an n-gram records that the n-gram is a table string (it can
  be matched as some phrase's paraphrase even if it heads no entry itself).

The kept strings (the n-grams found and the paraphrases of the phrases found) become a
small index with the arrays and meaning of the full one (``para_*``, see
:mod:`.resources`): for every n-gram given, a lookup finds it exactly when the full index
does, with the same paraphrases in the same order and the same word counts. String ids
differ (ranks among the kept strings), which the scorer never looks at: it compares ids
for equality and orders paraphrases by table position (tests/test_meteor_partial.py
compares the per-item scores of both paths).

Each line is first tested against a bitmap of the n-grams' (length, first 8 bytes, last 8
bytes); only lines that pass get their 64-bit key (:func:`.string_table.range_keys`) and a
byte-for-byte comparison. Decompression runs in its own thread (zlib releases the GIL).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.paraphrase_build import _emit_token_arrays, _offsets, _pack
from capeval.metrics.meteor.paraphrase_text import triple_blocks
from capeval.metrics.meteor.string_groups import COLLISION, bits, dedupe, key_order, sort_order
from capeval.metrics.meteor.string_table import copy_ranges, edge_words, range_keys, ranges_equal

_READ_BLOCK = 4 << 20  # decompressed bytes per block, as the index build reads them
_BITMAP_BITS = 22  # 4M-entry filter: with 100,000 n-grams about 2.4% of the lines pass it
_SPREAD = np.uint64(0x9E3779B97F4A7C15)


def _sketch_slots(first: np.ndarray, last: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A slot in the filter bitmap for each string, from its length and edge words."""
    h = first * _SPREAD
    h ^= last
    h *= np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= np.asarray(lengths, dtype=np.uint64) * _SPREAD
    h *= _SPREAD
    return (h >> np.uint64(64 - _BITMAP_BITS)).astype(np.int64)


def _packed(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The strings one after another, padded for :func:`.string_table.range_keys`: (buffer, starts, lengths)."""
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    starts = _offsets(lengths)[:-1]
    buf = np.zeros(int(lengths.sum()) + 8, dtype=np.uint8)
    buf[: len(buf) - 8] = np.frombuffer(b"".join(strings), dtype=np.uint8)
    return buf, starts, lengths


class _Grams:
    """The n-grams looked for: packed bytes, keys in sorted order, filter bitmap."""

    def __init__(self, grams: list[bytes]):
        self.buf, self.starts, self.lengths = _packed(grams)
        keys = range_keys(self.buf, self.starts, self.lengths)
        self.order = np.argsort(keys, kind="stable")
        self.keys = keys[self.order]
        if len(keys) > 1 and bool(np.any(self.keys[1:] == self.keys[:-1])):
            raise ResourceError(COLLISION)  # distinct n-grams with one key (never seen)
        first, last = edge_words(self.buf, self.starts, self.lengths)
        self.bitmap = np.zeros(1 << _BITMAP_BITS, dtype=bool)
        self.bitmap[_sketch_slots(first, last, self.lengths)] = True

    def find(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which strings ``buf[starts[i]:][:lengths[i]]`` are n-grams, the n-gram number of each)."""
        first, last = edge_words(buf, starts, lengths)
        cand = np.flatnonzero(self.bitmap[_sketch_slots(first, last, lengths)])
        if cand.size == 0 or len(self.keys) == 0:
            return cand[:0], cand[:0]
        keys = range_keys(buf, starts[cand], lengths[cand], last[cand])
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        hit = self.keys[pos] == keys
        cand, gram = cand[hit], self.order[pos[hit]]
        same = (lengths[cand] == self.lengths[gram]) & ranges_equal(
            buf, starts[cand], self.buf, self.starts[gram], lengths[cand]
        )
        return cand[same], gram[same]


def scan_paraphrases(gz_path: Path, grams: list[bytes]) -> dict[str, np.ndarray]:
    """The ``para_*`` arrays (as :func:`.paraphrase_build.build_paraphrase` names them) of a
    small index holding the distinct n-grams ``grams`` (UTF-8, tokens joined by one space)
    that are table strings, and the paraphrases of those that are phrases."""
    look = _Grams(grams)
    found = np.zeros(len(grams), dtype=bool)
    phrase_of: list[np.ndarray] = []  # per block: n-gram number of each kept triple's phrase
    para_parts: list[tuple[np.ndarray, np.ndarray]] = []  # per block: (packed paraphrases, lengths)
    for buf, starts, lengths in triple_blocks(gz_path, _READ_BLOCK, strict=True):
        at, gram = look.find(buf, starts, lengths)
        if not at.size:
            continue
        found[gram] = True
        n = len(starts) // 2
        heads = at < n
        if heads.any():
            para = at[heads] + n  # each phrase's paraphrase line
            plen = lengths[para]
            off = _offsets(plen)
            out = np.zeros(int(off[-1]) + 8, dtype=np.uint8)
            copy_ranges(buf, starts[para], plen, out, off[:-1])
            phrase_of.append(gram[heads])
            para_parts.append((out, plen))
    return _small_index(look, found, phrase_of, para_parts)


def _small_index(
    look: _Grams, found: np.ndarray, phrase_of: list[np.ndarray], para_parts: list[tuple[np.ndarray, np.ndarray]]
) -> dict[str, np.ndarray]:
    """The ``para_*`` arrays of the kept strings: the n-grams ``found`` and the paraphrases."""
    hit = np.flatnonzero(found)
    # every kept string in one padded buffer: the n-grams found, then each kept paraphrase
    pieces = [look.buf[: len(look.buf) - 8]] + [p[: len(p) - 8] for p, _ in para_parts]
    buf = np.zeros(sum(len(p) for p in pieces) + 8, dtype=np.uint8)
    bases, at = [], 0
    for p in pieces:
        buf[at : at + len(p)] = p
        bases.append(at)
        at += len(p)
    starts = [look.starts[hit]]
    lengths = [look.lengths[hit]]
    for (_, plen), base in zip(para_parts, bases[1:]):
        starts.append(_offsets(plen)[:-1] + base)
        lengths.append(plen.astype(np.int64))
    st = np.concatenate(starts)
    ln = np.concatenate(lengths)
    reps, group = dedupe(buf, st, ln, range_keys(buf, st, ln))
    rkeys = range_keys(buf, st[reps], ln[reps])
    order = key_order(rkeys)
    if order is not None:
        rank = np.empty(len(reps), dtype=np.int64)
        rank[order] = np.arange(len(reps))
        group, reps, rkeys = rank[group], reps[order], rkeys[order]
    n = len(reps)
    blob, off = _pack(buf, st[reps], ln[reps])
    arrays: dict[str, np.ndarray] = {"para_hash": rkeys}
    _emit_token_arrays(blob, off, arrays.__setitem__)
    arrays["para_off"] = off
    arrays["para_blob"] = blob[: int(off[-1])]
    # entries: the string id of each kept paraphrase, grouped by its phrase's id, file order kept
    id_of_gram = np.full(len(found), -1, dtype=np.int64)
    id_of_gram[hit] = group[: len(hit)]
    ph = id_of_gram[np.concatenate(phrase_of)] if phrase_of else np.zeros(0, np.int64)
    pa = group[len(hit) :]
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ph, minlength=n), out=start[1:])
    arrays["para_start"] = start.astype(np.int32 if start[-1] < 2**31 else np.int64)
    arrays["para_entries"] = pa[sort_order(ph, bits(max(n, 1)))].astype(np.int32)
    return arrays
