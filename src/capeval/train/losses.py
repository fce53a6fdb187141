"""Contrastive losses for training caption metrics (InfoNCE, van den Oord et al. 2018; SigLIP's sigmoid loss).

BRIDGE (Sarto et al. 2024, Sec. 3.3) trains with "a weighted version of the symmetric InfoNCE
loss, where positive and negative items are weighted according to the number of noun chunks
in each caption"; its supplementary material (Sec. A "Weighted Contrastive Loss", Eq. 5 for
L1 and Eq. 6 for L2) gives the form that :func:`weighted_infonce` computes by default
(``weighting="paper"``). For a batch of N images, image i owning N_i pseudo-captions t*_ij
(N_i counts the pseudo-captions in the batch, as the sums over j = 1..N_i require: in training
at most ``train_chunks`` = 2 of the caption's noun chunks, Sec. 4.1), M = sum_i N_i, targets
x_i (image embeddings v_i for L1, Eq. 5; ground-truth caption embeddings t_i for L2, Eq. 6)
and e(a, b) = exp(cos(a, b) / tau)::

    L = -1/M sum_i sum_j     log( e(x_i, t*_ij) / sum_{k != i} N_k e(x_k, t*_ij) )
        -1/M sum_i sum_j N_i log( e(x_i, t*_ij) / sum_{k != i} sum_h e(x_i, t*_kh) )

The positive is not in either denominator ("we also remove the positive item from the
denominator of each loss component"); negatives of the first term weigh N_k, the second term
N_i; the two terms are added. Without the positive in its denominators the loss is not bounded
below by 0: it turns negative once the positives outweigh their negatives. (The supplementary
writes the second denominator's pseudo-caption as t*_hk with h = 1..N_k; by its own notation
t*_ij, the j-th of image i, that is t*_kh.) An image owning no pseudo-caption (N_k = 0) drops
out of both terms. A batch in which fewer than two images own pseudo-captions has an empty
denominator: an InputError.

``weighting="capeval-v1"`` is capeval's reading before the supplementary was used (capeval
0.1.0's training runs; kept to reproduce them), with s(a, b) = scale * cos(a, b):

- pseudo-caption -> target: cross-entropy of t*_m over the N targets, positive x_{i(m)};
  weighted 1/N_{i(m)}, so every image counts once however many chunks it has;
- target -> pseudo-caption: for image n and each of its own t*_m,
  ``-log exp(s_nm) / (exp(s_nm) + sum_{k: i(k) != n} exp(s_nk) / N_{i(k)})``: the image's other
  pseudo-captions are not its negatives, and the pseudo-captions of another image k count
  1/N_k each (each image once in the denominator); averaged over own t*_m (weights 1/N_n);
- both directions averaged over the images that own pseudo-captions, then halved (symmetric).
  A batch of one image gives 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from capeval.errors import InputError

#: ``weighting`` values of :func:`weighted_infonce`; the first is the default.
WEIGHTINGS = ("paper", "capeval-v1")


def weighted_infonce(pseudo: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor, scale: float | torch.Tensor,
                     weighting: str = "paper") -> torch.Tensor:
    """BRIDGE's weighted contrastive loss (module docstring; supplementary Eq. 5/6).

    ``pseudo`` (M, D) and ``targets`` (N, D): unit rows; ``owner`` (M,): index in ``targets`` of
    each pseudo-caption's image; ``scale`` = 1 / tau > 0; ``weighting``: one of :data:`WEIGHTINGS`.
    """
    if weighting not in WEIGHTINGS:
        raise InputError(f"weighting={weighting!r}: expected one of {', '.join(WEIGHTINGS)}")
    n = targets.shape[0]
    if pseudo.ndim != 2 or targets.ndim != 2 or pseudo.shape[1] != targets.shape[1] or owner.shape != pseudo.shape[:1]:
        raise InputError(f"weighted_infonce: pseudo {tuple(pseudo.shape)}, targets {tuple(targets.shape)} and owner "
                         f"{tuple(owner.shape)} should be (M, D), (N, D) and (M,)")
    if len(owner) and not 0 <= int(owner.min()) <= int(owner.max()) < n:
        raise InputError(f"weighted_infonce: owner indices should lie in 0..{n - 1}")
    if not float(scale) > 0:
        raise InputError(f"weighted_infonce: scale (1 / temperature) should be > 0, got {float(scale)}")
    counts = torch.bincount(owner, minlength=n)
    if weighting == "capeval-v1":
        return _capeval_v1(pseudo, targets, owner, scale, counts)
    images = int((counts > 0).sum())
    if images < 2:
        raise InputError("weighted_infonce: a batch needs pseudo-captions of at least two images (the negatives of "
                         f"supplementary Eq. 5/6), got {images}")
    logits = scale * pseudo @ targets.T  # (M, N): cos(x_k, t*_m) / tau
    own = owner[:, None] == torch.arange(n, device=owner.device)[None, :]
    positive = logits.gather(1, owner[:, None])[:, 0]
    weights = counts.to(logits.dtype)
    # first term: other images k as negatives of t*_m, weighted N_k (N_k = 0: no term)
    to_image = (logits + weights.log()).masked_fill(own | (counts == 0)[None, :], float("-inf")).logsumexp(dim=1)
    # second term: the other images' pseudo-captions as negatives of x_i, one per image column
    to_pseudo = logits.masked_fill(own, float("-inf")).logsumexp(dim=0)  # (N,)
    per_pseudo = (to_image - positive) + weights[owner] * (to_pseudo[owner] - positive)
    return per_pseudo.sum() / len(pseudo)


def _capeval_v1(pseudo: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor, scale: float | torch.Tensor,
                counts: torch.Tensor) -> torch.Tensor:
    """capeval 0.1.0's weighting (module docstring)."""
    n = targets.shape[0]
    logits = scale * pseudo @ targets.T  # (M, N)
    counts = counts.to(logits.dtype)
    weight = 1.0 / counts[owner]  # (M,)
    images = (counts > 0).sum().clamp(min=1)
    to_target = (weight * F.cross_entropy(logits, owner, reduction="none")).sum() / images
    lt = logits.T  # (N, M)
    own = owner[None, :] == torch.arange(n, device=owner.device)[:, None]
    negatives = (lt + weight.log()[None, :]).masked_fill(own, float("-inf"))
    neg_lse = torch.logsumexp(negatives, dim=1, keepdim=True)  # (N, 1); -inf when no negative exists
    ce = torch.logaddexp(lt, neg_lse) - lt
    to_pseudo = (ce * weight[None, :]).masked_fill(~own, 0.0).sum() / images
    return 0.5 * (to_target + to_pseudo)


