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
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from capeval._optional import require

_tm = require("torchmetrics", extra="train", purpose="capeval.torchmetrics.CaptionScore")
torch = require("torch", extra="clip", purpose="capeval.torchmetrics.CaptionScore")

#: model metrics whose item score depends on that item only (their system score is the mean)
ITEM_LOCAL = frozenset({"clip-s", "ref-clip-s", "pac-s", "ref-pac-s", "pac-s++", "ref-pac-s++"})


def _encode(texts: Sequence[str]) -> tuple[Any, Any]:
    data = [t.encode("utf-8") for t in texts]
    flat = b"".join(data)
    return (torch.frombuffer(bytearray(flat), dtype=torch.uint8) if flat else torch.zeros(0, dtype=torch.uint8),
            torch.tensor([len(d) for d in data], dtype=torch.int64))


def _decode(flat: Any, lengths: Any) -> list[str]:
    raw = bytes(flat.to(torch.uint8).cpu().tolist())
    out, pos = [], 0
    for n in lengths.to(torch.int64).cpu().tolist():
        out.append(raw[pos : pos + n].decode("utf-8"))
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
        self.local = [n for n in self.names if n in ITEM_LOCAL]
        self.text = [n for n in self.names if n not in ITEM_LOCAL]
        self._evaluator: Any = None  # the model metrics' Evaluator, built on the first update, kept across resets
        for name in ("cand_bytes", "cand_lens", "ref_bytes", "ref_lens", "ref_counts", "ids", "local_scores"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Any = None,
               ids: Sequence[Any] | None = None) -> None:
        """Add a batch: one candidate and its references per item (``images`` for CLIP-family metrics)."""
        n = len(candidates)
        if len(references) != n or (ids is not None and len(ids) != n):
            raise _input_error(f"CaptionScore.update: {n} candidates, {len(references)} reference lists"
                               + ("" if ids is None else f", {len(ids)} ids") + " (one of each per item)")
        for k, (cand, refs) in enumerate(zip(candidates, references)):
            if not isinstance(cand, str) or isinstance(refs, str) or not all(isinstance(r, str) for r in refs):
                raise _input_error(f"CaptionScore.update: item {k} needs a caption string and a list of reference "
                                   "strings")
        cb, cl = _encode(candidates)
        rb, rl = _encode([r for refs in references for r in refs])
        self.cand_bytes.append(cb.to(self.device))
        self.cand_lens.append(cl.to(self.device))
        self.ref_bytes.append(rb.to(self.device))
        self.ref_lens.append(rl.to(self.device))
        self.ref_counts.append(torch.tensor([len(r) for r in references], dtype=torch.int64, device=self.device))
        if ids is not None:
            self.ids.append(torch.tensor([hash_id(i) for i in ids], dtype=torch.int64, device=self.device))
        if self.local:
            self.local_scores.append(self._score_local(candidates, references, images).to(self.device))

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
        # flat (items x metrics): a rank without items sends torchmetrics' 1-D empty placeholder
        return torch.tensor(cols, dtype=torch.float64).reshape(-1)

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


def _input_error(message: str) -> Exception:
    from capeval.errors import InputError

    return InputError(message)
