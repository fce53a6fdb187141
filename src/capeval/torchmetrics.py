"""capeval inside a training loop: :class:`CaptionScore`, a ``torchmetrics.Metric``.

Corpus-level text metrics (BLEU's corpus brevity penalty, METEOR's corpus statistics,
CIDEr-D's document frequencies, SPICE, ROUGE-L) cannot be averaged over processes: each rank
keeps its captions (as UTF-8 bytes in tensor states) and ``compute()`` scores the union of all
ranks' items with :class:`capeval.Evaluator`, so every rank returns exactly what
:func:`capeval.score` returns on all items. Metrics that score each item alone with a model
(the CLIP family) run in ``update()`` on the rank's device, with the model loaded once per
process; only their item scores travel, and the result is their mean.

``ids``: give each item's dataset index (or any hashable id) to drop the duplicates a
``DistributedSampler`` pads the last batch with; an id seen twice with different inputs is an
error. Without ids every item counts, as in other torchmetrics metrics. Items are ordered by
id when ids are given (so sums run in one order whatever the split), else rank by rank.

Under DDP the ranks first exchange a fixed-size fingerprint of their configuration (metrics,
options, whether ids were given), so a rank built with other metrics or options, or ids given
on some ranks only, is one :class:`~capeval.errors.InputError` on every rank, never a hang or
a per-rank result; a rank without items takes part with empty states. The states keep their
dtypes through ``set_dtype`` (bytes stay ``uint8``, lengths and id hashes ``int64``, item
scores ``float64``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from typing import Any, Callable, Mapping, Sequence

from capeval._optional import require

_tm = require("torchmetrics", extra="train", purpose="capeval.torchmetrics.CaptionScore")
torch = require("torch", extra="clip", purpose="capeval.torchmetrics.CaptionScore")

#: model metrics whose item score depends on that item only (their system score is the mean)
ITEM_LOCAL = frozenset({"clip-s", "ref-clip-s", "pac-s", "ref-pac-s", "pac-s++", "ref-pac-s++"})


#: each state's dtype, kept whatever ``set_dtype`` says (a float16 length or id hash is wrong)
_DTYPES = {"cand_bytes": torch.uint8, "cand_lens": torch.int64, "ref_bytes": torch.uint8, "ref_lens": torch.int64,
           "ref_counts": torch.int64, "ids": torch.int64, "local_scores": torch.float64}

# what a rank's items say about ids, in the fingerprint
_EMPTY, _NO_IDS, _IDS, _MIXED = 0, 1, 2, 3
#: bytes of the configuration text each rank sends for the error message (the check uses its sha256)
_SHOWN = 240
_HEADER = struct.Struct(">8sBqH")  # config digest, ids mode, number of items, length of the text shown


def _encode(texts: Sequence[str]) -> tuple[Any, Any]:
    # surrogatepass: a lone surrogate (which capeval.score accepts) travels and comes back as it was
    data = [t.encode("utf-8", "surrogatepass") for t in texts]
    flat = b"".join(data)
    return (torch.frombuffer(bytearray(flat), dtype=torch.uint8) if flat else torch.zeros(0, dtype=torch.uint8),
            torch.tensor([len(d) for d in data], dtype=torch.int64))


def _decode(flat: Any, lengths: Any) -> list[str]:
    raw = bytes(flat.to(torch.uint8).cpu().tolist())
    out, pos = [], 0
    for n in lengths.to(torch.int64).cpu().tolist():
        out.append(raw[pos : pos + n].decode("utf-8", "surrogatepass"))
        pos += n
    return out


def _cat(state: Any) -> Any:
    """A list state (before a sync) or a gathered tensor (after one) as one 1-D tensor."""
    from torchmetrics.utilities import dim_zero_cat

    if isinstance(state, list):
        return dim_zero_cat(state) if state else torch.zeros(0)
    return state


class CaptionScore(_tm.Metric):
    """Caption metrics as a torchmetrics ``Metric``: ``update(candidates, references, images=None, ids=None)``,
    ``compute() -> {metric: tensor}`` (see the module docs for what is gathered)."""

    is_differentiable = False
    higher_is_better = None
    full_state_update = False

    def __init__(self, metrics: str | Sequence[str] = "coco-ngram",
                 options: Mapping[str, Mapping[str, Any]] | None = None, **kwargs: Any):
        from capeval.options import check_options

        super().__init__(**kwargs)
        self.names, self.options = check_options(metrics, options)
        from capeval import registry

        unsupported = [n for n in self.names if registry.get(n).needs - {"references"} and n not in ITEM_LOCAL]
        if unsupported:
            raise _input_error(f"CaptionScore: {', '.join(unsupported)} cannot run per process yet (supported: text "
                               f"metrics and {', '.join(sorted(ITEM_LOCAL))})")
        from capeval.requirements import check as check_requirements

        # every missing package, model, data file or folder, now and in one line, not at the first
        # update() after an epoch of training (issue 47 item 6)
        check_requirements(self.names, self.options)
        self.local = [n for n in self.names if n in ITEM_LOCAL]
        self.text = [n for n in self.names if n not in ITEM_LOCAL]
        self._evaluator: Any = None  # the model metrics' Evaluator, built on the first update, kept across resets
        for name in ("cand_bytes", "cand_lens", "ref_bytes", "ref_lens", "ref_counts", "ids", "local_scores"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Any = None,
               ids: Sequence[Any] | None = None) -> None:
        """Add a batch: one candidate and its references per item (``images`` for CLIP-family metrics).

        What :func:`capeval.score` would refuse is refused here, at once, naming the item's
        position in the batch (and its id): a ``references`` that is not a list per item, an
        empty reference list or reference, a caption that is not a string, an id that is not
        an int or a string, ids given in some updates only.
        """
        cands = _batch(candidates, "candidates")
        refs_in = _batch(references, "references")
        id_list = None if ids is None else _batch(ids, "ids")
        n = len(cands)
        if len(refs_in) != n or (id_list is not None and len(id_list) != n):
            raise _input_error(f"CaptionScore.update: {n} candidates, {len(refs_in)} reference lists"
                               + ("" if id_list is None else f", {len(id_list)} ids") + " (one of each per item)")
        shown = id_list or [None] * n  # the ids as given, for the messages
        keys = [] if id_list is None else [_id_key(k, v) for k, v in enumerate(id_list)]
        refs = [_item_references(k, shown[k], value) for k, value in enumerate(refs_in)]
        for k, cand in enumerate(cands):
            if not isinstance(cand, str):
                raise _input_error(f"CaptionScore.update: {_where(k, shown[k])}: the candidate must be a string, "
                                   f"got {type(cand).__name__} ({cand!r:.60})")
        if n:
            self._check_ids_every_update(id_list is not None)
        cb, cl = _encode(cands)
        rb, rl = _encode([r for item in refs for r in item])
        self.cand_bytes.append(cb.to(self.device))
        self.cand_lens.append(cl.to(self.device))
        self.ref_bytes.append(rb.to(self.device))
        self.ref_lens.append(rl.to(self.device))
        self.ref_counts.append(torch.tensor([len(r) for r in refs], dtype=torch.int64, device=self.device))
        if id_list is not None:
            self.ids.append(torch.tensor(keys, dtype=torch.int64, device=self.device))
        if self.local:
            self.local_scores.append(self._score_local(cands, refs, images).to(self.device))

    def _check_ids_every_update(self, with_ids: bool) -> None:
        """Ids in every update of a rank or in none (an item without an id cannot be deduplicated)."""
        items, with_keys = _numel(self.cand_lens), _numel(self.ids)
        if items and (with_ids != (with_keys > 0) or (with_ids and with_keys != items)):
            now, before = ("given", "not in an earlier one") if with_ids else ("not given", "given in an earlier one")
            raise _input_error(f"CaptionScore.update: ids {now} in this update but {before}; give ids= in every "
                               "update (of every rank) or in none")

    def _score_local(self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Any) -> Any:
        from capeval.evaluator import Evaluator

        if images is None or len(images) != len(candidates):
            raise _input_error(f"CaptionScore.update: {', '.join(self.local)} need one image per candidate")
        if self._evaluator is None:
            self._evaluator = Evaluator(self.local, options={k: v for k, v in self.options.items()})
        keys = [str(k) for k in range(len(candidates))]
        report = self._evaluator.score(dict(zip(keys, candidates)), dict(zip(keys, map(list, references))),
                                       images=dict(zip(keys, images)))
        cols = [[report[m].items[k] for m in self.local] for k in keys]
        # flat (items x metrics), so a rank without items sends an empty 1-D float64 state
        return torch.tensor(cols, dtype=torch.float64).reshape(-1)

    def _apply(self, fn: Callable, exclude_state: Sequence[str] = ()) -> Any:
        """``.to(device)`` moves the states; no dtype change touches them (``set_dtype(torch.float16)``
        would turn lengths and id hashes into floats: 53 bits or fewer of a 64-bit hash)."""
        this = super()._apply(fn, exclude_state=(*exclude_state, *_DTYPES))
        device = this.device  # where the dummy tensor went (unchanged by a dtype conversion)
        for key in _DTYPES:
            if key in exclude_state or key not in this._defaults:  # not added yet (during __init__)
                continue
            this._defaults[key] = [v.to(device) for v in this._defaults[key]]
            value = getattr(this, key)
            setattr(this, key, value.to(device) if isinstance(value, torch.Tensor) else [v.to(device) for v in value])
        return this

    def _sync_dist(self, dist_sync_fn: Callable | None = None, process_group: Any = None) -> None:
        """Gather every state from every rank, after the ranks agreed on their configuration.

        torchmetrics' own sync sends a rank without items a float placeholder that gloo aborts
        on (SIGABRT) beside the other ranks' bytes; here each state travels with its own dtype,
        empty where a rank has nothing. First a fingerprint of fixed size (so no rank waits for
        a message of another length): a mismatch is the same :class:`InputError` on every rank.
        """
        if dist_sync_fn is None:
            from torchmetrics.utilities.distributed import gather_all_tensors as dist_sync_fn
        group = process_group or self.process_group
        fingerprints = [_unpack(t) for t in dist_sync_fn(self._fingerprint(), group=group)]
        problem = _disagreement(fingerprints)
        if problem:
            raise _input_error(problem)
        for key in self._reductions:
            parts = dist_sync_fn(self._local_state(key), group=group)
            setattr(self, key, torch.cat([p.reshape(-1).to(_DTYPES[key]) for p in parts]))

    def _local_state(self, key: str) -> Any:
        value = getattr(self, key)
        if isinstance(value, torch.Tensor):
            return value.reshape(-1).to(_DTYPES[key])
        if not value:
            return torch.zeros(0, dtype=_DTYPES[key], device=self.device)
        return torch.cat([v.reshape(-1).to(_DTYPES[key]) for v in value])

    def _config_text(self) -> str:
        """The metrics and options, canonical (same arguments: same text on every rank)."""
        return json.dumps({"metrics": sorted(self.names), "options": self.options}, sort_keys=True,
                          separators=(",", ":"), default=_canonical)

    def _fingerprint(self) -> Any:
        """This rank's configuration digest, ids mode and item count, as a fixed-size uint8 tensor."""
        text = self._config_text()
        items, keys = _numel(self.cand_lens), _numel(self.ids)
        mode = _EMPTY if not items else _NO_IDS if not keys else _IDS if keys == items else _MIXED
        shown = text.encode("utf-8")[:_SHOWN]
        raw = _HEADER.pack(hashlib.sha256(text.encode("utf-8")).digest()[:8], mode, items, len(shown))
        raw += shown.ljust(_SHOWN, b"\0")
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(self.device)

    def compute(self) -> dict[str, Any]:
        """``{metric: 0-d float64 tensor}`` over the items of every process."""
        cands = _decode(_cat(self.cand_bytes), _cat(self.cand_lens))
        flat_refs = _decode(_cat(self.ref_bytes), _cat(self.ref_lens))
        counts = _cat(self.ref_counts).to(torch.int64).tolist()
        refs, pos = [], 0
        for c in counts:
            refs.append(flat_refs[pos : pos + c])
            pos += c
        local = _cat(self.local_scores).to(torch.float64).reshape(len(cands), len(self.local)) if self.local else None
        ids = _cat(self.ids).to(torch.int64).tolist()
        order = list(range(len(cands)))
        if ids:
            if len(ids) != len(cands):
                raise _input_error("CaptionScore: give ids in every update or in none")
            order = _dedupe(ids, cands, refs)
        out: dict[str, Any] = {}
        if self.text and order:
            from capeval.api import score

            keys = [str(k) for k in range(len(order))]
            report = score(dict(zip(keys, (cands[i] for i in order))), dict(zip(keys, (refs[i] for i in order))),
                           self.text, options=self.options)
            out.update({m: torch.tensor(report[m].system, dtype=torch.float64) for m in self.text})
        for j, m in enumerate(self.local):
            values = [float(local[i, j]) for i in order]
            out[m] = torch.tensor(sum(values) / len(values) if values else math.nan, dtype=torch.float64)
        return {m: out.get(m, torch.tensor(math.nan, dtype=torch.float64)) for m in self.names}


