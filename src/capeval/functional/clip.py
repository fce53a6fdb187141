"""CLIP-S, PAC-S and PAC-S++ and their reference-based variants from cosines (Hessel et al. 2021)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from capeval.functional.arrays import as_array, is_tensor


def clip_s(cos: ArrayLike, w: float = 2.5) -> Any:
    """CLIP-S ``w * max(cos, 0)`` element-wise, from the cosine of caption and image embeddings.

    Range [0, w]. ``w`` = 2.5 for CLIP-S (Hessel et al. 2021, CLIPScore), 2.0 for PAC-S
    (Sarto et al. 2023) and, in the released code, PAC-S++ (Sarto et al. 2024). Numpy in,
    numpy out (the dtype of ``cos`` is kept when ``w`` is a Python number); tensor in,
    tensor out. NaN stays NaN.
    """
    cos = as_array(cos)
    if is_tensor(cos):
        return w * cos.clamp(min=0)
    return w * np.clip(cos, 0, None)


def positive_part(x: ArrayLike) -> Any:
    """``max(x, 0)`` element-wise, with NaN and -0.0 mapped to +0.0 (as Python's ``max(0.0, x)``).

    RefCLIP-S clamps the best reference cosine with it (Hessel et al. 2021, eq. 2). Range
    [0, inf).
    """
    x = as_array(x)
    if is_tensor(x):
        return x.where(x > 0, x.new_zeros(()))
    return np.where(x > 0, x, 0.0)


def harmonic_mean(a: ArrayLike, b: ArrayLike) -> Any:
    """``2ab / (a + b)`` element-wise, and 0 where ``a + b`` is not positive (0 or NaN).

    For non-negative ``a`` and ``b`` (both RefCLIP-S parts are clamped at 0) the result lies
    in [min(a, b), max(a, b)] and is 0 exactly where ``a + b == 0``, where the reference
    code (clipscore, pacscore) divides 0 by 0. RefCLIP-S combines the CLIP-S score and the
    clamped reference similarity this way (Hessel et al. 2021).
    """
    a, b = as_array(a), as_array(b)
    denom = a + b
    if is_tensor(denom):
        import torch

        ok = denom > 0
        return torch.where(ok, 2 * a * b / torch.where(ok, denom, torch.ones_like(denom)), torch.zeros_like(denom))
    return np.where(denom > 0, 2 * a * b / np.where(denom > 0, denom, 1), 0.0)


def ref_clip_s(cos_image: ArrayLike, cos_refs_max: ArrayLike, w: float = 2.5) -> Any:
    """RefCLIP-S ``H(clip_s(cos_image, w), max(cos_refs_max, 0))`` with ``H`` the harmonic mean.

    ``cos_image``: cosine of caption and image embeddings; ``cos_refs_max``: the largest
    cosine of the caption's and its references' text embeddings. Range [0, w); 0 when both
    parts are 0 (NaN in the reference code). Same ``w`` as :func:`clip_s` (RefPAC-S,
    RefPAC-S++ alike). Reference: Hessel et al. 2021, CLIPScore, eq. 2.
    """
    return harmonic_mean(clip_s(cos_image, w), positive_part(cos_refs_max))
