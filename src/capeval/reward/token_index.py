"""The training references of a token-id reward, counted once on the host (numpy).

Every n-gram of the references gets an exact integer id, order by order, with no hashing: a
token's id is its rank among the references' distinct token ids (``code`` = rank + 1), and a
k-gram's key is ``(id of its (k-1)-gram prefix + 1) * (V + 1) + code of its last token``, whose
sorted distinct values are the k-grams' ids (V: distinct reference tokens). Keys stay below
``G_(k-1) * (V + 1) + V`` (G: distinct (k-1)-grams), far inside int64 for any vocabulary; a
candidate n-gram is looked up the same way on the device (``searchsorted``), so two different
n-grams never share an id, whatever the tokenizer's vocabulary size.

Counted here, per order k: the document frequency of every k-gram (items whose references
contain it, as pycocoevalcap ``CiderScorer.compute_doc_freq`` counts over ``crefs``), each
reference's term frequency of every k-gram and its first position (pycocoevalcap's dicts
iterate n-grams in first-position order, and its sums run in that order), and one row per
(item, order, k-gram) holding the term frequency in each of the item's references.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from capeval.errors import InputError

_INT64_MAX = 2**63 - 1


@dataclass
class RefGrams:
    """Per (reference, order, k-gram) row: which reference, which k-gram id, tf, first position."""

    ref: np.ndarray
    order: np.ndarray  # 0-based order (k - 1)
    gid: np.ndarray
    tf: np.ndarray
    first: np.ndarray


@dataclass
class TokenIndex:
    """The n-gram ids, document frequencies and per-item tables of a reference corpus."""

    n: int
    vocab: np.ndarray  # sorted distinct reference token ids
    keys: list[np.ndarray]  # per order k >= 2: sorted keys of the distinct k-grams (index = id)
    df: list[np.ndarray]  # per order: items whose references contain the k-gram
    n_items: int
    ref_counts: np.ndarray  # [items] references per item
    ref_lengths: np.ndarray  # [items, R] tokens of each reference (0 for missing slots)
    entry_keys: np.ndarray  # sorted (item * n + order) * stride + gid
    entry_tf: np.ndarray  # [entries, R] tf of the k-gram in each reference of the item
    stride: int
    rows: RefGrams
    item_of: np.ndarray  # [references] the item of each reference
    slot: np.ndarray  # [references] its place among the item's references

    @property
    def max_refs(self) -> int:
        return int(self.entry_tf.shape[1]) if self.entry_tf.ndim == 2 else 0


def _as_list(ref: Any, where: str) -> list:
    if hasattr(ref, "detach"):  # a torch tensor
        ref = ref.detach().cpu().tolist()
    elif isinstance(ref, np.ndarray):
        ref = ref.tolist()
    if isinstance(ref, (str, bytes)) or not isinstance(ref, Sequence):
        raise InputError(f"{where} must be a list of token ids, got {type(ref).__name__}")
    return ref if isinstance(ref, list) else list(ref)


def read_references(references: Any, pad_id: int, eos_id: int | None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(all reference tokens as one int64 array, length of each reference, item of each reference).

    One :class:`InputError` line naming the first bad reference (``references[i][r]``).
    """
    if isinstance(references, (str, bytes)) or not isinstance(references, Sequence) or hasattr(references, "keys"):
        raise InputError("references must be a list (one entry per item) of lists of token-id lists")
    if len(references) == 0:
        raise InputError("references: no items")
    flat: list = []
    lengths: list[int] = []
    item_of: list[int] = []
    for i, item in enumerate(references):
        if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) == 0:
            raise InputError(f"references[{i}] must be a non-empty list of token-id lists")
        for r, ref in enumerate(item):
            ids = _as_list(ref, f"references[{i}][{r}]")
            if not ids:
                raise InputError(f"references[{i}][{r}] is empty")
            flat.extend(ids)
            lengths.append(len(ids))
            item_of.append(i)
    lens = np.asarray(lengths, dtype=np.int64)
    items = np.asarray(item_of, dtype=np.int64)
    slot = np.concatenate([[0], np.cumsum([len(item) for item in references])[:-1]])

    def where(token: int) -> str:  # the reference holding flat position `token`
        ref = int(np.searchsorted(np.cumsum(lens), token, side="right"))
        return f"references[{items[ref]}][{ref - slot[items[ref]]}]"

    if {type(x) for x in flat} - {int}:  # numpy integers are fine; bools, floats, lists are not
        bad = [k for k, x in enumerate(flat) if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer))]
        if bad:
            raise InputError(f"{where(bad[0])} must be a flat list of integer token ids")
    if max(flat) > np.iinfo(np.int64).max or min(flat) < 0:
        bad = next(k for k, x in enumerate(flat) if x < 0 or x > np.iinfo(np.int64).max)
        raise InputError(f"{where(bad)} holds a negative or too large token id")
    tok = np.asarray(flat, dtype=np.int64)
    for name, tid in (("pad_id", pad_id), ("eos_id", eos_id)):
        if tid is not None:
            hits = np.flatnonzero(tok == tid)
            if len(hits):
                raise InputError(f"{where(int(hits[0]))} holds {name} {tid} (give references without padding "
                                 "or special tokens)")
    return tok, lens, items