def infonce(a: torch.Tensor, b: torch.Tensor, scale: float | torch.Tensor, same: torch.Tensor | None = None
            ) -> torch.Tensor:
    """Symmetric InfoNCE between paired unit rows ``a[m]``, ``b[m]`` (M, D); mean over rows.

    ``same`` (M, M) bool marks pairs that are not negatives of each other (e.g. two rows with
    the same prompt text); the diagonal is always the positive.
    """
    logits = scale * a @ b.T
    if same is not None:
        eye = torch.eye(len(a), dtype=torch.bool, device=a.device)
        logits = logits.masked_fill(same & ~eye, float("-inf"))
    target = torch.arange(len(a), device=a.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def sigmoid_pairs(a: torch.Tensor, b: torch.Tensor, scale: float | torch.Tensor, bias: float | torch.Tensor
                  ) -> torch.Tensor:
    """SigLIP's pairwise sigmoid loss (Zhai et al. 2023, Algorithm 1) between paired unit rows (M, D)::

        L = -1/M sum_i sum_j log sigmoid(z_ij (scale * cos(a_i, b_j) + bias)),  z_ii = 1, z_ij = -1 (i != j)
    """
    logits = scale * a @ b.T + bias
    labels = 2 * torch.eye(len(a), dtype=logits.dtype, device=a.device) - 1
    return -F.logsigmoid(labels * logits).sum() / len(a)
