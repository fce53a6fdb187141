"""The candidates' n-grams on their device, and the shared frame of the token-id rewards.

For a ``[B, T]`` LongTensor of candidates (one caption per row, cut at the first ``pad_id``
and at the first ``eos_id``), per order k and start position t:

* ``gid[k][b, t]``: the k-gram's id among the references' k-grams (:mod:`.token_index`), or -1
  for a k-gram no reference holds; looked up at the k-gram's first position in its caption only,
  exact: with ``searchsorted`` in the sorted keys, or on the CPU through a direct-mapped table
  (:func:`.token_index.hash_table`, the key compared) with the same result.
* ``first[k][b, t]``: t is the k-gram's first position in its caption, and ``tf[k][b, t]`` its
  count there (0 elsewhere). Equal k-grams are found exactly, without hashing: a token's local
  id is the first position of the same token id in the row, a k-gram's is the first position of
  the same (local id of its (k-1)-gram prefix, local id of its last token) pair; one stable
  row-wise sort per order finds them (keys below T^2).

Summing a caption's values over ``first`` positions in increasing t is pycocoevalcap's order
(its dicts iterate n-grams in first-position order), which CIDEr-D needs to be exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from capeval.errors import InputError
from capeval.ranges import REWARD_TOKEN_RANGES
from capeval.reward import token_index

_DENSE_VOCAB = 1 << 22  # below this largest reference id, a lookup table maps ids to codes
_INT64_MAX = torch.iinfo(torch.int64).max


def check_range(option: str, value: Any) -> None:
    """One :class:`InputError` line when ``value`` is outside :data:`REWARD_TOKEN_RANGES`."""
    bounds = REWARD_TOKEN_RANGES[option]
    if value is not None and not bounds.accepts(value):
        raise InputError(f"option {option}={value!r} out of range: {bounds.describe(option)}")


def parse_dtype(dtype: Any) -> torch.dtype:
    """``torch.float32``/``"float32"`` or ``torch.float64``/``"float64"``; anything else is refused."""
    named = {"float32": torch.float32, "float64": torch.float64, torch.float32: torch.float32,
             torch.float64: torch.float64}
    if dtype not in named:
        raise InputError(f"option dtype={dtype!r}: use torch.float32 or torch.float64")
    return named[dtype]


def take(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[idx]`` through ``index_select`` (a few times faster than advanced indexing on the CPU)."""
    return torch.index_select(table, 0, idx.reshape(-1)).view(*idx.shape, *table.shape[1:])


def _shift(x: torch.Tensor, s: int) -> torch.Tensor:
    """``x[:, s:]`` padded with zeros on the right back to ``x``'s width."""
    return torch.zeros_like(x) if s >= x.shape[1] else F.pad(x[:, s:], (0, s))


