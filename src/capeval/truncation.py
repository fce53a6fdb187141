"""No silent truncation: how every text encoder says what it cut.

Each text encoder has a fixed context (CLIP 77 tokens, Long-CLIP 248, SigLIP 64, BERT/RoBERTa
512, ...) and the reference code of each metric cuts longer texts. capeval cuts them the same
way (faithful by default) but never silently; every scorer with a text encoder

- records its context and how it cuts in the signature: ``trunc:<tokens>:<policy>`` (for
  example ``77:keep-first+eot``); a scorer with two text encoders names each (``trunc`` and
  ``trunc_<part>``);
- counts the candidates and references cut in the result's extras, ``truncated_candidates``
  and ``truncated_references`` (``<part>_truncated_...`` for a second encoder; integers: sharded
  runs add them up);
- says so once on stderr per run (:func:`announce`): a direct ``scorer.score(...)`` call is a
  run; the evaluator and the CLI hold their scorers' lines back (:func:`deferred`) and print
  one for the whole run, whatever the number of batches or shards.

This module imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Any, Collection, Iterable, Iterator, Mapping, Sequence

CANDIDATES = "truncated_candidates"
REFERENCES = "truncated_references"

_deferred: contextvars.ContextVar[int] = contextvars.ContextVar("capeval_truncation_deferred", default=0)


def policy(tokens: int, how: str) -> str:
    """The signature value ``<tokens>:<how>`` (``how``: ``keep-first+eot``, ``keep-first``, ...)."""
    return f"{int(tokens)}:{how}"


def tally(candidates: Iterable[str], references: Iterable[Sequence[str]] | None,
          cut: Collection[str], part: str = "") -> dict[str, int]:
    """``{truncated_candidates: n, truncated_references: m}``: how many of the texts given (each
    occurrence counts) are in ``cut``, the set of texts the encoder truncated. Without
    references only the candidates' count. ``part`` names a second encoder of the metric (keys
    ``<part>_truncated_candidates`` ..., beside the signature's ``trunc_<part>``)."""
    pre = f"{part}_" if part else ""
    out = {pre + CANDIDATES: sum(1 for c in candidates if c in cut)}
    if references is not None:
        out[pre + REFERENCES] = sum(1 for refs in references for r in refs if r in cut)
    return out


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold back :func:`announce` lines inside the block (the caller announces the whole run)."""
    token = _deferred.set(_deferred.get() + 1)
    try:
        yield
    finally:
        _deferred.reset(token)


def lines(report: Mapping[str, Any]) -> list[str]:
    """The stderr lines for ``report`` (``{metric: MetricResult}``): one per text encoder setting
    that cut something, naming its metrics, the counts and the context (the signature's ``trunc``)."""
    groups: dict[tuple, dict[str, Any]] = {}
    for name, result in report.items():
        extras = getattr(result, "extras", {}) or {}
        fields = getattr(getattr(result, "signature", None), "fields", {}) or {}
        for key in extras:
            if not key.endswith(CANDIDATES):
                continue
            part = key[: -len(CANDIDATES)].rstrip("_")
            pre = f"{part}_" if part else ""
            cand, ref = int(extras.get(key) or 0), int(extras.get(pre + REFERENCES) or 0)
            if not cand and not ref:
                continue
            trunc = fields.get(f"trunc_{part}" if part else "trunc", "")
            model = fields.get("backbone", fields.get("model", "")) if not part else ""
            g = groups.setdefault((part, str(trunc), str(model)), {"metrics": [], "cand": 0, "ref": 0})
            g["metrics"].append(name)
            g["cand"], g["ref"] = max(g["cand"], cand), max(g["ref"], ref)
    out = []
    for (part, trunc, _), g in groups.items():
        counts = [f"{g['cand']} candidate{'s' * (g['cand'] != 1)}"]
        if g["ref"]:
            counts.append(f"{g['ref']} reference{'s' * (g['ref'] != 1)}")
        encoder = f"the {part} encoder's" if part else "the text encoder's"
        tokens, _, how = trunc.partition(":")
        context = f"{tokens}-token context ({how})" if how else "context"
        keys = f"{part + '_' if part else ''}{CANDIDATES}/{REFERENCES}"
        out.append(f"capeval: {', '.join(g['metrics'])}: cut {' and '.join(counts)} to {encoder} {context}; "
                   f"counts in the extras ({keys})")
    return out


def announce(report: Mapping[str, Any], force: bool = False) -> None:
    """Write :func:`lines` to stderr, unless inside :func:`deferred` (``force``: even there; what
    the one who deferred calls at the end of the run)."""
    if _deferred.get() and not force:
        return
    for line in lines(report):
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
