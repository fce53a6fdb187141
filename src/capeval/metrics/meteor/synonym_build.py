"""Building the synonym arrays of the METEOR 1.5 index (``syn_*``, ``exc_*``; see :mod:`.resources`).

Reads ``synonym/english.synsets`` (word line, synset-ids line) and
``synonym/english.exceptions`` (base-form line, irregular-forms line) from
``meteor-1.5.jar`` as ``SynonymDictionary`` does: two lines at a time, tokens split like
Java's ``StringTokenizer``, a repeated word replacing the earlier entry. Each table is a
sorted-key string table (:mod:`.string_table`) plus, per string, its sorted distinct
synset ids. Used by :func:`.index_build.prepare`.
"""

from __future__ import annotations

import re

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.index_format import LINE_BREAK
from capeval.metrics.meteor.string_table import padded, range_keys

_JAVA_DELIMS = re.compile(r"[ \t\n\r\f]+")  # StringTokenizer defaults


def _pairs(text: str) -> tuple[list[str], list[str]]:
    """(key lines, value lines), read two lines at a time like SynonymDictionary."""
    lines = LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) % 2:
        lines.append("")
    return lines[0::2], lines[1::2]


def _string_table(words: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Sorted-key table of the distinct ``words``; returns (hash/off/blob arrays, rank of each word)."""
    encoded = [w.encode("utf-8") for w in words]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    starts = np.zeros(len(encoded), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:]) if len(encoded) > 1 else None
    keys = range_keys(padded(b"".join(encoded)), starts, lengths)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if len(sorted_keys) > 1 and bool(np.any(sorted_keys[1:] == sorted_keys[:-1])):
        raise ResourceError("64-bit key collision while indexing METEOR resources (please report this)")
    off = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths[order], out=off[1:])
    blob = np.frombuffer(b"".join([encoded[i] for i in order.tolist()]), dtype=np.uint8)
    rank = np.empty(len(encoded), dtype=np.int64)
    rank[order] = np.arange(len(encoded))
    return {"hash": sorted_keys, "off": off, "blob": blob}, rank


def _set_table(words: list[str], owner: np.ndarray, ids: np.ndarray, prefix: str) -> dict[str, np.ndarray]:
    """``<prefix>_hash/off/blob`` for the distinct ``words`` and ``<prefix>_start/sets``: for
    each word, in table order, the sorted distinct ``ids[j]`` with ``owner[j]`` its number."""
    table, rank = _string_table(words)
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= 2**32):
        raise ResourceError(f"unexpected synset id in the METEOR synonym table ({int(ids.min())}..{int(ids.max())})")
    # sorted distinct (word rank, id) pairs, as one sort of 64-bit words
    packed = np.sort((rank[owner].astype(np.uint64) << np.uint64(32)) | ids.astype(np.uint64))
    keep = np.ones(len(packed), dtype=bool)
    np.not_equal(packed[1:], packed[:-1], out=keep[1:])
    packed = packed[keep]
    counts = np.bincount((packed >> np.uint64(32)).astype(np.int64), minlength=len(words))
    start = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    return {
        f"{prefix}_hash": table["hash"],
        f"{prefix}_off": table["off"],
        f"{prefix}_blob": table["blob"],
        f"{prefix}_start": start.astype(np.int32),
        f"{prefix}_sets": (packed & np.uint64(0xFFFFFFFF)).astype(np.int32),
    }


_PLAIN_IDS = re.compile(r"[0-9]+(?: [0-9]+)*(?:\n[0-9]+(?: [0-9]+)*)*")


def _id_lists(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The integers of each line as (count per line, all of them in order), lines split
    like StringTokenizer and read with Integer.parseInt."""
    joined = "\n".join(lines)
    if _PLAIN_IDS.fullmatch(joined):  # the jar's file: one space between decimal ids
        counts = np.fromiter((x.count(" ") + 1 for x in lines), dtype=np.int64, count=len(lines))
        return counts, np.array(joined.split(), dtype=np.int64)
    split = _JAVA_DELIMS.split
    tokens = [[int(t) for t in split(x) if t] for x in lines]
    counts = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    return counts, np.fromiter((t for ts in tokens for t in ts), dtype=np.int64, count=int(counts.sum()))


def build_synonyms(synsets_text: str, exceptions_text: str) -> dict[str, np.ndarray]:
    """The ``syn_*`` and ``exc_*`` arrays from the jar's synsets and exceptions files."""
    words, id_lines = _pairs(synsets_text)
    counts, ids = _id_lists(id_lines)
    del id_lines
    start = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    # a repeated word replaces the earlier line (Hashtable.put): keep each word's last line
    line_of = dict(zip(words, range(len(words))))
    distinct = list(line_of)
    lines = np.fromiter(line_of.values(), dtype=np.int64, count=len(line_of))
    n_ids = counts[lines]
    pick = np.repeat(start[lines] - np.cumsum(n_ids) + n_ids, n_ids) + np.arange(int(n_ids.sum()))
    syn = _set_table(distinct, np.repeat(np.arange(len(distinct)), n_ids), ids[pick], "syn")
    # irregular form -> base forms; stored resolved to the union of the bases' synsets,
    # which is all SynonymDictionary.getStemSynSets ever reads from it.
    bases: dict[str, list[str]] = {}
    for base, forms in zip(*_pairs(exceptions_text)):
        for form in _JAVA_DELIMS.split(forms):
            if form:
                bases.setdefault(form, []).append(base)
    forms = list(bases)
    resolved = [
        ids[start[line_of[b]] : start[line_of[b] + 1]] for f in forms for b in bases[f] if b in line_of
    ]
    per_form = [sum(int(counts[line_of[b]]) for b in bases[f] if b in line_of) for f in forms]
    exc = _set_table(
        forms,
        np.repeat(np.arange(len(forms)), per_form),
        np.concatenate(resolved) if resolved else np.zeros(0, np.int64),
        "exc",
    )
    return {**syn, **exc}
