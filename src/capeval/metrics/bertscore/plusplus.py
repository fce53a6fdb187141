"""BERT-S++'s formulas, model-free (Yi, Deng & Hu, ACL 2020, "Improving Image Captioning
Evaluation by Considering Inter References Variance"), as the official code computes them:
ck0123/improved-bertscore-for-image-captioning-evaluation @ b837055, ``run_metric.py``.

Inputs per sentence: ``emb`` = the unit-normalised hidden states of ``[CLS] t_1 .. t_n [SEP]``
(rows 0..n+1), ``tokens`` = the word pieces ``t_1 .. t_n``. Cosines use the token rows
``emb[1:-1]`` (``sim[:, 1:-1, 1:-1]``). ``thr`` is ``THRESHOLD`` (0.4 in the script).

1. Matches among the references (``matrix_search_mismatch``, l. 52-65, called l. 163-177): ``M[a][b][k]`` is
   whether token k of reference b has a cosine above ``thr`` with some token of reference a
   (the running maximum starts at 0, so an empty reference a matches nothing).
2. Combined reference of base reference i (the ``combine and avoid overlap-combination`` loop,
   l. 186-206): reference i's rows, then for every other reference j in order and each token k
   of j with ``M[i][j][k] = 0``, unless an earlier reference c < j (c != i) has
   ``M[c][j][k] = 1``: the hidden-state row k of j and the word piece ``tokens_j[k]``. The row
   index counts ``[CLS]`` while the token index does not, so the row appended is the one
   before the token (``[CLS]`` for k = 0); and the crop ``[1:-1]`` of the combined rows drops
   the last appended row and keeps reference i's ``[SEP]``. The official code does both; so
   does capeval, since the published numbers come from it.
3. For each column r of the combined reference (label ``labels[r]``, weight ``idf[r]``) and
   the candidate's token rows, ``best_r = max(0, max_g cos(c_g, col_r))``:

   - ``full = sum_{best_r > thr} idf_r best_r / sum_{best_r > thr} idf_r`` (0 when the
     denominator is 0; ``matrix_compute_full``, l. 92-109);
   - ``content`` = the mean of ``best_r > thr`` over the columns and candidate tokens whose
     word piece is not a stop word (0 when none; ``matrix_compute_rm_stop_word``, l. 68-89).

4. Item score = ``sum_i content_i * full_i / K`` over the K references (l. 207-218).

idf: over every caption of the call (references and candidates, each a document:
``get_idf_dict_from_samples``, l. 11-18, 159), ``idf(t) = log((N + 1) / (df(t) + 1))``
(:func:`capeval.metrics.bertscore.formulas.idf_table`), rounded to float32 as the official
``collate_idf_tokenized`` pads it as ``torch.float``. Everything else is float64 here.
"""

from __future__ import annotations

from typing import Collection, Sequence

import numpy as np


def _best(cand_tokens: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``max(0, max_g cos(cand_g, col_r))`` per column (the official maxima start at 0)."""
    if len(cand_tokens) == 0 or len(columns) == 0:
        return np.zeros(len(columns))
    return np.maximum((cand_tokens @ columns.T).max(axis=0), 0.0)


def matched(emb_a: np.ndarray, emb_b: np.ndarray, thr: float) -> np.ndarray:
    """``M[a][b]``: whether each token of sentence b has a token of a with cosine above ``thr``."""
    return _best(emb_a[1:-1], emb_b[1:-1]) > thr


def combine(i: int, embs: Sequence[np.ndarray], tokens: Sequence[Sequence[str]],
            match: Sequence[Sequence[np.ndarray | None]]) -> tuple[np.ndarray, list[str]]:
    """Columns and labels of base reference ``i`` combined with
    the unmatched tokens of the other references (step 2 of the module docstring)."""
    rows = [embs[i]]
    labels = list(tokens[i])
    for j in range(len(embs)):
        if j == i:
            continue
        base = match[i][j]
        assert base is not None
        for k in range(len(tokens[j])):
            if base[k]:
                continue
            if any(match[c][j][k] for c in range(j) if c != i):  # type: ignore[index]
                continue
            rows.append(embs[j][k: k + 1])  # row k: [CLS] is row 0, so this is token k-1's state
            labels.append(tokens[j][k])
    return np.concatenate(rows)[1:-1], labels


def full_recall(cand: np.ndarray, columns: np.ndarray, idf: np.ndarray, thr: float) -> float:
    """idf-weighted mean of the best cosines above ``thr`` (``matrix_compute_full``)."""
    best = _best(cand[1:-1], columns)
    keep = best > thr
    den = float(np.sum(idf[keep]))
    return float(np.sum(best[keep] * idf[keep])) / den if den != 0.0 else 0.0


def content_recall(cand: np.ndarray, cand_tokens: Sequence[str], columns: np.ndarray, labels: Sequence[str],
                   stop: Collection[str], thr: float) -> float:
    """Mean of the best cosines above ``thr`` between non-stop-word columns and non-stop-word
    candidate tokens (``matrix_compute_rm_stop_word``)."""
    c_keep = np.array([t not in stop for t in cand_tokens], dtype=bool).reshape(-1)
    r_keep = np.array([t not in stop for t in labels], dtype=bool).reshape(-1)
    best = _best(cand[1:-1][c_keep], columns[r_keep])
    sel = best[best > thr]
    total = float(np.sum(sel))
    return total / len(sel) if total != 0.0 else 0.0


def item_score(cand: np.ndarray, cand_tokens: Sequence[str], refs: Sequence[np.ndarray],
               ref_tokens: Sequence[Sequence[str]], idf_of: dict[str, float] | None, stop: Collection[str],
               thr: float) -> tuple[float, list[float], list[float]]:
    """BERT-S++ of one candidate against its references: ``(score, full_i, content_i)``.

    ``idf_of`` maps a word piece to its (float32-rounded) idf; None weighs every token 1."""
    k = len(refs)
    match = [[matched(refs[a], refs[b], thr) if a != b else None for b in range(k)] for a in range(k)]
    fulls, contents = [], []
    for i in range(k):
        columns, labels = combine(i, refs, ref_tokens, match)
        idf = np.array([idf_of[t] for t in labels] if idf_of is not None else [1.0] * len(labels), dtype=np.float64)
        fulls.append(full_recall(cand, columns, idf, thr))
        contents.append(content_recall(cand, cand_tokens, columns, labels, stop, thr))
    return sum(c * f for c, f in zip(contents, fulls)) / k, fulls, contents
