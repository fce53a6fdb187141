"""METEOR 1.5 as the COCO caption evaluation code runs it, in pure Python (no JVM).

``-l en -norm``: exact, stem, synonym and paraphrase matching with the METEOR 1.5
English parameters; per item the best reference's statistics; system score from the
statistics aggregated over all items (not a mean of item scores). Range [0, 1].
Reference: Denkowski & Lavie 2014, Meteor Universal. Resources (paraphrase table,
synonyms, function words) come from the pycocoevalcap 1.2 wheel and are indexed once
under the cache directory (``capeval info`` shows where).
"""

from __future__ import annotations

from typing import ClassVar

from capeval._optional import require
from capeval.progress import Progress
from capeval.result import MetricResult, Signature
from capeval.metrics.text import TextScorer


class Meteor(TextScorer):
    """METEOR 1.5 (en, -norm), numerically as pycocoevalcap's Java wrapper."""

    produces: ClassVar[tuple[str, ...]] = ("meteor",)

    def __init__(
        self, metrics=None, tokenizer: str = "ptb", cache_dir: str | None = None, workers: int | None = None
    ):
        super().__init__(metrics, tokenizer)
        self.workers = workers  # worker processes; None: automatic (see Meteor15.score)
        require("pycocoevalcap", extra="meteor", purpose="METEOR 1.5 resources (no Java is run)")
        from capeval.metrics.meteor import Meteor15

        self._meteor = Meteor15(cache_dir=cache_dir)

    def _compute(self, ids: list[str], hyps: list[str], refs: list[list[str]], progress: Progress) -> list[MetricResult]:
        from capeval.metrics.meteor import corpus_score, pycocoevalcap_fields, segment_score

        # the same '|||' handling as pycocoevalcap's line protocol to the Java process
        fields = [pycocoevalcap_fields(h, rs) for h, rs in zip(hyps, refs)]
        stats = self._meteor.stats_many([f[0] for f in fields], [f[1] for f in fields], workers=self.workers)
        progress.update(len(stats))
        system = corpus_score(stats)
        items = [segment_score(s) for s in stats]
        sig = Signature.build(
            "meteor", **self.signature_params(refs), version_meteor="1.5", lang="en", norm="yes",
            modules="exact,stem,synonym,paraphrase",
        )
        return [MetricResult("meteor", float(system), dict(zip(ids, map(float, items))), sig)]