def first_positions(key: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per row, the first position holding the same key (positions where ``valid`` is False: any)."""
    b, t = key.shape
    s, p = torch.sort(torch.where(valid, key, _INT64_MAX), dim=1, stable=True)
    start = torch.cat([torch.ones_like(s[:, :1], dtype=torch.bool), s[:, 1:] != s[:, :-1]], dim=1)
    j = torch.arange(t, device=key.device).expand(b, t)
    run_start = torch.where(start, j, 0).cummax(dim=1).values
    return torch.empty_like(p).scatter_(1, p, p.gather(1, run_start))  # stable: the run's first is its smallest t


def _search(table: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Index of each key ``q`` in the sorted ``table``, -1 where absent (binary search)."""
    j = torch.searchsorted(table, q).clamp_(max=table.shape[0] - 1)
    return torch.where(torch.index_select(table, 0, j.reshape(-1)).view_as(q) == q, j, -1)


def _hashed(table: torch.Tensor, hashed: dict[str, Any], q: torch.Tensor) -> torch.Tensor:
    """:func:`_search` through :func:`.token_index.hash_table`'s direct-mapped table: the same indices."""
    j = torch.index_select(hashed["table"], 0, q % hashed["m"]).long()
    taken = j >= 0
    j = j.clamp_(min=0)
    ok = taken & (torch.index_select(table, 0, j) == q)
    out = torch.where(ok, j, -1)
    over = hashed["over_keys"]
    if over.shape[0]:  # a slot taken by another key: the query may be an overflow key
        at = (taken & ~ok).nonzero().squeeze(1)
        i = _search(over, torch.index_select(q, 0, at))
        out.index_copy_(0, at, torch.where(i >= 0, torch.index_select(hashed["over_ids"], 0, i.clamp(min=0)), -1))
    return out


def find(table: torch.Tensor, key: torch.Tensor, mask: torch.Tensor, hashed: dict[str, Any] | None = None
         ) -> torch.Tensor:
    """Index of each ``key`` in the sorted ``table`` where ``mask`` holds and the key is there, else -1.

    On the CPU (eager) only the masked keys are looked up (``nonzero``: a sync, free on the host),
    through ``hashed`` when given (one random read per key instead of a binary search's ~20);
    elsewhere every key is searched and the mask applied after (no sync, fixed shapes to compile).
    """
    if table.shape[0] == 0:
        return torch.full_like(key, -1)
    if key.device.type == "cpu" and not torch.compiler.is_compiling():
        at = mask.reshape(-1).nonzero().squeeze(1)
        q = torch.index_select(key.reshape(-1), 0, at)
        j = _search(table, q) if hashed is None else _hashed(table, hashed, q)
        return torch.full_like(key, -1).view(-1).index_copy_(0, at, j).view_as(key)
    return torch.where(mask, _search(table, key), -1)


class TokenReward:
    """Shared frame: references counted once, tensors moved once per device, chunked calls.

    Subclasses set :meth:`_chunk` (scores of a chunk of rows) and may extend :meth:`_device_tables`.
    """

    _tail: tuple[int, ...] = ()  # the shape of one row's scores

    def __init__(self, references: Any, *, pad_id: int = 0, eos_id: int | None = None, n: int = 4,
                 dtype: Any = torch.float64, max_elements: int = 1 << 22, check_items: bool = True):
        for option, value in (("pad_id", pad_id), ("eos_id", eos_id), ("n", n), ("max_elements", max_elements)):
            check_range(option, value)
        if not isinstance(check_items, bool):
            raise InputError(f"option check_items={check_items!r} must be True or False")
        self.pad_id, self.eos_id, self.n = pad_id, eos_id, n
        self.dtype = parse_dtype(dtype)
        self.max_elements = max_elements
        self.check_items = check_items
        self.index = token_index.build(references, n, pad_id, eos_id)
        self.n_items = self.index.n_items
        self._tables: dict[str, dict[str, Any]] = {}

    # -- tables on a device --------------------------------------------------------------------
    def _device_tables(self, device: torch.device) -> dict[str, Any]:
        ix = self.index
        out: dict[str, Any] = {
            "keys": [torch.as_tensor(k, device=device) for k in ix.keys],
            "entry_keys": torch.as_tensor(ix.entry_keys, device=device),
            "entry_tf": torch.as_tensor(ix.entry_tf, device=device),
            "ref_lengths": torch.as_tensor(ix.ref_lengths, device=device),
            "ref_counts": torch.as_tensor(ix.ref_counts, device=device),
            "vocab": torch.as_tensor(ix.vocab, device=device),
        }
        if device.type == "cpu":  # direct-mapped tables for the n-gram ids (see find)
            out["hashed"] = [{k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v
                              for k, v in token_index.hash_table(keys).items()} for keys in ix.keys]
        top = int(ix.vocab[-1])
        if top < _DENSE_VOCAB:
            table = torch.zeros(top + 1, dtype=torch.int64)
            table[torch.as_tensor(ix.vocab)] = torch.arange(1, len(ix.vocab) + 1)
            out["code_table"] = table.to(device)
        return out

    def tables(self, device: Any) -> dict[str, Any]:
        """This reward's tensors on ``device`` (moved there once, then kept)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:  # "cuda" and "cuda:0" share one copy
            device = torch.device("cuda", torch.cuda.current_device())
        key = str(device)
        if key not in self._tables:
            self._tables[key] = self._device_tables(device)
        return self._tables[key]

    def to(self, device: Any) -> "TokenReward":
        """Move the tables to ``device`` now (else on the first call with candidates there)."""
        self.tables(device)
        return self

    # -- the call ------------------------------------------------------------------------------
    def _inputs(self, candidates: Any, items: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(candidates, torch.Tensor) or candidates.dim() != 2:
            raise InputError("candidates must be a [B, T] tensor of token ids")
        if candidates.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
            raise InputError(f"candidates must hold integer token ids, got {candidates.dtype}")
        if not isinstance(items, torch.Tensor) or items.dim() != 1 or items.dtype not in (torch.int64, torch.int32):
            raise InputError("items must be a [B] integer tensor of item indices")
        if items.shape[0] != candidates.shape[0]:
            raise InputError(f"{items.shape[0]} items for {candidates.shape[0]} candidates")
        candidates = candidates.long()
        items = items.to(device=candidates.device, dtype=torch.int64)
        if self.check_items and items.numel():  # the one host sync of a call (check_items=False: none)
            bad = (items < 0) | (items >= self.n_items)
            if bool(bad.any()):
                k = int(bad.nonzero()[0, 0])
                raise InputError(f"items[{k}] = {int(items[k])} is not an item index (0..{self.n_items - 1})")
        return candidates, items

    def table(self, candidates: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Scores of ``candidates`` ``[B, T]`` against the references of ``items`` ``[B]``, on their device."""
        candidates, items = self._inputs(candidates, items)
        tabs = self.tables(candidates.device)
        b, t = candidates.shape
        if b == 0:
            return torch.zeros((0, *self._tail), dtype=self.dtype, device=candidates.device)
        if t == 0:  # every caption empty
            candidates = torch.full((b, 1), self.pad_id, dtype=torch.int64, device=candidates.device)
            t = 1
        rows = max(1, self.max_elements // (t * max(1, self.index.max_refs)))
        parts = [self._chunk(candidates[s : s + rows], items[s : s + rows], tabs) for s in range(0, b, rows)]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    __call__ = table

    def _chunk(self, candidates: torch.Tensor, items: torch.Tensor, tabs: dict[str, Any]) -> torch.Tensor:
        raise NotImplementedError

    # -- n-grams of a chunk ----------------------------------------------------------------------
    def grams(self, cand: torch.Tensor, tabs: dict[str, Any]) -> dict[str, Any]:
        """Lengths and per-order ``valid``/``first``/``tf``/``gid`` ``[B, T]`` tensors (module docstring)."""
        b, t = cand.shape
        dev = cand.device
        pos = torch.arange(t, device=dev)
        stop = cand == self.pad_id
        if self.eos_id is not None:
            stop = stop | (cand == self.eos_id)
        length = torch.where(stop, pos, t).amin(dim=1)
        vocab = tabs["vocab"]
        if "code_table" in tabs:
            table = tabs["code_table"]
            inside = (cand >= 0) & (cand < table.shape[0])
            code = torch.where(inside, take(table, cand.clamp(0, table.shape[0] - 1)), 0)
        else:
            j = torch.searchsorted(vocab, cand).clamp(max=vocab.shape[0] - 1)
            code = torch.where(take(vocab, j) == cand, j + 1, 0)
        v1 = vocab.shape[0] + 1
        out: dict[str, Any] = {"length": length, "valid": [], "first": [], "tf": [], "gid": []}
        gid = code - 1
        loc1 = loc = first_positions(cand, pos < length[:, None])
        for k in range(1, self.n + 1):
            valid = pos + k <= length[:, None]
            if k > 1:
                loc = first_positions(loc * t + _shift(loc1, k - 1), valid)
            first = valid & (loc == pos)
            if k > 1:  # looked up at first positions only, then copied to the repeats
                nxt = _shift(code, k - 1)
                hashed = tabs["hashed"][k - 2] if "hashed" in tabs else None
                at_first = find(tabs["keys"][k - 2], (gid + 1) * v1 + nxt, first & (gid >= 0) & (nxt > 0), hashed)
                gid = at_first.gather(1, loc)
            tf = torch.zeros(b, t + 1, dtype=torch.int64, device=dev)
            tf = tf.scatter_add_(1, torch.where(valid, loc, t), torch.ones_like(loc))[:, :t]
            gid = torch.where(valid, gid, -1)
            out["valid"].append(valid)
            out["first"].append(first)
            out["tf"].append(tf)
            out["gid"].append(gid)
        return out

    def item_hits(self, items: torch.Tensor, k: int, gid: torch.Tensor, first: torch.Tensor,
                  tabs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """CPU: (flat positions, in order, of first-position k-grams the item's references hold; their entries)."""
        ekeys = tabs["entry_keys"]
        mask = (first & (gid >= 0)).view(-1)
        at = mask.nonzero().squeeze(1)
        if ekeys.shape[0] == 0 or at.shape[0] == 0:
            return at[:0], at[:0]
        b, t = gid.shape
        row_item = torch.index_select(items, 0, torch.div(at, t, rounding_mode="floor"))
        key = (row_item * self.n + (k - 1)) * self.index.stride + torch.index_select(gid.view(-1), 0, at)
        j = _search(ekeys, key)
        hit = j >= 0
        return at[hit], j[hit]

    def item_tf(self, items: torch.Tensor, k: int, gid: torch.Tensor, first: torch.Tensor,
                tabs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """(``[B, T, R]`` tf of each first-position k-gram in each reference of its item, hit mask ``[B, T]``)."""
        ekeys = tabs["entry_keys"]
        key = (items[:, None] * self.n + (k - 1)) * self.index.stride + gid.clamp(min=0)
        j = find(ekeys, key, first & (gid >= 0))
        hit = j >= 0
        return torch.where(hit[..., None], take(tabs["entry_tf"], j.clamp(min=0)), 0), hit
