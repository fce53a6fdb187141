"""``group_baseline``: advantages from per-sample rewards, for GRPO and SCST.

* ``mode="mean"`` (GRPO, Shao et al. 2024 arXiv 2402.03300, section 4.1.2 outcome supervision,
  without the division by the group's standard deviation, as Dr. GRPO, Liu et al. 2025 arXiv
  2503.20783): ``A_i = r_i - mean(r of i's group)``.
* ``mode="loo"`` (the "new SCST" baseline of Luo 2020 arXiv 2003.09971, the leave-one-out mean
  of the other samples of the same image): ``A_i = r_i - (sum of the group - r_i) / (G_i - 1)``;
  a group of one sample gets advantage 0.
* ``mode="greedy"`` (SCST, Rennie et al. 2017): ``A_i = r_i - greedy`` with ``greedy`` the
  reward of the image's greedy (test-time) caption, one per sample ``[B]`` or one per group.

Groups are ``group_size`` consecutive samples (``[B] -> [B / group_size, group_size]``), or the
samples sharing an ``items`` value (any order; found by a sort, no host sync). Nothing syncs.
"""

from __future__ import annotations

from typing import Any

import torch

from capeval.errors import InputError
from capeval.reward.token_grams import check_range

MODES = ("mean", "loo", "greedy")


def _group_ids(items: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(group index in 0..B-1 of every sample, B) from arbitrary item ids, without a host sync."""
    s, p = torch.sort(items, stable=True)
    new = torch.cat([torch.zeros_like(s[:1]), (s[1:] != s[:-1]).long()])
    gid_sorted = new.cumsum(0)
    return torch.empty_like(gid_sorted).scatter_(0, p, gid_sorted), items.shape[0]


def group_baseline(rewards: torch.Tensor, group_size: int | None = None, *, items: torch.Tensor | None = None,
                   mode: str = "mean", greedy: torch.Tensor | None = None) -> torch.Tensor:
    """Advantages ``[B]`` (rewards minus the baseline of each sample's group), on the rewards' device.

    Args:
        rewards: ``[B]`` rewards of the sampled captions.
        group_size: samples per group, consecutive (>= 1, dividing B); or give ``items``.
        items: ``[B]`` group (image) of each sample; samples with equal values form a group.
        mode: ``"mean"`` (GRPO), ``"loo"`` (leave-one-out mean) or ``"greedy"`` (SCST).
        greedy: for ``mode="greedy"``: ``[B]`` baseline per sample, or one per group (``[B /
            group_size]`` with ``group_size``).

    Raises:
        InputError: a bad shape, mode or option.
    """
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise InputError("rewards must be a [B] tensor")
    if mode not in MODES:
        raise InputError(f"option mode={mode!r}: use one of {', '.join(MODES)}")
    b = rewards.shape[0]
    if mode == "greedy":
        if not isinstance(greedy, torch.Tensor) or greedy.dim() != 1:
            raise InputError("mode='greedy' needs greedy= (a [B] or [groups] tensor of greedy-caption rewards)")
        if greedy.shape[0] == b:
            return rewards - greedy.to(rewards)
        if group_size is None or greedy.shape[0] * group_size != b:
            raise InputError(f"greedy= has {greedy.shape[0]} rewards for {b} samples"
                             + ("" if group_size is None else f" in groups of {group_size}"))
        check_range("group_size", group_size)
        return rewards - greedy.to(rewards).repeat_interleave(group_size)
    if greedy is not None:
        raise InputError(f"greedy= is used by mode='greedy' only, not mode={mode!r}")
    if (group_size is None) == (items is None):
        raise InputError("give one of group_size= or items=")
    if group_size is not None:
        check_range("group_size", group_size)
        if b % group_size:
            raise InputError(f"{b} rewards do not split into groups of {group_size}")
        grouped = rewards.view(-1, group_size)
        total = grouped.sum(dim=1, keepdim=True)
        if mode == "mean":
            return (grouped - total / group_size).reshape(b)
        if group_size == 1:
            return torch.zeros_like(rewards)
        return (grouped - (total - grouped) / (group_size - 1)).reshape(b)
    if not isinstance(items, torch.Tensor) or items.shape != rewards.shape:
        raise InputError("items must be a [B] tensor, one group id per reward")
    gid, size = _group_ids(items.to(rewards.device))
    total = torch.zeros(size, dtype=rewards.dtype, device=rewards.device).index_add_(0, gid, rewards)[gid]
    count = torch.zeros(size, dtype=rewards.dtype, device=rewards.device).index_add_(
        0, gid, torch.ones_like(rewards))[gid]
    if mode == "mean":
        return rewards - total / count
    others = count - 1
    return torch.where(others > 0, rewards - (total - rewards) / others.clamp(min=1), 0.0)
