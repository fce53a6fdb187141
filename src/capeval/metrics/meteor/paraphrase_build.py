"""Building the paraphrase-table arrays of the METEOR 1.5 index from ``paraphrase-en.gz``.

The table (5.27M entries: probability, phrase, paraphrase) is streamed block by block
(:mod:`.paraphrase_text`) and indexed with numpy only, no Python object per line:

1. per block, every phrase and paraphrase gets its 64-bit key
   (:func:`.string_table.range_keys`) and equal strings are grouped
   (:func:`.string_groups.dedupe`); the block's distinct strings are kept (bytes and
   keys), each line becomes a number;
2. at the end the kept strings are grouped again across blocks, which gives every
   distinct string its id (its rank in key order), and the arrays ``para_*`` (see
   :mod:`.resources`) are handed over one by one as they are finished.

Equal keys are always confirmed byte for byte, so two different strings are never
merged; two different strings with the same 64-bit key stop the build with an error
(it does not happen with the real table). Blocks are indexed on two threads while a
third decompresses (zlib and numpy release the GIL). Used by :func:`.index_build.prepare`.
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import BinaryIO

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.paraphrase_text import (
    TripleBlock,
    messy_pairs,
    triple_blocks,
    valid_utf8,
)
from capeval.metrics.meteor.string_groups import (
    SLICE,
    WORKERS,
    bits,
    dedupe,
    key_order,
    map_slices,
    release_freed_memory,
    sort_order,
    sorted_distinct,
)
from capeval.metrics.meteor.string_table import (
    copy_ranges,
    edge_words,
    middles_equal,
    range_keys,
)

_READ_BLOCK = 4 << 20  # decompressed bytes read from the paraphrase file at a time
_TOKEN_SLICE = 1 << 17  # strings whose words are counted at a time
_TRIM_EVERY = 16  # blocks between hand-backs of freed memory (see release_freed_memory)

Emit = Callable[[str, np.ndarray], None]


def _offsets(lengths: np.ndarray) -> np.ndarray:
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def _pack(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strings one after the other in a new padded buffer: (buffer, offsets there).

    A slice of strings at a time, which keeps the word-index temporaries small (one
    thread: more would hold more memory for little time).
    """
    off = _offsets(lengths)
    out = np.empty(int(off[-1]) + 8, dtype=np.uint8)
    out[-8:] = 0
    for a in range(0, len(lengths), SLICE):
        b = min(len(lengths), a + SLICE)
        copy_ranges(buf, starts[a:b], lengths[a:b], out, off[a:b])
    return out, off


