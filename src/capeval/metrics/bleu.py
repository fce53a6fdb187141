"""BLEU-1..4 exactly as the COCO caption evaluation code (pycocoevalcap 1.2) computes it.

Per item: clipped n-gram precisions against the max counts over the references,
``bleu_n = (prod_k (correct_k + 1e-15) / (guess_k + 1e-9)) ** (1/n)``, times the
brevity penalty ``exp(1 - r/c)`` when ``c < r``, with ``r`` the reference length
closest to the candidate length (ties: the shorter). Corpus: the same on the summed
counts and lengths (a corpus brevity penalty, not a mean of item scores). Range [0, 1].
Reference: Papineni et al. 2002; Chen et al. 2015 (COCO caption evaluation).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Any, ClassVar

from capeval.functional import BLEU_SMALL as _SMALL
from capeval.functional import BLEU_TINY as _TINY
from capeval.functional import bleu_from_stats as _bleu_from_counts
from capeval.progress import Progress
from capeval.result import MetricResult, Signature
from capeval.metrics.text import TextScorer


def ngram_counts(words: list[str], n: int) -> Counter:
    """Counts of all 1..n-grams of ``words`` as tuples."""
    counts: Counter = Counter()
    for k in range(1, n + 1):
        counts.update(zip(*(words[j:] for j in range(k))))
    return counts


@lru_cache(maxsize=1 << 17)
def sentence_counts(sentence: str, n: int = 4) -> Counter:
    """Cached :func:`ngram_counts` of a tokenised sentence; shared by BLEU and CIDEr-D.

    The returned Counter is shared: callers must not modify it.
    """
    return ngram_counts(sentence.split(), n)


_RefStats = tuple[list[int], dict[tuple[str, ...], int]]


def reference_stats(refs: list[str], n: int = 4) -> _RefStats:
    """Reference lengths and, per n-gram, its maximum count over the references."""
    max_counts: dict[tuple[str, ...], int] = {}
    reflens = []
    for ref in refs:
        reflens.append(len(ref.split()))
        for gram, c in sentence_counts(ref, n).items():
            if c > max_counts.get(gram, 0):
                max_counts[gram] = c
    return reflens, max_counts


def bleu_stats(
    hyp: str, refs: list[str], n: int = 4, ref_stats: _RefStats | None = None
) -> tuple[int, int, list[int], list[int]]:
    """Sufficient statistics ``(testlen, closest_reflen, guess[n], correct[n])`` of one item."""
    words = hyp.split()
    testlen = len(words)
    reflens, max_counts = ref_stats or reference_stats(refs, n)
    # min over (|l - c|, l) picks the shorter reference on a tie, as the reference code does
    reflen = min((abs(l - testlen), l) for l in reflens)[1]
    guess = [max(0, testlen - k + 1) for k in range(1, n + 1)]
    correct = [0] * n
    for gram, c in sentence_counts(hyp, n).items():
        m = max_counts.get(gram)
        if m:
            correct[len(gram) - 1] += c if c < m else m
    return testlen, reflen, guess, correct


class Bleu(TextScorer):
    """BLEU-1..4 (pycocoevalcap variant). ``metrics`` picks which orders to report."""

    produces: ClassVar[tuple[str, ...]] = ("bleu-1", "bleu-2", "bleu-3", "bleu-4")

    def _compute(self, ids: list[str], hyps: list[str], refs: list[list[str]], progress: Progress) -> list[MetricResult]:
        n = 4
        per_item: list[list[float]] = [[] for _ in range(n)]
        tot_test = 0
        tot_ref = 0
        tot_guess = [0] * n
        tot_correct = [0] * n
        # items often share one reference list (one image, several candidates)
        ref_cache: dict[tuple[str, ...], _RefStats] = {}
        for hyp, rs in zip(hyps, refs):
            key = tuple(rs)
            stats = ref_cache.get(key)
            if stats is None:
                stats = ref_cache[key] = reference_stats(rs, n)
            testlen, reflen, guess, correct = bleu_stats(hyp, rs, n, stats)
            tot_test += testlen
            tot_ref += reflen
            for k in range(n):
                tot_guess[k] += guess[k]
                tot_correct[k] += correct[k]
            for k, s in enumerate(_bleu_from_counts(testlen, reflen, guess, correct)):
                per_item[k].append(s)
            progress.update()
        system = _bleu_from_counts(tot_test, tot_ref, tot_guess, tot_correct)
        params: dict[str, Any] = {**self.signature_params(refs), "reflen": "closest", "bp": "corpus", "smooth": "1e-15/1e-9"}
        extras = {"testlen": tot_test, "reflen": tot_ref, "ratio": (tot_test + _TINY) / (tot_ref + _SMALL)}
        out = []
        for k in range(n):
            name = f"bleu-{k + 1}"
            if name in self.metrics:
                out.append(
                    MetricResult(
                        metric=name,
                        system=system[k],
                        items=dict(zip(ids, per_item[k])),
                        signature=Signature.build(name, **params),
                        extras=extras,
                    )
                )
        return out
