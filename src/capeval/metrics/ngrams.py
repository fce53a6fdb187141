"""Sparse n-gram tables of tokenised sentences, shared by BLEU and CIDEr-D, and the
document frequencies of a reference corpus counted chunk by chunk.

:class:`NgramTable` turns one chunk of items (a candidate and its references each) into
integer tables: every distinct sentence, every distinct 1..n-gram, and the entries
(sentence, n-gram, count). Entries are ordered by sentence, then n-gram order, then
first position in the sentence: the order in which pycocoevalcap's ``precook`` inserts
n-grams into its dictionaries, so sums over a sentence's n-grams (CIDEr-D's norms and dot
products) are done in the reference code's order, whatever else is in the chunk.

:class:`GramIndex` counts, over a reference corpus read in chunks, how many items'
references contain each n-gram (CIDEr-D's ``df``), in flat integer arrays.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

# order-k n-gram key in a GramIndex: id of its (k-1)-gram prefix * _SHIFT + id of its last word
_SHIFT = np.int64(1 << 32)


class NgramTable:
    """Distinct sentences, n-grams and (sentence, n-gram) counts of one chunk of items.

    ``hyps[i]`` is item i's candidate, ``refs[i]`` its references (tokenised, words split on
    whitespace); ``hyps`` may be None (references only). Arrays (all int64):

    - ``hyp_sid`` (per item), ``slot_sid`` / ``slot_item`` (per reference slot), ``ref_counts``;
    - per distinct n-gram: ``gram_order`` (k - 1) and, for order k, ``prefix[k]`` / ``last[k]``
      (rank of its (k-1)-gram among order k-1, its last word) with ``words`` the local vocabulary;
    - per entry: ``ent_sent``, ``ent_gram``, ``ent_tf`` (pycocoevalcap's order, see the module
      docs); ``ent_ptr[s]:ent_ptr[s + 1]`` are sentence s's entries.
    """

    def __init__(self, hyps: Sequence[str] | None, refs: Sequence[Sequence[str]], n: int = 4):
        self.n = n
        hyps = hyps if hyps is not None else []
        self.n_items = len(refs)
        # sentences and words numbered in order of first occurrence (dict.fromkeys keeps it), the
        # lookups done by map in C rather than one Python call per token
        slots = list(chain.from_iterable(refs))
        sent_ids = {t: k for k, t in enumerate(dict.fromkeys(chain(hyps, slots)))}
        self.hyp_sid = np.fromiter(map(sent_ids.__getitem__, hyps), dtype=np.int64, count=len(hyps))
        self.ref_counts = np.array([len(rs) for rs in refs], dtype=np.int64)
        self.slot_sid = np.fromiter(map(sent_ids.__getitem__, slots), dtype=np.int64, count=len(slots))
        self.slot_item = np.repeat(np.arange(self.n_items, dtype=np.int64), self.ref_counts)
        split = [s.split() for s in sent_ids]
        lens = np.array([len(w) for w in split], dtype=np.int64)
        tokens = list(chain.from_iterable(split))
        vocab = {w: k for k, w in enumerate(dict.fromkeys(tokens))}
        flat = np.fromiter(map(vocab.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        self.words = list(vocab)
        self.sent_len = lens
        self.n_sent = n_sent = len(split)
        tok_sent = np.repeat(np.arange(n_sent, dtype=np.int64), lens)
        starts = np.cumsum(lens) - lens
        remaining = np.repeat(starts + lens, lens) - np.arange(len(flat), dtype=np.int64)  # tokens left incl. this one
        width = np.int64(len(vocab) + 1)

        # n-gram ids: order k extends the (k-1)-gram at the same start by one word
        occ_sent, occ_gram, orders = [], [], []
        self.prefix: dict[int, np.ndarray] = {}
        self.last: dict[int, np.ndarray] = {}
        self.first_pos: list[np.ndarray] = []  # token index of each n-gram's first occurrence
        self.gram_offset = [0]
        prev = flat
        offset = 0
        for k in range(1, n + 1):
            pos = np.nonzero(remaining >= k)[0]
            key = flat[pos] if k == 1 else prev[pos] * width + flat[pos + k - 1]
            uniq, first, inv, _ = unique_first(key)
            self.prefix[k] = uniq // width if k > 1 else np.full(len(uniq), -1, dtype=np.int64)
            self.last[k] = uniq % width if k > 1 else uniq
            self.first_pos.append(pos[first])
            cur = np.full(len(flat), -1, dtype=np.int64)
            cur[pos] = inv
            prev = cur
            occ_sent.append(tok_sent[pos])
            occ_gram.append(inv + offset)
            orders.append(np.full(len(uniq), k - 1, dtype=np.int64))
            offset += len(uniq)
            self.gram_offset.append(offset)
        self.n_grams = n_grams = np.int64(offset)
        self.gram_order = np.concatenate(orders) if orders else np.zeros(0, dtype=np.int64)
        occ_s = np.concatenate(occ_sent) if occ_sent else np.zeros(0, dtype=np.int64)
        occ_g = np.concatenate(occ_gram) if occ_gram else np.zeros(0, dtype=np.int64)
        # occurrences are listed by order, then token position: the first occurrence of an
        # entry gives pycocoevalcap's insertion order within its sentence
        key_sorted, first_occ, _, tf = unique_first(occ_s * n_grams + occ_g)
        sent_sorted = key_sorted // n_grams if n_grams else key_sorted
        # distinct keys (first_occ is): any sort gives this permutation, no need of a stable one
        perm = np.argsort(sent_sorted * np.int64(len(occ_s) + 1) + first_occ)
        self.key_sorted = key_sorted  # sorted sentence * n_grams + gram, for lookups
        self.entry_of_sorted = np.empty(len(perm), dtype=np.int64)
        self.entry_of_sorted[perm] = np.arange(len(perm), dtype=np.int64)
        self.ent_sent = sent_sorted[perm]
        self.ent_gram = (key_sorted % n_grams)[perm] if n_grams else key_sorted
        self.ent_tf = tf[perm]
        self.ent_order = self.gram_order[self.ent_gram]
        self.ent_ptr = np.searchsorted(self.ent_sent, np.arange(n_sent + 1, dtype=np.int64))
        self._flat = flat
        self._pairs: tuple[np.ndarray, ...] | None = None
        self._hits: tuple[np.ndarray, ...] | None = None
        #: names the table (its views share it: the same sentences and entries)
        self.token = os.urandom(8).hex()
        #: what is computed on the whole table, kept for its views (the same dict): a metric's
        #: per-sentence arrays (CIDEr-D's vectors and norms), the n-grams' corpus ids
        self.shared_cache: dict[Any, Any] = {}

    def view(self, lo: int, hi: int) -> "NgramTable":
        """The table as the candidates ``hyps[lo:hi]`` see it: a table built on several candidate
        lists for the same references (``hyps = first + second + ...``, each one per item) read
        as the table of one of them. Sentences, n-grams and entries are shared (a sentence's
        entries are in pycocoevalcap's order whatever else the table holds); only the candidate
        of each item changes, so every score computed on the view is the one a table of that
        list alone gives (``tests/test_joint_tables.py``)."""
        if not (0 <= lo <= hi <= len(self.hyp_sid)) or hi - lo != self.n_items:
            raise ValueError(f"NgramTable.view({lo}, {hi}): not one candidate per item of {self.n_items} items "
                             f"within {len(self.hyp_sid)} candidates")
        out = copy.copy(self)
        out.hyp_sid = self.hyp_sid[lo:hi]
        out._pairs = out._hits = None
        return out

    def expand(self, sids: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows (owner, entry index) for every entry of each sentence in ``sids``, in entry order."""
        lo = self.ent_ptr[sids]
        cnt = self.ent_ptr[sids + 1] - lo
        rows_owner = np.repeat(owner, cnt)
        base = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        return rows_owner, base + np.arange(int(cnt.sum()), dtype=np.int64)

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every candidate entry against each of its item's references (cached).

        ``(slot, candidate entry, reference entry or -1)``, by reference slot, then the
        candidate's entries in order.
        """
        if self._pairs is None:
            slots = np.arange(len(self.slot_sid), dtype=np.int64)
            h_slot, h_ent = self.expand(self.hyp_sid[self.slot_item], slots)
            look = self.slot_sid[h_slot] * self.n_grams + self.ent_gram[h_ent]
            where = np.searchsorted(self.key_sorted, look)
            where[where >= len(self.key_sorted)] = 0
            hit = self.key_sorted[where] == look if len(self.key_sorted) else np.zeros(len(look), dtype=bool)
            r_ent = np.where(hit, self.entry_of_sorted[where] if len(where) else where, -1)
            self._pairs = (h_slot, h_ent, r_ent)
        return self._pairs

    def hits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows of :meth:`pairs` whose candidate n-gram is in the reference (cached): ``(slot,
        candidate entry, reference entry)``, in the same order."""
        if self._hits is None:
            h_slot, h_ent, r_ent = self.pairs()
            hit = r_ent >= 0
            self._hits = (h_slot[hit], h_ent[hit], r_ent[hit])
        return self._hits

    def item_grams(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (item, n-gram) pairs over each item's references, as two arrays."""
        r_item, r_ent = self.expand(self.slot_sid, self.slot_item)
        n_grams = max(int(self.n_grams), 1)
        key = r_item * n_grams + self.ent_gram[r_ent]
        if self.n_items * n_grams < 1 << 31:
            key = key.astype(np.int32)  # sorts twice as fast as int64 (the corpus pass's main cost)
        key = unique_sorted(key).astype(np.int64)
        return key // n_grams, key % n_grams

    def gram_texts(self) -> list[str]:
        """Each n-gram as its words joined by single spaces (n-gram id order)."""
        words = self.words
        flat = self._flat
        return [" ".join(words[t] for t in flat[p : p + k + 1]) for k, fp in enumerate(self.first_pos) for p in fp]


class GramIndex:
    """Document frequencies of n-grams (1..n words) over a reference corpus, added chunk by chunk.

    ``df`` of an n-gram: the number of items whose references contain it; ``n_docs``: items
    added. Each order keeps its n-grams as sorted integer keys (built on the ids of the
    order below and a word vocabulary), so memory grows with the distinct n-grams only.
    """

    def __init__(self, n: int = 4):
        self.n = n
        self.n_docs = 0
        #: names this index (the same in the processes forked with it), so that statistics
        #: computed on it can be known to share its references (capeval compare)
        self.token = os.urandom(8).hex()
        #: set when a comparison's later systems score on it (text_share.publish): their
        #: passes need not keep the references' (item, n-gram) pairs again
        self.shared_by_passes = False
        #: whether the parts added carried the references' (item, n-gram) pairs (part(pairs=True)):
        #: then :meth:`reference_pairs` gives them, and a pass's statistics need not keep them
        self.keeps_pairs = False
        # per part with pairs: (its first item, each item's number of pairs, local n-grams, local n-gram -> (order, id in it))
        self._pair_parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.vocab: dict[str, int] = {}
        self._keys = [np.zeros(0, dtype=np.int64) for _ in range(n + 1)]  # sorted, per order
        self._ids = [np.zeros(0, dtype=np.int64) for _ in range(n + 1)]  # id of each key
        self._df = [np.zeros(0, dtype=np.int64) for _ in range(n + 1)]  # by id

    def part(self, refs: Sequence[Sequence[str]], pairs: bool = False) -> "DfPart":
        """The counts of one chunk of items (their tokenised references), to :meth:`add_part` later;
        with ``pairs``, also its distinct (item, n-gram) pairs (:meth:`reference_pairs`).

        Needs nothing of the index but its order, so chunks can be counted in other processes.
        """
        table = NgramTable(None, refs, self.n)
        items, grams = table.item_grams()
        counts = np.bincount(grams, minlength=int(table.n_grams))
        kept = (None, None)
        if pairs:
            # the pairs are sorted by item: each item's number of n-grams says which item a pair
            # is of (half the bytes to send from a worker)
            per_item = np.bincount(items, minlength=int(table.n_items)).astype(np.int32)
            kept = (per_item, grams.astype(np.int32) if table.n_grams < 1 << 31 else grams)
        return DfPart(table.n_items, table.words, table.prefix, table.last, table.gram_offset, counts, *kept)

    def add_part(self, part: "DfPart") -> None:
        """Count the items of a :meth:`part` into the index. Parts with pairs and parts without
        are not mixed in one index."""
        if (part.pair_counts is not None) != self.keeps_pairs and self.n_docs:
            raise ValueError("GramIndex: parts with and without the references' (item, n-gram) pairs mixed")
        self.keeps_pairs = part.pair_counts is not None
        first_item = self.n_docs
        local_ids = []
        self.n_docs += part.n_items
        vocab = self.vocab
        wid = np.array([vocab.setdefault(w, len(vocab)) for w in part.words], dtype=np.int64)
        prev_ids = None
        for k in range(1, self.n + 1):
            q = self._query(part, k, wid, prev_ids)  # every word is in vocab: no -1 here
            keys, ids = self._keys[k], self._ids[k]
            at = _search(keys, q)
            found = _contains(keys, q, at)
            # an n-gram's id never changes: known ones keep theirs, new ones are numbered
            # from the end in key order (one search of the whole index per order, not two)
            prev_ids = np.empty(len(q), dtype=np.int64)
            prev_ids[found] = ids[at[found]]
            if not found.all():
                missing = q[~found]
                new = unique_sorted(missing)
                start = len(self._df[k])
                prev_ids[~found] = start + np.searchsorted(new, missing)
                where = np.searchsorted(keys, new)
                self._keys[k] = np.insert(keys, where, new)
                self._ids[k] = np.insert(ids, where, np.arange(start, start + len(new), dtype=np.int64))
                self._df[k] = np.concatenate([self._df[k], np.zeros(len(new), dtype=np.int64)])
            lo, hi = part.gram_offset[k - 1], part.gram_offset[k]
            self._df[k][prev_ids] += part.counts[lo:hi]
            local_ids.append(prev_ids)
        if part.pair_counts is not None:
            orders = np.repeat(np.arange(self.n, dtype=np.int8), np.diff(part.gram_offset[: self.n + 1]))
            ids = np.concatenate(local_ids) if local_ids else np.zeros(0, dtype=np.int64)
            self._pair_parts.append((first_item, part.pair_counts, part.pair_gram, orders, ids))

    def drop_reference_pairs(self) -> None:
        """Let the parts' pairs go (once :meth:`reference_pairs` was read)."""
        self._pair_parts = []

    def reference_pairs(self) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """Per part added with pairs: (its n-grams' ids over the whole index as :meth:`ids_of`
        gives them, its items numbered within the part, its first item): the distinct (item,
        n-gram) pairs of the references, valid once every part is added (ids are offset by the
        sizes of the orders below)."""
        return list(self.iter_reference_pairs())

    def iter_reference_pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
        """:meth:`reference_pairs` one part at a time (each part's arrays made when it is reached)."""
        offsets = np.cumsum([0] + [len(self._df[k]) for k in range(1, self.n + 1)]).astype(np.int64)
        for first_item, per_item, grams, orders, ids in list(self._pair_parts):
            gid = offsets[orders] + ids
            items = np.repeat(np.arange(len(per_item), dtype=np.int32), per_item)
            yield gid[grams], items, first_item

    def reference_pair_count(self) -> int:
        """The number of pairs :meth:`reference_pairs` gives."""
        return sum(len(grams) for _, _, grams, _, _ in self._pair_parts)

    def df_of(self, table: NgramTable) -> np.ndarray:
        """Document frequency of every n-gram of ``table`` (0 for those never seen), as floats."""
        out = np.zeros(int(table.n_grams), dtype=np.float64)
        for k, rows, ids in self._known(table):
            out[rows] = self._df[k][ids]
        return out

    def n_ids(self) -> int:
        """Number of distinct n-grams added (all orders): the range of :meth:`ids_of`."""
        return sum(len(self._df[k]) for k in range(1, self.n + 1))

    def df_by_id(self) -> np.ndarray:
        """The df of every n-gram by its :meth:`ids_of` id (int64)."""
        parts = [self._df[k] for k in range(1, self.n + 1)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def ids_of(self, table: NgramTable) -> np.ndarray:
        """One id per n-gram of ``table`` over the whole index (order 1's first, then order 2's, ...),
        -1 for an n-gram never added; the same n-gram has the same id in every table, so
        per-chunk statistics can be merged (``capeval compare`` recounts ``df`` on resamples)."""
        out = np.full(int(table.n_grams), -1, dtype=np.int64)
        offsets = np.cumsum([0] + [len(self._df[k]) for k in range(1, self.n + 1)])
        for k, rows, ids in self._known(table):
            out[rows] = offsets[k - 1] + ids
        return out

    def _known(self, table: NgramTable) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Per order ``k`` of ``table``: the rows of its n-grams this index holds and their ids
        in order ``k`` (one search of the index per order; an order's query builds on the
        previous order's ids, -1 where unknown)."""
        wid = np.array([self.vocab.get(w, -1) for w in table.words], dtype=np.int64)
        prev_ids = None
        for k in range(1, min(self.n, table.n) + 1):
            q = self._query(table, k, wid, prev_ids)
            keys = self._keys[k]
            at = _search(keys, q)
            found = _contains(keys, q, at)
            prev_ids = np.full(len(q), -1, dtype=np.int64)
            prev_ids[found] = self._ids[k][at[found]]
            yield k, table.gram_offset[k - 1] + np.nonzero(found)[0], prev_ids[found]

    @staticmethod
    def _query(table: "NgramTable | DfPart", k: int, wid: np.ndarray, prev_ids: np.ndarray | None) -> np.ndarray:
        last = wid[table.last[k]]
        if k == 1:
            return last
        prefix = prev_ids[table.prefix[k]]  # type: ignore[index]
        return np.where((prefix < 0) | (last < 0), np.int64(-1), prefix * _SHIFT + last)

    def nbytes(self) -> int:
        """Memory held by the arrays."""
        return sum(a.nbytes for arrs in (self._keys, self._ids, self._df) for a in arrs)


def unique_first(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(x, return_index=True, return_inverse=True, return_counts=True)`` of a
    non-negative int64 array: (sorted distinct values, index of each one's first occurrence,
    inverse, counts). Each value is packed with its index into one int64 and the packed values
    sorted (numpy's plain sort, several times faster than the stable argsort ``np.unique``
    uses for the first occurrences); values too large to pack take ``np.unique``."""
    n = len(x)
    bits = max(1, (n - 1).bit_length())
    if n == 0 or int(x.min()) < 0 or int(x.max()) >= 1 << (62 - bits):
        uniq, first, inv, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
        return uniq, first.astype(np.int64), inv.reshape(-1).astype(np.int64), counts.astype(np.int64)
    packed = x << np.int64(bits)
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    index = packed & np.int64((1 << bits) - 1)
    packed >>= np.int64(bits)  # the sorted values
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(packed[1:], packed[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    inv = np.empty(n, dtype=np.int64)
    inv[index] = np.cumsum(new) - 1
    return packed[starts], index[starts], inv, np.diff(np.append(starts, n))


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` of an int64 array by sorting (numpy's hash path is ~10x slower here)."""
    x = np.sort(x)
    keep = np.ones(len(x), dtype=bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


@dataclass
class DfPart:
    """One chunk's contribution to a :class:`GramIndex`: its n-grams (as in
    :class:`NgramTable`) and, per n-gram, the number of its items whose references hold it."""

    n_items: int
    words: list[str]
    prefix: dict[int, np.ndarray]
    last: dict[int, np.ndarray]
    gram_offset: list[int]
    counts: np.ndarray
    #: the distinct (item within the part, n-gram) pairs of its references, when asked for: each
    #: item's number of pairs (the pairs sorted by item) and each pair's n-gram
    pair_counts: np.ndarray | None = None
    pair_gram: np.ndarray | None = None


#: queries from which :func:`_search` sorts them first
_SORT_QUERIES = 2048


def _search(keys: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.searchsorted(keys, q)``, the same indices: many queries are sorted first, so the
    searches walk the keys in order (a quarter of the time for 30,000 queries into 400,000 keys,
    the sort included) instead of jumping across them for each query."""
    if len(q) < _SORT_QUERIES:
        return np.searchsorted(keys, q)
    order = np.argsort(q)
    at = np.empty(len(q), dtype=np.intp)
    at[order] = np.searchsorted(keys, q[order])
    return at


def _contains(keys: np.ndarray, q: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
    if at is None:
        at = np.searchsorted(keys, q)
    ok = at < len(keys)
    out = np.zeros(len(q), dtype=bool)
    out[ok] = keys[at[ok]] == q[ok]
    return out & (q >= 0)
