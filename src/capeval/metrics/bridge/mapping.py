"""BRIDGE's mapping module psi, its ablations and the regularisation branch (Sarto et al. 2024).

psi (Sec. 3.2, 4.1): "a stack of Transformer encoder layers interleaved with cross-attention
layers" (2 layers), attending to the CLIP visual grid ("the grid of features from the last
layer", 50 x d for ViT-B/32) mapped "to an embedding space of dimension 512" by "a simple
linear projection" (here: to the text width, 512 for ViT-B/32). Its outputs at the masked
positions replace those token embeddings; the pseudo-caption then goes through the frozen
CLIP text encoder (:meth:`capeval.models.clip.model.CLIP.encode_text_embeddings`).

Choices the paper leaves open (all in :class:`BridgeConfig`, stored in every checkpoint):
pre-LayerNorm blocks, GELU MLPs of 4x width, ``width // 64`` heads, dropout 0.1 (the
Transformer default of [55]), bidirectional self-attention over the replica's tokens
(padding masked), a learnable embedding per slot (US of them) as psi's input at the mask,
learnable positions, a final LayerNorm + Linear back into the token-embedding space. Grid:
``projected`` = every token after ``ln_post`` @ ``proj`` (capeval's ``encode_image_grid``,
index 0 = the image embedding v) or ``tokens`` = before the projection.

Ablations (Table 1): ``mapping="mlp"`` (w/o mapping module: a two-layer MLP on the image
embedding, as Pic2Word [47], fills 'a photo of S*'), ``template="none"`` (w/o template
captions: psi fills 'a photo of S*' from learnable tokens). Regularisation branch (Eq. 2):
C(x) = Linear(ReLU(Linear(x))) on each pseudo-caption embedding.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from capeval.errors import InputError
from capeval.metrics.bridge.templates import DEFAULT_US

MAPPINGS = ("transformer", "mlp")
TEMPLATES = ("caption", "none")
GRIDS = ("projected", "tokens")


@dataclass(frozen=True)
class BridgeConfig:
    """Everything a trained BRIDGE model depends on besides its weights and the CLIP backbone."""

    us: int = DEFAULT_US           # pseudo-tokens per noun chunk (Table 1: 3)
    layers: int = 2                # Sec. 4.1: "composed of two Transformer layers"
    heads: int | None = None       # None: text_width // 64 (CLIP's head width), at least 1
    mapping: str = "transformer"   # Table 1: "transformer" (psi) or "mlp" (w/o mapping module)
    template: str = "caption"      # Table 1: "caption" or "none" (w/o template captions)
    grid: str = "projected"
    dropout: float = 0.1
    mlp_ratio: int = 4
    prompt: str = "A photo depicts "  # before candidates and ground-truth captions (as CLIP-S)
    regularizer_hidden: int | None = None  # Eq. 2 hidden size; None: embed_dim
    # sizes of the CLIP this model was built for (filled by :meth:`for_clip`)
    text_width: int = 512
    embed_dim: int = 512
    grid_dim: int = 512
    context_length: int = 77

    def __post_init__(self) -> None:
        problems = []
        if self.mapping not in MAPPINGS:
            problems.append(f"mapping={self.mapping!r} (use {' or '.join(MAPPINGS)})")
        if self.template not in TEMPLATES:
            problems.append(f"template={self.template!r} (use {' or '.join(TEMPLATES)})")
        if self.grid not in GRIDS:
            problems.append(f"grid={self.grid!r} (use {' or '.join(GRIDS)})")
        if self.mapping == "mlp" and self.template != "none":
            problems.append("mapping='mlp' fills 'a photo of S*' only (Table 1): set template='none'")
        for name in ("us", "layers", "mlp_ratio", "text_width", "embed_dim", "grid_dim", "context_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name}={value!r} (a positive integer)")
        if self.heads is not None and (isinstance(self.heads, bool) or not isinstance(self.heads, int) or self.heads < 1):
            problems.append(f"heads={self.heads!r} (a positive integer or None)")
        if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            problems.append(f"dropout={self.dropout!r} (in [0, 1))")
        if problems:
            raise InputError("BRIDGE config: " + "; ".join(problems))

    @property
    def n_heads(self) -> int:
        return self.heads or max(1, self.text_width // 64)

    @classmethod
    def for_clip(cls, clip_config: Any, **options: Any) -> "BridgeConfig":
        """A config sized for a :class:`~capeval.models.clip.model.ClipConfig` (options override defaults)."""
        grid = options.get("grid", "projected")
        sizes = {"text_width": clip_config.text_width, "embed_dim": clip_config.embed_dim,
                 "grid_dim": clip_config.embed_dim if grid == "projected" else clip_config.vision_width,
                 "context_length": clip_config.context_length}
        return cls(**{**options, **sizes})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> "BridgeConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"{source}: unknown BRIDGE config keys {unknown}; known: {sorted(known)}")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> "BridgeConfig":
        return replace(self, **changes)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask: torch.Tensor | None) -> torch.Tensor:
    b, n, d = q.shape
    m = k.shape[1]
    split = lambda x, length: x.view(b, length, heads, d // heads).transpose(1, 2)  # noqa: E731
    out = F.scaled_dot_product_attention(split(q, n), split(k, m), split(v, m), attn_mask=mask)
    return out.transpose(1, 2).reshape(b, n, d)


class Attention(nn.Module):
    """Multi-head attention (queries from ``x``, keys/values from ``context``), boolean key mask."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        if width % heads:
            raise InputError(f"BRIDGE config: width {width} is not divisible by heads={heads}")
        self.heads = heads
        self.q, self.k, self.v, self.out = (nn.Linear(width, width) for _ in range(4))

    def forward(self, x: torch.Tensor, context: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = key_mask[:, None, None, :] if key_mask is not None else None
        return self.out(_attend(self.q(x), self.k(context), self.v(context), self.heads, mask))


class Block(nn.Module):
    """Pre-LN residual block: self-attention (an encoder layer, with its MLP) or cross-attention."""

    def __init__(self, width: int, heads: int, ratio: int, dropout: float, cross: bool):
        super().__init__()
        self.cross = cross
        self.ln_1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, ratio * width), nn.GELU(), nn.Linear(ratio * width, width))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, valid: torch.Tensor, visual: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        attn = self.attn(h, visual) if self.cross else self.attn(h, h, valid)
        x = x + self.drop(attn)
        return x + self.drop(self.mlp(self.ln_2(x)))


