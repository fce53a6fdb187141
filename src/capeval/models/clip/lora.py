"""LoRA deltas of the PAC-S++ checkpoints, applied the way the official pipeline applies them.

PAC-S++ (Sarto et al. 2024) fine-tunes OpenAI CLIP with LoRA (rank 4, alpha 1 -> scaling
0.25, dropout 0) on both towers: each residual block's attention (q, k, v via
``in_proj_weight_lora_{A,B}``, output via ``out_proj.lora_{A,B}``), the MLP ``c_fc`` and
``c_proj`` (``lora_{A,B}``) and the ViT patch-embedding ``conv1`` (``lora_{A,B}``).

What pacscore actually computes (``models/clip_lora/model.py`` ``build_model`` ->
``model.eval()``; ``compute_correlations_pac++.py`` then ``load_state_dict`` and ``eval()``;
layers in ``models/custom_loralib/layers.py``):

- MLP ``Linear`` layers (``merge_weights=True``): ``build_model`` ends with ``model.eval()``,
  which calls ``train(False)`` on them; they add their (still zero) delta to ``weight`` and
  set ``merged = True``. Loading the checkpoint afterwards replaces ``weight`` and
  ``lora_A/B`` but not the flag, and the second ``eval()`` does nothing, so ``forward``
  uses ``weight`` alone: **the trained MLP deltas are never used.**
- Attention: the custom ``MultiheadAttention`` adds ``(x A^T) B^T * s`` for q, k, v and the
  output projection inside its forward, whatever the mode (``out_proj`` has
  ``merge_weights=False``): **used.**
- ``conv1`` (LoRA ``Conv2d``): its ``train(mode)`` override only ever un-merges, and
  ``Module.eval()`` calls ``train(False)``, not the layer's own ``eval()``; it is never
  merged, so ``forward`` adds ``(B A).view(weight.shape) * s``: **used.**

``lora="effective"`` (default) reproduces this: attention and conv1 deltas, not the MLP
ones. ``lora="all"`` applies every delta: what pacscore computes if the file is loaded
first and ``eval()`` is called afterwards, or in train mode. Whether the file's MLP
``weight`` tensors already hold their deltas depends on the mode the (unreleased) training
code saved them in; a file saved merged would count them twice under ``all``. Comparing a
file's ``mlp.c_fc.weight`` with the base checkpoint's tells which. ``lora="none"`` applies
none. Deltas are merged into the base weights once at load time, ``W + s * B @ A``, which
equals the separate LoRA branch up to float rounding (~1e-7).

``tests/test_upstream_pacscore.py`` checks all three modes against this life cycle rebuilt
from ``loralib.Linear`` (the class pacscore copies) and OpenAI's ``clip/model.py``, and,
given a pacscore checkout in ``CAPEVAL_PACSCORE_SRC``, against pacscore's own modules.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from capeval.errors import ResourceError

MODES = ("effective", "all", "none")
GROUPS = {"effective": ("attention", "conv1"), "all": ("attention", "conv1", "mlp"), "none": ()}


def _target(key: str) -> tuple[str, str] | None:
    """(base weight key, group) for the ``lora_A`` key of a LoRA pair; None if not a LoRA key."""
    if key.endswith(".attn.in_proj_weight_lora_A"):
        return key[: -len("_lora_A")], "attention"
    if key.endswith(".lora_A"):
        stem = key[: -len(".lora_A")]
        if stem.endswith(".attn.out_proj"):
            return stem + ".weight", "attention"
        if stem.endswith((".mlp.c_fc", ".mlp.c_proj")):
            return stem + ".weight", "mlp"
        if stem.endswith("visual.conv1") or stem == "conv1":
            return stem + ".weight", "conv1"
        return stem + ".weight", "unknown"
    return None


def has_lora(state: Mapping[str, Any]) -> bool:
    return any("lora_" in k for k in state)


def apply_lora(state: Mapping[str, torch.Tensor], mode: str = "effective", alpha: float = 1.0,
               source: str = "checkpoint") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Base state dict with the chosen LoRA deltas merged, and a summary for the signature."""
    if mode not in MODES:
        raise ValueError(f"lora must be one of {MODES}, got {mode!r}")
    out = {k: v for k, v in state.items() if "lora_" not in k}
    counts = {"attention": 0, "conv1": 0, "mlp": 0}
    rank = None
    for key in state:
        found = _target(key)
        if found is None:
            continue
        target, group = found
        b_key = key[: -len("A")] + "B"
        if group == "unknown" or b_key not in state or target not in out:
            raise ResourceError(f"{source}: LoRA weights {key} do not match a known layer (expected {b_key} and {target})")
        a, b, w = state[key].float(), state[b_key].float(), out[target].float()
        if group == "conv1":
            k = w.shape[-1]
            r = a.shape[0] // k
            delta = (b @ a).view(w.shape)
        else:
            r = a.shape[0]
            delta = b @ a
        if delta.shape != w.shape:
            raise ResourceError(f"{source}: LoRA delta of {target} has shape {tuple(delta.shape)}, weight {tuple(w.shape)}")
        rank = r
        counts[group] += 1
        if group in GROUPS[mode]:
            out[target] = w + delta * (alpha / r)
    info = {"mode": mode, "rank": rank, "alpha": alpha, "applied": list(GROUPS[mode]), "layers": counts}
    return out, info


def describe(info: Mapping[str, Any] | None) -> str:
    """Short signature value, e.g. ``effective(attention+conv1;r4;a1)``."""
    if not info:
        return "none"
    applied = "+".join(info["applied"]) or "no-deltas"
    alpha = info["alpha"]
    return f"{info['mode']}({applied};r{info['rank']};a{alpha:g})"
