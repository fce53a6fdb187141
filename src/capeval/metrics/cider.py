"""CIDEr-D exactly as pycocoevalcap 1.2's ``Cider`` computes it.

For n = 1..4, each sentence becomes a tf-idf vector ``g_n(s) = tf * (log N - log max(1, df))``
with ``df`` the number of items whose references contain the n-gram and ``N`` the number of
items in the evaluated set. Per item:
``CIDEr-D = 10/|R| * sum_r mean_n [ sum min(g_n(c), g_n(r)) g_n(r) / (|g_n(c)| |g_n(r)|)
* exp(-(l_c - l_r)^2 / (2 sigma^2)) ]`` with sigma = 6. As in the reference code the
length ``l`` is the number of *bigrams* of a sentence. System score: mean of items.
Scores depend on the whole evaluated set through ``df``. Range [0, 10] (10 only in
degenerate cases). An item none of whose candidate n-grams occurs in its references scores
0.0, as in the reference code; a set whose references are all empty (e.g. punctuation only,
removed by the PTB step) scores 0.0 everywhere, where pycocoevalcap raises ``ValueError``.
Every sum runs in the reference code's order, so item scores are pycocoevalcap's bit for
bit, and they depend on the other items only through ``df`` and ``N``: scoring in chunks
with ``df`` counted over all references first gives the same numbers.
Reference: Vedantam et al. 2015.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from capeval.io.inputs import normalize_references
from capeval.progress import Progress
from capeval.result import MetricResult, Signature, item_scores
from capeval.metrics.cider_penalty import slot_penalties
from capeval.metrics.ngrams import GramIndex, NgramTable
from capeval.metrics.text import TextChunk, TextScorer


class CiderD(TextScorer):
    """CIDEr-D (n=4, sigma=6, clipping, x10).

    Document frequencies come from the evaluated set itself (pycocoevalcap's behaviour) unless
    :meth:`fit` fixed them from a reference corpus (e.g. the training references of an SCST
    reward): then ``df`` counts the corpus items whose references contain the n-gram and
    ``N`` is the number of corpus items. Fitting on the evaluated references gives exactly
    the unfitted scores.
    """

    produces: ClassVar[tuple[str, ...]] = ("cider-d",)

    def __init__(
        self, metrics=None, tokenizer: str = "ptb", n: int = 4, sigma: float = 6.0,
        chunk_size: int | None = None, workers: int | None = None,
    ):
        super().__init__(metrics, tokenizer, chunk_size, workers)
        self.n = n
        self.sigma = sigma
        self.corpus: CorpusDf | None = None

    def fit(self, references: Mapping[Any, Any] | Sequence[Sequence[str]]) -> "CiderD":
        """Fix the document frequencies from ``references`` (``{id: [ref, ...]}`` or a list of lists)."""
        if not isinstance(references, Mapping):
            references = {str(k): list(v) for k, v in enumerate(references)}
        refs = normalize_references(references)
        ids = list(refs)
        _, refs_tok = self.tokenize(ids, {i: "" for i in ids}, refs)
        self.corpus = CorpusDf.count(refs_tok, self.n)
        return self

    def corpus_order(self) -> int | None:
        """Unfitted, the document frequencies of the whole evaluated set are needed first."""
        return self.n if self.corpus is None else None

    def score_chunk(self, chunk: TextChunk, corpus: Any) -> np.ndarray:
        """Per-item CIDEr-D of one chunk, with the fitted or the whole set's document frequencies."""
        if len(chunk) == 0:
            return np.zeros(0)
        table = chunk.table(self.n)
        if self.corpus is None and _keeping() is not None:  # for capeval compare: what resampling needs, from this pass
            from capeval.significance.cider_arrays import chunk_statistics, table_ids

            gid, df = table_ids(table, corpus)  # df as document_frequencies gives it, and the n-grams' ids
            scores = cider_table_scores(table, df, corpus.n_docs, self.sigma)
            # a later system of a comparison scores on the first one's index (text_share), or in
            # its pass (a joint chunk): the same references in the same chunks, whose (item,
            # n-gram) pairs the first one kept (or its corpus pass: GramIndex.keeps_pairs)
            pairs = chunk.keeps_reference_pairs and not corpus.shared_by_passes and not corpus.keeps_pairs
            return scores, chunk_statistics(table, gid, corpus.n_ids(), self.sigma, pairs=pairs,
                                            refs_token=corpus.token)
        df, n_docs = document_frequencies(table, self.corpus if self.corpus is not None else corpus)
        return cider_table_scores(table, df, n_docs, self.sigma)

    def merge(self, ids: list[str], parts: list[Any], nrefs: str) -> list[MetricResult]:
        kept = _keeping()
        if kept is not None and self.corpus is None:
            kept["cider-d"] = [p[1] for p in parts if isinstance(p, tuple)]
        parts = [p[0] if isinstance(p, tuple) else p for p in parts]
        scores = np.concatenate(parts) if parts else np.zeros(0)
        system = float(np.mean(scores))
        df = "corpus" if self.corpus is None else f"fitted(n={self.corpus.n_docs},sha={self.corpus.digest[:12]})"
        sig = Signature.build("cider-d", **self.signature_params(nrefs), n=self.n, sigma=self.sigma, df=df)
        return [MetricResult("cider-d", system, item_scores(ids, scores), sig)]


def _keeping() -> dict[str, Any] | None:
    """``capeval compare``'s collector of per-item statistics, or None (see :mod:`capeval.significance.keep`)."""
    from capeval.significance.keep import kept

    return kept()


@dataclass(frozen=True)
class CorpusDf:
    """Document frequencies of a reference corpus: n-gram (space-joined tokens) -> items containing it."""

    df: Mapping[str, int]
    n_docs: int
    digest: str

    @classmethod
    def count(cls, refs: Sequence[Sequence[str]], n: int = 4) -> "CorpusDf":
        """Count over tokenised references, one entry of ``refs`` per corpus item."""
        df: Counter = Counter()
        for item_refs in refs:
            grams: set[str] = set()
            for r in item_refs:
                words = r.split()
                for k in range(1, n + 1):
                    grams.update(" ".join(words[j : j + k]) for j in range(len(words) - k + 1))
            df.update(grams)
        blob = "\n".join(f"{g}\t{c}" for g, c in sorted(df.items())).encode()
        return cls(dict(df), len(refs), hashlib.sha256(blob + f"|{len(refs)}".encode()).hexdigest())


def cider_d(
    hyps: list[str], refs: list[list[str]], n: int = 4, sigma: float = 6.0, progress: Progress | None = None,
    corpus: CorpusDf | GramIndex | None = None,
) -> list[float]:
    """Per-item CIDEr-D of tokenised candidates against tokenised references.

    ``corpus``: fixed document frequencies (:meth:`CiderD.fit`, or a :class:`GramIndex`
    counted over the references of a larger set) instead of those of ``refs``.
    See :func:`cider_table_scores`.
    """
    if len(hyps) == 0:
        return []
    table = NgramTable(hyps, refs, n)
    if corpus is None:
        _, grams = table.item_grams()
        df = np.bincount(grams, minlength=int(table.n_grams)).astype(np.float64)
        n_docs = len(hyps)
    else:
        df, n_docs = document_frequencies(table, corpus)
    scores = cider_table_scores(table, df, n_docs, sigma)
    if progress is not None:
        progress.update(len(hyps))
    return scores.tolist()


def document_frequencies(table: NgramTable, corpus: CorpusDf | GramIndex) -> tuple[np.ndarray, int]:
    """(df of every n-gram of ``table`` as floats, number of corpus items) from ``corpus``."""
    if isinstance(corpus, GramIndex):
        return corpus.df_of(table), corpus.n_docs
    get = corpus.df.get
    return np.array([get(t, 0) for t in table.gram_texts()], dtype=np.float64), corpus.n_docs


def _sentence_vectors(table: NgramTable, df: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """(every entry's tf-idf value, every sentence's norm per order): what depends on the
    sentences only, computed once for a table and its views (the views of a joint table share
    its sentences: ``NgramTable.shared_cache``, for the same ``df`` object)."""
    key = ("cider-vectors", id(df), n_docs)
    cached = table.shared_cache.get(key)
    if cached is not None and cached[0] is df:
        return cached[1]
    n = table.n
    n_sent = table.n_sent
    weight = np.log(float(n_docs)) - np.log(np.maximum(1.0, df))
    ent_val = table.ent_tf.astype(np.float64) * weight[table.ent_gram]
    ent_order = table.ent_order
    ent_sent = table.ent_sent
    # pycocoevalcap squares with pow(x, 2) (libm), which differs from x * x in the last bit
    # for about one value in a thousand: square each distinct value the same way
    uniq, inv = np.unique(ent_val, return_inverse=True)
    squares = np.array([v**2 for v in uniq.tolist()], dtype=np.float64)[inv]
    norms = np.sqrt(np.bincount(ent_sent * n + ent_order, weights=squares, minlength=n_sent * n)).reshape(n_sent, n)
    out = (ent_val, norms)
    table.shared_cache[key] = (df, out)  # the df held: its id names no other array meanwhile
    return out


def cider_table_scores(table: NgramTable, df: np.ndarray, n_docs: int, sigma: float = 6.0) -> np.ndarray:
    """CIDEr-D of the items of ``table`` given the document frequency of each of its n-grams.

    Vectorised with numpy: sentences are sparse (sentence, n-gram, tf) tables and the
    clipped products of all (candidate, reference) pairs are gathered in one join. Every
    sum runs in pycocoevalcap's order (a sentence's n-grams by order, then first position;
    an item's references in order) and the length penalty is ``np.e ** x`` as there, so
    the scores are pycocoevalcap's bit for bit, and an item's score does not depend on the
    other items of the chunk (only on ``df`` and ``n_docs``).
    """
    n = table.n
    n_items = table.n_items
    ent_val, norms = _sentence_vectors(table, df, n_docs)
    ent_order = table.ent_order

    # -- clipped dot products of every (candidate, reference) pair -----------------------
    hit_slot, hit_h, hit_r = table.hits()
    vh = ent_val[hit_h]
    vr = ent_val[hit_r]
    contrib = np.minimum(vh, vr) * vr
    n_slots = len(table.slot_sid)
    # np.bincount returns int64 (not float) when it is given no entries at all, which happens
    # when no candidate n-gram occurs in its references anywhere in the set: every score is 0
    val = np.bincount(hit_slot * n + ent_order[hit_h], weights=contrib, minlength=n_slots * n)
    val = val.astype(np.float64, copy=False).reshape(n_slots, n)
    hyp_of_slot = table.hyp_sid[table.slot_item]
    nh = norms[hyp_of_slot]
    nr = norms[table.slot_sid]
    ok = (nh != 0) & (nr != 0)
    val[ok] /= (nh * nr)[ok]
    val *= slot_penalties(table, sigma)[:, None]
    per_item = np.zeros((n_items, n))
    np.add.at(per_item, table.slot_item, val)
    return per_item.mean(axis=1) / table.ref_counts * 10.0
