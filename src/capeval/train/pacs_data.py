"""PAC-S training data: COCO Karpathy items plus generated positives (Sarto et al. 2023, Sec. 3).

A positives folder (what ``capeval train pacs generate`` writes) holds JSON-lines files
(``*.jsonl``, any number of shards); each line is one of::

    {"kind": "caption", "image_id": "391895", "text": "a man riding a bike", "sha256": ...}
    {"kind": "image", "image_id": "391895", "caption_index": 0, "path": "images/391895_0.png", "sha256": ...}

t'_i = the generated caption of image i; v'_ij = the image generated from caption j of
image i (paths relative to the folder). A later line for the same key replaces an earlier
one. Per item the dataset returns the real image v, one caption t (a random one of the
image's captions, drawn per epoch), the generated image v' of that caption and the
generated caption t' of the image: the views (v, t), (v', t) and (v, t') of the loss.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capeval.errors import InputError
from capeval.train.coco import CaptionedImage


@dataclass
class Positives:
    """Generated captions (by image id) and images (by (image id, caption index)), with their folder."""

    root: Path | None = None
    captions: dict[str, str] = field(default_factory=dict)
    images: dict[tuple[str, int], Any] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)  # shard file -> sha256 (the run's data hashes)


def read_positives(folder: str | os.PathLike[str]) -> Positives:
    """Every ``*.jsonl`` record under ``folder`` (sorted by name); InputError names a bad line."""
    from capeval.hashing import file_digest

    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"positives folder not found: {root}")
    files = sorted(root.glob("*.jsonl"))
    if not files:
        raise InputError(f"positives folder {root} holds no *.jsonl file (run `capeval train pacs generate`)")
    out = Positives(root)
    for path in files:
        out.hashes[path.name] = file_digest(path, "sha256", cached=False)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                kind, image_id = rec["kind"], str(rec["image_id"])
                if kind == "caption":
                    out.captions[image_id] = str(rec["text"])
                elif kind == "image":
                    out.images[(image_id, int(rec["caption_index"]))] = root / rec["path"]
                elif kind != "provenance":
                    raise KeyError("kind")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise InputError(f"{path} line {n}: not a positives record ({exc})") from None
    return out


def check_positives(items: Sequence[CaptionedImage], positives: Positives, need_images: bool, need_captions: bool,
                    split: str = "train") -> None:
    """InputError naming the first item whose needed positive is missing (or whose image file is absent)."""
    for item in items:
        if need_captions and item.id not in positives.captions:
            raise InputError(f"{split}: image {item.id} has no generated caption in {positives.root} "
                             "(the positives do not match the COCO root; regenerate or set lambda_t: 0)")
        if need_images:
            for j in range(len(item.captions)):
                path = positives.images.get((item.id, j))
                if path is None:
                    raise InputError(f"{split}: caption {j} of image {item.id} has no generated image in "
                                     f"{positives.root} (regenerate or set lambda_v: 0)")
                if isinstance(path, Path) and not path.is_file():
                    raise InputError(f"{split}: generated image {path} (image {item.id}) not found")


class PacsDataset:
    """``dataset[k]`` -> ``(v, v', caption, generated caption, k)``; v' is a zero tensor when unused.

    ``preprocess``: ``(image, name) -> (3, H, W) float32 array`` (a backbone's Preprocess).
    ``set_epoch(e)`` redraws the caption of every image (seeded: the same after a resume).
    """

    def __init__(self, items: Sequence[CaptionedImage], positives: Positives | None, preprocess: Any,
                 use_images: bool, use_captions: bool, seed: int = 0):
        self.items = list(items)
        self.positives = positives or Positives()
        self.preprocess = preprocess
        self.use_images, self.use_captions = use_images, use_captions
        self.seed = seed
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + epoch)
        self.choice = [rng.randrange(len(it.captions)) for it in self.items]

    def __len__(self) -> int:
        return len(self.items)

    def _pixels(self, image: Any, name: str) -> Any:
        import torch

        return torch.from_numpy(self.preprocess(image, name))

    def __getitem__(self, k: int) -> tuple[Any, Any, str, str, int]:
        import torch

        item, j = self.items[k], self.choice[k]
        v = self._pixels(item.image, f"image {item.id}")
        if self.use_images:
            v_gen = self._pixels(self.positives.images[(item.id, j)], f"generated image of {item.id}/{j}")
        else:
            v_gen = torch.zeros(0)
        t_gen = self.positives.captions[item.id] if self.use_captions else ""
        return v, v_gen, item.captions[j], t_gen, k


def collate(batch: Sequence[tuple[Any, Any, str, str, int]]) -> dict[str, Any]:
    import torch

    v, v_gen, t, t_gen, idx = zip(*batch)
    return {"v": torch.stack(v), "v_gen": torch.stack(v_gen), "t": list(t), "t_gen": list(t_gen),
            "index": torch.as_tensor(idx)}


def tokenize(tokenizer: Any, texts: Sequence[str], device: Any = "cpu") -> tuple[Any, Any]:
    """(ids (B, L) right-padded, EOT index (B,)) with capeval's CLIP tokenizer (EOT kept when truncated)."""
    import torch

    ids, _ = tokenizer.encode_batch(texts)
    longest = max(len(x) for x in ids)
    batch = torch.zeros(len(ids), longest, dtype=torch.long)
    for i, x in enumerate(ids):
        batch[i, : len(x)] = torch.as_tensor(x, dtype=torch.long)
    eot = torch.as_tensor([len(x) - 1 for x in ids])
    return batch.to(device), eot.to(device)
