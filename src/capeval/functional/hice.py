"""HICE-S and RefHICE-S from cosine similarities (Zeng et al., ACM MM 2024, Eq. 2-11). numpy only.

Local matching (Eq. 4-9) works on a similarity matrix ``sim`` of shape ``(N, M)``: rows are
the *evidence* (image regions for lITC, reference phrases for lTTC), columns the candidate's
phrases. With every cosine first clipped at 0 (``max(cos, 0)``, as CLIP-S clips its cosine)::

    P = 1/M * sum_m max_n sim[n, m]      (Eq. 4 / 7: is each candidate phrase supported?)
    R = 1/N * sum_n max_m sim[n, m]      (Eq. 5 / 8: is each region / reference phrase covered?)
    l = hMean(P, R)                      (Eq. 6 / 9)

Global parts are single cosines (Eq. 2-3), clipped the same way; then::

    HICE-S    = w * hMean(gITC, lITC)                 (Eq. 10)
    RefHICE-S = w * hMean(gITC, lITC, gTTC, lTTC)     (Eq. 11)

``hMean(x_1..x_k) = k / sum(1/x_i)``, defined as 0 when any part is 0 (the limit); a NaN part
gives NaN (never a silent 0). The paper has no ``w``; hMean is homogeneous
(``hMean(w a, w b) = w hMean(a, b)``), so ``w`` rescales every part and the score alike and
never changes a ranking; ``w = 1`` gives the paper's formulas on raw cosines. Range [0, w].

Clipping before the max/mean (not after) is capeval's choice: the paper is silent about
negative cosines; clipping each comparison keeps every part in [0, 1] so the harmonic mean
is defined, and matches CLIP-S's ``max(cos, 0)``. Empty sets are the caller's to avoid (the
scorer substitutes the full image for "no region" and the whole caption for "no phrase");
here they raise ``ValueError``. Ties in a max go to the lowest index.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
from numpy.typing import ArrayLike

REF_MODES = ("max", "mean")


class SetMatch(NamedTuple):
    """Precision/recall matching of two embedding sets (Eq. 4-9), on clipped cosines.

    ``precision``/``recall``/``f``: floats in [0, 1] (``f`` = hMean); ``column_best`` (M,):
    each candidate phrase's best clipped cosine and ``column_arg`` (M,) its row; ``row_best``
    (N,) / ``row_arg`` (N,): each region's (reference phrase's) best cosine and column.
    """

    precision: float
    recall: float
    f: float
    column_best: np.ndarray
    column_arg: np.ndarray
    row_best: np.ndarray
    row_arg: np.ndarray


def clipped(cos: ArrayLike) -> np.ndarray:
    """``max(cos, 0)`` element-wise in float64; NaN stays NaN."""
    x = np.asarray(cos, dtype=np.float64)
    return np.where(x < 0, 0.0, x)


def hmean(*parts: ArrayLike) -> np.ndarray:
    """Harmonic mean ``k / sum(1 / x_i)`` of k non-negative parts, element-wise (broadcast).

    0 where any part is 0 (the limit of the formula), NaN where any part is NaN; negative
    parts are refused (clip them first). Range [min(x), max(x)].
    """
    if not parts:
        raise ValueError("hmean needs at least one part")
    arrays = np.broadcast_arrays(*(np.asarray(p, dtype=np.float64) for p in parts))
    stack = np.stack(arrays)
    if np.any(stack < 0):
        raise ValueError("hmean parts must be >= 0 (clip cosines with max(cos, 0) first)")
    nan = np.isnan(stack).any(axis=0)
    zero = (stack == 0).any(axis=0)
    safe = np.where((stack == 0) | np.isnan(stack), 1.0, stack)
    out = len(parts) / np.sum(1.0 / safe, axis=0)
    out = np.where(zero, 0.0, out)
    return np.where(nan, np.nan, out)


def set_match(sim: ArrayLike) -> SetMatch:
    """P, R and their harmonic mean for an ``(N, M)`` cosine matrix (rows: regions or reference
    phrases; columns: candidate phrases), cosines clipped at 0 first. Eq. 4-6 (lITC), 7-9 (lTTC)."""
    s = clipped(sim)
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] == 0:
        raise ValueError(f"set_match needs a non-empty (N, M) matrix, got shape {s.shape}")
    column_arg = np.argmax(s, axis=0)
    row_arg = np.argmax(s, axis=1)
    column_best = s[column_arg, np.arange(s.shape[1])]
    row_best = s[np.arange(s.shape[0]), row_arg]
    p, r = float(column_best.mean()), float(row_best.mean())
    return SetMatch(p, r, float(hmean(p, r)), column_best, column_arg, row_best, row_arg)


def combine_refs(values: ArrayLike, mode: str = "max") -> float:
    """One number from per-reference values: ``"max"`` (RefCLIP-S's rule) or ``"mean"``."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("combine_refs needs at least one reference value")
    if mode == "max":
        return float(np.max(v))
    if mode == "mean":
        return float(np.mean(v))
    raise ValueError(f"reference mode must be one of {', '.join(REF_MODES)}, got {mode!r}")


def hice_s(g_itc: ArrayLike, l_itc: ArrayLike, w: float = 2.5) -> np.ndarray:
    """HICE-S ``w * hMean(max(gITC, 0), lITC)`` (Eq. 10); ``g_itc`` a raw cosine, ``l_itc`` from
    :func:`set_match` (already in [0, 1]). Range [0, w]."""
    return w * hmean(clipped(g_itc), clipped(l_itc))


def ref_hice_s(g_itc: ArrayLike, l_itc: ArrayLike, g_ttc: ArrayLike, l_ttc: ArrayLike, w: float = 2.5) -> np.ndarray:
    """RefHICE-S ``w * hMean(gITC, lITC, gTTC, lTTC)`` of the clipped parts (Eq. 11). Range [0, w]."""
    return w * hmean(clipped(g_itc), clipped(l_itc), clipped(g_ttc), clipped(l_ttc))


def local_ttc(ref_sims: Sequence[ArrayLike], mode: str = "pool") -> float:
    """lTTC (Eq. 7-9) for several references, each given as its ``(M_r, M_c)`` cosine matrix.

    ``"pool"``: one set F_{R_h} of every reference's phrases (rows stacked; the paper's
    notation, and how SPICE pools references; pass each distinct phrase once to avoid
    double weight); ``"max"`` / ``"mean"``: lTTC per reference, then max / mean.
    """
    if not ref_sims:
        raise ValueError("local_ttc needs at least one reference")
    if mode == "pool":
        return set_match(np.vstack([np.asarray(s, dtype=np.float64) for s in ref_sims])).f
    return combine_refs([set_match(s).f for s in ref_sims], mode)