def build(references: Any, n: int, pad_id: int, eos_id: int | None) -> TokenIndex:
    """Count the references (see the module docstring); bad input is one :class:`InputError` line."""
    tok, lengths, item_of = read_references(references, pad_id, eos_id)
    n_items = int(item_of[-1]) + 1
    n_refs = len(lengths)
    ref_of = np.repeat(np.arange(n_refs, dtype=np.int64), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pos = np.arange(len(tok), dtype=np.int64) - np.repeat(starts, lengths)
    vocab = np.unique(tok)
    v = len(vocab)
    code = np.searchsorted(vocab, tok) + 1
    ref_counts = np.bincount(item_of, minlength=n_items)
    r_max = int(ref_counts.max())
    slot = np.arange(n_refs) - np.concatenate([[0], np.cumsum(ref_counts)[:-1]])[item_of]

    keys: list[np.ndarray] = []
    df: list[np.ndarray] = []
    per_order: list[tuple[np.ndarray, np.ndarray]] = []  # (positions j of valid k-grams, their ids)
    gid = code - 1
    for k in range(1, n + 1):
        j = np.nonzero(pos + k <= lengths[ref_of])[0]
        if k == 1:
            ids, size = gid, v
        else:
            prev = per_order[-1]
            prev_id = np.full(len(tok), -1, dtype=np.int64)
            prev_id[prev[0]] = prev[1]
            if (len(keys[-1]) if keys else v) * (v + 1) + v > _INT64_MAX:
                raise InputError(f"references: too many distinct {k - 1}-grams for int64 n-gram keys")
            key = (prev_id[j] + 1) * (v + 1) + code[j + k - 1]
            uniq, inv = np.unique(key, return_inverse=True)
            keys.append(uniq)
            ids = np.full(len(tok), -1, dtype=np.int64)
            ids[j] = inv
            size = len(uniq)
        per_order.append((j, ids[j]))
        # document frequency: items whose references hold the k-gram
        in_item = np.unique(item_of[ref_of[j]] * size + ids[j])
        df.append(np.bincount(in_item % size, minlength=size))

    stride = max(v, *(len(x) for x in keys)) if keys else v
    if n_items * n * stride > _INT64_MAX:
        raise InputError("references: too many items and n-grams for int64 table keys")
    rows = {f: [] for f in ("ref", "order", "gid", "tf", "first")}
    for k, (j, ids) in enumerate(per_order):
        size = stride
        u, first_j, tf = np.unique(ref_of[j] * size + ids, return_index=True, return_counts=True)
        rows["ref"].append(u // size)
        rows["order"].append(np.full(len(u), k, dtype=np.int64))
        rows["gid"].append(u % size)
        rows["tf"].append(tf.astype(np.int64))
        rows["first"].append(pos[j[first_j]])
    grams = RefGrams(**{f: np.concatenate(x) for f, x in rows.items()})

    ekey = (item_of[grams.ref] * n + grams.order) * stride + grams.gid
    entry_keys, inv = np.unique(ekey, return_inverse=True)
    max_tf = int(grams.tf.max())
    dtype = np.uint8 if max_tf < 2**8 else np.int16 if max_tf < 2**15 else np.int32
    entry_tf = np.zeros((len(entry_keys), r_max), dtype=dtype)
    entry_tf[inv, slot[grams.ref]] = grams.tf
    ref_lengths = np.zeros((n_items, r_max), dtype=np.int64)
    ref_lengths[item_of, slot] = lengths
    return TokenIndex(n=n, vocab=vocab, keys=keys, df=df, n_items=n_items, ref_counts=ref_counts,
                      ref_lengths=ref_lengths, entry_keys=entry_keys, entry_tf=entry_tf, stride=stride,
                      rows=grams, item_of=item_of, slot=slot)


def _prime_at_least(m: int) -> int:
    """The smallest prime >= m (trial division: m is at most a few times the n-gram count)."""
    m = max(m, 2)
    while any(m % d == 0 for d in range(2, int(m**0.5) + 1)):
        m += 1
    return m


def hash_table(keys: np.ndarray, slots_per_key: int = 4) -> dict[str, Any]:
    """A direct-mapped table over the sorted distinct ``keys`` for O(1) lookups on the host.

    ``table[key % m]`` holds the index of the first key landing in that slot (-1: none), with
    ``m`` the smallest prime > ``slots_per_key * len(keys)`` (int32 slots: 16 bytes per key at 4);
    keys that lose their slot to an earlier key (about 1 in 9 at 4 slots per key) are kept sorted
    in ``over_keys`` with their indices in ``over_ids``. A lookup compares the key found in the
    slot, so it is exact; a query whose slot holds another key is looked up in the overflow; one
    whose slot is empty is in no reference.
    """
    m = _prime_at_least(slots_per_key * len(keys) + 1)
    slot = keys % m
    _, first = np.unique(slot, return_index=True)
    table = np.full(m, -1, dtype=np.int32 if len(keys) < 2**31 else np.int64)
    table[slot[first]] = first
    rest = np.ones(len(keys), dtype=bool)
    rest[first] = False
    over = np.flatnonzero(rest)
    return {"m": m, "table": table, "over_keys": keys[over], "over_ids": over.astype(np.int64)}

