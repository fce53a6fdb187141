"""EMScore (Shi et al., CVPR 2022) from embeddings or similarity matrices, on
:mod:`capeval.metrics.emscore.formulas` (imported, with torch, when a function is called)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from capeval.functional.arrays import is_tensor

if TYPE_CHECKING:  # pragma: no cover
    import torch


class EMScoreParts(NamedTuple):
    """Per-item EMScore quantities of one part (caption vs video, or caption vs references).

    ``precision``/``recall``/``f``: fine-grained matching; ``coarse``: global-embedding
    cosine; ``full``: ``(f + coarse) / 2``. Each has one value per item.
    """

    precision: Any
    recall: Any
    f: Any
    coarse: Any
    full: Any


class EMScoreResult(NamedTuple):
    """EMScore of a batch: the parts computed (``None`` when not asked for) and the score.

    ``score`` is EMScore's headline ``full_F``: ``video.full`` without references,
    ``refs.full`` without video, and ``(video.full + refs.full) / 2`` with both.
    """

    video: EMScoreParts | None
    refs: EMScoreParts | None
    score: Any


def _to_tensor(x: Any) -> torch.Tensor:
    import torch

    return x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(np.asarray(x)))


def _idf_rows(weights: Sequence[Any] | None, rows: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    import torch

    if weights is None:
        return [torch.ones(r.shape[0], dtype=r.dtype, device=r.device) for r in rows]
    out = [_to_tensor(w).to(rows[0].device, rows[0].dtype) for w in weights]
    for w, r in zip(out, rows):
        if w.shape != (r.shape[0],):
            raise ValueError(f"IDF weights of shape {tuple(w.shape)} for a text of {r.shape[0]} tokens")
    return out


def _pair_index(refs: Sequence[Sequence[Any]], n_items: int) -> list[tuple[int, int]]:
    if len(refs) != n_items:
        raise ValueError(f"{len(refs)} reference lists for {n_items} items")
    pairs = [(k, j) for k, rs in enumerate(refs) for j in range(len(rs))]
    empty = [k for k, rs in enumerate(refs) if len(rs) == 0]
    if empty:
        raise ValueError(f"item {empty[0]} has no references")
    return pairs


def _parts(em: Any, p: Any, r: Any, f: Any, coarse: Any) -> EMScoreParts:
    return EMScoreParts(p, r, f, coarse, em.full_score(f, coarse))


def _ref_parts(em: Any, p: Any, r: Any, f: Any, coarse: Any, groups: list[int], n: int) -> EMScoreParts:
    """Element-wise max over each item's references of P, R, F and coarse (as ``EMScorer.score``)."""
    import torch

    g = torch.tensor(groups, device=p.device)
    p, r, f, coarse = (em.group_max(x, g, n) for x in (p, r, f, coarse))
    return _parts(em, p, r, f, coarse)


def _finish(video: EMScoreParts | None, refs: EMScoreParts | None, as_numpy: bool) -> EMScoreResult:
    if video is not None and refs is not None:
        score = (video.full + refs.full) / 2
    else:
        score = (video if video is not None else refs).full  # type: ignore[union-attr]
    if as_numpy:
        def np_(x: Any) -> np.ndarray:
            return x.detach().cpu().numpy()

        video = EMScoreParts(*map(np_, video)) if video is not None else None
        refs = EMScoreParts(*map(np_, refs)) if refs is not None else None
        score = np_(score)
    return EMScoreResult(video, refs, score)


