"""The backbone ``capeval train pacs`` fine-tunes: loaded (:func:`load_training_backbone`) or shape only.

CLIP checkpoints by name or path, ``random/<arch>``, and SigLIP / SigLIP 2 hub names or folders
(:mod:`capeval.train.pacs_siglip`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def load_training_backbone(name: str, seed: int = 0) -> Any:
    """A ClipBackbone to fine-tune: a checkpoint name or path (LoRA deltas not merged), or
    ``random/<arch>`` (random weights, toy tokenizer: smoke tests and benchmarks)."""
    from capeval.models.clip.backbone import load_backbone, random_backbone

    if name.startswith("random/"):
        return random_backbone(name.split("/", 1)[1], seed=seed)
    return load_backbone(name, device="cpu", lora="none")


def shape_only_model(name: str) -> nn.Module:
    """The backbone's architecture on the meta device (no memory, no weights read)."""
    from capeval.models.clip.siglip import is_siglip

    if is_siglip(name):
        from capeval.train.pacs_siglip import shape_only

        return shape_only(name)
    from capeval.models.clip import checkpoints as ck
    from capeval.models.clip.model import ARCHITECTURES, CLIP, get_config

    arch = name.split("/", 1)[1] if name.startswith("random/") else name
    if name in ck.CHECKPOINTS:
        arch = ck.CHECKPOINTS[name].arch
    if arch not in ARCHITECTURES:
        from capeval.models.clip.model import clean_state_dict, infer_config

        return_cfg = infer_config(clean_state_dict(ck.read_state_dict(name, trusted=True)))
    else:
        return_cfg = get_config(arch)
    with torch.device("meta"):
        return CLIP(return_cfg)
