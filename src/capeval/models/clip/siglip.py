"""SigLIP / SigLIP 2 as a CLIP-family backbone, via transformers.

PAC-S++ journal, Table 8 and Sec. 4 ("Effect of Changing Backbone"): CLIP-S, PAC-S and
PAC-S++ are also evaluated with SigLIP (Zhai et al. 2023) and SigLIP 2 (Tschannen et al. 2025)
encoders; the paper names neither the checkpoints nor a ``w`` for them, so the backbone is
given by hub name or folder and the scorers keep their ``w`` (recorded in the signature).

Same interface as :class:`capeval.models.clip.backbone_base.ClipBackbone` (``tokenize``,
``encode_texts``, ``load_image``, ``encode_images``, ``embed_dim``, ``signature``):

- images: the checkpoint's own ``AutoImageProcessor`` (SigLIP: resize to a square of the
  model's size, no crop, rescale 1/255, mean = std = 0.5);
- texts: the checkpoint's tokenizer with ``padding="max_length"``, ``max_length=64`` and
  truncation, as the model cards prescribe (the text tower pools the last position, so the
  padding is part of the embedding), with the attention mask exactly when the tokenizer
  returns one (the tokenizer's own ``pad``; SigLIP's pad token is its EOS, so a mask rebuilt
  from ``ids != pad_token_id`` would hide the EOS); ``get_text_features`` / ``get_image_features``.

SigLIP 2's NaFlex models (``Siglip2Model``, model type ``siglip2``) take patch sequences plus a
patch mask and the patch grid's shape: :func:`pack_pixels` packs the three into one
``(max_num_patches, C*p*p + 3)`` tensor per image (so images stack as CLIP's do) and
:func:`unpack_pixels` restores them; fixed-resolution SigLIP 2 releases are ``siglip`` models.
PAC-S checkpoints trained on these backbones: :mod:`capeval.models.clip.siglip_pacs`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Sequence

from capeval.errors import InputError, MissingDependencyError, ResourceError

TEXT_LENGTH = 64
MODEL_TYPES = ("siglip", "siglip2")


def is_siglip(name_or_path: str) -> bool:
    """Whether ``name_or_path`` is a SigLIP checkpoint: a folder whose config says so, or a
    hub name of Google's SigLIP releases."""
    path = Path(os.path.expanduser(name_or_path))
    if path.is_dir() and (path / "config.json").is_file():
        try:
            return json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type") in MODEL_TYPES
        except ValueError:
            return False
    return name_or_path.startswith(("google/siglip-", "google/siglip2-"))


class SiglipBackbone:
    """A SigLIP dual encoder with the ClipBackbone interface (fp32, embeddings not normalised)."""

    def __init__(self, name_or_path: str, device: str = "cpu"):
        from capeval._optional import require

        self.torch = require("torch", extra="hf", purpose="a SigLIP backbone")
        tf = require("transformers", extra="hf", purpose="a SigLIP backbone")
        self.name = os.fspath(name_or_path)
        try:
            self.model = tf.AutoModel.from_pretrained(self.name).to(device).eval()
            self.tokenizer = tf.AutoTokenizer.from_pretrained(self.name)
            self.processor = tf.AutoImageProcessor.from_pretrained(self.name)
        except ImportError as exc:  # SigLIP's tokenizer needs sentencepiece; transformers says so in a paragraph
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0]
            raise MissingDependencyError(f"SigLIP backbone {self.name!r}: {first[:160]}: pip install \".[hf]\" "
                                         "(in the capeval checkout; the hf extra brings sentencepiece)") from None
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ResourceError(f"SigLIP backbone {self.name!r} cannot be loaded ({first[:160]}); download it once "
                                "into the Hugging Face cache or give a folder saved with save_pretrained") from None
        if getattr(self.model.config, "model_type", "") not in MODEL_TYPES:
            raise InputError(f"{self.name} is a {self.model.config.model_type} model, not SigLIP")
        self.device = self.torch.device(device)
        tc = self.model.config.text_config
        self.embed_dim = int(getattr(tc, "projection_size", None) or tc.hidden_size)
        self.context_length = TEXT_LENGTH
        state = self.model.state_dict()
        h = hashlib.sha256()
        for k in sorted(state):
            h.update(k.encode())
            h.update(state[k].detach().cpu().contiguous().numpy().tobytes())
        proc = self.processor.to_dict()
        self.preprocess = SiglipPreprocess(self.processor, self.model.config.model_type == "siglip2")
        self.signature: dict[str, Any] = {
            "backbone": self.name, "arch": self.model.config.model_type, "sha256": h.hexdigest(),
            "img_size": json.dumps(proc.get("size")), "img_mean": list(proc.get("image_mean") or []),
            "img_std": list(proc.get("image_std") or []), "img_resize": "square-no-crop",
            "precision": "fp32", "lora": "n/a", "trunc": f"{TEXT_LENGTH}:max_length-padding",
            "tokenizer": type(self.tokenizer).__name__,
        }

    @property
    def signature_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.signature, sort_keys=True, default=str).encode()).hexdigest()

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], int]:
        """Ids truncated to 64 (padded by :func:`text_features`) and the number of texts truncated."""
        full = self.tokenizer(list(texts))["input_ids"]
        return text_ids(self.tokenizer, texts), sum(1 for x in full if len(x) > TEXT_LENGTH)

    def encode_texts(self, ids: Sequence[Sequence[int]]) -> Any:
        with self.torch.inference_mode():
            return text_features(self.model, self.tokenizer, ids, self.device)

    def load_image(self, image: Any, name: str | None = None) -> Any:
        return self.torch.from_numpy(self.preprocess(image, name))

    def encode_images(self, pixels: Any) -> Any:
        with self.torch.inference_mode():
            return image_features(self.model, pixels.to(self.device, self.torch.float32))

    def __repr__(self) -> str:
        return f"SiglipBackbone({self.name!r}, embed_dim={self.embed_dim}, device={self.device})"


