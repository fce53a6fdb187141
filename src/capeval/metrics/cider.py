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
from capeval.result import MetricResult, Signature
from capeval.metrics.text import TextScorer


class CiderD(TextScorer):
    """CIDEr-D (n=4, sigma=6, clipping, x10).

    Document frequencies come from the evaluated set itself (pycocoevalcap's behaviour) unless
    :meth:`fit` fixed them from a reference corpus (e.g. the training references of an SCST
    reward): then ``df`` counts the corpus items whose references contain the n-gram and
    ``N`` is the number of corpus items. Fitting on the evaluated references gives exactly
    the unfitted scores.
    """

    produces: ClassVar[tuple[str, ...]] = ("cider-d",)

    def __init__(self, metrics=None, tokenizer: str = "ptb", n: int = 4, sigma: float = 6.0):
        super().__init__(metrics, tokenizer)
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

    def _compute(self, ids: list[str], hyps: list[str], refs: list[list[str]], progress: Progress) -> list[MetricResult]:
        scores = cider_d(hyps, refs, self.n, self.sigma, progress, corpus=self.corpus)
        system = float(np.mean(np.array(scores)))
        df = "corpus" if self.corpus is None else f"fitted(n={self.corpus.n_docs},sha={self.corpus.digest[:12]})"
        sig = Signature.build("cider-d", **self.signature_params(refs), n=self.n, sigma=self.sigma, df=df)
        return [MetricResult("cider-d", system, dict(zip(ids, scores)), sig)]


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


