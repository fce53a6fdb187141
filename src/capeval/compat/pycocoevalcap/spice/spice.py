"""``pycocoevalcap.spice.spice.Spice`` (1.2) on capeval's SPICE (:mod:`capeval.metrics.spice`).

Not the same numbers: the original runs SPICE 1.0's jar, which parses captions with
Stanford CoreNLP 3.6.0; capeval's SPICE parses them with spaCy
(:class:`capeval.metrics.spice.parser.SceneGraphParser`) and follows the jar from the
parse on (graphs, merging, WordNet synonym matching, statistics). The result's *layout*
is the original's: ``compute_score(gts, res)`` returns ``(np.float64 mean of the items'
"All" F1, list of per-item dicts)`` over the image ids in sorted order, each dict
``{"All" | "Object" | "Attribute" | "Relation" | "Cardinality" | "Color" | "Size":
{"tp", "fp", "fn", "f", "pr", "re", "numImages": float}}`` (every value a float, NaN
where SPICE writes null, as the original's ``float_convert``). The first ``compute_score``
of a process warns once (:class:`SpiceParserWarning`), naming the result's signature.
Needs the ``spice`` extra (spaCy and its English model); no Java.
Reference: Anderson et al. 2016; pycocoevalcap/spice/spice.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from capeval.compat.pycocoevalcap._common import check_keys, collect, run_chunks

_warned = False


class SpiceParserWarning(UserWarning):
    """capeval.compat's Spice uses capeval's spaCy parser, not SPICE 1.0's CoreNLP."""


class Spice:
    """SPICE with pycocoevalcap 1.2's result layout; the parse is capeval's (see the module docs)."""

    def __init__(self) -> None:
        from capeval.metrics.spice.scorer import Spice as Scorer

        self._scorer = Scorer(tokenizer="none")  # gts/res arrive tokenised, as in the original

    def float_convert(self, obj: Any) -> float:
        """``float(obj)``, NaN where that fails (the original's helper)."""
        try:
            return float(obj)
        except (TypeError, ValueError):
            return np.nan

    def compute_score(self, gts: dict, res: dict) -> tuple[np.float64, list[dict[str, dict[str, float]]]]:
        """(mean SPICE F1, per-item score dicts in sorted image-id order)."""
        global _warned
        ids = check_keys(gts, res, sort=True)
        hyps, refs = collect(ids, gts, res)
        if not _warned:
            counts = sorted({len(r) for r in refs}) or [0]
            nrefs = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
            warnings.warn(
                "capeval.compat.pycocoevalcap Spice parses with spaCy, not SPICE 1.0's CoreNLP 3.6.0: "
                f"scores differ from pycocoevalcap's; signature {self._scorer.signature(nrefs)}",
                SpiceParserWarning,
                stacklevel=2,
            )
            _warned = True
        scorer = self._scorer

        def job(task: tuple[list[str], list[list[str]]]) -> list[dict[str, Any]]:
            from capeval.metrics.text import TextChunk

            return scorer.score_chunk(TextChunk(*task), None)

        per_item = [ev for part in run_chunks(job, hyps, refs) for ev in part]
        scores = [
            {name: {k: self.float_convert(v) for k, v in e.to_dict().items()} for name, e in ev.items()}
            for ev in per_item
        ]
        average_score = np.mean(np.array([s["All"]["f"] for s in scores]))
        return average_score, scores

    def method(self) -> str:
        return "SPICE"
