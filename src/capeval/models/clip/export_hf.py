"""Export a :class:`ClipBackbone` to a Hugging Face ``CLIPModel`` folder (weights, tokenizer,
image processor), e.g. to compare with tools built on transformers (torchmetrics' CLIPScore)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def hf_state_dict(state: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """OpenAI-named tensors -> ``CLIPModel`` names (q/k/v split, projections transposed)."""
    out: dict[str, Any] = {}
    names = {"attn.out_proj": "self_attn.out_proj", "ln_1": "layer_norm1", "ln_2": "layer_norm2",
             "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2"}
    for src, dst, n in (("transformer.resblocks", "text_model.encoder.layers", cfg.text_layers),
                        ("visual.transformer.resblocks", "vision_model.encoder.layers", cfg.vision_layers)):
        for i in range(n):
            s, d = f"{src}.{i}", f"{dst}.{i}"
            for part, w, b in zip("qkv", state[f"{s}.attn.in_proj_weight"].chunk(3), state[f"{s}.attn.in_proj_bias"].chunk(3)):
                out[f"{d}.self_attn.{part}_proj.weight"], out[f"{d}.self_attn.{part}_proj.bias"] = w, b
            for a, b2 in names.items():
                out[f"{d}.{b2}.weight"], out[f"{d}.{b2}.bias"] = state[f"{s}.{a}.weight"], state[f"{s}.{a}.bias"]
    out["text_model.embeddings.token_embedding.weight"] = state["token_embedding.weight"]
    pos = state["positional_embedding"]
    keep = getattr(cfg, "keep_positions", 0)
    if keep:  # Long-CLIP: one fixed row per position, so the two tables fold into one exactly
        import torch

        pos = torch.cat([pos[:keep], state["positional_embedding_res"][keep:]])
    out["text_model.embeddings.position_embedding.weight"] = pos
    for p in ("weight", "bias"):
        out[f"text_model.final_layer_norm.{p}"] = state[f"ln_final.{p}"]
        out[f"vision_model.pre_layrnorm.{p}"] = state[f"visual.ln_pre.{p}"]
        out[f"vision_model.post_layernorm.{p}"] = state[f"visual.ln_post.{p}"]
    out["text_projection.weight"] = state["text_projection"].T.contiguous()
    out["visual_projection.weight"] = state["visual.proj"].T.contiguous()
    out["vision_model.embeddings.class_embedding"] = state["visual.class_embedding"]
    out["vision_model.embeddings.patch_embedding.weight"] = state["visual.conv1.weight"]
    out["vision_model.embeddings.position_embedding.weight"] = state["visual.positional_embedding"]
    out["logit_scale"] = state["logit_scale"]
    return out


def export_hf(backbone: Any, directory: str | os.PathLike[str]) -> Path:
    """Write ``backbone`` as a transformers ``CLIPModel`` + ``CLIPProcessor`` folder."""
    import json

    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    from capeval.models.clip.tokenizer import write_vocab

    cfg = backbone.model.config
    directory = Path(directory)
    act = "quick_gelu" if cfg.activation == "quick_gelu" else "gelu"
    tok = backbone.tokenizer
    hf_cfg = CLIPConfig(
        text_config=dict(vocab_size=cfg.vocab_size, hidden_size=cfg.text_width, intermediate_size=4 * cfg.text_width,
                         num_hidden_layers=cfg.text_layers, num_attention_heads=cfg.text_heads,
                         max_position_embeddings=cfg.context_length, hidden_act=act, layer_norm_eps=1e-5,
                         eos_token_id=tok.eot_id, bos_token_id=tok.sot_id, pad_token_id=tok.eot_id),
        vision_config=dict(hidden_size=cfg.vision_width, intermediate_size=4 * cfg.vision_width,
                           num_hidden_layers=cfg.vision_layers, num_attention_heads=cfg.vision_heads,
                           image_size=cfg.image_size, patch_size=cfg.patch_size, hidden_act=act, layer_norm_eps=1e-5),
        projection_dim=cfg.embed_dim,
    )
    model = CLIPModel(hf_cfg)
    model.load_state_dict(hf_state_dict(dict(backbone.model.state_dict()), cfg), strict=False)
    model.save_pretrained(directory)
    write_vocab(directory, tok.merges, tok.encoder)  # the tokenizer's own id table, whatever its origin
    CLIPTokenizer.from_pretrained(str(directory)).save_pretrained(directory)
    prep = backbone.preprocess
    CLIPImageProcessor(size={"shortest_edge": prep.size}, crop_size={"height": prep.size, "width": prep.size},
                       image_mean=list(prep.mean), image_std=list(prep.std)).save_pretrained(directory)
    (directory / "capeval_source.json").write_text(json.dumps(backbone.signature, default=str))
    return directory