def hash_id(value: Any) -> int:
    """An item id as an int64 (ints as they are; other ids by a stable 63-bit hash of their text)."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    if hasattr(value, "item"):  # a 0-d tensor or numpy scalar
        return hash_id(value.item())
    import hashlib

    return int.from_bytes(hashlib.sha256(str(value).encode()).digest()[:8], "big") >> 1


def _dedupe(ids: list[int], cands: list[str], refs: list[list[str]]) -> list[int]:
    """Positions of the first occurrence of each id, ordered by id; conflicting duplicates are errors."""
    first: dict[int, int] = {}
    for pos, key in enumerate(ids):
        seen = first.setdefault(key, pos)
        if seen != pos and (cands[seen] != cands[pos] or refs[seen] != refs[pos]):
            raise _input_error(f"CaptionScore: id {key} was given twice with different captions or references")
    return [first[k] for k in sorted(first)]


def _numel(state: Any) -> int:
    """Number of values in a list state (or a gathered tensor)."""
    if isinstance(state, torch.Tensor):
        return int(state.numel())
    return sum(int(t.numel()) for t in state)


def _canonical(value: Any) -> Any:
    """An option value json cannot write, as text that is the same on every rank."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(map(str, value))
    return f"<{type(value).__module__}.{type(value).__qualname__}>"  # never its address


