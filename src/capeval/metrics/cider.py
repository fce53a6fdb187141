"""CIDEr-D exactly as pycocoevalcap 1.2's ``Cider`` computes it.

For n = 1..4, each sentence becomes a tf-idf vector ``g_n(s) = tf * (log N - log max(1, df))``
with ``df`` the number of items whose references contain the n-gram and ``N`` the number of
items in the evaluated set. Per item:
``CIDEr-D = 10/|R| * sum_r mean_n [ sum min(g_n(c), g_n(r)) g_n(r) / (|g_n(c)| |g_n(r)|)
* exp(-(l_c - l_r)^2 / (2 sigma^2)) ]`` with sigma = 6. As in the reference code the
length ``l`` is the number of *bigrams* of a sentence. System score: mean of items.
Scores depend on the whole evaluated set through ``df``. Range [0, 10] (10 only in
degenerate cases). Reference: Vedantam et al. 2015.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import ClassVar

import numpy as np

from capeval.metrics.bleu import sentence_counts
from capeval.progress import Progress
from capeval.result import MetricResult, Signature
from capeval.scorer import TextScorer

_Vec = tuple[list[dict[tuple[str, ...], float]], list[float], int]


class CiderD(TextScorer):
    """CIDEr-D (n=4, sigma=6, clipping, x10), document frequency over the evaluated set."""

    produces: ClassVar[tuple[str, ...]] = ("cider-d",)

    def __init__(self, metrics=None, tokenizer: str = "ptb", n: int = 4, sigma: float = 6.0):
        super().__init__(metrics, tokenizer)
        self.n = n
        self.sigma = sigma

    def _compute(self, ids: list[str], hyps: list[str], refs: list[list[str]], progress: Progress) -> list[MetricResult]:
        scores = cider_d(hyps, refs, self.n, self.sigma, progress)
        system = float(np.mean(np.array(scores)))
        sig = Signature.build("cider-d", **self.signature_params(refs), n=self.n, sigma=self.sigma, df="corpus")
        return [MetricResult("cider-d", system, dict(zip(ids, scores)), sig)]


def cider_d(
    hyps: list[str], refs: list[list[str]], n: int = 4, sigma: float = 6.0, progress: Progress | None = None
) -> list[float]:
    """Per-item CIDEr-D of tokenised candidates against tokenised references."""
    ref_counts = [[sentence_counts(r, n) for r in rs] for rs in refs]
    df: Counter = Counter()
    for counts in ref_counts:
        df.update({g for c in counts for g in c})
    log_n = math.log(float(len(refs)))
    log_df: dict[tuple[str, ...], float] = {}

    def to_vec(counts: Counter) -> _Vec:
        vec: list[dict[tuple[str, ...], float]] = [{} for _ in range(n)]
        norm = [0.0] * n
        length = 0
        for gram, tf in counts.items():
            k = len(gram) - 1
            w = log_df.get(gram)
            if w is None:
                w = log_df[gram] = log_n - math.log(max(1.0, df.get(gram, 0)))
            v = float(tf) * w
            vec[k][gram] = v
            norm[k] += v * v
            if k == 1:
                length += tf  # the reference code measures length in bigrams
        return vec, [math.sqrt(x) for x in norm], length

    vec_cache: dict[int, _Vec] = {}

    def ref_vec(counts: Counter) -> _Vec:
        # keyed by identity: equal reference strings share one cached Counter
        v = vec_cache.get(id(counts))
        if v is None:
            v = vec_cache[id(counts)] = to_vec(counts)
        return v

    denom = 2 * sigma**2
    scores: list[float] = []
    for hyp, counts in zip(hyps, ref_counts):
        vec_h, norm_h, len_h = to_vec(sentence_counts(hyp, n))
        total = [0.0] * n
        for rc in counts:
            vec_r, norm_r, len_r = ref_vec(rc)
            delta = float(len_h - len_r)
            penalty = math.exp(-(delta**2) / denom)
            for k in range(n):
                vr = vec_r[k]
                val = 0.0
                vh_k = vec_h[k]
                # only shared n-grams contribute; the key intersection runs in C
                for gram in vh_k.keys() & vr.keys():
                    vh = vh_k[gram]
                    r = vr[gram]
                    val += (vh if vh < r else r) * r
                if norm_h[k] != 0 and norm_r[k] != 0:
                    val /= norm_h[k] * norm_r[k]
                total[k] += val * penalty
        scores.append(float(np.mean(total)) / len(counts) * 10.0)
        if progress is not None:
            progress.update()
    return scores
