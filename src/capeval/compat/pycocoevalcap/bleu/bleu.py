"""``pycocoevalcap.bleu.bleu.Bleu`` (1.2) on capeval's BLEU (:mod:`capeval.metrics.bleu`).

``compute_score(gts, res, verbose=1)`` returns ``(score, scores)``: ``score`` a list of
``n`` floats (corpus BLEU-1..n: clipped counts and lengths summed over the items, one
brevity penalty with the closest reference length, ties to the shorter), ``scores`` a
list of ``n`` lists of per-item floats in ``gts``'s key order. ``verbose > 0`` prints the
summed statistics and the length ratio as the original does (``verbose > 1`` also each
item's). As in pycocoevalcap 1.2, counts always go up to 4-grams (its ``cook_refs`` /
``cook_test`` are called without ``n``), so ``Bleu(n)`` reports the first ``n`` of BLEU-1..4
(valid range: ``1 <= n <= 4``; larger ``n`` fails in the original with an IndexError).
Reference: Papineni et al. 2002; pycocoevalcap/bleu/bleu_scorer.py.
"""

from __future__ import annotations

from typing import Any

from capeval.compat.pycocoevalcap._common import CompatInputError, check_keys, collect, run_chunks
from capeval.compat.pycocoevalcap._memo import digest, enabled, remember


def _stats(task: tuple[list[str], list[list[str]]]) -> tuple[list[int], list[int], list[list[int]], list[list[int]]]:
    from capeval.metrics.bleu import table_bleu_stats
    from capeval.metrics.text import TextChunk

    return table_bleu_stats(TextChunk(*task).table(4))


def _all_stats(hyps: list[str], refs: list[list[str]]) -> list[Any]:
    """The chunks' statistics; under ``CAPEVAL_AS_PYCOCOEVALCAP`` remembered by content (lmms-eval
    scores the same input with ``Bleu(4)`` once per BLEU order). Read only by the caller."""
    if not enabled():
        return run_chunks(_stats, hyps, refs)
    key = digest((), [t for h, rs in zip(hyps, refs) for t in (h, *rs)], [len(rs) for rs in refs])
    return remember("bleu", key, lambda: run_chunks(_stats, hyps, refs))


class Bleu:
    """BLEU-1..n as pycocoevalcap 1.2 computes it (no Java is involved in either)."""

    def __init__(self, n: int = 4):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 4:
            raise CompatInputError(f"Bleu: n must be an integer in 1..4 (pycocoevalcap counts up to 4-grams), got {n!r}")
        self._n = n
        self._hypo_for_image: dict[Any, Any] = {}
        self.ref_for_image: dict[Any, Any] = {}

    def compute_score(self, gts: dict, res: dict, verbose: int = 1) -> tuple[list[float], list[list[float]]]:
        """(corpus BLEU-1..n, per-item BLEU-1..n lists); see the module docs."""
        from capeval.functional.text import BLEU_SMALL, BLEU_TINY, bleu_from_stats

        n = self._n
        hyps, refs = collect(check_keys(gts, res), gts, res)
        testlen: list[int] = []
        reflen: list[int] = []
        guess: list[list[int]] = []
        correct: list[list[int]] = []
        for t, r, g, c in _all_stats(hyps, refs):
            testlen += t
            reflen += r
            guess += g
            correct += c
        scores: list[list[float]] = [[] for _ in range(n)]
        for i, (t, r, g, c) in enumerate(zip(testlen, reflen, guess, correct)):
            for k, s in enumerate(bleu_from_stats(t, r, g[:n], c[:n])):
                scores[k].append(s)
            if verbose > 1:  # the original prints each item's cooked statistics and reference length
                lens = [len(x.split()) for x in refs[i]]
                print({"reflen": lens, "testlen": t, "guess": g, "correct": c}, r)
        tot_t, tot_r = sum(testlen), sum(reflen)
        tot_g = [sum(g[k] for g in guess) for k in range(n)]
        tot_c = [sum(c[k] for c in correct) for k in range(n)]
        score = bleu_from_stats(tot_t, tot_r, tot_g, tot_c)
        if verbose > 0:
            print({"testlen": tot_t, "reflen": tot_r, "guess": tot_g, "correct": tot_c})
            print("ratio:", (tot_t + BLEU_TINY) / (tot_r + BLEU_SMALL))
        return score, scores

    def method(self) -> str:
        return "Bleu"
