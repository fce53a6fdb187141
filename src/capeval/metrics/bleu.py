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

import numpy as np

from capeval.functional import BLEU_SMALL as _SMALL
from capeval.functional import BLEU_TINY as _TINY
from capeval.functional import bleu_from_stats as _bleu_from_counts
from capeval.metrics.ngrams import NgramTable
from capeval.metrics.text import TextChunk, TextScorer
from capeval.result import MetricResult, Signature, item_scores


def ngram_counts(words: list[str], n: int) -> Counter:
    """Counts of all 1..n-grams of ``words`` as tuples."""
    counts: Counter = Counter()
    for k in range(1, n + 1):
        counts.update(zip(*(words[j:] for j in range(k))))
    return counts


@lru_cache(maxsize=1 << 12)
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


def table_bleu_stats(table: NgramTable) -> tuple[list[int], list[int], list[list[int]], list[list[int]]]:
    """:func:`bleu_stats` of every item of an n-gram table: ``(testlen, reflen, guess, correct)``.

    Integer counts, so equal to the per-item loop whatever the chunk.
    """
    n = table.n
    n_items = table.n_items
    testlen = table.sent_len[table.hyp_sid]
    # closest reference length, ties to the shorter: least (|l - c|, l) per item
    ref_len = table.sent_len[table.slot_sid]
    key = np.abs(ref_len - testlen[table.slot_item]) * np.int64(1 << 32) + ref_len
    first_slot = np.cumsum(table.ref_counts) - table.ref_counts
    reflen = np.minimum.reduceat(key, first_slot) % np.int64(1 << 32) if n_items else key
    guess = np.maximum(0, testlen[:, None] - np.arange(n, dtype=np.int64)[None, :])
    # clipped matches: per candidate n-gram, min(its count, its max count over the references)
    h_slot, h_ent, r_ent = table.pairs()
    lo = table.ent_ptr[table.hyp_sid]
    per_item = table.ent_ptr[table.hyp_sid + 1] - lo
    item_base = np.cumsum(per_item) - per_item
    item = table.slot_item[h_slot]
    row = item_base[item] + (h_ent - lo[item])
    hit = r_ent >= 0
    best = np.zeros(int(per_item.sum()), dtype=np.int64)
    np.maximum.at(best, row[hit], table.ent_tf[r_ent[hit]])
    h_item, h_ent_all = table.expand(table.hyp_sid, np.arange(n_items, dtype=np.int64))
    clipped = np.minimum(table.ent_tf[h_ent_all], best)
    correct = np.bincount(h_item * n + table.ent_order[h_ent_all], weights=clipped, minlength=n_items * n)
    correct = correct.astype(np.int64).reshape(n_items, n)
    return testlen.tolist(), reflen.tolist(), guess.tolist(), correct.tolist()


def _keeping() -> dict[str, Any] | None:
    """``capeval compare``'s collector of per-item statistics, or None (see :mod:`capeval.significance.keep`)."""
    from capeval.significance.keep import kept

    return kept()


class Bleu(TextScorer):
    """BLEU-1..4 (pycocoevalcap variant). ``metrics`` picks which orders to report."""

    produces: ClassVar[tuple[str, ...]] = ("bleu-1", "bleu-2", "bleu-3", "bleu-4")
    n = 4

    def score_chunk(self, chunk: TextChunk, corpus: Any) -> tuple[np.ndarray, list[int]]:
        """(per-item BLEU-1..4 as an (items, 4) array, summed ``[testlen, reflen, guess.., correct..]``)."""
        n = self.n
        testlen, reflen, guess, correct = table_bleu_stats(chunk.table(n))
        scores = [_bleu_from_counts(t, r, g, c) for t, r, g, c in zip(testlen, reflen, guess, correct)]
        totals = [sum(testlen), sum(reflen)] + [sum(g[k] for g in guess) for k in range(n)]
        totals += [sum(c[k] for c in correct) for k in range(n)]
        out = np.array(scores, dtype=np.float64).reshape(len(testlen), n), totals
        if _keeping() is not None:  # for capeval compare: every item's counts, resamples sum them
            rows = np.column_stack([np.array(testlen, dtype=np.int64), np.array(reflen, dtype=np.int64),
                                    np.array(guess, dtype=np.int64).reshape(-1, n),
                                    np.array(correct, dtype=np.int64).reshape(-1, n)])
            return (*out, rows)
        return out

    def merge(self, ids: list[str], parts: list[Any], nrefs: str) -> list[MetricResult]:
        n = self.n
        kept = _keeping()
        if kept is not None and all(len(p) == 3 for p in parts):
            rows = np.concatenate([p[2] for p in parts]) if parts else np.zeros((0, 2 + 2 * n), dtype=np.int64)
            for name in self.metrics:
                kept[name] = rows
        per_item = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, n))
        tot = [sum(p[1][j] for p in parts) for j in range(2 + 2 * n)]
        tot_test, tot_ref = tot[0], tot[1]
        system = _bleu_from_counts(tot_test, tot_ref, tot[2 : 2 + n], tot[2 + n :])
        params: dict[str, Any] = {**self.signature_params(nrefs), "reflen": "closest", "bp": "corpus", "smooth": "1e-15/1e-9"}
        extras = {"testlen": tot_test, "reflen": tot_ref, "ratio": (tot_test + _TINY) / (tot_ref + _SMALL)}
        out = []
        for k in range(n):
            name = f"bleu-{k + 1}"
            if name in self.metrics:
                out.append(
                    MetricResult(
                        metric=name,
                        system=system[k],
                        items=item_scores(ids, per_item[:, k]),
                        signature=Signature.build(name, **params),
                        extras=extras,
                    )
                )
        return out
