"""``pycocoevalcap.rouge.rouge.Rouge`` (1.2) on capeval's ROUGE-L (:mod:`capeval.metrics.rouge`).

``compute_score(gts, res)`` returns ``(np.float64 mean, np.ndarray of per-item scores)`` in
``gts``'s key order; ``calc_score([candidate], refs)`` one item's float. Tokens are
``caption.split(" ")`` as in the original; beta = 1.2. Reference: Lin 2004;
pycocoevalcap/rouge/rouge.py.
"""

from __future__ import annotations

import numpy as np

from capeval.compat.pycocoevalcap._common import CompatInputError, check_keys, collect, run_chunks


class Rouge:
    """ROUGE-L F (beta 1.2) as pycocoevalcap 1.2 computes it."""

    def __init__(self) -> None:
        self.beta = 1.2

    def calc_score(self, candidate: list[str], refs: list[str]) -> float:
        """ROUGE-L of one candidate (a one-element list) against its references."""
        from capeval.metrics.rouge import rouge_l

        if len(candidate) != 1 or len(refs) < 1:
            raise CompatInputError(
                f"Rouge.calc_score needs one candidate and at least one reference, got {len(candidate)} and {len(refs)}"
            )
        return rouge_l(candidate[0], list(refs), self.beta)

    def compute_score(self, gts: dict, res: dict) -> tuple[np.float64, np.ndarray]:
        """(mean ROUGE-L, per-item ROUGE-L array)."""
        from capeval.metrics.rouge import rouge_l

        hyps, refs = collect(check_keys(gts, res), gts, res)
        beta = self.beta

        def job(task: tuple[list[str], list[list[str]]]) -> list[float]:
            return [rouge_l(h, rs, beta) for h, rs in zip(*task)]

        score = [s for part in run_chunks(job, hyps, refs) for s in part]
        return np.mean(np.array(score)), np.array(score)

    def method(self) -> str:
        return "Rouge"
