"""A pure-torch CLIP dual encoder (ViT image tower + causal text transformer).

Parameter names follow OpenAI's ``clip/model.py`` (and open_clip's, which uses the same
names for the plain ViT towers), so the state dicts of ``ViT-B-32.pt``, ``ViT-L-14.pt``,
open_clip ``ViT-L-14`` (``laion2b_s32b_b82k``) and the PAC-S checkpoints load directly:

    visual.conv1.weight, visual.class_embedding, visual.positional_embedding, visual.ln_pre.*,
    visual.transformer.resblocks.{i}.{ln_1,attn.in_proj_weight,attn.in_proj_bias,attn.out_proj,
    ln_2,mlp.c_fc,mlp.c_proj}.*, visual.ln_post.*, visual.proj,
    token_embedding.weight, positional_embedding, transformer.resblocks.{i}.*, ln_final.*,
    text_projection, logit_scale

Long-CLIP files (Zhang et al., ECCV 2024; beichenzbc/Long-CLIP ``model/model_longclip.py``) add
``positional_embedding_res``: both tables have 248 rows, and position ``p`` takes its row from
``positional_embedding`` when ``p < 20``, else from ``positional_embedding_res``
(:meth:`CLIP.positions`); the rest of the model is OpenAI's. :func:`infer_config` recognises
them by that key.

Differences that do not change results: tensors are batch-first and attention uses
``scaled_dot_product_attention`` (same maths as ``nn.MultiheadAttention``); the text tower
runs on a batch padded to its longest sequence instead of 77 positions, which is exact
because the causal mask stops every position from seeing later (padding) positions.
Everything runs in fp32.

Checked against the upstream model code with random weights (max |diff| < 1e-5):
open_clip's ``CLIP`` (``tests/test_upstream_open_clip.py``), a TorchScript archive traced
from OpenAI's ``clip/model.py`` (``tests/test_upstream_torchscript.py``) and the PAC-S++
LoRA life cycle (``tests/test_upstream_pacscore.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from capeval.errors import ResourceError


@dataclass(frozen=True)
class ClipConfig:
    """Architecture of a ViT CLIP model (OpenAI naming: heads = width // 64 for the real ones)."""

    embed_dim: int
    image_size: int
    patch_size: int
    vision_width: int
    vision_layers: int
    vision_heads: int
    context_length: int
    vocab_size: int
    text_width: int
    text_layers: int
    text_heads: int
    activation: str = "quick_gelu"  # OpenAI weights; open_clip LAION weights use "gelu"
    # Long-CLIP (Zhang et al. 2024): positions < keep_positions come from ``positional_embedding``,
    # the rest from ``positional_embedding_res`` (0: a plain CLIP, one table)
    keep_positions: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.keep_positions:  # plain CLIP: the dict stays what files written before Long-CLIP hold
            del out["keep_positions"]
        return out


def _heads(width: int) -> int:
    # real CLIP models use 64-wide heads; narrower (test) models 16-wide ones
    return width // 64 if width >= 64 else max(1, width // 16)


def _vit(embed, size, patch, vw, vl, tw, tl, act="quick_gelu", context=77, keep=0) -> ClipConfig:
    return ClipConfig(embed, size, patch, vw, vl, vw // 64, context, 49408, tw, tl, tw // 64, act, keep)


# Long-CLIP: model_longclip.py builds every released model with 248 text positions and keeps
# the first 20 of the original table (``mask1[:20] = 1``)
LONGCLIP_CONTEXT, LONGCLIP_KEEP = 248, 20


ARCHITECTURES: dict[str, ClipConfig] = {
    "ViT-B-32": _vit(512, 224, 32, 768, 12, 512, 12),
    "ViT-B-16": _vit(512, 224, 16, 768, 12, 512, 12),
    "ViT-L-14": _vit(768, 224, 14, 1024, 24, 768, 12),
    "ViT-L-14-336": _vit(768, 336, 14, 1024, 24, 768, 12),
    "LongCLIP-ViT-B-16": _vit(512, 224, 16, 768, 12, 512, 12, context=LONGCLIP_CONTEXT, keep=LONGCLIP_KEEP),
    "LongCLIP-ViT-L-14": _vit(768, 224, 14, 1024, 24, 768, 12, context=LONGCLIP_CONTEXT, keep=LONGCLIP_KEEP),
    # a small model of the same structure, for tests
    "tiny": ClipConfig(16, 32, 8, 32, 2, 2, 77, 600, 32, 2, 2),
}


def get_config(arch: str | Mapping[str, Any] | ClipConfig, **overrides: Any) -> ClipConfig:
    """``ClipConfig`` from a name in :data:`ARCHITECTURES`, a dict or a config; overrides replace fields."""
    if isinstance(arch, ClipConfig):
        cfg = arch
    elif isinstance(arch, str):
        if arch not in ARCHITECTURES:
            raise KeyError(f"unknown CLIP architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")
        cfg = ARCHITECTURES[arch]
    else:
        base = dict(ARCHITECTURES[arch["base"]].to_dict()) if "base" in arch else {}
        base.update({k: v for k, v in arch.items() if k != "base"})
        cfg = ClipConfig(**base)
    return replace(cfg, **overrides) if overrides else cfg


class QuickGELU(nn.Module):
    """x * sigmoid(1.702 x): the activation OpenAI trained CLIP with."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class SelfAttention(nn.Module):
    """Multi-head self-attention with ``nn.MultiheadAttention``'s parameter names."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        b, n, d = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        qkv = qkv.view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=causal)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, d))


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width: int, heads: int, activation: str):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = SelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        act: nn.Module = QuickGELU() if activation == "quick_gelu" else nn.GELU()
        self.mlp = nn.Sequential(
            OrderedDict([("c_fc", nn.Linear(width, 4 * width)), ("gelu", act), ("c_proj", nn.Linear(4 * width, width))])
        )

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), causal)
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, activation: str):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, heads, activation) for _ in range(layers)])

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        for block in self.resblocks:
            x = block(x, causal)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, cfg: ClipConfig):
        super().__init__()
        w = cfg.vision_width
        grid = cfg.image_size // cfg.patch_size
        self.conv1 = nn.Conv2d(3, w, kernel_size=cfg.patch_size, stride=cfg.patch_size, bias=False)
        self.class_embedding = nn.Parameter(torch.zeros(w))
        self.positional_embedding = nn.Parameter(torch.zeros(grid * grid + 1, w))
        self.ln_pre = nn.LayerNorm(w)
        self.transformer = Transformer(w, cfg.vision_layers, cfg.vision_heads, cfg.activation)
        self.ln_post = nn.LayerNorm(w)
        self.proj = nn.Parameter(torch.zeros(w, cfg.embed_dim))

    def _states(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.conv1(pixels).flatten(2).transpose(1, 2)
        cls = self.class_embedding.expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding
        return self.transformer(self.ln_pre(x))

    def tokens(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 1+HW, width) transformer outputs after ``ln_post`` (class token first)."""
        return self.ln_post(self._states(pixels))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        # ln_post is per token, so pooling the class token first is exact and cheaper
        return self.ln_post(self._states(pixels)[:, 0]) @ self.proj


class CLIP(nn.Module):
    """CLIP dual encoder. ``encode_image`` / ``encode_text`` return projected, unnormalised features."""

    def __init__(self, cfg: ClipConfig):
        super().__init__()
        self.config = cfg
        self.visual = VisionTransformer(cfg)
        self.token_embedding = nn.Embedding(cfg.vocab_size, cfg.text_width)
        self.positional_embedding = nn.Parameter(torch.zeros(cfg.context_length, cfg.text_width))
        if cfg.keep_positions:
            self.positional_embedding_res = nn.Parameter(torch.zeros(cfg.context_length, cfg.text_width))
        self.transformer = Transformer(cfg.text_width, cfg.text_layers, cfg.text_heads, cfg.activation)
        self.ln_final = nn.LayerNorm(cfg.text_width)
        self.text_projection = nn.Parameter(torch.zeros(cfg.text_width, cfg.embed_dim))
        self.logit_scale = nn.Parameter(torch.tensor(4.6052))

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.visual(pixels)

    def encode_image_grid(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.visual.tokens(pixels) @ self.visual.proj

    def positions(self, n: int) -> torch.Tensor:
        """The (n, width) positional embeddings of the first ``n`` positions.

        Long-CLIP's ``encode_text`` adds ``positional_embedding * mask1 + positional_embedding_res
        * mask2`` (masks selecting rows < 20 and >= 20): each row is exactly one of the two
        tables' rows, which is what is taken here.
        """
        k = self.config.keep_positions
        if not k or n <= k:
            return self.positional_embedding[:n]
        return torch.cat([self.positional_embedding[:k], self.positional_embedding_res[k:n]])

    def text_states(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L, width) after ``ln_final`` for right-padded ``ids`` of length L <= context_length."""
        x = self.token_embedding(ids) + self.positions(ids.shape[1])
        return self.ln_final(self.transformer(x, causal=True))

    def encode_text(self, ids: torch.Tensor, eot_index: torch.Tensor) -> torch.Tensor:
        """Features at each row's ``[EOT]`` position (OpenAI takes ``argmax`` of ids: the same place)."""
        x = self.text_states(ids)
        return x[torch.arange(x.shape[0]), eot_index] @ self.text_projection

    def encode_text_embeddings(self, embeds: torch.Tensor, eot_index: torch.Tensor) -> torch.Tensor:
        """:meth:`encode_text` from token embeddings ``(B, L, width)`` instead of ids (L <= context_length).

        ``token_embedding(ids)`` in gives ``encode_text(ids)`` out exactly; rows may hold other
        vectors (pseudo-tokens, BRIDGE). Positional embeddings, the causal transformer, ``ln_final``
        and ``text_projection`` at each row's ``eot_index`` follow; gradients flow to ``embeds``.
        """
        x = embeds + self.positions(embeds.shape[1])
        x = self.ln_final(self.transformer(x, causal=True))
        return x[torch.arange(x.shape[0], device=x.device), eot_index] @ self.text_projection


def init_random(model: CLIP, seed: int = 0) -> CLIP:
    """Initialise like OpenAI's ``initialize_parameters`` (normal, scaled stds), deterministically."""
    gen = torch.Generator().manual_seed(seed)
    cfg = model.config

    def normal_(t: torch.Tensor, std: float) -> None:
        with torch.no_grad():
            t.copy_(torch.randn(t.shape, generator=gen) * std)

    normal_(model.token_embedding.weight, 0.02)
    normal_(model.positional_embedding, 0.01)
    if cfg.keep_positions:
        normal_(model.positional_embedding_res, 0.01)
    vis = model.visual
    scale = cfg.vision_width**-0.5
    normal_(vis.conv1.weight, 0.02)
    normal_(vis.class_embedding, scale)
    normal_(vis.positional_embedding, scale)
    normal_(vis.proj, scale)
    for tower, width, layers in ((model.transformer, cfg.text_width, cfg.text_layers),
                                 (vis.transformer, cfg.vision_width, cfg.vision_layers)):
        proj_std = width**-0.5 * (2 * layers) ** -0.5
        for block in tower.resblocks:
            normal_(block.attn.in_proj_weight, width**-0.5)
            normal_(block.attn.out_proj.weight, proj_std)
            normal_(block.mlp.c_fc.weight, (2 * width) ** -0.5)
            normal_(block.mlp.c_proj.weight, proj_std)
            # small random biases and norms so tests exercise every parameter
            for p in (block.attn.in_proj_bias, block.attn.out_proj.bias, block.mlp.c_fc.bias, block.mlp.c_proj.bias):
                normal_(p, 0.02)
            for ln in (block.ln_1, block.ln_2):
                normal_(ln.bias, 0.02)
                with torch.no_grad():
                    ln.weight.add_(torch.randn(ln.weight.shape, generator=gen) * 0.02)
    normal_(model.text_projection, cfg.text_width**-0.5)
    return model


# -- loading state dicts ---------------------------------------------------------------

_DROP = ("input_resolution", "context_length", "vocab_size", "attn_mask")


def clean_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop OpenAI's int metadata and open_clip's mask buffer, strip a ``module.`` prefix, cast to fp32."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.startswith("module."):
            key = key[len("module."):]
        if key in _DROP or key.endswith(".attn_mask"):
            continue
        out[key] = value.float() if value.is_floating_point() else value
    return out


def infer_config(state: Mapping[str, torch.Tensor], activation: str = "quick_gelu") -> ClipConfig:
    """Architecture from tensor shapes, as OpenAI's ``build_model`` does (ViT only)."""
    try:
        vw = state["visual.conv1.weight"].shape[0]
        patch = state["visual.conv1.weight"].shape[-1]
        grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
        vl = len({k.split(".")[3] for k in state if k.startswith("visual.transformer.resblocks.")})
        tw = state["ln_final.weight"].shape[0]
        tl = len({k.split(".")[2] for k in state if k.startswith("transformer.resblocks.")})
        return ClipConfig(
            embed_dim=state["text_projection"].shape[1],
            image_size=patch * grid,
            patch_size=patch,
            vision_width=vw,
            vision_layers=vl,
            vision_heads=_heads(vw),
            context_length=state["positional_embedding"].shape[0],
            vocab_size=state["token_embedding.weight"].shape[0],
            text_width=tw,
            text_layers=tl,
            text_heads=_heads(tw),
            activation=activation,
            keep_positions=LONGCLIP_KEEP if "positional_embedding_res" in state else 0,
        )
    except KeyError as exc:
        raise ResourceError(f"not a ViT CLIP state dict: key {exc.args[0]!r} is missing") from None


def load_weights(model: CLIP, state: Mapping[str, torch.Tensor], source: str = "state dict") -> None:
    """Load an OpenAI/open_clip-named state dict strictly; :class:`ResourceError` names bad keys."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong = [
        f"{k} {tuple(state[k].shape)} != {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or wrong:
        parts = []
        for what, keys in (("missing keys", missing), ("unexpected keys", unexpected), ("wrong shapes", wrong)):
            if keys:
                shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
                parts.append(f"{what}: {shown}")
        raise ResourceError(f"{source} does not fit the CLIP {model.config} architecture: " + "; ".join(parts))
    model.load_state_dict({k: state[k] for k in expected}, strict=True)


def build_model(cfg: ClipConfig | str | Mapping[str, Any], state: Mapping[str, torch.Tensor] | None = None,
                seed: int = 0, source: str = "state dict") -> CLIP:
    """A CLIP in eval mode, fp32: weights from ``state`` or random (``seed``)."""
    model = CLIP(get_config(cfg))
    if state is None:
        init_random(model, seed)
    else:
        load_weights(model, state, source)
    return model.float().eval().requires_grad_(False)