def _unique_sorted(x: np.ndarray) -> np.ndarray:
    # np.unique without return_inverse takes a hash path that is ~10x slower on int64 here
    x = np.sort(x)
    keep = np.ones(len(x), dtype=bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def cider_d(
    hyps: list[str], refs: list[list[str]], n: int = 4, sigma: float = 6.0, progress: Progress | None = None,
    corpus: CorpusDf | None = None,
) -> list[float]:
    """Per-item CIDEr-D of tokenised candidates against tokenised references.

    Vectorised with numpy: every n-gram gets an integer id, sentences become sparse
    (sentence, n-gram, tf) tables, and the clipped products of all (candidate, reference)
    pairs are gathered in one join. Equal to the reference loop up to float summation
    order (differences ~1e-15). ``corpus``: fixed document frequencies (:meth:`CiderD.fit`)
    instead of those of ``refs``.
    """
    n_items = len(hyps)
    if n_items == 0:
        return []
    # -- unique sentences and their tokens as integers ------------------------------
    sent_ids: dict[str, int] = {}
    hyp_sid = np.array([sent_ids.setdefault(h, len(sent_ids)) for h in hyps], dtype=np.int64)
    ref_counts_per_item = np.array([len(rs) for rs in refs], dtype=np.int64)
    slot_sid = np.array([sent_ids.setdefault(r, len(sent_ids)) for rs in refs for r in rs], dtype=np.int64)
    slot_item = np.repeat(np.arange(n_items, dtype=np.int64), ref_counts_per_item)
    vocab: dict[str, int] = {}
    words = [s.split() for s in sent_ids]
    lens = np.array([len(w) for w in words], dtype=np.int64)
    flat = np.array([vocab.setdefault(w, len(vocab)) for ws in words for w in ws], dtype=np.int64)
    n_sent = len(words)
    tok_sent = np.repeat(np.arange(n_sent, dtype=np.int64), lens)
    starts = np.cumsum(lens) - lens
    remaining = np.repeat(starts + lens, lens) - np.arange(len(flat), dtype=np.int64)  # tokens left incl. this one
    width = np.int64(len(vocab) + 1)

    # -- n-gram ids: order k extends the (k-1)-gram id at the same start by one word ---
    e_key_parts, e_order_parts, e_first = [], [], []
    prev = flat
    offset = 0
    for k in range(1, n + 1):
        pos = np.nonzero(remaining >= k)[0]
        if k == 1:
            key = flat[pos]
        else:
            key = prev[pos] * width + flat[pos + k - 1]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        e_first.append(pos[first])
        cur = np.full(len(flat), -1, dtype=np.int64)
        cur[pos] = inv
        prev = cur
        e_key_parts.append(tok_sent[pos])  # sentence of each occurrence
        e_order_parts.append((pos, inv + offset))
        offset += len(uniq)
    n_grams = np.int64(offset)
    occ_sent = np.concatenate(e_key_parts)
    occ_gram = np.concatenate([g for _, g in e_order_parts])
    gram_order = np.zeros(n_grams, dtype=np.int64)
    for k, (_, g) in enumerate(e_order_parts):
        gram_order[g] = k
    # (sentence, gram) -> tf; entries sorted by sentence then gram
    ent_key, ent_tf = np.unique(occ_sent * n_grams + occ_gram, return_counts=True)
    ent_sent = ent_key // n_grams
    ent_gram = ent_key % n_grams
    ent_ptr = np.searchsorted(ent_sent, np.arange(n_sent + 1, dtype=np.int64))

    # -- document frequency: items whose references contain the n-gram -----------------
    def expand(sids: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows (owner, entry index) for every entry of each sentence in ``sids``."""
        lo = ent_ptr[sids]
        cnt = ent_ptr[sids + 1] - lo
        rows_owner = np.repeat(owner, cnt)
        base = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        return rows_owner, base + np.arange(int(cnt.sum()), dtype=np.int64)

    if corpus is None:
        r_item, r_ent = expand(slot_sid, slot_item)
        item_gram = _unique_sorted(r_item * n_grams + ent_gram[r_ent])
        df = np.bincount(item_gram % n_grams, minlength=int(n_grams)).astype(np.float64)
        weight = np.log(float(n_items)) - np.log(np.maximum(1.0, df))
    else:
        words_of = list(vocab)
        texts = [" ".join(words_of[t] for t in flat[p : p + k + 1]) for k, starts_k in enumerate(e_first) for p in starts_k]
        df = np.array([corpus.df.get(t, 0) for t in texts], dtype=np.float64)
        weight = np.log(float(corpus.n_docs)) - np.log(np.maximum(1.0, df))

    # -- tf-idf vectors, norms per (sentence, order), lengths in bigrams ---------------
    ent_val = ent_tf.astype(np.float64) * weight[ent_gram]
    ent_order = gram_order[ent_gram]
    norms = np.sqrt(np.bincount(ent_sent * n + ent_order, weights=ent_val * ent_val, minlength=n_sent * n)).reshape(n_sent, n)
    length = np.bincount(ent_sent, weights=np.where(ent_order == 1, ent_tf, 0), minlength=n_sent)

    # -- clipped dot products of every (candidate, reference) pair -----------------------
    n_slots = len(slot_sid)
    slot_ids = np.arange(n_slots, dtype=np.int64)
    h_slot, h_ent = expand(hyp_sid[slot_item], slot_ids)
    look = slot_sid[h_slot] * n_grams + ent_gram[h_ent]
    where = np.searchsorted(ent_key, look)
    where[where >= len(ent_key)] = 0
    hit = ent_key[where] == look
    vh = ent_val[h_ent[hit]]
    vr = ent_val[where[hit]]
    contrib = np.minimum(vh, vr) * vr
    # np.bincount returns int64 (not float) when it is given no entries at all, which happens
    # when no candidate n-gram occurs in its references anywhere in the set: every score is 0
    val = np.bincount(h_slot[hit] * n + ent_order[h_ent[hit]], weights=contrib, minlength=n_slots * n)
    val = val.astype(np.float64, copy=False).reshape(n_slots, n)
    nh = norms[hyp_sid[slot_item]]
    nr = norms[slot_sid]
    ok = (nh != 0) & (nr != 0)
    val[ok] /= (nh * nr)[ok]
    delta = length[hyp_sid[slot_item]] - length[slot_sid]
    val *= np.exp(-(delta**2) / (2 * sigma**2))[:, None]
    per_item = np.zeros((n_items, n))
    np.add.at(per_item, slot_item, val)
    scores = per_item.mean(axis=1) / ref_counts_per_item * 10.0
    if progress is not None:
        progress.update(n_items)
    return scores.tolist()
