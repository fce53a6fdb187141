"""The pieces of a LLaVA-1.5 LoRA release in LLaVA's own format (haotian-liu/LLaVA), read and
merged tensor by tensor, and LLaVA's parameter names mapped to the llava-hf layout.

Merge, as LLaVA ``scripts/merge_lora_weights.py`` runs it (``llava/model/builder.py``,
``load_pretrained_model`` with a ``model_base``): the base ``LlavaLlamaForCausalLM`` in float16
(on the CPU: ``device_map='cpu'``); ``non_lora_trainables.bin`` loaded over it with
``strict=False`` after stripping ``base_model.`` and then, when keys start ``model.model.``,
one ``model.`` (keys that match no parameter are ignored there, listed here); then peft's
``merge_and_unload`` with its default settings: for every LoRA pair ``W += scaling * (B @ A)``
with the adapter in float32 (``autocast_adapter_dtype=True``), so the sum is taken in float32
and rounded once to float16 (peft ``lora.Linear.merge`` / ``get_delta_weight``),
``scaling = lora_alpha / r`` (``lora_alpha / sqrt(r)`` with ``use_rslora``).

Names, as transformers' ``models/llava/convert_llava_weights_to_hf.py`` maps them
(``KEYS_TO_MODIFY_MAPPING``, applied in order; ``.inv_freq`` buffers dropped): ``model.X`` of the
language model -> ``language_model.model.X``, ``lm_head`` -> ``language_model.lm_head``,
``model.mm_projector.{0,2}`` -> ``multi_modal_projector.linear_{1,2}``, the CLIP vision tower
``model.vision_tower.vision_tower.vision_model.X`` -> ``vision_tower.vision_model.X`` (the layout
of the published ``llava-hf/llava-1.5-*-hf`` folders, which transformers and vLLM load).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

from capeval.errors import ResourceError

#: transformers convert_llava_weights_to_hf.py KEYS_TO_MODIFY_MAPPING (order matters)
KEYS_TO_MODIFY = (
    ("model.vision_tower.", ""),
    ("model.mm_projector", "multi_modal_projector"),
    ("model", "model.model"),
    ("vision_model.model", "vision_model"),
    ("lm_head", "language_model.lm_head"),
    ("model.model", "language_model.model"),
    ("multi_modal_projector.0", "multi_modal_projector.linear_1"),
    ("multi_modal_projector.2", "multi_modal_projector.linear_2"),
)
LORA_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
_PEFT_PREFIX = "base_model.model."


def hf_name(key: str) -> str:
    """The llava-hf name of LLaVA parameter ``key`` (the conversion script's substitutions)."""
    for old, new in KEYS_TO_MODIFY:
        if old in key:
            key = key.replace(old, new)
    return key


def _load_file(path: Path) -> dict[str, Any]:
    """A state dict from a ``.safetensors`` or torch pickle file (tensors only, memory-mapped)."""
    import torch

    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # an old (non-zip) pickle cannot be memory-mapped
        return torch.load(str(path), map_location="cpu", weights_only=True)


def read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise ResourceError(f"{what}: missing file {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ResourceError(f"{what}: {path} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ResourceError(f"{what}: {path} is not a JSON object")
    return data


def base_shards(folder: Path) -> list[Path]:
    """The weight files of LLaVA's base checkpoint folder, in the order of its index file."""
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            names = sorted(set(read_json(folder / index, "base checkpoint").get("weight_map", {}).values()))
            missing = [n for n in names if not (folder / n).is_file()]
            if missing or not names:
                raise ResourceError(f"base checkpoint: missing file {folder / (missing[0] if missing else index)}")
            return [folder / n for n in names]
    for single in ("model.safetensors", "pytorch_model.bin"):
        if (folder / single).is_file():
            return [folder / single]
    raise ResourceError(f"base checkpoint: missing file {folder / 'pytorch_model.bin.index.json'} "
                        "(or model.safetensors.index.json / a single weights file)")


def iter_base(folder: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``(shard, state dict)`` per shard of the base checkpoint, one shard in memory at a time."""
    for shard in base_shards(folder):
        yield shard, _load_file(shard)


class Lora:
    """A LoRA folder of LLaVA's training: ``adapter_config.json``, ``adapter_model.{safetensors,bin}``
    (peft names ``base_model.model.<module>.lora_{A,B}.weight``), ``non_lora_trainables.bin``."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.config = read_json(folder / "adapter_config.json", "LoRA")
        self.weights_file = next((folder / n for n in LORA_WEIGHTS if (folder / n).is_file()), None)
        if self.weights_file is None:
            raise ResourceError(f"LoRA: missing file {folder / LORA_WEIGHTS[1]} (or {LORA_WEIGHTS[0]})")
        self.trainables_file = folder / "non_lora_trainables.bin"
        if not self.trainables_file.is_file():
            raise ResourceError(f"LoRA: missing file {self.trainables_file}")
        cfg = self.config
        if cfg.get("peft_type", "LORA") != "LORA":
            raise ResourceError(f"LoRA: {folder / 'adapter_config.json'} is a {cfg.get('peft_type')} adapter, not LORA")
        for unsupported in ("use_dora", "rank_pattern", "alpha_pattern", "fan_in_fan_out", "modules_to_save"):
            if cfg.get(unsupported):
                raise ResourceError(f"LoRA: adapter_config.json sets {unsupported}, which LLaVA's LoRA releases "
                                    "do not use and this converter does not apply")
        r, alpha = cfg.get("r"), cfg.get("lora_alpha")
        if not isinstance(r, int) or r < 1 or not isinstance(alpha, (int, float)):
            raise ResourceError(f"LoRA: adapter_config.json needs an integer r >= 1 and lora_alpha, got r={r!r}, "
                                f"lora_alpha={alpha!r}")
        #: peft LoraLayer.update_layer
        self.scaling = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
        self.pairs = self._pairs(_load_file(self.weights_file))

    def _pairs(self, sd: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """``{base weight name: (A, B)}`` from peft's saved keys."""
        a: dict[str, Any] = {}
        b: dict[str, Any] = {}
        for key, value in sd.items():
            for tag, into in ((".lora_A.weight", a), (".lora_B.weight", b)):
                if key.endswith(tag) and key.startswith(_PEFT_PREFIX):
                    into[key[len(_PEFT_PREFIX):-len(tag)] + ".weight"] = value
                    break
            else:
                raise ResourceError(f"LoRA: {self.weights_file.name} has key {key!r}, not a peft "
                                    "base_model.model.<module>.lora_{A,B}.weight")
        if set(a) != set(b) or not a:
            odd = sorted(set(a) ^ set(b))
            raise ResourceError(f"LoRA: {self.weights_file.name}: "
                                f"{'no LoRA pairs' if not a else 'unpaired LoRA weight ' + odd[0]}")
        return {k: (a[k], b[k]) for k in a}

    def trainables(self) -> dict[str, Any]:
        """``non_lora_trainables.bin`` with LLaVA builder's prefix stripping (``base_model.``, then
        ``model.`` when keys start ``model.model.``): keys of ``LlavaLlamaForCausalLM``."""
        sd = _load_file(self.trainables_file)
        sd = {(k[11:] if k.startswith("base_model.") else k): v for k, v in sd.items()}
        if any(k.startswith("model.model.") for k in sd):
            sd = {(k[6:] if k.startswith("model.") else k): v for k, v in sd.items()}
        return sd


def merge(weight: Any, pair: tuple[Any, Any], scaling: float) -> Any:
    """``weight + scaling * (B @ A)`` as peft's ``merge_and_unload`` with its default settings:
    the LoRA pair in float32 (peft's ``autocast_adapter_dtype=True`` upcasts float16/bfloat16
    adapters; LLaVA-era peft built its LoRA layers in float32), the product in float32, and
    ``weight.data += delta``, which adds in float32 and rounds once to ``weight``'s dtype.
    (peft with ``autocast_adapter_dtype=False`` on a float16 adapter rounds the product to
    float16 first: up to one float16 step of the result plus half a step of the product away.)"""
    import torch

    a, b = pair
    if b.shape[1] != a.shape[0] or (b.shape[0], a.shape[1]) != tuple(weight.shape):
        raise ResourceError(f"LoRA pair of shape B{tuple(b.shape)} A{tuple(a.shape)} does not fit a weight "
                            f"of shape {tuple(weight.shape)}")
    delta = (b.to(torch.float32) @ a.to(torch.float32)) * scaling
    return (weight.to(torch.float32) + delta).to(weight.dtype)


def vision_state(folder: Path) -> dict[str, Any]:
    """CLIP's ``vision_model.*`` tensors (what LLaVA's ``CLIPVisionTower`` loads with
    ``CLIPVisionModel.from_pretrained(mm_vision_tower)``) from the CLIP folder."""
    files = [folder / n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).is_file()]
    if not files:
        raise ResourceError(f"vision tower: missing file {folder / 'model.safetensors'} (or pytorch_model.bin)")
    sd = _load_file(files[0])
    out = {k: v for k, v in sd.items() if k.startswith("vision_model.")}
    if not out:
        raise ResourceError(f"vision tower: {files[0]} has no vision_model.* weights")
    return out


def sha256(path: Path) -> str:
    from capeval.hashing import file_digest

    return file_digest(path, "sha256", cached=False)


def folder_files(folder: Path) -> list[Path]:
    """Regular files of ``folder`` (top level), sorted: what the manifest hashes."""
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))