def _index_block(blk: TripleBlock) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The distinct strings of one block (packed bytes, keys, lengths) and the number among
    them of each of its phrases, then each of its paraphrases."""
    buf, st, ln = blk
    n = len(st) // 2
    first, last = edge_words(buf, st, ln)
    # The table lists a phrase's paraphrases one after another: compare each phrase with
    # the one before it first, so a run of equal phrases is hashed and grouped once.
    repeat = np.zeros(n, dtype=bool)
    if n > 1:
        repeat[1:] = (ln[1:n] == ln[: n - 1]) & (first[1:n] == first[: n - 1]) & (last[1:n] == last[: n - 1])
        long = np.flatnonzero(repeat & (ln[:n] > 16))
        if long.size:
            repeat[long] = middles_equal(buf, st[long], buf, st[long - 1], ln[long])
    keep = np.flatnonzero(~repeat)  # the phrase heading each run, then every paraphrase
    run = np.cumsum(~repeat) - 1
    del repeat
    heads = len(keep)
    keep = np.concatenate((keep, np.arange(n, len(st))))
    s_st, s_ln, first, last = st[keep], ln[keep], first[keep], last[keep]
    del keep
    keys = range_keys(buf, s_st, s_ln, last)
    reps, group = dedupe(buf, s_st, s_ln, keys, (first, last))
    del first, last
    # keep the distinct strings in the order they lie in the block (read in order)
    by_place = sort_order(s_st[reps])
    place = np.empty(len(reps), dtype=group.dtype)
    place[by_place] = np.arange(len(reps), dtype=group.dtype)
    reps = reps[by_place]
    data, _ = _pack(buf, s_st[reps], s_ln[reps])
    ids = place[np.concatenate((group[run], group[heads:]))]
    return (data, keys[reps], s_ln[reps].astype(np.int32)), ids


def _kept_strings(
    gz_path: Path, strict: bool, spill: tuple[BinaryIO, BinaryIO, BinaryIO]
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct strings of every block, one block after another (padded bytes, lengths).

    As the blocks are done, the number among them of each phrase and each paraphrase
    (int32) and their keys (uint64) go to the three files ``spill``.
    """
    datas: list[np.ndarray] = []
    lengths_: list[np.ndarray] = []
    count = 0
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="capeval-meteor-index") as pool:
        todo: deque[Future] = deque()

        def collect() -> None:
            nonlocal count
            (data, keys, lengths), ids = todo.popleft().result()
            datas.append(data)
            keys.tofile(spill[2])
            lengths_.append(lengths)
            ids += count
            count += len(keys)
            if count >= 2**31:
                raise ResourceError("too many strings in the paraphrase table")
            ids = ids.astype(np.int32)
            ids[: len(ids) // 2].tofile(spill[0])
            ids[len(ids) // 2 :].tofile(spill[1])
            if len(datas) % _TRIM_EVERY == 0:
                release_freed_memory()

        for blk in triple_blocks(gz_path, _READ_BLOCK, strict):
            todo.append(pool.submit(_index_block, blk))
            del blk
            if len(todo) >= WORKERS:
                collect()
        while todo:
            collect()
    lengths = np.concatenate(lengths_) if lengths_ else np.zeros(0, np.int32)
    lengths_.clear()
    buf = np.empty(sum(len(d) - 8 for d in datas) + 8, dtype=np.uint8)
    at = 0
    while datas:  # each part freed once copied
        data = datas.pop(0)[:-8]  # without its padding
        buf[at : at + len(data)] = data
        at += len(data)
        del data
    buf[at:] = 0
    return buf, lengths


def build_paraphrase(gz_path: Path, emit: Emit, strict: bool = False, scratch: Path | None = None) -> None:
    """Index the paraphrase table, handing each finished array to ``emit(name, array)``.

    Without ``strict`` the blocks are taken as they are (only CR, tab and form feed are
    looked for) and the distinct strings are checked at the end instead: valid UTF-8, one
    space between words, none at the edges. Should one fail (never with the real table),
    the table is read again with ``strict``, every block made canonical as Java sees it.
    ``scratch``: a folder for temporary files (75 MB in all) holding the string number of
    each line and the strings' keys meanwhile (default: the system's temporary folder).
    Peak memory: about 0.35 GB (the distinct strings of each block, then their grouping
    across blocks and the strings in key order).
    """
    with (
        tempfile.TemporaryFile(dir=scratch) as ph_ids,
        tempfile.TemporaryFile(dir=scratch) as pa_ids,
        tempfile.TemporaryFile(dir=scratch) as keys,
    ):
        done = _index_strings(gz_path, strict, (ph_ids, pa_ids, keys), emit)
        if done is not None:
            _emit_entries(ph_ids, pa_ids, *done, emit)
            return
    build_paraphrase(gz_path, emit, strict=True, scratch=scratch)


def _index_strings(
    gz_path: Path, strict: bool, spill: tuple[BinaryIO, BinaryIO, BinaryIO], emit: Emit
) -> tuple[np.ndarray, int] | None:
    """Group the kept strings across blocks and emit ``para_hash/off/blob/ntok/pairs``;
    returns (the rank in key order of each kept string, how many distinct strings), or
    None when (without ``strict``) some string is not canonical."""
    buf, lengths = _kept_strings(gz_path, strict, spill)
    release_freed_memory()
    starts = _offsets(lengths)[:-1]
    if len(buf) < 2**31:
        starts = starts.astype(np.int32)
    spill[2].flush()
    spill[2].seek(0)
    keys = np.fromfile(spill[2], dtype=np.uint64)
    reps, group = dedupe(buf, starts, lengths, keys, consume=True)  # sorts in the keys' memory
    del keys
    rkeys = np.memmap(spill[2], dtype=np.uint64, mode="r")[reps]  # the keys, from their file
    order = key_order(rkeys)
    n = len(reps)
    if order is not None:  # group -> rank in key order
        rkeys = rkeys[order]
        reps = reps[order]
        rank = np.empty(n, dtype=group.dtype)
        rank[order] = np.arange(n, dtype=group.dtype)
        del order
        map_slices(partial(_renumber, group, rank), len(group))
        del rank
    release_freed_memory()
    # the distinct strings' bytes in key order
    blob, off = _pack(buf, starts[reps], lengths[reps])
    del buf, starts, lengths, reps
    if not strict and not _canonical_strings(blob, off):
        return None
    emit("para_hash", rkeys)
    del rkeys
    _emit_token_arrays(blob, off, emit)
    emit("para_off", off)
    emit("para_blob", blob[: int(off[-1])])
    return group, n


def _renumber(group: np.ndarray, rank: np.ndarray, a: int, b: int) -> None:
    group[a:b] = rank[group[a:b]]


def _canonical_strings(blob: np.ndarray, off: np.ndarray) -> bool:
    """Whether every string ``blob[off[i]:off[i + 1]]`` is valid UTF-8 with one space between
    words and none at its edges (tabs and form feeds were ruled out block by block)."""
    text = blob[: int(off[-1])]
    nonempty = off[1:] > off[:-1]
    return not (
        bool((text[off[:-1][nonempty]] == 32).any())
        or bool((text[off[1:][nonempty] - 1] == 32).any())
        or messy_pairs(text)
        or not valid_utf8(text, off)
    )


def _emit_token_arrays(blob: np.ndarray, off: np.ndarray, emit: Emit) -> None:
    """``para_ntok`` (words per string) and ``para_pairs`` (sorted distinct keys of the
    adjacent word pairs of the strings, which are canonical: one space between words).

    Done a slice of strings at a time, on two threads.
    """
    n = len(off) - 1
    ntok = np.zeros(n, dtype=np.uint8)

    def words(i0: int, i1: int) -> np.ndarray | None:
        seg = off[i0 : i1 + 1]
        spaces = np.flatnonzero(blob[seg[0] : seg[-1]] == 32) + seg[0]
        owner = np.searchsorted(seg, spaces, side="right") - 1  # string of each space, from i0
        count = np.bincount(owner, minlength=i1 - i0) + (seg[1:] > seg[:-1])
        if int(count.max(initial=0)) > 255:
            raise ResourceError("paraphrase phrase longer than 255 tokens")
        ntok[i0:i1] = count
        if not len(spaces):
            return None
        # the pair around a space: from the word before it to the word after it
        inner = np.zeros(len(spaces) + 1, dtype=bool)  # space j and j - 1 in one string
        inner[1:-1] = owner[1:] == owner[:-1]
        lo = np.where(inner[:-1], np.concatenate(([0], spaces[:-1] + 1)), seg[owner])
        hi = np.where(inner[1:], np.concatenate((spaces[1:], [0])), seg[owner + 1])
        return sorted_distinct(range_keys(blob, lo, hi - lo))

    pair_keys = [k for k in map_slices(words, n, _TOKEN_SLICE) if k is not None]
    emit("para_ntok", ntok)
    emit("para_pairs", sorted_distinct(np.concatenate(pair_keys)) if pair_keys else np.zeros(0, np.uint64))


def _emit_entries(ph_ids: BinaryIO, pa_ids: BinaryIO, group: np.ndarray, n: int, emit: Emit) -> None:
    """``para_start`` / ``para_entries``: the paraphrases of each string, grouped by phrase,
    in file order within a phrase (the order in which Java's transducer emits them).
    ``ph_ids`` / ``pa_ids``: files of the kept-string number (int32) of each phrase and
    paraphrase line."""

    def ranks(f: BinaryIO) -> np.ndarray:
        f.flush()
        f.seek(0)
        return group[np.fromfile(f, dtype=np.int32)]

    ph = ranks(ph_ids)
    counts = np.bincount(ph, minlength=n)
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    del counts
    emit("para_start", start.astype(np.int32 if start[-1] < 2**31 else np.int64))
    del start
    by_phrase = sort_order(ph, bits(n))  # stable: file order within a phrase
    del ph
    emit("para_entries", ranks(pa_ids)[by_phrase].astype(np.int32))
