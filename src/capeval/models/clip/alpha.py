"""Alpha-CLIP (Sun et al., CVPR 2024): CLIP whose ViT also reads an alpha (region) mask.

Used by HICE-S: a region embedding is ``Cv(I, A_n)``, the image encoded with the alpha mask
``A_n``; the global one uses the full mask. Read from github.com/SunzeY/AlphaCLIP:

- ``alpha_clip/model.py`` lines 338-339 and 352-354: the patch embedding is
  ``conv1(x) + conv1_alpha(alpha)``, ``conv1_alpha = Conv2d(1, width, kernel_size=patch,
  stride=patch, bias=False)``; the rest of the ViT is OpenAI's. Lines 591-595: a state dict
  without ``visual.conv1_alpha.weight`` (OpenAI's files) gets zeros, so the model is then
  exactly CLIP whatever the mask.
- The visual attention keeps q, k, v in an ``nn.Linear`` (lines 196-201): keys
  ``attn.in_proj.weight`` / ``attn.in_proj.bias`` (lines 577-588 rename OpenAI's
  ``in_proj_weight`` / ``in_proj_bias``); same maths (q scaled by head_dim**-0.5, softmax).
- ``alpha_clip/alpha_clip.py`` lines 141-151: the OpenAI checkpoint is loaded first (text
  tower and all), then the released file with ``model.visual.load_state_dict(...)``, strictly:
  the released files are visual-only state dicts without prefix, and, loaded into the
  default ``lora_adapt=False`` model, hold no LoRA factors ("fultune": full fine-tunes; the
  zoo trains the visual tower only, ``model-zoo.md``: "The text-encoder stays fixed").
- Image preprocessing is OpenAI's (``alpha_clip.py`` lines 79-86); the mask's is in
  :mod:`capeval.models.clip.alpha_mask`.

Here: :class:`AlphaCLIP` = capeval's :class:`~capeval.models.clip.model.CLIP` plus
``visual.conv1_alpha`` (zeros unless loaded); ``alpha=None`` means the full-image mask.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from capeval.errors import InputError, ResourceError
from capeval.models.clip import checkpoints as ck
from capeval.models.clip.alpha_mask import MaskPreprocess, full_alpha, normalise_alpha
from capeval.models.clip.backbone_base import ClipBackbone, describe_config, toy_tokenizer
from capeval.models.clip.model import ARCHITECTURES, CLIP, ClipConfig, clean_state_dict, get_config, infer_config, \
    init_random, load_weights
from capeval.models.clip.preprocess import Preprocess
from capeval.models.clip.tokenizer import ClipTokenizer, load_tokenizer

ALPHA_KEY = "visual.conv1_alpha.weight"


class AlphaCLIP(CLIP):
    """CLIP with ``visual.conv1_alpha``; ``encode_image(pixels, alpha)`` returns unnormalised features."""

    def __init__(self, cfg: ClipConfig):
        super().__init__(cfg)
        p = cfg.patch_size
        self.visual.conv1_alpha = nn.Conv2d(1, cfg.vision_width, kernel_size=p, stride=p, bias=False)
        nn.init.zeros_(self.visual.conv1_alpha.weight)  # a plain CLIP until weights say otherwise

    def _alpha_states(self, pixels: torch.Tensor, alpha: torch.Tensor | None) -> torch.Tensor:
        b, _, h, w = pixels.shape
        if alpha is None:
            alpha = normalise_alpha(torch.ones(b, 1, h, w, device=pixels.device))
        elif alpha.dim() != 4 or alpha.shape[1] != 1 or alpha.shape[0] != b or tuple(alpha.shape[2:]) != (h, w):
            raise InputError(f"alpha must have shape ({b}, 1, {h}, {w}) to match the pixels, got {tuple(alpha.shape)}")
        vis = self.visual
        x = (vis.conv1(pixels) + vis.conv1_alpha(alpha.to(pixels.dtype))).flatten(2).transpose(1, 2)
        cls = vis.class_embedding.expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + vis.positional_embedding
        return vis.transformer(vis.ln_pre(x))

    def encode_image(self, pixels: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
        """(B, D): class token after ln_post @ proj; ``alpha`` (B, 1, H, W) normalised, None = full mask."""
        # ln_post is per token, so pooling the class token first is exact
        return self.visual.ln_post(self._alpha_states(pixels, alpha)[:, 0]) @ self.visual.proj

    def encode_image_grid(self, pixels: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
        return self.visual.ln_post(self._alpha_states(pixels, alpha)) @ self.visual.proj


# -- state dicts -------------------------------------------------------------------------


def alpha_visual_state(state: Mapping[str, torch.Tensor], source: str = "Alpha-CLIP file") -> dict[str, torch.Tensor]:
    """A released Alpha-CLIP visual file in capeval's names: ``visual.`` prefix, ``in_proj_weight``.

    Accepts the released layout (``conv1.weight``, ``conv1_alpha.weight``,
    ``transformer.resblocks.{i}.attn.in_proj.weight``, ...), a ``module.`` prefix (the
    training script saves a DDP-wrapped tower) and a whole-model state dict (only its
    ``visual.*`` tensors are taken). LoRA factors are refused.
    """
    state = clean_state_dict(state)
    lora = sorted(k for k in state if "lora_" in k)
    if lora:
        raise ResourceError(f"{source} holds LoRA factors ({lora[0]}, {len(lora)} in all); only the released full "
                            "fine-tunes (*_fultune_*.pth, no LoRA) are supported")
    if any(k.startswith("visual.") for k in state):
        state = {k[len("visual."):]: v for k, v in state.items() if k.startswith("visual.")}
    out = {}
    for key, value in state.items():
        key = key.replace(".attn.in_proj.weight", ".attn.in_proj_weight").replace(".attn.in_proj.bias", ".attn.in_proj_bias")
        out["visual." + key] = value
    return out


def _mismatch(expected: Mapping[str, torch.Tensor], got: Mapping[str, torch.Tensor]) -> str | None:
    missing = [k for k in expected if k not in got]
    unexpected = [k for k in got if k not in expected]
    wrong = [f"{k} {tuple(got[k].shape)} != {tuple(v.shape)}" for k, v in expected.items()
             if k in got and tuple(got[k].shape) != tuple(v.shape)]
    parts = []
    for what, keys in (("missing keys", missing), ("unexpected keys", unexpected), ("wrong shapes", wrong)):
        if keys:
            parts.append(f"{what}: " + ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else ""))
    return "; ".join(parts) or None


def load_alpha_weights(model: AlphaCLIP, base: Mapping[str, torch.Tensor] | None,
                       alpha: Mapping[str, torch.Tensor] | None = None, source: str = "Alpha-CLIP file",
                       base_source: str = "base state dict") -> None:
    """Base CLIP state dict (cleaned; ``conv1_alpha`` zero when absent), then the visual tower of
    ``alpha`` (from :func:`alpha_visual_state`) over it; ``base=None`` keeps the model's weights.

    ``alpha`` must hold every visual tensor including ``conv1_alpha`` (upstream loads it
    strictly); otherwise :class:`ResourceError` naming ``source`` and the keys.
    """
    if base is not None:
        merged = dict(base)
        if ALPHA_KEY not in merged:
            merged[ALPHA_KEY] = torch.zeros_like(model.visual.conv1_alpha.weight)
        load_weights(model, merged, base_source)
    if alpha is not None:
        expected = {k: v for k, v in model.state_dict().items() if k.startswith("visual.")}
        problem = _mismatch(expected, alpha)
        if problem:
            raise ResourceError(f"{source} does not fit as the Alpha-CLIP visual tower of {describe_config(model.config)} "
                                f"({base_source}): {problem}")
        model.load_state_dict(alpha, strict=False)


def build_alpha_model(cfg: ClipConfig | str | Mapping[str, Any], state: Mapping[str, torch.Tensor] | None = None,
                      alpha: Mapping[str, torch.Tensor] | None = None, seed: int = 0, source: str = "Alpha-CLIP file",
                      base_source: str = "base state dict") -> AlphaCLIP:
    """An :class:`AlphaCLIP` in eval mode, fp32: base weights from ``state`` (or random with
    ``seed``, as :func:`~capeval.models.clip.model.init_random`), visual tower from ``alpha``."""
    model = AlphaCLIP(get_config(cfg))
    if state is None:
        init_random(model, seed)
    load_alpha_weights(model, state, alpha, source, base_source)
    return model.float().eval().requires_grad_(False)


# -- backbone ----------------------------------------------------------------------------


class AlphaClipBackbone(ClipBackbone):
    """:class:`ClipBackbone` of an :class:`AlphaCLIP`; ``encode_images`` uses the full-image mask."""

    model: AlphaCLIP

    def __init__(self, model: AlphaCLIP, tokenizer: ClipTokenizer, preprocess: Preprocess, name: str,
                 device: str | torch.device = "cpu", info: Mapping[str, Any] | None = None,
                 mask_preprocess: MaskPreprocess | None = None):
        super().__init__(model, tokenizer, preprocess, name, device, info)
        self.mask_preprocess = mask_preprocess or MaskPreprocess(preprocess.size)
        if self.mask_preprocess.size != preprocess.size:
            raise ResourceError(f"{name}: mask size {self.mask_preprocess.size} != image size {preprocess.size}")
        self.signature.update({
            "alpha": "conv1_alpha",
            "base_sha256": (info or {}).get("base_sha256"),
            **{f"mask_{k}": v for k, v in self.mask_preprocess.signature().items()},
        })

    def load_mask(self, mask: Any, name: str | None = None, image_size: tuple[int, int] | None = None) -> torch.Tensor:
        """(1, S, S) normalised alpha from an HxW mask (bool, uint8 0/255, float in [0, 1], PIL)."""
        return self.mask_preprocess(mask, name, image_size)

    def full_alpha(self, batch: int) -> torch.Tensor:
        """(batch, 1, S, S) alpha of the whole image (HICE-S's global embedding)."""
        return full_alpha(batch, self.preprocess.size, self.device)

    @torch.inference_mode()
    def encode_images_with_masks(self, pixels: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """(B, D) ``Cv(I, A)``: class token after ln_post @ proj for (B, 3, S, S) pixels and (B, 1, S, S) alpha."""
        return self.model.encode_image(pixels.to(self.device, torch.float32), alpha.to(self.device, torch.float32))

    @torch.inference_mode()
    def encode_regions(self, pixels: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """(N, D) for one image (3, S, S) and N masks (N, 1, S, S), without copying the image N times."""
        if pixels.dim() != 3:
            raise InputError(f"encode_regions takes one image (3, H, W), got {tuple(pixels.shape)}")
        return self.encode_images_with_masks(pixels.unsqueeze(0).expand(alpha.shape[0], *pixels.shape), alpha)

    def __repr__(self) -> str:
        return f"AlphaClipBackbone({self.name!r}, embed_dim={self.embed_dim}, device={self.device})"


def random_alpha_backbone(config: dict | str = "tiny", seed: int = 0, alpha_std: float = 0.02,
                          device: str = "cpu", preprocess: Preprocess | None = None,
                          mask_preprocess: MaskPreprocess | None = None) -> AlphaClipBackbone:
    """Random weights as :func:`~capeval.models.clip.backbone.random_backbone` (same ``seed``, same
    CLIP weights) plus a random ``conv1_alpha`` (normal, ``alpha_std``; 0 gives plain CLIP); toy tokenizer."""
    tok = toy_tokenizer()
    cfg = get_config(config)
    if cfg.vocab_size < 49408:  # small test configs: size the embedding table to the tokenizer
        cfg = get_config(cfg, vocab_size=max(tok.encoder.values()) + 1)
    model = build_alpha_model(cfg, None, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        w = model.visual.conv1_alpha.weight
        w.copy_(torch.randn(w.shape, generator=gen) * alpha_std)
    prep = preprocess or Preprocess(cfg.image_size)
    name = config if isinstance(config, str) else "custom"
    info = {"arch": name, "sha256": f"random(seed={seed},alpha_std={alpha_std})"}
    return AlphaClipBackbone(model, tok, prep, f"random-alpha/{name}", device, info, mask_preprocess)


# -- loading released files --------------------------------------------------------------


def _alpha_entries() -> dict[str, ck.Checkpoint]:
    return {n: e for n, e in ck.CHECKPOINTS.items() if e.kind == "alpha-clip"}


def _guess_base(alpha: Mapping[str, torch.Tensor]) -> str | None:
    """The OpenAI checkpoint whose ViT has the visual shapes of ``alpha`` (B/16, L/14, L/14-336)."""
    conv, pos = alpha.get("visual.conv1.weight"), alpha.get("visual.positional_embedding")
    if conv is None or pos is None:
        return None
    for entry in ck.CHECKPOINTS.values():
        if entry.kind == "openai" and entry.arch in ARCHITECTURES:
            a = ARCHITECTURES[entry.arch]
            grid = a.image_size // a.patch_size
            if tuple(conv.shape) == (a.vision_width, 3, a.patch_size, a.patch_size) and pos.shape[0] == grid * grid + 1:
                return entry.name
    return None


def _resolve(key: str, checkpoint_dir: str | None) -> tuple[Path, str, ck.Checkpoint | None, bool]:
    """(path, sha256, table entry or None, trusted) of a table name or a file path."""
    if key in ck.CHECKPOINTS:
        entry = ck.get_checkpoint(key)
        path, digest = ck.resolve(entry, checkpoint_dir)
        return path, digest, entry, entry.sha256 is not None
    path = Path(key).expanduser()
    if not path.is_file():
        raise ResourceError(f"{key!r} is neither a checkpoint name nor an existing file")
    entry = next((e for e in ck.CHECKPOINTS.values() if e.filename == path.name and e.kind != "vocab"), None)
    digest = ck.sha256_file(path)
    if entry is not None and entry.sha256 and digest != entry.sha256:
        raise ResourceError(f"{path}: sha256 {digest} differs from the official {entry.sha256} of {entry.name}")
    return path, digest, entry, True  # the user named this file


def load_alpha_backbone(alpha: str | os.PathLike[str] = "alpha-clip/ViT-L-14-grit20m",
                        base: str | os.PathLike[str] | None = None, device: str = "cpu",
                        tokenizer: str | os.PathLike[str] | None = None, checkpoint_dir: str | None = None,
                        mask_geometry: str = "crop", mask_antialias: bool = True) -> AlphaClipBackbone:
    """Alpha-CLIP from a table name (``alpha-clip/ViT-L-14-grit20m``, ...) or a released file,
    loaded over its base OpenAI CLIP (the entry's ``base``, else ``base=``, else guessed from
    the visual shapes); the text tower is the base's. Broken or mismatched files raise a
    one-line :class:`ResourceError` naming the file.
    """
    key = os.fspath(alpha)
    if key in ck.CHECKPOINTS and ck.CHECKPOINTS[key].kind != "alpha-clip":
        raise ResourceError(f"{key} is not an Alpha-CLIP checkpoint; known: {', '.join(_alpha_entries())}")
    path, digest, entry, trusted = _resolve(key, checkpoint_dir)
    if entry is not None and entry.kind != "alpha-clip":
        raise ResourceError(f"{path} is the file of {entry.name}, not an Alpha-CLIP checkpoint")
    vis = alpha_visual_state(ck.read_state_dict(path, trusted=trusted), str(path))
    base_key = os.fspath(base) if base is not None else (entry.base if entry else _guess_base(vis))
    if base_key is None:
        raise ResourceError(f"{path}: cannot tell which CLIP it fine-tunes; name the base checkpoint with base=")
    base_path, base_digest, base_entry, base_trusted = _resolve(base_key, checkpoint_dir)
    state = clean_state_dict(ck.read_state_dict(base_path, trusted=base_trusted))
    cfg = infer_config(state, base_entry.activation if base_entry else "quick_gelu")
    if entry is not None and describe_config(cfg) != entry.arch:
        raise ResourceError(f"{base_path} holds a {describe_config(cfg)} model, but {entry.name} fine-tunes {entry.arch}")
    model = build_alpha_model(cfg, state, vis, source=str(path), base_source=str(base_path))
    prep = entry.preprocess if entry else (base_entry.preprocess if base_entry else Preprocess(cfg.image_size))
    if prep.size != cfg.image_size:
        raise ResourceError(f"{path}: preprocessing size {prep.size} != model input size {cfg.image_size}")
    tok = load_tokenizer(tokenizer, cfg.context_length)
    info = {"arch": entry.arch if entry else describe_config(cfg), "sha256": digest, "base_sha256": base_digest}
    name = entry.name if entry is not None and key in ck.CHECKPOINTS else str(path)
    return AlphaClipBackbone(model, tok, prep, name, device, info, MaskPreprocess(prep.size, mask_geometry, mask_antialias))
