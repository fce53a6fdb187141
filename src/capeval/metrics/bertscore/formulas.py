"""BERTScore's formulas, model-free (Zhang et al. 2020, Sec. 3; bert_score 0.3.13, ``utils.py``).

For a candidate x (tokens x_i) and a reference y (tokens y_j), unit-normalised contextual
embeddings and token weights w (1 or idf; the special tokens <s>/</s> weigh 0 but still
take part in the matching, as in ``bert_cos_score_idf``)::

    P = sum_i w(x_i) max_j cos(x_i, y_j) / sum_i w(x_i)
    R = sum_j w(y_j) max_i cos(x_i, y_j) / sum_j w(y_j)
    F = 2 P R / (P + R)            (0 when P + R = 0, as the package's NaN fill)

Several references: P, R and F are each the maximum over the references (``score`` with a
list of lists takes ``max(dim=0)`` column-wise, so the three may come from different
references). Baseline rescaling: ``(s - b) / (1 - b)`` with the baseline ``b`` of the model's
layer (``rescale_baseline/{lang}/{model}.tsv``, one row per layer, columns P, R, F).

idf (``get_idf_dict``): over the M reference sentences of the call (each a document, repeats
counted), ``idf(t) = log((M + 1) / (df(t) + 1))``; a token absent from the references gets
``log(M + 1)``; <s> and </s> are in every document, so they get ``log(1) = 0``.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Sequence

import numpy as np


def idf_table(documents: Iterable[Sequence[int]]) -> tuple[dict[int, float], float]:
    """``({token id: idf}, idf of unseen tokens)`` over ``documents`` (token id lists, one per
    reference sentence; each counted once per document)."""
    df: Counter[int] = Counter()
    n = 0
    for doc in documents:
        df.update(set(doc))
        n += 1
    return {t: math.log((n + 1) / (c + 1)) for t, c in df.items()}, math.log(n + 1)


def token_weights(ids: Sequence[int], idf: tuple[dict[int, float], float] | None,
                  special: frozenset[int]) -> np.ndarray:
    """Per-token weights in float32 (the package pads its idf weights as ``torch.float``):
    idf, or 1 with the special tokens at 0 when ``idf`` is None."""
    if idf is None:
        return np.array([0.0 if t in special else 1.0 for t in ids], dtype=np.float32)
    table, unseen = idf
    return np.array([table.get(t, unseen) for t in ids], dtype=np.float32)


def greedy_match(cand: np.ndarray, ref: np.ndarray, cand_w: np.ndarray, ref_w: np.ndarray) -> tuple[float, float, float]:
    """P, R, F of one pair from unit-normalised embeddings ``cand`` (n x d), ``ref`` (m x d)
    and float32 token weights; the weights are normalised in float32 like the package's."""
    sim = cand @ ref.T
    cw = cand_w / cand_w.sum(dtype=np.float32)
    rw = ref_w / ref_w.sum(dtype=np.float32)
    p = float(np.sum(sim.max(axis=1) * cw.astype(sim.dtype)))
    r = float(np.sum(sim.max(axis=0) * rw.astype(sim.dtype)))
    f = 2 * p * r / (p + r) if p + r != 0 and math.isfinite(p + r) else 0.0
    return p, r, f


def rescale(value: float, baseline: float) -> float:
    """``(value - b) / (1 - b)``: BERTScore's baseline rescaling (Zhang et al. 2020, Sec. 6)."""
    return (value - baseline) / (1 - baseline)
