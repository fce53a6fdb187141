"""METEOR 1.5 as the COCO caption evaluation code runs it, in pure Python (no JVM).

``-l en -norm``: exact, stem, synonym and paraphrase matching with the METEOR 1.5
English parameters; per item the best reference's statistics; system score from the
statistics aggregated over all items (not a mean of item scores). Range [0, 1].
Reference: Denkowski & Lavie 2014, Meteor Universal. Resources (paraphrase table,
synonyms, function words) come from the pycocoevalcap 1.2 wheel and are indexed once
under the cache directory (``capeval info`` shows where).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from capeval._optional import require
from capeval.metrics.text import TextChunk, TextScorer
from capeval.result import MetricResult, Signature, item_scores

if TYPE_CHECKING:  # pragma: no cover
    from capeval.metrics.meteor.stats import MeteorStats


class Meteor(TextScorer):
    """METEOR 1.5 (en, -norm), numerically as pycocoevalcap's Java wrapper.

    ``compiled``: the alignment's beam search compiled with numba (the ``fast`` extra):
    None (default): when numba is installed, a kernel already built ahead of time for any job,
    and from 20,000 items on one built now (once) or numba's JIT; True always, False never;
    the results are the same (see :mod:`capeval.metrics.meteor.jit_align`).
    """

    produces: ClassVar[tuple[str, ...]] = ("meteor",)

    def __init__(
        self, metrics=None, tokenizer: str = "ptb", cache_dir: str | None = None, workers: int | None = None,
        chunk_size: int | None = None, compiled: bool | None = None,
    ):
        super().__init__(metrics, tokenizer, chunk_size, workers)
        require("pycocoevalcap", extra="meteor", purpose="METEOR 1.5 resources (no Java is run)")
        from capeval.metrics.meteor import Meteor15

        self._meteor = Meteor15(cache_dir=cache_dir, compiled=compiled)

    def before_chunks(self, n_items: int) -> None:
        """Start the one-time builds a large job needs beside the corpus pass (the full index,
        the compiled kernel: :mod:`capeval.metrics.meteor.ahead`), then load the compiled beam
        search before any worker is forked; a kernel still being built is not waited for: the
        chunks switch to it once it is built (same results)."""
        self._meteor.start_ahead(n_items)
        self._meteor.use_compiled(n_items, wait=False)

    def score_chunk(self, chunk: TextChunk, corpus: Any) -> tuple[np.ndarray, MeteorStats]:
        """(per-item METEOR, summed statistics) of one chunk."""
        from capeval.metrics.meteor.fast_align import sum_stats

        best = self.item_stats(chunk)
        out = np.array([sc for _, sc in best], dtype=np.float64), sum_stats(st for st, _ in best)
        from capeval.significance.keep import kept

        if kept() is not None:  # for capeval compare: every item's statistics, resamples sum them
            from capeval.significance.statistics import meteor_item_rows

            return (*out, meteor_item_rows([st for st, _ in best]))
        return out

    def item_stats(self, chunk: TextChunk) -> list[tuple[MeteorStats, float]]:
        """Per item: the best reference's statistics and the item's METEOR."""
        from capeval.metrics.meteor import pycocoevalcap_fields

        # the same '|||' handling as pycocoevalcap's line protocol to the Java process
        fields = [pycocoevalcap_fields(h, rs) for h, rs in zip(chunk.hyps, chunk.refs)]
        return self._meteor.best_many([f[0] for f in fields], [f[1] for f in fields])

    def merge(self, ids: list[str], parts: list[Any], nrefs: str) -> list[MetricResult]:
        from capeval.metrics.meteor.stats import add_totals, compute
        from capeval.significance.keep import kept

        from capeval.metrics.meteor import ahead

        ahead.reap()  # the builds started beside the job: waited for (the index is done: it was used)
        keep = kept()
        if keep is not None and all(len(p) == 3 for p in parts):
            keep["meteor"] = np.concatenate([p[2] for p in parts]) if parts else np.zeros((0, 23))
        items = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
        system = compute(add_totals([p[1] for p in parts])).score
        sig = Signature.build(
            "meteor", **self.signature_params(nrefs), version_meteor="1.5", lang="en", norm="yes",
            modules="exact,stem,synonym,paraphrase",
        )
        return [MetricResult("meteor", float(system), item_scores(ids, items), sig)]