def _unpack(tensor: Any) -> tuple[bytes, int, int, str]:
    raw = bytes(tensor.to(torch.uint8).cpu().tolist())
    digest, mode, items, n = _HEADER.unpack_from(raw)
    shown = raw[_HEADER.size : _HEADER.size + n].decode("utf-8", "replace")
    return digest, mode, items, shown


def _ranks(ranks: Sequence[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _disagreement(fingerprints: Sequence[tuple[bytes, int, int, str]]) -> str:
    """The one message every rank raises (built from the gathered fingerprints only, so it is
    the same text everywhere), or "" when the ranks agree."""
    digest0, _, _, shown0 = fingerprints[0]
    for rank, (digest, _, _, shown) in enumerate(fingerprints):
        if digest != digest0:
            return (f"CaptionScore: rank 0 and rank {rank} were built with different metrics or options "
                    f"({shown0} vs {shown}); build CaptionScore with the same arguments on every rank")
    mixed = [r for r, f in enumerate(fingerprints) if f[1] == _MIXED]
    if mixed:
        return (f"CaptionScore: {_ranks(mixed)} gave ids in some updates only; give ids= in every update of "
                "every rank, or in none")
    with_ids = [r for r, f in enumerate(fingerprints) if f[1] == _IDS]
    without = [r for r, f in enumerate(fingerprints) if f[1] == _NO_IDS]
    if with_ids and without:
        return (f"CaptionScore: ids were given on {_ranks(with_ids)} but not on {_ranks(without)}; give ids= in "
                "every update of every rank, or in none")
    return ""


def _batch(value: Any, name: str) -> list[Any]:
    """A batch argument as a list: a sequence (list, tuple, 1-D tensor or array), never a string,
    a mapping, None or a scalar."""
    if value is None or isinstance(value, (str, bytes, Mapping)) or getattr(value, "ndim", 1) == 0:
        got = "None" if value is None else type(value).__name__
        raise _input_error(f"CaptionScore.update: {name} must be a list with one entry per item, got {got}")
    if hasattr(value, "tolist"):  # a tensor or array: its values (0-d ones were refused above)
        return value.tolist()
    try:
        return list(value)
    except TypeError:
        raise _input_error(f"CaptionScore.update: {name} must be a list with one entry per item, "
                           f"got {type(value).__name__}") from None


def _where(position: int, item_id: Any) -> str:
    if hasattr(item_id, "item") and getattr(item_id, "ndim", None) == 0:
        item_id = item_id.item()
    return f"item {position} of the batch" + ("" if item_id is None else f" (id {item_id!r:.40})")


def _id_key(position: int, value: Any) -> int:
    """:func:`hash_id` of an id that is an int or a string (or a 0-d integer tensor/array); any
    other value (a list, None, a float, a bool) is an error naming its position."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return hash_id(value)
    raise _input_error(f"CaptionScore.update: id of item {position} of the batch must be an int or a string, "
                       f"got {type(value).__name__} ({value!r:.60})")


def _item_references(position: int, item_id: Any, value: Any) -> list[str]:
    """One item's references, checked as :func:`capeval.score` checks them (so ``compute()``
    never fails on an item the rank accepted)."""
    from capeval.io.reading import max_references

    where = _where(position, item_id)
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise _input_error(f"CaptionScore.update: {where}: the references must be a list of strings, "
                           f"got {type(value).__name__}")
    if not value:
        raise _input_error(f"CaptionScore.update: {where}: the reference list is empty")
    limit = max_references()
    if len(value) > limit:
        raise _input_error(f"CaptionScore.update: {where}: {len(value):,} references, more than the {limit:,} an "
                           "item may have (set CAPEVAL_MAX_REFERENCES to raise the limit)")
    for k, ref in enumerate(value):
        if not isinstance(ref, str):
            raise _input_error(f"CaptionScore.update: {where}: reference #{k} must be a string, "
                               f"got {type(ref).__name__} ({ref!r:.60})")
        if not ref.strip():
            raise _input_error(f"CaptionScore.update: {where}: reference #{k} is empty")
    return list(value)


def _input_error(message: str) -> Exception:
    from capeval.errors import InputError

    return InputError(message)
