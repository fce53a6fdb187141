"""The captioner of PAC-S++'s SCST experiments (Sarto et al. 2024, Sec. 4.2 and 5.1): a standard
encoder-decoder Transformer (3 + 3 layers, d = 512, 8 heads) over CLIP visual grid features.

- Visual input (Eq. 15): the grid ``e^1 ... e^R`` of the CLIP vision transformer *before*
  its last LayerNorm and projection (class token first), precomputed once per image and
  cached on disk (:class:`FeatureStore`), projected to ``d`` by Linear-ReLU-Dropout-LayerNorm.
- Vocabulary: PTB-tokenised, lower-cased training captions, words seen ``min_count`` times
  (``<pad> <bos> <eos> <unk>`` first).
- Decoding: beam search (``beam=1`` is greedy), no length normalisation; a finished beam
  keeps its score. ``sequence_logprobs`` gives ``log p(t^)`` (sum over the words and the
  end token) with gradients, for the SCST loss.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from capeval.errors import InputError
from capeval.io.atomic import atomic_open

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")


class Vocab:
    """Word <-> id; ``encode`` PTB-tokenises, ``decode`` stops at ``<eos>``."""

    def __init__(self, words: Sequence[str]):
        self.words = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, captions: Sequence[str], min_count: int = 5) -> Vocab:
        """Words of ``captions`` seen at least ``min_count`` times, most frequent first (ties: alphabetical)."""
        counts = Counter(w for c in tokenize(captions) for w in c)
        kept = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        if not kept:
            raise InputError(f"no word occurs {min_count} times in the {len(captions)} training captions")
        return cls(kept)

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, caption: str | Sequence[str], max_len: int) -> list[int]:
        """Ids of the (tokenised) caption, cut at ``max_len`` words, then ``<eos>``."""
        words = tokenize([caption])[0] if isinstance(caption, str) else list(caption)
        return [self.index.get(w, UNK) for w in words[:max_len]] + [EOS]

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == EOS or i == PAD:
                break
            out.append(self.words[i])
        return " ".join(out)


def tokenize(captions: Sequence[str]) -> list[list[str]]:
    """PTB tokens of each caption (lower-cased, punctuation removed), as capeval's text metrics."""
    from capeval.tokenize import ptb_tokenize_batch

    return [t.split() for t in ptb_tokenize_batch(list(captions))]


def pad_batch(seqs: Sequence[Sequence[int]], length: int | None = None) -> torch.Tensor:
    """(N, T) long tensor, right-padded with ``<pad>`` to ``length`` (default: the longest)."""
    t = max([len(s) for s in seqs] + [length or 0])
    out = torch.full((len(seqs), t), PAD, dtype=torch.long)
    for k, s in enumerate(seqs):
        out[k, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def _positions(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    out = torch.zeros(n, d)
    out[:, 0::2] = torch.sin(pos * div)
    out[:, 1::2] = torch.cos(pos * div)[:, : d // 2]
    return out


class CaptionTransformer(nn.Module):
    """Encoder-decoder Transformer captioner (post-norm layers, sinusoidal positions)."""

    def __init__(self, vocab_size: int, feature_dim: int, d_model: int = 512, heads: int = 8, enc_layers: int = 3,
                 dec_layers: int = 3, ff_dim: int = 2048, dropout: float = 0.1, max_len: int = 20):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.visual = nn.Sequential(nn.Linear(feature_dim, d_model), nn.ReLU(), nn.Dropout(dropout),
                                    nn.LayerNorm(d_model))
        enc = nn.TransformerEncoderLayer(d_model, heads, ff_dim, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, enc_layers, enable_nested_tensor=False)
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.register_buffer("pos", _positions(max_len + 2, d_model), persistent=False)
        dec = nn.TransformerDecoderLayer(d_model, heads, ff_dim, dropout, batch_first=True)
        self.decoder = nn.TransformerDecoder(dec, dec_layers)
        self.out = nn.Linear(d_model, vocab_size)

    def encode(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, R, feature_dim) grid features -> (B, R, d) memory."""
        return self.encoder(self.visual(feats))

    def decode(self, memory: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) input tokens (``<bos>`` first) -> (B, T, V) next-word logits (causal)."""
        t = tokens.shape[1]
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.pos[:t]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tokens.device), diagonal=1)  # True: masked
        h = self.decoder(x, memory, tgt_mask=causal, tgt_key_padding_mask=tokens == PAD)
        return self.out(h)

    def forward(self, feats: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits predicting ``targets`` (B, T; ends with ``<eos>``, padded)."""
        bos = torch.full_like(targets[:, :1], BOS)
        return self.decode(self.encode(feats), torch.cat([bos, targets[:, :-1]], dim=1))

    def sequence_logprobs(self, feats: torch.Tensor, seqs: torch.Tensor) -> torch.Tensor:
        """(N,) ``log p(seq | image)``: sum over the words up to and including the first ``<eos>``."""
        return sequence_logprobs(self(feats, seqs), seqs)

    @torch.no_grad()
    def beam_search(self, feats: torch.Tensor, beam: int = 5, max_len: int | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(seqs (B, beam, T), log-probs (B, beam))``, best first; ``seqs`` end with ``<eos>``, pad after."""
        max_len = max_len or self.max_len
        b = feats.shape[0]
        memory = self.encode(feats)
        seqs = torch.full((b, 1, 1), BOS, dtype=torch.long, device=feats.device)
        scores = torch.zeros(b, 1, device=feats.device)
        done = torch.zeros(b, 1, dtype=torch.bool, device=feats.device)
        for _ in range(max_len + 1):
            k = seqs.shape[1]
            logits = self.decode(memory.repeat_interleave(k, 0), seqs.view(b * k, -1))[:, -1]
            logp = torch.log_softmax(logits.float(), dim=-1).view(b, k, -1)
            logp[..., PAD] = float("-inf")
            logp[..., BOS] = float("-inf")
            if seqs.shape[2] > max_len:  # the last step may only end the caption
                keep = logp[..., EOS].clone()
                logp.fill_(float("-inf"))
                logp[..., EOS] = keep
            # a finished beam continues with <pad> at no cost, and only with it
            finished = torch.full_like(logp, float("-inf"))
            finished[..., PAD] = 0.0
            logp = torch.where(done[..., None], finished, logp)
            flat = (scores[..., None] + logp).view(b, -1)
            top, idx = flat.topk(min(beam, flat.shape[1]), dim=1)
            origin, word = idx // logp.shape[2], idx % logp.shape[2]
            seqs = torch.cat([seqs.gather(1, origin[..., None].expand(-1, -1, seqs.shape[2])), word[..., None]], 2)
            done = done.gather(1, origin) | (word == EOS)
            scores = top
            if bool(done.all()):
                break
        return seqs[:, :, 1:], scores


def sequence_logprobs(logits: torch.Tensor, seqs: torch.Tensor) -> torch.Tensor:
    """(N,) ``sum_t log p(seq_t | seq_<t)`` from teacher-forced (N, T, V) ``logits``, ``<pad>`` left out."""
    logp = torch.log_softmax(logits, dim=-1).gather(2, seqs[..., None])[..., 0]
    return (logp * (seqs != PAD)).sum(dim=1)


# -- CLIP grid features ----------------------------------------------------------------------

@torch.inference_mode()
def grid_features(backbone: Any, pixels: torch.Tensor) -> torch.Tensor:
    """(B, 1 + HW, width): the vision transformer's outputs before ``ln_post`` and ``proj`` (Eq. 15)."""
    v = backbone.model.visual
    x = v.conv1(pixels.to(backbone.device, torch.float32)).flatten(2).transpose(1, 2)
    cls = v.class_embedding.expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], dim=1) + v.positional_embedding
    return v.transformer(v.ln_pre(x))


