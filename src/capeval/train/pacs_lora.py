"""Trainable parts of PAC-S / PAC-S++ on capeval's CLIP, and export in the released layouts.

PAC-S (Sarto et al. 2023; journal Table 7 first row): only ``visual.proj`` and
``text_projection`` are trained. PAC-S++ (Sarto et al. 2024, Sec. 4.1): frozen weights plus
LoRA (Hu et al. 2021) of rank r on every residual block's attention q/k/v
(``attn.in_proj_weight``) and output (``attn.out_proj``), MLP ``c_fc`` / ``c_proj`` and the
patch-embedding ``visual.conv1``, in both towers; alpha 1 (scaling alpha / r), dropout 0, as
the released files and pacscore's ``custom_loralib`` (:mod:`capeval.models.clip.lora`).

Each target weight becomes ``W + s * (B @ A).view(W.shape) - offset`` (a
``torch.nn.utils.parametrize`` parametrization; same maths as a separate LoRA branch); conv1
uses loralib's Conv2d shapes A (r*k, 3*k), B (width*k, r*k). Initial factors as pacscore's
layers (``models/custom_loralib/layers.py``, which ``models/clip_lora/model.py`` builds with
``lora=4`` before loading CLIP's weights with ``strict=False``, so the factors keep their
initial values): out_proj, MLP and conv1 (``Linear`` / ``Conv2d``, loralib's) A ~
kaiming-uniform(a=sqrt 5), B = 0; the attention's q/k/v (``MultiheadAttention._reset_parameters``)
A and B both ~ xavier-uniform, so q/k/v start at W + s B A, not at CLIP's W. ``qkv_init="zeros"``
(an option, not the official code) gives q/k/v loralib's initialisation too: training starts
exactly at CLIP.

Export layout (what pacscore loads with ``strict=True`` and capeval's ``load_backbone`` reads):
every base key, plus ``<layer>.lora_A/B`` (attention q/k/v: ``attn.in_proj_weight_lora_A/B``).
Attention and conv1 weights are written *unmerged*: pacscore's attention and conv1 add their
LoRA branch at inference. MLP weights are written *merged* (W + s B A), as loralib's
``Linear.eval()`` leaves them and a checkpoint saved after validation holds them: pacscore
never adds the MLP branch after loading (lora.py), so only merged weights make its
computation, and capeval's default ``lora="effective"``, equal the trained model.
(``lora="all"`` would count the MLP deltas twice on such a file.) ``offset`` makes a loaded
file round-trip bit for bit: for a file's merged MLP weight it is the file's own s B0 A0.

SigLIP backbones (:class:`capeval.train.pacs_siglip.SiglipDual`) name their own targets
(``lora_layers``) and projections (``projection_parameters``) and export their own layout.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from capeval.errors import InputError, ResourceError

from capeval.train.pacs_config import QKV_INITS, TARGETS  # noqa: E402  (kept torch-free there, for the CLI)
PROJECTIONS = ("visual.proj", "text_projection")


class LoraDelta(nn.Module):
    """Parametrization ``W -> W + scaling * (B @ A).view(W.shape) - offset``."""

    def __init__(self, shape: torch.Size, rank: int, scaling: float, fan_in: int, fan_out: int, seed: int,
                 xavier: bool = False):
        """A (rank, fan_in), B (fan_out, rank); ``xavier``: both ~ U(+-sqrt(6 / (rows + columns)))
        (Glorot; pacscore's attention q/k/v), else A ~ U(+-1/sqrt(fan_in)) (kaiming_uniform_ with
        a=sqrt(5), loralib) and B = 0."""
        super().__init__()
        self.shape, self.scaling = tuple(shape), scaling
        gen = torch.Generator().manual_seed(seed)

        def uniform(rows: int, cols: int, bound: float) -> torch.Tensor:
            return (torch.rand(rows, cols, generator=gen) * 2 - 1) * bound

        if xavier:
            self.lora_A = nn.Parameter(uniform(rank, fan_in, math.sqrt(6.0 / (rank + fan_in))))
            self.lora_B = nn.Parameter(uniform(fan_out, rank, math.sqrt(6.0 / (fan_out + rank))))
        else:
            self.lora_A = nn.Parameter(uniform(rank, fan_in, 1.0 / math.sqrt(fan_in)))
            self.lora_B = nn.Parameter(torch.zeros(fan_out, rank))
        self.register_buffer("offset", torch.zeros(()), persistent=False)

    def delta(self) -> torch.Tensor:
        return (self.lora_B @ self.lora_A).view(self.shape) * self.scaling - self.offset

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight + self.delta()


def _layers(model: nn.Module, targets: Iterable[str]) -> list[tuple[str, nn.Module, str, str]]:
    """(export stem, module, parameter name, group) of every LoRA target in ``model``."""
    targets = set(targets)
    unknown = targets - set(TARGETS)
    if unknown:
        raise InputError(f"unknown LoRA targets {sorted(unknown)}; known: {', '.join(TARGETS)}")
    if hasattr(model, "lora_layers"):  # SigLIP (capeval.train.pacs_siglip.SiglipDual)
        return model.lora_layers(targets)
    out = []
    for prefix, tower in (("transformer", model.transformer), ("visual.transformer", model.visual.transformer)):
        for i, block in enumerate(tower.resblocks):
            p = f"{prefix}.resblocks.{i}"
            if "attn" in targets:
                out.append((f"{p}.attn.in_proj_weight_", block.attn, "in_proj_weight", "attention"))
            if "attn_out" in targets:
                out.append((f"{p}.attn.out_proj.", block.attn.out_proj, "weight", "attention"))
            if "mlp" in targets:
                out.append((f"{p}.mlp.c_fc.", block.mlp.c_fc, "weight", "mlp"))
                out.append((f"{p}.mlp.c_proj.", block.mlp.c_proj, "weight", "mlp"))
    if "conv1" in targets:
        out.append(("visual.conv1.", model.visual.conv1, "weight", "conv1"))
    return out


def add_lora(model: nn.Module, rank: int = 4, alpha: float = 1.0, targets: Iterable[str] = TARGETS,
             seed: int = 0, qkv_init: str = "xavier") -> list[LoraDelta]:
    """Freeze ``model`` and parametrize its targets with LoRA factors (the only trainable tensors);
    ``qkv_init``: the q/k/v factors' initialisation (module docstring)."""
    if rank < 1:
        raise InputError(f"LoRA rank must be >= 1, got {rank}")
    if qkv_init not in QKV_INITS:
        raise InputError(f"LoRA qkv_init={qkv_init!r} (known: {', '.join(QKV_INITS)})")
    model.requires_grad_(False)
    deltas = []
    for n, (stem, module, pname, group) in enumerate(_layers(model, targets)):
        w = getattr(module, pname)
        if group == "conv1":
            k = w.shape[-1]
            delta = LoraDelta(w.shape, rank * k, alpha / rank, w.shape[1] * k, w.shape[0] * k, seed + n)
        else:
            xavier = qkv_init == "xavier" and (pname == "in_proj_weight" or group == "qkv")
            delta = LoraDelta(w.shape, rank, alpha / rank, w.shape[1], w.shape[0], seed + n, xavier)
        delta.to(w.device)
        parametrize.register_parametrization(module, pname, delta, unsafe=True)
        module.parametrizations[pname].original.requires_grad_(False)
        delta._capeval = (stem, group)  # type: ignore[attr-defined]
        deltas.append(delta)
    return deltas


