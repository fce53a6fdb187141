"""Contrastive losses for training caption metrics (InfoNCE, van den Oord et al. 2018).

BRIDGE (Sarto et al. 2024, Sec. 3.3) trains with "a weighted version of the symmetric InfoNCE
loss, where positive and negative items are weighted according to the number of noun chunks
in each caption". The supplementary material with the exact form is not public; capeval's
reading (:func:`weighted_infonce`), for M pseudo-captions t*_m of N images, image i owning
N_i of them, targets x_n (image embeddings v_n for L1, caption embeddings t_n for L2), unit
vectors and s(a, b) = scale * cos(a, b):

- pseudo-caption -> target: cross-entropy of t*_m over the N targets, positive x_{i(m)};
  weighted 1/N_{i(m)}, so every image counts once however many chunks it has;
- target -> pseudo-caption: for image n and each of its own t*_m,
  ``-log exp(s_nm) / (exp(s_nm) + sum_{k: i(k) != n} exp(s_nk) / N_{i(k)})``: the image's other
  pseudo-captions are not its negatives, and the pseudo-captions of another image k count
  1/N_k each (each image once in the denominator); averaged over own t*_m (weights 1/N_n);
- both directions averaged over the images that own pseudo-captions, then halved (symmetric).

Images without pseudo-captions still serve as negatives in the first direction.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def weighted_infonce(pseudo: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor, scale: float | torch.Tensor
                     ) -> torch.Tensor:
    """Weighted symmetric InfoNCE (module docstring): ``pseudo`` (M, D), ``targets`` (N, D) unit rows,
    ``owner`` (M,) = index of each pseudo-caption's image in ``targets``."""
    n = targets.shape[0]
    logits = scale * pseudo @ targets.T  # (M, N)
    counts = torch.bincount(owner, minlength=n).to(logits.dtype)
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
