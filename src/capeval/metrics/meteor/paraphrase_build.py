"""Building the paraphrase-table arrays of the METEOR 1.5 index from ``paraphrase-en.gz``.

The table (5.27M entries: probability, phrase, paraphrase; three lines each, as
``ParaphraseTransducer`` reads them) is streamed block by block; between blocks only
numpy arrays and one byte buffer of the distinct strings are kept, so building peaks at
a few times the index size instead of the whole table as Python objects. The arrays
(``para_*``, see :mod:`.resources`) are handed over one by one as they are finished.
Used by :func:`.index_build.prepare`.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.string_table import gather_ranges, keys64

_JAVA_DELIMS_B = re.compile(rb"[ \t\n\r\f]+")  # StringTokenizer defaults


def _canonical(line: bytes) -> bytes:
    """Tokens as Java's StringTokenizer splits them, joined by one space."""
    return b" ".join(t for t in _JAVA_DELIMS_B.split(line) if t)


_READ_BLOCK = 8 << 20  # decompressed bytes read from the paraphrase file at a time
_GATHER_BLOCK = 1 << 17  # strings copied into the sorted blob at a time


def _java_text(part: bytes) -> bytes:
    """What Java's readers see of ``part`` (whole lines): UTF-8, line breaks as ``\\n``.

    Java decodes with a replacing decoder; when ``part`` is not valid UTF-8, re-encode what
    Java would see. ``part`` always ends at a line break (ASCII), so decoding block by block
    gives the same text as decoding the whole file. BufferedReader.readLine also ends lines
    at CR and CRLF.
    """
    try:
        part.decode("utf-8")
    except UnicodeDecodeError:
        part = part.decode("utf-8", errors="replace").encode("utf-8")
    if b"\r" in part:
        part = part.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return part


def _is_messy(part: bytes) -> bool:
    """Whether some line of ``part`` is not in canonical form (single spaces, no edges)."""
    return (
        b"\t" in part or b"\f" in part or b"  " in part or b" \n" in part or b"\n " in part
        or part.startswith(b" ") or part.endswith(b" ")
    )  # fmt: skip


def _paraphrase_batches(gz_path: Path) -> Iterator[tuple[list[bytes], bool]]:
    """The paraphrase file's lines in batches of whole (probability, phrase, paraphrase) triples.

    Streams the gzip file in blocks, so only one block of lines exists at a time. Lines are
    split like ``text.split("\\n")`` on the whole file after :func:`_java_text`: the piece
    after the last line break counts as a line, and a trailing incomplete triple is
    dropped (ParaphraseTransducer reads three lines per entry). Each batch comes with
    whether some of its lines may need :func:`_canonical`.
    """
    pending: list[bytes] = []  # up to two lines of an incomplete triple
    pending_messy = False
    carry = b""  # bytes after the last line break read so far
    with gzip.open(gz_path, "rb") as f:
        while True:
            block = f.read(_READ_BLOCK)
            eof = not block
            buf = carry + block
            del block
            if eof:
                part, carry = buf, b""
            else:
                # cut after the last line break whose end is known (a CR could be a CRLF's first half)
                cut = max(buf.rfind(b"\n"), buf.rfind(b"\r", 0, len(buf) - 1)) + 1
                part, carry = buf[:cut], buf[cut:]
            del buf
            part = _java_text(part)
            messy = _is_messy(part)
            lines = part.split(b"\n")
            del part
            if not eof:
                lines.pop()  # the empty piece after the final line break: the next line starts in carry
            if pending:
                lines[:0] = pending
                messy = messy or pending_messy
            n = len(lines) // 3 * 3
            pending = lines[n:]
            pending_messy = messy
            del lines[n:]
            if lines:
                yield lines, messy
            del lines
            if eof:
                return


class _DistinctStrings:
    """Distinct byte strings in first-seen order, kept as one byte buffer plus numpy arrays.

    Strings are identified by their 64-bit keys (kept sorted for binary search); a string
    whose key was seen before is compared byte for byte with the stored one, so a key
    collision is detected exactly, as when the strings were all held in a dict.
    """

    def __init__(self) -> None:
        self.blob = bytearray()
        self.off = np.zeros(1, dtype=np.int64)  # string i is blob[off[i]:off[i + 1]]
        self.sorted_keys = np.zeros(0, dtype=np.uint64)
        self.sorted_ids = np.zeros(0, dtype=np.int64)  # first-seen id of each sorted key
        self.ntok: list[np.ndarray] = []
        self.pair_keys: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.off) - 1

    def add(self, uniq: list[bytes]) -> np.ndarray:
        """Ids (int64) of the distinct strings ``uniq``, registering the new ones."""
        keys = keys64(uniq)
        by_key = np.argsort(keys)
        sk = keys[by_key]
        if len(sk) > 1 and bool(np.any(sk[1:] == sk[:-1])):
            raise ResourceError("64-bit key collision while indexing METEOR resources (please report this)")
        n_known = len(self.sorted_keys)
        pos = np.empty(len(keys), dtype=np.int64)
        pos[by_key] = np.searchsorted(self.sorted_keys, sk)  # sorted needles: far fewer cache misses
        del by_key, sk
        if n_known:
            found = self.sorted_keys[np.minimum(pos, n_known - 1)] == keys
        else:
            found = np.zeros(len(keys), dtype=bool)
        ids = np.empty(len(uniq), dtype=np.int64)
        old = np.flatnonzero(found)
        if old.size:
            gid = self.sorted_ids[pos[old]]
            ids[old] = gid
            lo = self.off[gid].tolist()
            hi = self.off[gid + 1].tolist()
            blob = self.blob
            for i, a, b in zip(old.tolist(), lo, hi):
                if blob[a:b] != uniq[i]:
                    raise ResourceError("64-bit key collision while indexing METEOR resources (please report this)")
        new = np.flatnonzero(~found)
        if new.size:
            first = len(self)
            new_ids = np.arange(first, first + new.size, dtype=np.int64)
            ids[new] = new_ids
            strings = [uniq[i] for i in new.tolist()]
            lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
            off = np.empty(len(self.off) + len(strings), dtype=np.int64)
            off[: len(self.off)] = self.off
            np.cumsum(lengths, out=off[len(self.off) :])
            off[len(self.off) :] += self.off[-1]
            self.off = off
            self.blob += b"".join(strings)
            ntok = np.fromiter((x.count(b" ") + 1 if x else 0 for x in strings), dtype=np.int64, count=len(strings))
            if ntok.max(initial=0) > 255:
                raise ResourceError("paraphrase phrase longer than 255 tokens")
            self.ntok.append(ntok.astype(np.uint8))
            del ntok
            self.pair_keys.append(_pair_keys(strings))
            del strings
            nk = keys[new]
            o = np.argsort(nk, kind="stable")
            at = pos[new][o]
            self.sorted_keys = np.insert(self.sorted_keys, at, nk[o])
            self.sorted_ids = np.insert(self.sorted_ids, at, new_ids[o])
        return ids


