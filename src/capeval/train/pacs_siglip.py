"""PAC-S / PAC-S++ training on a SigLIP or SigLIP 2 backbone (PAC-S++ journal, Sec. 5.1 and Table 8).

The journal trains CLIP, SigLIP and SigLIP 2 ViT-L "with the same training strategies" and says
nothing else about SigLIP (no loss, temperature or layer list; aimagelab/pacscore has no SigLIP
code). capeval therefore applies the recipe of :mod:`capeval.train.pacs` unchanged to the SigLIP
embeddings: the same loss (softmax InfoNCE over cosine similarities, averaged over both
directions, scaled by the backbone's own learned ``exp(logit_scale)``, frozen; SigLIP's
``logit_bias`` is not used, as the softmax is invariant to it), the same lambdas, LoRA rank and
optimiser. Option ``loss: sigmoid`` (capeval's, not the paper's) trains with SigLIP's own
pairwise sigmoid loss instead (:func:`capeval.train.losses.sigmoid_pairs`, Zhai et al. 2023,
Algorithm 1) at the backbone's frozen ``exp(logit_scale)`` and ``logit_bias``, each of the three
PAC-S terms in that form. :class:`SiglipDual` gives transformers' model the CLIP-side hooks the trainer uses:

- LoRA targets (PAC-S++), the analogues of the CLIP path's (:mod:`capeval.train.pacs_lora`) in
  every encoder layer of both towers: ``attn`` = ``self_attn.q_proj/k_proj/v_proj`` (CLIP's
  fused ``in_proj_weight``; ``lora_qkv_init="xavier"`` gives each of them pacscore's Glorot
  A and B, per matrix), ``attn_out`` = ``self_attn.out_proj``, ``mlp`` = ``mlp.fc1/fc2``,
  ``conv1`` = ``vision_model.embeddings.patch_embedding`` (SigLIP's Conv2d, with loralib's
  Conv2d factor shapes; SigLIP 2 NaFlex's Linear). The attention-pooling head is not a target,
  as CLIP's projections are not.
- Projections (PAC-S): ``text_model.head`` (SigLIP's linear text projection, CLIP's
  ``text_projection``) and ``vision_model.head``, the attention-pooling head that takes the
  place of CLIP's ``ln_post`` + ``visual.proj`` (SigLIP has no linear image projection).

Export (:meth:`SiglipDual.export_tensors`): only the trained tensors, ``<module>.lora_A/B``
(unmerged) and the projections' parameters by their transformers names, with the header
``format`` = :data:`capeval.models.clip.siglip_pacs.FORMAT`, the backbone's name and weights
sha256 (written by the trainer), ``model_type`` and ``lora_scaling`` (alpha / rank); scoring
merges them onto the same backbone (:mod:`capeval.models.clip.siglip_pacs`).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Sequence

import torch
from torch import nn

from capeval.errors import InputError
from capeval.models.clip.siglip import MODEL_TYPES, image_features, text_features, text_ids
from capeval.models.clip.siglip_pacs import FORMAT


class SiglipDual(nn.Module):
    """transformers' SiglipModel / Siglip2Model with the hooks :class:`capeval.train.pacs.PacsObjective` uses."""

    def __init__(self, model: nn.Module, tokenizer: Any):
        super().__init__()
        self.model, self.tokenizer = model, tokenizer
        vc, tc = model.config.vision_config, model.config.text_config
        size = getattr(vc, "image_size", None) or int(math.isqrt(vc.num_patches)) * vc.patch_size
        # the fields plan() reads for its memory estimate
        self.config = SimpleNamespace(image_size=size, patch_size=vc.patch_size, vision_width=vc.hidden_size,
                                      vision_layers=vc.num_hidden_layers, text_width=tc.hidden_size,
                                      text_layers=tc.num_hidden_layers)

    @property
    def logit_scale(self) -> torch.Tensor:
        return self.model.logit_scale

    @property
    def logit_bias(self) -> torch.Tensor:
        return self.model.logit_bias

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return image_features(self.model, pixels)

    def encode_captions(self, texts: Sequence[str], device: Any) -> torch.Tensor:
        return text_features(self.model, self.tokenizer, text_ids(self.tokenizer, texts), device)

    def lora_layers(self, targets: set[str]) -> list[tuple[str, nn.Module, str, str]]:
        """(export stem, module, parameter name, group) of every LoRA target (module docstring)."""
        out = []
        for tower in ("text_model", "vision_model"):
            for i, layer in enumerate(getattr(self.model, tower).encoder.layers):
                p = f"{tower}.encoder.layers.{i}"
                if "attn" in targets:
                    out += [(f"{p}.self_attn.{n}.", getattr(layer.self_attn, n), "weight", "qkv")
                            for n in ("q_proj", "k_proj", "v_proj")]
                if "attn_out" in targets:
                    out.append((f"{p}.self_attn.out_proj.", layer.self_attn.out_proj, "weight", "attention"))
                if "mlp" in targets:
                    out += [(f"{p}.mlp.{n}.", getattr(layer.mlp, n), "weight", "mlp") for n in ("fc1", "fc2")]
        if "conv1" in targets:
            patch = self.model.vision_model.embeddings.patch_embedding
            out.append(("vision_model.embeddings.patch_embedding.", patch, "weight",
                        "conv1" if isinstance(patch, nn.Conv2d) else "patch"))
        return out

    def projection_parameters(self) -> list[nn.Parameter]:
        """PAC-S's trainable tensors: ``text_model.head`` and ``vision_model.head`` (module docstring)."""
        head = getattr(self.model.vision_model, "head", None)
        if head is None:
            raise InputError("PAC-S (mode: pacs) on SigLIP trains the attention-pooling head, but this backbone "
                             "has none (vision_use_head=false)")
        return [*self.model.text_model.head.parameters(), *head.parameters()]

    def export_tensors(self) -> dict[str, torch.Tensor]:
        """LoRA factors (``<module>.lora_A/B``) and the other trained parameters, by transformers' names."""
        from capeval.train.pacs_lora import lora_modules

        out = {}
        for delta in lora_modules(self.model):
            stem = delta._capeval[0]  # type: ignore[attr-defined]
            out[f"{stem}lora_A"] = delta.lora_A.detach().clone()
            out[f"{stem}lora_B"] = delta.lora_B.detach().clone()
        for name, p in self.model.named_parameters():
            if p.requires_grad and ".parametrizations." not in name:
                out[name] = p.detach().clone()
        return out

    def export_meta(self) -> dict[str, Any]:
        from capeval.train.pacs_lora import lora_modules

        deltas = lora_modules(self.model)
        ranks = {d.lora_A.shape[0] for d in deltas if d._capeval[1] != "conv1"}  # type: ignore[attr-defined]
        return {"format": FORMAT, "model_type": self.model.config.model_type, "lora_layers": len(deltas),
                "lora_scaling": deltas[0].scaling if deltas else None, "lora_rank": min(ranks) if ranks else None}


def as_trainable(model: nn.Module, tokenizer: Any) -> nn.Module:
    """``model`` wrapped in :class:`SiglipDual` when it is transformers' SigLIP; a CLIP unchanged."""
    if isinstance(model, SiglipDual):
        return model
    if getattr(getattr(model, "config", None), "model_type", None) in MODEL_TYPES:
        return SiglipDual(model, tokenizer)
    return model


def shape_only(name: str) -> SiglipDual:
    """The backbone's architecture on the meta device (config only: no weights read), for ``--dry-run``."""
    from capeval.errors import ResourceError

    import transformers as tf

    try:
        config = tf.AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ResourceError(f"SigLIP backbone {name!r}: config cannot be read ({str(exc).splitlines()[0][:160]})"
                            ) from None
    with torch.device("meta"):
        return SiglipDual(tf.AutoModel.from_config(config), None)
