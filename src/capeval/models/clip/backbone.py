"""``ClipBackbone``: one loaded CLIP (model + tokenizer + preprocessing + signature).

The image metrics here and the video metrics (``capeval.metrics.emscore``) are written against this
interface only. All outputs are fp32 torch tensors on ``device``; embeddings are projected
but not normalised.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from capeval.models.clip import checkpoints as ck
from capeval.models.clip.lora import apply_lora, describe, has_lora
from capeval.models.clip.model import ARCHITECTURES, CLIP, ClipConfig, build_model, clean_state_dict, get_config, infer_config
from capeval.models.clip.preprocess import Preprocess
from capeval.models.clip.tokenizer import ClipTokenizer, load_tokenizer, openai_vocab, train_bpe
from capeval.errors import InputError, ResourceError


class ClipBackbone:
    """A CLIP dual encoder ready to embed images and texts exactly as the reference code does."""

    def __init__(self, model: CLIP, tokenizer: ClipTokenizer, preprocess: Preprocess, name: str,
                 device: str | torch.device = "cpu", info: Mapping[str, Any] | None = None):
        self.model = model.to(device)
        self.tokenizer = tokenizer
        self.preprocess = preprocess
        self.name = name
        self.device = torch.device(device)
        self.context_length = min(tokenizer.context_length, model.config.context_length)
        self.embed_dim = model.config.embed_dim
        self.signature: dict[str, Any] = {
            "backbone": name,
            "arch": (info or {}).get("arch", "custom"),
            "sha256": (info or {}).get("sha256"),
            "activation": model.config.activation,
            **{f"img_{k}": v for k, v in preprocess.signature().items()},
            "precision": "fp32",
            "lora": (info or {}).get("lora", "n/a"),
            "trunc": f"{self.context_length}:keep-first+eot",
            # the full token -> id table and the merges: results computed with other ids never share it
            "tokenizer": tokenizer.fingerprint()[:16],
        }
        if (info or {}).get("run"):  # a file written by `capeval train`: which run made it
            self.signature["run"] = info["run"]

    @property
    def signature_hash(self) -> str:
        """Hash of everything an embedding depends on (used as the embedding-cache namespace)."""
        blob = json.dumps(self.signature, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()

    # -- text ---------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], int]:
        """Ids with SOT/EOT (at most ``context_length``, EOT kept) and the number truncated."""
        if self.tokenizer.context_length != self.context_length:
            self.tokenizer.context_length = self.context_length
        return self.tokenizer.encode_batch(texts)

    def _pad(self, ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        if not ids or any(len(x) == 0 for x in ids):
            raise ValueError("encode_texts needs non-empty id lists (SOT ... EOT)")
        longest = max(len(x) for x in ids)
        batch = torch.zeros(len(ids), longest, dtype=torch.long)
        for i, x in enumerate(ids):
            batch[i, : len(x)] = torch.as_tensor(x, dtype=torch.long)
        lengths = torch.as_tensor([len(x) for x in ids])
        return batch.to(self.device), lengths.to(self.device)

    @torch.inference_mode()
    def encode_texts(self, ids: Sequence[Sequence[int]]) -> torch.Tensor:
        """(B, D) features at ``[EOT]`` @ text_projection; the batch is padded to its longest sequence."""
        batch, lengths = self._pad(ids)
        return self.model.encode_text(batch, lengths - 1)

    @torch.inference_mode()
    def encode_text_tokens(self, ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, D) every position after ln_final @ text_projection, and the (B, L) mask of SOT..EOT."""
        batch, lengths = self._pad(ids)
        states = self.model.text_states(batch) @ self.model.text_projection
        mask = torch.arange(batch.shape[1], device=self.device)[None, :] < lengths[:, None]
        return states, mask

    # -- images -------------------------------------------------------------------
    def load_image(self, image: Any, name: str | None = None) -> torch.Tensor:
        """(3, H, W) float32 from a path, PIL image or HWC uint8 array; InputError names the file."""
        return torch.from_numpy(self.preprocess(image, name))

    @torch.inference_mode()
    def encode_images(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, D) class-token features after ln_post @ proj."""
        return self.model.encode_image(pixels.to(self.device, torch.float32))

    @torch.inference_mode()
    def encode_image_grid(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 1 + HW, D): every token after ln_post @ proj (index 0 = ``encode_images``)."""
        return self.model.encode_image_grid(pixels.to(self.device, torch.float32))

    def __repr__(self) -> str:
        return f"ClipBackbone({self.name!r}, embed_dim={self.embed_dim}, device={self.device})"