class MappingModule(nn.Module):
    """psi: token embeddings with slots + visual grid -> token embeddings with the slots filled."""

    def __init__(self, cfg: BridgeConfig):
        super().__init__()
        w = cfg.text_width
        self.config = cfg
        self.slot_embedding = nn.Parameter(torch.randn(cfg.us, w) * 0.02)
        self.positional_embedding = nn.Parameter(torch.randn(cfg.context_length, w) * 0.01)
        self.visual_proj = nn.Linear(cfg.grid_dim, w)  # Sec. 4.1: "a simple linear projection"
        self.blocks = nn.ModuleList(
            Block(w, cfg.n_heads, cfg.mlp_ratio, cfg.dropout, cross=bool(i % 2)) for i in range(2 * cfg.layers)
        )
        self.ln_out = nn.LayerNorm(w)
        self.head = nn.Linear(w, w)

    def forward(self, embeds: torch.Tensor, slots: torch.Tensor, valid: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        """``embeds`` (R, L, W) token embeddings, ``slots``/``valid`` (R, L), ``grid`` (R, G, grid_dim)."""
        rank = (slots.long().cumsum(1) - 1).clamp(min=0)
        x = torch.where(slots[..., None], self.slot_embedding[rank], embeds)
        x = x + self.positional_embedding[: x.shape[1]]
        visual = self.visual_proj(grid)
        for block in self.blocks:
            x = block(x, valid, visual)
        out = self.head(self.ln_out(x))
        return torch.where(slots[..., None], out, embeds)


class MlpMapping(nn.Module):
    """Table 1 'w/o mapping module': Linear-ReLU-Linear from the image embedding to US pseudo-tokens."""

    def __init__(self, cfg: BridgeConfig):
        super().__init__()
        self.config = cfg
        self.mlp = nn.Sequential(nn.Linear(cfg.grid_dim, cfg.text_width), nn.ReLU(),
                                 nn.Linear(cfg.text_width, cfg.us * cfg.text_width))

    def forward(self, embeds: torch.Tensor, slots: torch.Tensor, valid: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        r, _, w = embeds.shape
        tokens = self.mlp(grid[:, 0]).view(r, self.config.us, w)
        rank = (slots.long().cumsum(1) - 1).clamp(min=0)
        filled = tokens[torch.arange(r, device=embeds.device)[:, None], rank]
        return torch.where(slots[..., None], filled, embeds)


class Regularizer(nn.Module):
    """Eq. 2: C(x) = Linear(ReLU(Linear(x))) on a pseudo-caption embedding."""

    def __init__(self, cfg: BridgeConfig):
        super().__init__()
        hidden = cfg.regularizer_hidden or cfg.embed_dim
        self.net = nn.Sequential(nn.Linear(cfg.embed_dim, hidden), nn.ReLU(), nn.Linear(hidden, cfg.embed_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class BridgeModel(nn.Module):
    """The trainable part of BRIDGE: ``mapping`` (psi or the MLP) and ``regularizer`` (training only)."""

    def __init__(self, cfg: BridgeConfig):
        super().__init__()
        self.config = cfg
        self.mapping = MappingModule(cfg) if cfg.mapping == "transformer" else MlpMapping(cfg)
        self.regularizer = Regularizer(cfg)


def check_clip(cfg: BridgeConfig, clip: Any) -> None:
    """:class:`InputError` when ``clip`` (a CLIP module) does not have the sizes ``cfg`` was built for."""
    c = clip.config
    want = {"text_width": c.text_width, "embed_dim": c.embed_dim, "context_length": c.context_length,
            "grid_dim": c.embed_dim if cfg.grid == "projected" else c.vision_width}
    wrong = [f"{k} {getattr(cfg, k)} != {v}" for k, v in want.items() if getattr(cfg, k) != v]
    if wrong:
        raise InputError(f"BRIDGE model was built for another CLIP: {', '.join(wrong)}")


def image_features(clip: Any, pixels: torch.Tensor, grid: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grid (B, G, grid_dim), v (B, embed_dim))``: the visual grid psi attends to and the image embedding."""
    if grid == "projected":
        g = clip.encode_image_grid(pixels)
        return g, g[:, 0]  # index 0 after ln_post @ proj is encode_image exactly
    g = clip.visual.tokens(pixels)
    return g, g[:, 0] @ clip.visual.proj


def pseudo_captions(clip: Any, mapping: nn.Module, batch: Any, grid: torch.Tensor) -> torch.Tensor:
    """(R, embed_dim) unnormalised pseudo-caption embeddings t*_ij of a :class:`ReplicaBatch` (Sec. 3.2).

    ``grid`` (B, G, grid_dim) holds the images the replicas' ``owner`` indices point into.
    """
    embeds = clip.token_embedding(batch.ids)
    filled = mapping(embeds, batch.slots, batch.valid, grid[batch.owner])
    return clip.encode_text_embeddings(filled, batch.eot)
