"""``pycocoevalcap.cider.cider.Cider`` (1.2) on capeval's CIDEr-D (:mod:`capeval.metrics.cider`).

``compute_score(gts, res)`` returns ``(np.float64 mean, np.ndarray of per-item scores)`` in
``gts``'s key order, bit for bit as the original: document frequencies over the evaluated
set's references (``N`` = its number of items), tf-idf of 1..4-grams, clipped cosine with
the Gaussian length penalty (sigma 6), mean over n, divided by the number of references,
times 10. Valid options: ``n == 4`` (pycocoevalcap 1.2 always counts 1..4-grams; another
``n`` crashes or rescales there) and a finite ``sigma > 0``. Where every reference of the
set is empty the original raises ``ValueError`` (``max()`` of no document frequency); so
does the drop-in. Reference: Vedantam et al. 2015; pycocoevalcap/cider/cider_scorer.py.
"""

from __future__ import annotations

import math

import numpy as np

from capeval.compat.pycocoevalcap._common import CompatInputError, check_keys, collect, run_chunks


class Cider:
    """CIDEr-D (n=4, sigma=6) as pycocoevalcap 1.2 computes it."""

    def __init__(self, test: object = None, refs: object = None, n: int = 4, sigma: float = 6.0):
        if isinstance(n, bool) or n != 4:
            raise CompatInputError(f"Cider: n must be 4 (pycocoevalcap 1.2 always counts 1..4-grams), got {n!r}")
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (math.isfinite(sigma) and sigma > 0):
            raise CompatInputError(f"Cider: sigma must be a finite number > 0, got {sigma!r}")
        self._n = n
        self._sigma = float(sigma)

    def compute_score(self, gts: dict, res: dict) -> tuple[np.float64, np.ndarray]:
        """(mean CIDEr-D, per-item CIDEr-D array)."""
        from capeval.metrics.cider import cider_table_scores
        from capeval.metrics.ngrams import GramIndex, NgramTable

        hyps, refs = collect(check_keys(gts, res), gts, res)
        n, sigma = self._n, self._sigma
        corpus = GramIndex(n)

        def count(task: tuple[list[str], list[list[str]]]) -> object:
            return corpus.part(task[1])

        for part in run_chunks(count, hyps, refs):
            corpus.add_part(part)
        if not any(r.split() for rs in refs for r in rs):
            raise CompatInputError("Cider: every reference is empty (pycocoevalcap raises ValueError: max() of no n-gram)")

        def job(task: tuple[list[str], list[list[str]]]) -> np.ndarray:
            table = NgramTable(task[0], task[1], n)
            return cider_table_scores(table, corpus.df_of(table), corpus.n_docs, sigma)

        parts = run_chunks(job, hyps, refs)
        score = np.concatenate(parts) if parts else np.zeros(0)
        return np.mean(score), score

    def method(self) -> str:
        return "CIDEr"