def build_paraphrase(gz_path: Path, emit: Callable[[str, np.ndarray], None]) -> None:
    """Index the paraphrase table, handing each finished array to ``emit(name, array)``.

    The file is streamed (see :func:`_paraphrase_batches`); what is kept between batches
    is numpy arrays and one byte buffer of the distinct strings, so the peak memory is a
    few times the index size rather than the whole table as Python objects.
    """
    strings = _DistinctStrings()
    ph_ids: list[np.ndarray] = []
    pa_ids: list[np.ndarray] = []
    for lines, messy in _paraphrase_batches(gz_path):
        # groups of three lines: probability, phrase, paraphrase (ParaphraseTransducer)
        phrases = lines[1::3]
        paras = lines[2::3]
        del lines
        if messy:
            phrases = [_canonical(x) for x in phrases]
            paras = [_canonical(x) for x in paras]
        local: dict[bytes, int] = {}
        setdefault = local.setdefault
        ph_local = np.fromiter((setdefault(x, len(local)) for x in phrases), dtype=np.int64, count=len(phrases))
        pa_local = np.fromiter((setdefault(x, len(local)) for x in paras), dtype=np.int64, count=len(paras))
        del phrases, paras
        uniq = list(local)
        del local
        ids = strings.add(uniq).astype(np.int32)
        del uniq
        ph_ids.append(ids[ph_local])
        pa_ids.append(ids[pa_local])
        del ids, ph_local, pa_local

    n = len(strings)
    emit("para_pairs", np.unique(np.concatenate(strings.pair_keys)) if strings.pair_keys else np.zeros(0, np.uint64))
    strings.pair_keys.clear()
    order = strings.sorted_ids  # first-seen id of the i-th string in key order
    emit("para_hash", strings.sorted_keys)
    strings.sorted_keys = np.zeros(0, dtype=np.uint64)
    ntok = np.concatenate(strings.ntok) if strings.ntok else np.zeros(0, np.uint8)
    strings.ntok.clear()
    emit("para_ntok", ntok[order])
    del ntok
    # the strings' bytes in key order, copied a block of strings at a time
    src_off = strings.off
    lengths = src_off[1:] - src_off[:-1]
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths[order], out=off[1:])
    del lengths
    src = np.frombuffer(strings.blob, dtype=np.uint8)
    blob = np.empty(int(off[-1]), dtype=np.uint8)
    for b0 in range(0, n, _GATHER_BLOCK):
        o = order[b0 : b0 + _GATHER_BLOCK]
        b1 = b0 + len(o)
        blob[off[b0] : off[b1]] = gather_ranges(src, src_off[o], src_off[o + 1])
        del o
    del src
    strings.blob = bytearray()
    strings.off = src_off = np.zeros(1, dtype=np.int64)
    emit("para_off", off)
    emit("para_blob", blob)
    del off, blob
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    del order
    strings.sorted_ids = np.zeros(0, dtype=np.int64)
    ph_rank = rank[np.concatenate(ph_ids)] if ph_ids else np.zeros(0, np.int64)
    ph_ids.clear()
    # Entries grouped by phrase, file order kept within a phrase (the order in which
    # Java's transducer emits them).
    by_phrase = np.argsort(ph_rank, kind="stable")
    counts = np.bincount(ph_rank, minlength=n)
    del ph_rank
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    del counts
    emit("para_start", start.astype(np.int32 if start[-1] < 2**31 else np.int64))
    del start
    pa_rank = rank[np.concatenate(pa_ids)] if pa_ids else np.zeros(0, np.int64)
    pa_ids.clear()
    del rank
    emit("para_entries", pa_rank[by_phrase].astype(np.int32))


def _pair_keys(strings: list[bytes]) -> np.ndarray:
    """Sorted distinct keys of the adjacent token pairs of canonical ``strings``."""
    pairs: set[bytes] = set()
    add = pairs.add
    update = pairs.update
    join = b" ".join
    for x in strings:
        n = x.count(b" ")
        if n == 1:
            add(x)
        elif n > 1:
            w = x.split(b" ")
            update(map(join, zip(w, w[1:])))
    keys = keys64(list(pairs))
    del pairs
    return np.unique(keys)  # sorted
