"""PAC-S / PAC-S++ checkpoints trained on a SigLIP backbone (``capeval train pacs``): read, check, merge.

A file holds only the trained tensors (:mod:`capeval.train.pacs_siglip`): LoRA factors
``<module>.lora_A/B`` and, for PAC-S, the heads' parameters by their transformers names; its
safetensors header records ``format`` (:data:`FORMAT`), ``backbone`` (the hub name or folder it
was trained on), ``backbone_sha256`` (capeval's hash of that backbone's weights, as in the
SigLIP backbone's signature), ``model_type`` and ``lora_scaling``. Loading merges every LoRA
pair into its weight as the trainer's forward computes it, ``W + (B @ A).view(W.shape) * s``
(same float32 operations, so the scores equal the trained model's), and copies the heads. A
backbone whose weights differ from the recorded hash is refused. No SigLIP PAC-S weights have
been released (the PAC-S++ journal's Table 8 names none), so these files come from
``capeval train pacs`` only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from capeval.errors import InputError, ResourceError

FORMAT = "capeval-pacs-siglip/1"


def read_meta(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The header of a SigLIP PAC-S checkpoint, or None when ``path`` is not one."""
    p = Path(os.path.expanduser(os.fspath(path)))
    if p.suffix != ".safetensors" or not p.is_file():
        return None
    try:
        from safetensors import safe_open

        with safe_open(str(p), "pt") as f:
            raw = f.metadata() or {}
        meta = {k: json.loads(v) for k, v in raw.items()}
    except Exception:  # noqa: BLE001 - safetensors' SafetensorError derives from Exception only; a broken
        return None    # file is then reported by the CLIP loader's checks, as any other
    return meta if meta.get("format") == FORMAT else None


def load_siglip_checkpoint(path: str | os.PathLike[str], backbone: Any = None, device: str = "cpu") -> Any:
    """A :class:`~capeval.models.clip.siglip.SiglipBackbone` with the checkpoint merged.

    ``backbone``: None (the recorded one), a hub name / folder, or a loaded SiglipBackbone (copied,
    not changed).
    """
    from capeval.models.clip.siglip import SiglipBackbone, is_siglip

    meta = read_meta(path)
    if meta is None:
        raise InputError(f"checkpoint {path}: not a SigLIP PAC-S checkpoint (a .safetensors file that "
                         "`capeval train pacs` writes for a SigLIP backbone)")
    if backbone is None:
        backbone = meta.get("backbone")
    if isinstance(backbone, (str, os.PathLike)):
        if not is_siglip(os.fspath(backbone)):
            raise InputError(f"checkpoint {path} was trained on the SigLIP backbone {meta.get('backbone')}; "
                             f"backbone {os.fspath(backbone)!r} is not a SigLIP model")
        backbone = SiglipBackbone(os.fspath(backbone), device=device)
    elif isinstance(backbone, SiglipBackbone):
        import copy

        backbone = copy.deepcopy(backbone)  # the caller's backbone stays as it was
    else:
        raise InputError(f"checkpoint {path} is a SigLIP PAC-S checkpoint; the backbone {backbone!r} is not SigLIP")
    merge(backbone, path, meta)
    return backbone


def merge(backbone: Any, path: str | os.PathLike[str], meta: dict[str, Any]) -> None:
    """Check ``backbone`` against the header and merge the file's tensors into it (module docstring)."""
    import torch
    from safetensors.torch import load_file

    from capeval.hashing import file_digest

    want, have = meta.get("backbone_sha256"), backbone.signature.get("sha256")
    if backbone.model.config.model_type != meta.get("model_type") or want != have:
        raise InputError(f"checkpoint {path} was trained on {meta.get('backbone')} ({meta.get('model_type')}, "
                         f"weights sha256 {str(want)[:12]}), not on backbone {backbone.name} "
                         f"({backbone.model.config.model_type}, sha256 {str(have)[:12]}): give the backbone it was "
                         "trained on")
    tensors = load_file(os.fspath(path))
    params = dict(backbone.model.named_parameters())
    scale = meta.get("lora_scaling")
    with torch.no_grad():
        for key, value in tensors.items():
            if key.endswith(".lora_B"):
                continue
            if key.endswith(".lora_A"):
                stem = key[: -len("lora_A")]
                w, b = params.get(stem + "weight"), tensors.get(stem + "lora_B")
                if w is None or b is None or scale is None:
                    raise ResourceError(f"checkpoint {path}: LoRA key {key} has no weight {stem}weight, no "
                                        "lora_B or no lora_scaling in this backbone/file")
                w.copy_(w + (b.to(w) @ value.to(w)).view(w.shape) * scale)
            elif key in params and params[key].shape == value.shape:
                params[key].copy_(value)
            else:
                raise ResourceError(f"checkpoint {path}: tensor {key} {tuple(value.shape)} has no counterpart "
                                    "in the backbone")
    lora = (f"merged: rank {meta['lora_rank']}, {meta.get('lora_layers')} layers, scaling {scale}"
            if scale is not None and "lora_rank" in meta else "n/a")
    backbone.signature.update({"checkpoint": os.path.basename(os.fspath(path)), "mode": meta.get("mode"),
                               "loss": meta.get("loss"),
                               "checkpoint_sha256": file_digest(Path(path), "sha256", cached=False),
                               "lora": lora, "run": f"config:{meta.get('config_hash')}"})