# -- loading ------------------------------------------------------------------------------


# entries whose file is not a whole CLIP state dict (Alpha-CLIP files: capeval.models.clip.alpha)
_NOT_CLIP = ("vocab", "alpha-clip", "hf-model")


def _by_filename(path: Path) -> ck.Checkpoint | None:
    for entry in ck.CHECKPOINTS.values():
        if entry.filename == path.name and entry.kind not in _NOT_CLIP:
            return entry
    return None


def load_backbone(name_or_path: str | os.PathLike[str], device: str = "cpu", lora: str = "effective",
                  tokenizer: str | os.PathLike[str] | None = None, checkpoint_dir: str | None = None,
                  activation: str | None = None, preprocess: Preprocess | None = None) -> ClipBackbone:
    """Load a checkpoint by table name (``openai/ViT-B-32``, ``pac-s++/ViT-L-14``, ...) or path.

    A file whose name is in the table (e.g. ``.../PAC++_clip_ViT-B-32.pth``) gets that entry's
    preprocessing and activation and its hash is checked; other files default to OpenAI's
    mean/std and QuickGELU (override with ``activation=``/``preprocess=``). A folder is
    searched for one file named in the table. A file of a table entry (by name or file name)
    must hold that entry's architecture (:func:`check_architecture`). ``lora`` (PAC-S++
    only): ``effective`` (what the official code computes, default), ``all`` or ``none``;
    see :mod:`capeval.models.clip.lora`. Alpha-CLIP names (``alpha-clip/...``) go to
    :func:`capeval.models.clip.alpha.load_alpha_backbone` (with its defaults).
    """
    key = os.fspath(name_or_path)
    entry: ck.Checkpoint | None
    if key in ck.CHECKPOINTS and ck.CHECKPOINTS[key].kind == "alpha-clip":
        from capeval.models.clip.alpha import load_alpha_backbone  # imports this module: load it lazily

        return load_alpha_backbone(key, device=device, tokenizer=tokenizer, checkpoint_dir=checkpoint_dir)
    if key in ck.CHECKPOINTS and ck.CHECKPOINTS[key].kind in _NOT_CLIP:
        raise InputError(f"{key} is not a CLIP checkpoint (it is a {ck.CHECKPOINTS[key].kind} entry of the table)")
    if key in ck.CHECKPOINTS:
        entry = ck.get_checkpoint(key)
        path, digest = ck.resolve(entry, checkpoint_dir)
        trusted = entry.sha256 is not None
    else:
        path = Path(key).expanduser()
        if path.is_dir():
            hits = [e for e in ck.CHECKPOINTS.values() if e.kind not in _NOT_CLIP and (path / e.filename).is_file()]
            if len(hits) != 1:
                raise ResourceError(f"{path}: expected exactly one known checkpoint file in this folder, found "
                                    f"{[h.filename for h in hits] or 'none'}; name the file instead")
            path = path / hits[0].filename
        if not path.is_file():
            raise ResourceError(f"unknown backbone {key!r}: not a checkpoint name ({', '.join(ck.CHECKPOINTS)}) "
                                "and not an existing file")
        entry = _by_filename(path)
        digest = ck.sha256_file(path)
        if entry is not None and entry.sha256 and digest != entry.sha256:
            raise ResourceError(f"{path}: sha256 {digest} differs from the official {entry.sha256} of {entry.name}")
        trusted = True  # the user named this file
    state = ck.read_state_dict(path, trusted=trusted)
    lora_info = None
    if has_lora(state):
        state, lora_info = apply_lora(state, lora, source=str(path))
    state = clean_state_dict(state)
    act = activation or (entry.activation if entry else "quick_gelu")
    cfg = infer_config(state, act)
    if entry is not None:
        check_architecture(cfg, entry, path)
    model = build_model(cfg, state, source=str(path))
    prep = preprocess or (entry.preprocess if entry else Preprocess(cfg.image_size))
    if prep.size != cfg.image_size:
        raise ResourceError(f"{path}: preprocessing size {prep.size} != model input size {cfg.image_size}")
    tok = load_tokenizer(tokenizer, cfg.context_length)
    info = {"arch": entry.arch if entry else "inferred", "sha256": digest,
            "lora": describe(lora_info) if lora_info else "n/a", "run": _training_run(path)}
    return ClipBackbone(model, tok, prep, entry.name if entry and key in ck.CHECKPOINTS else str(path), device, info)