class SiglipPreprocess:
    """``(image, name) -> float32 array``: the checkpoint's image processor (NaFlex: :func:`pack_pixels`)."""

    def __init__(self, processor: Any, naflex: bool):
        self.processor, self.naflex = processor, naflex

    def __call__(self, image: Any, name: str | None = None) -> Any:
        from capeval.models.clip.preprocess import open_image

        out = self.processor(images=open_image(image, name).convert("RGB"), return_tensors="pt")
        return (pack_pixels(out) if self.naflex else out["pixel_values"][0]).float().numpy()


def pack_pixels(out: Any) -> Any:
    """One image's NaFlex inputs as ``(P, C*p*p + 3)``: patches, then the patch mask, then the grid's (h, w)."""
    import torch

    pv, mask, shape = out["pixel_values"][0], out["pixel_attention_mask"][0], out["spatial_shapes"][0]
    return torch.cat([pv.float(), mask[:, None].float(), shape.float().expand(len(pv), 2)], dim=1)


def unpack_pixels(packed: Any) -> dict[str, Any]:
    """The inverse of :func:`pack_pixels` for a stacked batch (B, P, C*p*p + 3)."""
    return {"pixel_values": packed[..., :-3], "pixel_attention_mask": packed[..., -3].long(),
            "spatial_shapes": packed[:, 0, -2:].long()}


def text_features(model: Any, tokenizer: Any, ids: Sequence[Sequence[int]], device: Any) -> Any:
    """``get_text_features`` of :func:`text_ids` output, padded to 64 by the tokenizer itself.

    As ``model(**tokenizer(texts, padding="max_length", max_length=64))`` in the model cards:
    the tokenizer's ``pad`` adds the padding and the attention mask exactly when its ``__call__``
    would (a tokenizer that gives none: the padding is attended to)."""
    import torch

    inputs = tokenizer.pad({"input_ids": [list(x) for x in ids]}, padding="max_length", max_length=TEXT_LENGTH)
    tensors = {k: torch.as_tensor(v, dtype=torch.long, device=device) for k, v in inputs.items()}
    return _features(model.get_text_features(**tensors))


def image_features(model: Any, pixels: Any) -> Any:
    """``get_image_features`` of a stacked batch of :class:`SiglipPreprocess` outputs."""
    if model.config.model_type == "siglip2":
        return _features(model.get_image_features(**unpack_pixels(pixels)))
    return _features(model.get_image_features(pixel_values=pixels))


def text_ids(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Ids truncated to 64 as the model cards tokenize (``truncation=True``); unpadded, so that
    :func:`text_features` pads them and makes the tokenizer's own mask."""
    ids = tokenizer(list(texts), max_length=TEXT_LENGTH, truncation=True)["input_ids"]
    return [list(x) for x in ids]


def _features(out: Any) -> Any:
    """transformers 5 returns a model output whose ``pooler_output`` holds the features; 4.x a tensor."""
    return getattr(out, "pooler_output", out)