def emscore_from_embeddings(
    cand_tokens: Sequence[Any],
    frames: Sequence[Any] | None = None,
    refs: Sequence[Sequence[Any]] | None = None,
    *,
    cand_idf: Sequence[Any] | None = None,
    ref_idf: Sequence[Sequence[Any]] | None = None,
    normalize: bool = True,
) -> EMScoreResult:
    """EMScore (Shi et al., CVPR 2022) of a batch of items from token and frame embeddings.

    ``cand_tokens[i]``: ``(L_i, D)`` token embeddings of caption ``i`` over ``[SOT]..[EOT]``,
    the last row being ``[EOT]`` (its global embedding); ``frames[i]``: ``(T_i, D)`` frame
    embeddings of its video; ``refs[i]``: list of ``(L_r, D)`` token embeddings of its
    references. ``cand_idf[i]`` ``(L_i,)`` and ``ref_idf[i][r]`` ``(L_r,)``: IDF weight per
    token (``None``: weight 1, the reference code's ``idf=False``; tables:
    :func:`capeval.metrics.emscore.formulas.compute_idf`). ``normalize``: L2-normalise
    every row first (pass ``False`` for embeddings already normalised). Numpy arrays or
    torch tensors; the result is of the kind of ``cand_tokens[0]``. With sim = cosine::

        video:  P = sum_i w_i max_f sim(i, f),  R = mean_f max_i sim(i, f),
                coarse = cos([EOT], L2norm(mean_f frame_f))
        refs:   P = sum_i w_i max_j sim(i, j),  R = sum_j w_j max_i sim(i, j),
                coarse = cos([EOT]_cand, [EOT]_ref); max over references element-wise
        F = 2PR / (P + R) (0 where P + R = 0),  full = (F + coarse) / 2

    with ``w`` the IDF weights normalised per sentence. Each value in [-1, 1]. The score is
    ``full`` of the part given, or the mean of both parts' ``full``. The math is that of
    :mod:`capeval.metrics.emscore.formulas` (``video_match``, ``text_match``,
    ``group_max``, ``full_score``), where the differences from the reference code are
    documented.
    """
    import torch

    from capeval.metrics.emscore import formulas as em

    if frames is None and refs is None:
        raise ValueError("EMScore needs frames, references or both")
    if len(cand_tokens) == 0:
        raise ValueError("no items to score")
    as_numpy = not is_tensor(cand_tokens[0])
    prep = em.l2_normalize if normalize else (lambda x: x)
    cand = [prep(_to_tensor(t)) for t in cand_tokens]
    n = len(cand)
    c_w = _idf_rows(cand_idf, cand)
    video = ref = None
    if frames is not None:
        if len(frames) != n:
            raise ValueError(f"{len(frames)} videos for {n} items")
        fr = [prep(_to_tensor(f).to(cand[0].dtype)) for f in frames]
        tok, tmask = em.pad_stack(cand)
        w, _ = em.pad_stack(c_w)
        fstack, fmask = em.pad_stack(fr)
        m = em.video_match(tok, tmask, w, fstack, fmask)
        coarse = em.cosine(torch.stack([t[-1] for t in cand]), em.video_embedding(fstack, fmask))
        video = _parts(em, m.P, m.R, m.F, coarse)
    if refs is not None:
        pairs = _pair_index(refs, n)
        r_tok = [[prep(_to_tensor(x).to(cand[0].dtype)) for x in rs] for rs in refs]
        r_w = [_idf_rows(ref_idf[k] if ref_idf is not None else None, r_tok[k]) for k in range(n)]
        c_t, c_m = em.pad_stack([cand[k] for k, _ in pairs])
        r_t, r_m = em.pad_stack([r_tok[k][j] for k, j in pairs])
        cw, _ = em.pad_stack([c_w[k] for k, _ in pairs])
        rw, _ = em.pad_stack([r_w[k][j] for k, j in pairs])
        m = em.text_match(c_t, c_m, cw, r_t, r_m, rw)
        coarse = em.cosine(torch.stack([cand[k][-1] for k, _ in pairs]),
                           torch.stack([r_tok[k][j][-1] for k, j in pairs]))
        ref = _ref_parts(em, m.P, m.R, m.F, coarse, [k for k, _ in pairs], n)
    return _finish(video, ref, as_numpy)