def _training_run(path: Path) -> str | None:
    """``config:<hash>,train:<hash>`` from the header of a safetensors file `capeval train` wrote."""
    if path.suffix != ".safetensors":
        return None
    try:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
        config = json.loads(meta["config_hash"]) if "config_hash" in meta else None
        data = json.loads(meta.get("data", "{}"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not config:
        return None
    train = data.get("train") if isinstance(data, dict) else None
    return f"config:{config}" + (f",train:{train}" if train else "")


def _same_shape(a: ClipConfig, b: ClipConfig) -> bool:
    # the activation is not visible in the tensors; everything else is
    return a.to_dict() | {"activation": ""} == b.to_dict() | {"activation": ""}


def describe_config(cfg: ClipConfig) -> str:
    """The architecture's name in :data:`ARCHITECTURES` when the shapes match one, else its key sizes."""
    for name, known in ARCHITECTURES.items():
        if name != "tiny" and _same_shape(cfg, known):  # "tiny" is a test size, no checkpoint has it
            return name
    return (f"an unlisted ViT (image {cfg.image_size}, patch {cfg.patch_size}, vision width {cfg.vision_width} x "
            f"{cfg.vision_layers} layers, text width {cfg.text_width} x {cfg.text_layers} layers, "
            f"embed {cfg.embed_dim}, vocabulary {cfg.vocab_size})")


def check_architecture(cfg: ClipConfig, entry: ck.Checkpoint, path: Path) -> None:
    """:class:`ResourceError` naming both when the tensors of ``path`` are not ``entry.arch``.

    This is what makes an entry without a published sha256 safe: its file is accepted only
    if it is a state dict of the expected architecture.
    """
    expected = get_config(entry.arch)
    if not _same_shape(cfg, expected):
        raise ResourceError(
            f"{path}: the file holds a {describe_config(cfg)} model, but {entry.name} ({entry.filename}) "
            f"is a {entry.arch} checkpoint; replace it, or rename it to load it as an unlisted checkpoint"
        )


_TOY_CORPUS = (
    "a photo depicts a dog running on the grass . two cats are sleeping next to each other on a blanket .",
    "a man rides a bike down the street while a woman walks her dog in the park near the water .",
    "children play football on a sandy beach ; the black dog is wearing a red hat and looks at the camera .",
)


def toy_tokenizer(num_merges: int = 80, corpus: Sequence[str] = _TOY_CORPUS) -> ClipTokenizer:
    """A small deterministic CLIP-style tokenizer (for tests/benchmarks without the real vocabulary)."""
    merges = train_bpe(corpus, num_merges, min_count=1)
    vocab = openai_vocab(merges)
    return ClipTokenizer({t: i for i, t in enumerate(vocab)}, merges, 77, "toy")


def random_backbone(config: dict | str = "tiny", seed: int = 0, tokenizer_dir: str | os.PathLike[str] | None = None,
                    device: str = "cpu", preprocess: Preprocess | None = None) -> ClipBackbone:
    """Random weights of a named architecture (``"ViT-B-32"``, ``"tiny"``, ...) or a config dict.

    Tokenizer: from ``tokenizer_dir`` when given, else a small toy BPE (deterministic). For
    ``"tiny"``-sized vocabularies the embedding table is sized to the tokenizer.
    """
    tok = ClipTokenizer.from_path(tokenizer_dir) if tokenizer_dir is not None else toy_tokenizer()
    cfg = get_config(config)
    n_ids = max(tok.encoder.values()) + 1
    if cfg.vocab_size < 49408:  # small test configs: size the embedding table to the tokenizer
        cfg = get_config(cfg, vocab_size=n_ids)
    elif n_ids > cfg.vocab_size:
        raise ResourceError(f"tokenizer has {n_ids} ids but {config} has a vocabulary of {cfg.vocab_size}")
    model = build_model(cfg, None, seed=seed)
    prep = preprocess or Preprocess(cfg.image_size)
    name = config if isinstance(config, str) else "custom"
    info = {"arch": name, "sha256": f"random(seed={seed})"}
    return ClipBackbone(model, tok, prep, f"random/{name}", device, info)


def as_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy()
