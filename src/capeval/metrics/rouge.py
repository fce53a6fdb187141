"""ROUGE-L as the COCO caption evaluation code (pycocoevalcap 1.2) computes it.

Per item: ``P = max_r LCS(c, r) / |c|``, ``R = max_r LCS(c, r) / |r|`` (maxima taken
separately over the references), ``F = (1 + b^2) P R / (R + b^2 P)`` with ``b = 1.2``,
0 when P or R is 0. Tokens are ``caption.split(" ")`` as in the reference code (an empty
caption is one empty token). System score: mean of items. Range [0, 1].
Reference: Lin 2004, ROUGE; Chen et al. 2015.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from capeval.metrics.text import TextChunk, TextScorer
from capeval.result import MetricResult, Signature, item_scores

BETA = 1.2


#: a candidate of at most this many tokens keeps its masks for all its references (bits
#: per distinct word: the masks of a caption of n distinct words take n * n bits)
SHARED_MASKS_MAX = 512


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison & Dix 1986; Hyyro 2004).

    Each token of ``a`` is a bit; one pass over ``b`` with big-integer arithmetic replaces
    the O(|a||b|) dynamic programme, so a 10,000-word caption stays cheap. The bits are
    those of the shorter sequence (LCS is symmetric): with masks over the longer one, a
    100,000-word caption of distinct words took 640 MB (one 100,000-bit mask per word).
    """
    if len(a) > len(b):
        a, b = b, a
    return _lcs_with(token_masks(a), len(a), b)


def token_masks(a: list[str]) -> dict[str, int]:
    """Bit i of ``masks[w]`` set where ``a[i] == w`` (what :func:`lcs_length` builds for ``a``)."""
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    return masks


def _lcs_with(masks: dict[str, int], n: int, b: list[str]) -> int:
    """LCS length of the ``n`` tokens behind ``masks`` (:func:`token_masks`) and ``b``."""
    full = (1 << n) - 1
    v = full
    get = masks.get
    for tok in b:
        m = get(tok)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return n - v.bit_count()


def rouge_l(candidate: str, references: list[str], beta: float = BETA, seen: dict | None = None) -> float:
    """ROUGE-L F of one tokenised candidate against its tokenised references.

    A short candidate's masks are made once and used against every reference (LCS is
    symmetric, so either sequence may carry the bits; same integers). ``seen``: LCS
    lengths of (candidate, reference) pairs met before, looked up for this pair and its
    mirror (in leave-one-out jobs each pair comes once each way) and added to."""
    tok_c = candidate.split(" ")
    nc = len(tok_c)
    cmasks = None
    prec_max = 0.0
    rec_max = 0.0
    for ref in references:
        lcs = None if seen is None else seen.get((ref, candidate))
        if lcs is None:
            tok_r = ref.split(" ")
            if cmasks is None and nc <= SHARED_MASKS_MAX:
                cmasks = token_masks(tok_c)
            lcs = _lcs_with(cmasks, nc, tok_r) if cmasks is not None else lcs_length(tok_r, tok_c)
            if seen is not None:
                seen[(candidate, ref)] = lcs
        p = lcs / float(nc)
        if p > prec_max:
            prec_max = p
        r = lcs / float(ref.count(" ") + 1)  # len(ref.split(" "))
        if r > rec_max:
            rec_max = r
    if prec_max != 0 and rec_max != 0:
        return ((1 + beta**2) * prec_max * rec_max) / float(rec_max + beta**2 * prec_max)
    return 0.0


class RougeL(TextScorer):
    """ROUGE-L (beta 1.2), pycocoevalcap variant."""

    produces: ClassVar[tuple[str, ...]] = ("rouge-l",)

    def __init__(
        self, metrics=None, tokenizer: str = "ptb", beta: float = BETA,
        chunk_size: int | None = None, workers: int | None = None,
    ):
        super().__init__(metrics, tokenizer, chunk_size, workers)
        self.beta = beta

    def score_chunk(self, chunk: TextChunk, corpus: Any) -> np.ndarray:
        """Per-item ROUGE-L of one chunk."""
        beta = self.beta
        seen: dict = {}  # the chunk's pairs: a chunk holds an image's captions together
        return np.array([rouge_l(h, rs, beta, seen) for h, rs in zip(chunk.hyps, chunk.refs)], dtype=np.float64)

    def merge(self, ids: list[str], parts: list[Any], nrefs: str) -> list[MetricResult]:
        scores = np.concatenate(parts) if parts else np.zeros(0)
        system = float(np.mean(scores))
        sig = Signature.build("rouge-l", **self.signature_params(nrefs), beta=self.beta)
        return [MetricResult("rouge-l", system, item_scores(ids, scores), sig)]