def lora_modules(model: nn.Module) -> list[LoraDelta]:
    return [m for m in model.modules() if isinstance(m, LoraDelta)]


def train_projections(model: nn.Module) -> list[nn.Parameter]:
    """PAC-S: freeze everything but ``visual.proj`` and ``text_projection``; return those two."""
    model.requires_grad_(False)
    hook = getattr(model, "projection_parameters", None)  # SigLIP (capeval.train.pacs_siglip.SiglipDual)
    params = hook() if hook else [model.visual.proj, model.text_projection]
    for p in params:
        p.requires_grad_(True)
    return params


def _key(stem: str, ab: str) -> str:
    return f"{stem}lora_{ab}"


def export_state(model: nn.Module, extras: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """The model's state dict in the released layout (module docstring); ``extras`` are re-emitted keys."""
    out: dict[str, torch.Tensor] = {}
    names = {}
    for name, module in model.named_modules():
        for pname, plist in getattr(module, "parametrizations", {}).items():
            names[f"{name}.parametrizations.{pname}.original"] = (f"{name}.{pname}", plist[0], plist.original)
    for key, value in model.state_dict().items():
        if ".parametrizations." not in key:
            out[key] = value.detach().clone()
        elif key in names:
            base, delta, original = names[key]
            stem, group = delta._capeval
            out[base] = (original + delta.delta()).detach() if group == "mlp" else original.detach().clone()
            out[_key(stem, "A")] = delta.lora_A.detach().clone()
            out[_key(stem, "B")] = delta.lora_B.detach().clone()
    out.update({k: v for k, v in (extras or {}).items() if k not in out})
    return out


def import_state(model: nn.Module, state: Mapping[str, torch.Tensor], source: str = "checkpoint"
                 ) -> dict[str, torch.Tensor]:
    """Load a released-layout state dict into a (LoRA-parametrized or plain) model; return unused keys.

    LoRA keys must match the model's LoRA layers (same targets and rank), else ResourceError.
    """
    deltas = {d._capeval[0]: d for d in lora_modules(model)}  # type: ignore[attr-defined]
    lora_keys = {k for k in state if "lora_" in k}
    wanted = {_key(s, ab) for s in deltas for ab in "AB"}
    if lora_keys != wanted:
        missing, extra = sorted(wanted - lora_keys)[:3], sorted(lora_keys - wanted)[:3]
        raise ResourceError(f"{source}: LoRA keys do not match the model's LoRA layers (missing {missing}, "
                            f"unexpected {extra}); check lora_rank/lora_targets")
    plain: dict[str, torch.Tensor] = {}
    layers = {}
    for name, module in model.named_modules():
        for pname, plist in getattr(module, "parametrizations", {}).items():
            layers[f"{name}.{pname}"] = (plist[0], plist.original)
    own = model.state_dict()
    extras = {}
    with torch.no_grad():
        for key, value in state.items():
            if "lora_" in key:
                continue
            if key in layers:
                delta, original = layers[key]
                stem, group = delta._capeval
                delta.lora_A.copy_(state[_key(stem, "A")])
                delta.lora_B.copy_(state[_key(stem, "B")])
                original.copy_(value)
                if group == "mlp":  # the file's weight already holds s B0 A0 (merged)
                    delta.offset = (delta.lora_B @ delta.lora_A).view(delta.shape) * delta.scaling
            elif key in own:
                plain[key] = value
            else:
                extras[key] = value
    missing = [k for k in own if ".parametrizations." not in k and k not in plain]
    if missing:
        raise ResourceError(f"{source}: missing keys {missing[:5]}")
    model.load_state_dict(plain, strict=False)
    return extras


def trainable_names(model: nn.Module) -> list[str]:
    return [n for n, p in model.named_parameters() if p.requires_grad]


def describe_trainable(model: nn.Module) -> dict[str, Any]:
    """Counts for the plan / run record."""
    total = sum(p.numel() for p in model.parameters())
    train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"parameters": total, "trainable": train}