def emscore_from_similarities(
    video_sim: Sequence[Any] | None = None,
    video_coarse: Any = None,
    ref_sim: Sequence[Sequence[Any]] | None = None,
    ref_coarse: Sequence[Sequence[float]] | None = None,
    *,
    cand_idf: Sequence[Any] | None = None,
    ref_idf: Sequence[Sequence[Any]] | None = None,
) -> EMScoreResult:
    """EMScore (Shi et al., CVPR 2022) of a batch of items from cosine-similarity matrices.

    ``video_sim[i]``: ``(L_i, T_i)`` cosines of caption ``i``'s tokens (``[SOT]..[EOT]``)
    and its video's frames; ``video_coarse[i]``: cosine of its ``[EOT]`` embedding and the
    video embedding ``L2norm(mean_f frame_f)``. ``ref_sim[i][r]``: ``(L_i, L_r)`` cosines of
    its tokens and those of reference ``r``; ``ref_coarse[i][r]``: cosine of the two
    ``[EOT]`` embeddings. IDF weights as in :func:`emscore_from_embeddings` (``None``:
    weight 1). Formulas, ranges and result as there::

        video:  P = sum_i w_i max_f S_if,  R = mean_f max_i S_if
        refs:   P = sum_i w_i max_j S_ij,  R = sum_j w_j max_i S_ij; max over references
        F = 2PR / (P + R) (0 where P + R = 0),  full = (F + coarse) / 2

    The matrices go through the same code as embeddings (:mod:`capeval.metrics.emscore.formulas`):
    each ``S`` is paired with an identity matrix as the "other side", since ``S @ I = S``
    exactly for finite ``S`` (so the values must be finite).
    """
    import torch

    from capeval.metrics.emscore import formulas as em

    if video_sim is None and ref_sim is None:
        raise ValueError("EMScore needs video similarities, reference similarities or both")
    n = len(video_sim) if video_sim is not None else len(ref_sim)  # type: ignore[arg-type]
    if n == 0:
        raise ValueError("no items to score")
    first = video_sim[0] if video_sim is not None else (ref_sim[0][0] if len(ref_sim[0]) else None)  # type: ignore[index]
    as_numpy = not is_tensor(first)

    def square_up(mats: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Each ``S`` (L, T) zero-padded to (L, T_max), and its "other side" ``eye(T, T_max)``."""
        width = max(s.shape[1] for s in mats)
        padded = [torch.nn.functional.pad(s, (0, width - s.shape[1])) for s in mats]
        return padded, [torch.eye(s.shape[1], width, dtype=s.dtype, device=s.device) for s in mats]

    video = ref = None
    if video_sim is not None:
        if video_coarse is None:
            raise ValueError("video_sim needs video_coarse")
        sims, eyes = square_up([_to_tensor(s) for s in video_sim])
        dtype = sims[0].dtype
        tok, tmask = em.pad_stack(sims)
        eyes, fmask = em.pad_stack(eyes)
        w, _ = em.pad_stack(_idf_rows(cand_idf, sims))
        m = em.video_match(tok, tmask, w, eyes, fmask)
        coarse = _to_tensor(video_coarse).to(dtype).reshape(-1)
        if coarse.shape[0] != n:
            raise ValueError(f"{coarse.shape[0]} coarse similarities for {n} items")
        video = _parts(em, m.P, m.R, m.F, coarse)
    if ref_sim is not None:
        if ref_coarse is None:
            raise ValueError("ref_sim needs ref_coarse")
        pairs = _pair_index(ref_sim, n)
        sims, eyes = square_up([_to_tensor(ref_sim[k][j]) for k, j in pairs])
        dtype = sims[0].dtype
        cw = _idf_rows([cand_idf[k] for k, _ in pairs] if cand_idf is not None else None, sims)
        rw = _idf_rows([ref_idf[k][j] for k, j in pairs] if ref_idf is not None else None, eyes)
        c_t, c_m = em.pad_stack(sims)
        r_t, r_m = em.pad_stack(eyes)
        m = em.text_match(c_t, c_m, em.pad_stack(cw)[0], r_t, r_m, em.pad_stack(rw)[0])
        coarse = torch.stack([_to_tensor(ref_coarse[k][j]).to(dtype).reshape(()) for k, j in pairs])
        ref = _ref_parts(em, m.P, m.R, m.F, coarse, [k for k, _ in pairs], n)
    return _finish(video, ref, as_numpy)