class FeatureStore:
    """Grid features per image id, computed once and kept as ``.npy`` files (float32).

    ``<folder>/<backbone signature hash[:16]>/<sha1(id)[:2]>/<sha1(id)>.npy``; files are
    written atomically, so an interrupted extraction resumes where it stopped.
    """

    def __init__(self, backbone: Any, folder: str | os.PathLike[str] | None = None):
        self.backbone = backbone
        self.root = Path(folder) / backbone.signature_hash[:16] if folder is not None else None
        self.memory: dict[str, np.ndarray] = {}  # without a folder: kept in memory

    def _path(self, image_id: str) -> Path:
        key = hashlib.sha1(image_id.encode("utf-8")).hexdigest()
        return self.root / key[:2] / f"{key}.npy"  # type: ignore[operator]

    def has(self, image_id: str) -> bool:
        return image_id in self.memory if self.root is None else self._path(image_id).is_file()

    def extract(self, images: Mapping[str, Any], batch_size: int = 64, progress: bool | None = False) -> int:
        """Compute the missing features of ``{id: image}``; returns how many were computed."""
        from capeval.progress import make_progress

        todo = [i for i in images if not self.has(i)]
        with make_progress(len(todo), "grid features", progress) as bar:
            for start in range(0, len(todo), batch_size):
                chunk = todo[start : start + batch_size]
                px = torch.stack([self.backbone.load_image(images[i], str(i)) for i in chunk])
                feats = grid_features(self.backbone, px).to("cpu", torch.float32).numpy()
                for i, f in zip(chunk, feats):
                    self._put(i, f)
                bar.update(len(chunk))
        return len(todo)

    def _put(self, image_id: str, value: np.ndarray) -> None:
        if self.root is None:
            self.memory[image_id] = value
            return
        path = self._path(image_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path) as f:
            np.save(f, np.asarray(value, dtype=np.float32), allow_pickle=False)

    def get(self, image_ids: Sequence[str]) -> torch.Tensor:
        """(B, R, width) float32 features of ``image_ids`` (all must have been extracted)."""
        rows = []
        for i in image_ids:
            if self.root is None:
                if i not in self.memory:
                    raise InputError(f"image {i!r}: grid features not extracted", i)
                rows.append(self.memory[i])
            else:
                try:
                    rows.append(np.load(self._path(i), allow_pickle=False))
                except (FileNotFoundError, ValueError, OSError):
                    raise InputError(f"image {i!r}: grid features missing or unreadable in {self.root}", i) from None
        return torch.from_numpy(np.stack(rows))
