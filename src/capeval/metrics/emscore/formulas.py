"""EMScore's formulas as pure functions on tensors (no model needed, testable on random data).

EMScore (Shi et al., CVPR 2022, "EMScore: Evaluating Video Captioning via Coarse-Grained and
Fine-Grained Embedding Matching"). What the reference code (ShiYaya/emscore ``utils.py``,
``scorer.py``, ``VATEX-EVAL-demo.py``) actually computes, and what capeval does:

Token features
    The text transformer's outputs at every position after ``ln_final``, times
    ``text_projection``, each L2-normalised. The positions used are ``[SOT]`` through
    ``[EOT]`` *inclusive* (the code's active branch; variants without them are commented
    out). Both special tokens therefore take part as match candidates everywhere (the
    ``[SOT]`` output is the same vector for every caption, since attention is causal);
    their *weights* come from the IDF table below. The normalised ``[EOT]`` vector is the
    caption's global embedding (identical to CLIP's ``encode_text`` output, normalised).
Frame features
    CLIP image embeddings, L2-normalised; the video embedding is
    ``L2norm(mean_f(frame_f))``.
IDF (``get_idf_dict`` plus the fix-up in ``EMScorer.score``)
    Every corpus sentence is tokenised *padded to the context length* and turned into a set
    of ids, so the padding id 0 is counted in every sentence shorter than the context.
    ``idf(t) = log((N + 1) / (df(t) + 1))`` with N the number of corpus sentences
    (duplicates counted). ``[SOT]`` and padding occur in every sentence, so they get 0;
    ids never seen get ``log(N + 1)``. Then ``[EOT]`` (found as the largest id in the table)
    is set to the *plain mean of all table entries*: every distinct id seen in the corpus,
    including padding (0), ``[SOT]`` (0) and ``[EOT]``'s own value before the fix (0) — not a
    df-weighted or per-sentence mean. ``EMScorer.score`` takes the corpus from the
    references whenever it is given any (``idf_corpus = refs if refs else cands``, refs
    flattened per candidate, so a shared reference counts once per candidate) and applies
    that one table to candidate and reference tokens alike, in the reference-free part
    ``EMScore(X,V)`` too; otherwise the candidates. capeval's default (``idf=True``) does the
    same; ``"candidates"``, ``"references"``, ``False`` or a fixed list of sentences choose
    explicitly, and the signature records which (``idf:references(n=...)``). The published
    benchmark numbers use neither: ``VATEX-EVAL-demo.py`` and ``ActivityNet-FOIL_demo.py``
    pass a table built the same way from the dataset's *training* captions (VATEX train;
    ActivityNet Captions train without sentences over 66 words) for every score they print;
    ``capeval bench`` does the same (:mod:`capeval.bench.video_benchmarks`). CLIP's id 0 is also the
    real token ``"!"``, which thus shares the padding's IDF (reproduced, since ids are what
    the table is keyed by). ``idf=False`` in the reference means weight 1 for every id,
    ``[SOT]`` included.
Candidate vs video (``vid_greedy_cos``), sim = cosine(token_i, frame_f)
    ``P = sum_i idf_i max_f sim / sum_i idf_i`` (weights normalised per caption, over
    ``[SOT]..[EOT]``), ``R = mean_f max_i sim`` (unweighted, over all frames, the max over
    ``[SOT]..[EOT]``), ``F = 2PR / (P + R)``; coarse = ``cos(video, [EOT])``.
Candidate vs reference (``refs_greedy_cos``), BERTScore-style
    ``P = sum_i idf_i max_j sim_ij / sum_i idf_i`` over candidate tokens with candidate
    IDF, ``R = sum_j idf_j max_i sim_ij / sum_j idf_j`` over reference tokens with
    reference IDF; coarse = ``cos([EOT]_cand, [EOT]_ref)``. Several references: the
    *element-wise* max over references of P, R, F and coarse separately (F need not come
    from the reference giving the max P).
Scores
    ``full = (F + coarse) / 2`` for each part; with references and video the reference
    averages P, R, F and coarse of both parts, so the final ``full_F`` equals
    ``(full_F(video) + full_F(refs)) / 2``. EMScore's headline number is ``full_F``.

Where capeval differs from the reference code
    * Precision: the reference runs ``clip.load("ViT-B/32")`` on the GPU when there is one,
      i.e. OpenAI's fp16 model (half-precision weights and activations, LayerNorm in fp32),
      and turns only the outputs to fp32; capeval computes in fp32 (on CPU the reference is
      fp32 too). ``benchmarks/video_fp16_vs_fp32.py`` runs OpenAI's own model code in fp16
      and fp32 on the sample clip (random ViT-B/32, weights rounded to fp16 as the released
      checkpoint's; fp16 emulated on the CPU): P, R and coarse move by at most 1.3e-4 (mean
      4e-5), EMScore by at most 1.4e-4 (mean 4e-5) for the 6 of 8 captions whose P + R is not
      near 0; ``F = 2PR/(P+R)`` amplifies the rest, which random weights produce (cosines of
      either sign near 0) and trained CLIP's positive similarities do not. Expect agreement
      with published numbers to about 1e-4 per item, i.e. in the 4th decimal that VATEX-EVAL
      rounds to.
    * Padding: the reference multiplies padded positions' similarities by 0 before taking
      maxima, so a max over a caption shorter than the longest in its batch of 64 (or over
      a video with fewer frames than the longest) is really ``max(0, max)``: batch-dependent.
      capeval takes maxima over real positions only (the paper's formula). The results
      differ only where every similarity in a row is negative, which CLIP features
      practically never produce; :class:`Match.negative_max` flags such items.
    * ``P + R = 0`` gives NaN in the reference; capeval sets F to 0.
    * A text whose IDF weights are all 0 (e.g. the only sentence of a one-sentence IDF
      corpus: every token has df = N) makes the reference's P (or R) 0/0 = NaN; capeval
      weights that text's tokens uniformly instead and counts it (``Match.zero_idf``).
    * Truncation: ``clip.tokenize`` raises for a text over 77 tokens (the reference script
      for ActivityNet drops such corpus sentences beforehand); capeval keeps the first 76
      tokens and ``[EOT]`` and counts the captions cut (``n_truncated``).
    * Frames: decoded with PyAV (rgb24) instead of OpenCV, and resized by capeval's
      preprocessing (PIL bicubic, as CLIP's); the reference VATEX-EVAL numbers use frame
      features the authors extracted beforehand.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

import torch


# -- IDF -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Idf:
    """IDF table over token ids: ``values`` for seen ids, ``default`` for unseen ones."""

    values: Mapping[int, float] = field(default_factory=dict)
    default: float = 1.0
    n_docs: int = 0

    @classmethod
    def uniform(cls) -> "Idf":
        """Weight 1 for every id (the reference's ``idf=False``)."""
        return cls({}, 1.0, 0)

    def weights(self, ids: Sequence[int]) -> list[float]:
        get = self.values.get
        return [get(int(t), self.default) for t in ids]


def compute_idf(
    corpus_ids: Sequence[Sequence[int]],
    *,
    eot_id: int,
    pad_id: int = 0,
    context_length: int = 77,
) -> Idf:
    """EMScore's IDF table from tokenised corpus sentences (each ``[SOT] ... [EOT]``, unpadded).

    ``idf(t) = log((N+1)/(df(t)+1))``; a sentence shorter than ``context_length`` also
    "contains" ``pad_id`` (the reference tokenises padded); unseen ids ``log(N+1)``;
    ``[EOT]`` = mean of all table entries (see the module docs).
    """
    if len(corpus_ids) == 0:
        raise ValueError("the IDF corpus is empty")
    return idf_from_counts(len(corpus_ids), document_counts(corpus_ids, pad_id=pad_id,
                                                             context_length=context_length), eot_id)


def document_counts(corpus_ids: Sequence[Sequence[int]], *, pad_id: int = 0, context_length: int = 77
                    ) -> Counter[int]:
    """``df``: in how many sentences each token id occurs (padding included, as :func:`compute_idf`).

    Counts of consecutive parts of a corpus, added in order (``Counter.update``), equal the
    counts of the whole, key order included: the Ray engine counts shards this way."""
    df: Counter[int] = Counter()
    for ids in corpus_ids:
        seen = {int(t) for t in ids}
        if len(ids) < context_length:
            seen.add(int(pad_id))
        df.update(seen)
    return df


def idf_from_counts(n: int, df: Mapping[int, int], eot_id: int) -> Idf:
    """The table of :func:`compute_idf` from ``n`` sentences and their ``df`` counts."""
    if n <= 0:
        raise ValueError("the IDF corpus is empty")
    values = {t: math.log((n + 1) / (c + 1)) for t, c in df.items()}
    values[int(eot_id)] = sum(values.values()) / len(values)
    return Idf(values, math.log(n + 1), n)


# -- padding helpers -------------------------------------------------------------------------


def pad_stack(rows: Sequence[torch.Tensor], value: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack ``(L_i, ...)`` tensors into ``(B, max L, ...)`` plus a ``(B, max L)`` bool mask."""
    lengths = [r.shape[0] for r in rows]
    longest = max(lengths)
    out = rows[0].new_full((len(rows), longest, *rows[0].shape[1:]), value)
    mask = torch.zeros(len(rows), longest, dtype=torch.bool, device=rows[0].device)
    for k, (r, n) in enumerate(zip(rows, lengths)):
        out[k, :n] = r
        mask[k, :n] = True
    return out, mask


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """``x / ||x||`` along the last dimension (as the reference; no epsilon)."""
    return x / x.norm(dim=-1, keepdim=True)


def video_embedding(frames: torch.Tensor, frame_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``L2norm(mean of the (already normalised) frame embeddings)``: ``(B, T, D) -> (B, D)``."""
    if frame_mask is None:
        return l2_normalize(frames.mean(dim=-2))
    m = frame_mask.to(frames.dtype).unsqueeze(-1)
    return l2_normalize((frames * m).sum(dim=-2) / m.sum(dim=-2))


# -- matching ------------------------------------------------------------------------------


class Match(NamedTuple):
    """Fine-grained matching result per row: P, R, F, plus flags (see the module docs)."""

    P: torch.Tensor
    R: torch.Tensor
    F: torch.Tensor
    negative_max: torch.Tensor  # bool: a row max < 0, where the reference's padding could differ
    zero_idf: torch.Tensor  # bool: weights all 0, replaced by uniform weights


def f_measure(p: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """``2PR/(P+R)``, 0 where ``P + R == 0`` (NaN in the reference)."""
    den = p + r
    safe = torch.where(den == 0, torch.ones_like(den), den)
    return torch.where(den == 0, torch.zeros_like(den), 2 * p * r / safe)


def _normalised_weights(idf: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = idf * mask.to(idf.dtype)
    total = w.sum(dim=1, keepdim=True)
    zero = total.squeeze(1) <= 0
    if bool(zero.any()):
        w = torch.where(zero.unsqueeze(1), mask.to(idf.dtype), w)
        total = w.sum(dim=1, keepdim=True)
    return w / total, zero


def _masked_max(sim: torch.Tensor, valid: torch.Tensor, dim: int) -> torch.Tensor:
    return sim.masked_fill(~valid, float("-inf")).amax(dim=dim)


def video_match(
    tokens: torch.Tensor,
    token_mask: torch.Tensor,
    token_idf: torch.Tensor,
    frames: torch.Tensor,
    frame_mask: torch.Tensor | None = None,
) -> Match:
    """Fine-grained candidate-vs-video matching (EMScore's ``vid_greedy_cos``).

    ``tokens`` ``(B, L, D)`` and ``frames`` ``(B, T, D)`` L2-normalised; ``token_mask``
    ``(B, L)`` bool over ``[SOT]..[EOT]``; ``token_idf`` ``(B, L)``; ``frame_mask`` ``(B, T)``.
    ``P = sum_i w_i max_f sim``, ``R = mean_f max_i sim``, ``F = 2PR/(P+R)``.
    """
    if frame_mask is None:
        frame_mask = torch.ones(frames.shape[:2], dtype=torch.bool, device=frames.device)
    sim = torch.bmm(tokens, frames.transpose(1, 2))  # (B, L, T)
    valid = token_mask.unsqueeze(2) & frame_mask.unsqueeze(1)
    word_p = _masked_max(sim, valid, dim=2).masked_fill(~token_mask, 0.0)  # (B, L)
    word_r = _masked_max(sim, valid, dim=1).masked_fill(~frame_mask, 0.0)  # (B, T)
    w, zero = _normalised_weights(token_idf, token_mask)
    p = (word_p * w).sum(dim=1)
    r = word_r.sum(dim=1) / frame_mask.sum(dim=1).to(word_r.dtype)
    negative = ((word_p < 0) & token_mask).any(dim=1) | ((word_r < 0) & frame_mask).any(dim=1)
    return Match(p, r, f_measure(p, r), negative, zero)


def text_match(
    cand: torch.Tensor,
    cand_mask: torch.Tensor,
    cand_idf: torch.Tensor,
    ref: torch.Tensor,
    ref_mask: torch.Tensor,
    ref_idf: torch.Tensor,
) -> Match:
    """BERTScore-style candidate-vs-reference matching (EMScore's ``refs_greedy_cos``).

    One row per (candidate, reference) pair. ``P = sum_i wc_i max_j sim_ij``,
    ``R = sum_j wr_j max_i sim_ij`` with IDF weights normalised per sentence.
    """
    sim = torch.bmm(cand, ref.transpose(1, 2))  # (B, Lc, Lr)
    valid = cand_mask.unsqueeze(2) & ref_mask.unsqueeze(1)
    word_p = _masked_max(sim, valid, dim=2).masked_fill(~cand_mask, 0.0)
    word_r = _masked_max(sim, valid, dim=1).masked_fill(~ref_mask, 0.0)
    wc, zero_c = _normalised_weights(cand_idf, cand_mask)
    wr, zero_r = _normalised_weights(ref_idf, ref_mask)
    p = (word_p * wc).sum(dim=1)
    r = (word_r * wr).sum(dim=1)
    negative = ((word_p < 0) & cand_mask).any(dim=1) | ((word_r < 0) & ref_mask).any(dim=1)
    return Match(p, r, f_measure(p, r), negative, zero_c | zero_r)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise dot product of L2-normalised vectors: the coarse-grained score."""
    return (a * b).sum(dim=-1)


def group_max(values: torch.Tensor, groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Max of ``values`` within each group id ``0..n_groups-1`` (the max over references)."""
    out = values.new_full((n_groups,), float("-inf"))
    return out.scatter_reduce(0, groups, values, reduce="amax", include_self=True)


def group_any(flags: torch.Tensor, groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    out = torch.zeros(n_groups, dtype=torch.long, device=flags.device)
    return out.scatter_reduce(0, groups, flags.long(), reduce="amax", include_self=True).bool()


def full_score(f: torch.Tensor, coarse: torch.Tensor) -> torch.Tensor:
    """EMScore's fine- and coarse-grained score ``(F + coarse) / 2``."""
    return (f + coarse) / 2
