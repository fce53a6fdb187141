"""``ClipBackbone``: one loaded CLIP (model + tokenizer + preprocessing + signature).

The image metrics here and the video metrics (``capeval.metrics.emscore``) are written against this
interface only. All outputs are fp32 torch tensors on ``device``; embeddings are projected
but not normalised. The loaders build it: :mod:`capeval.models.clip.backbone` (CLIP files, by
name or path; it hands Alpha-CLIP names to :mod:`capeval.models.clip.alpha`, whose
``AlphaClipBackbone`` extends this class). Both import this module; neither imports the other's
internals, so there is no import circle.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from capeval.models.clip.model import ARCHITECTURES, CLIP, ClipConfig
from capeval.models.clip.preprocess import Preprocess
from capeval.models.clip.tokenizer import ClipTokenizer, openai_vocab, train_bpe


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


def same_shape(a: ClipConfig, b: ClipConfig) -> bool:
    """Whether two configs have the same tensor shapes (the activation is not compared)."""
    # the activation is not visible in the tensors; everything else is
    return a.to_dict() | {"activation": ""} == b.to_dict() | {"activation": ""}


def describe_config(cfg: ClipConfig) -> str:
    """The architecture's name in :data:`ARCHITECTURES` when the shapes match one, else its key sizes."""
    for name, known in ARCHITECTURES.items():
        if name != "tiny" and same_shape(cfg, known):  # "tiny" is a test size, no checkpoint has it
            return name
    return (f"an unlisted ViT (image {cfg.image_size}, patch {cfg.patch_size}, vision width {cfg.vision_width} x "
            f"{cfg.vision_layers} layers, text width {cfg.text_width} x {cfg.text_layers} layers, "
            f"embed {cfg.embed_dim}, vocabulary {cfg.vocab_size})")


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


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor as a float32 numpy array on the CPU."""
    return t.detach().to("cpu", torch.float32).numpy()
