"""BRIDGE training data: template captions and noun chunks per image, and step batches.

Templates (Sec. 4.1: BLIP captions): ``templates="captioner"`` (one generated caption per
image, cached like at scoring time), a caption file (image id / file name -> caption), or
``"reference"``: the ground-truth caption T_i of the step is its own template (Sec. 3.3
counts "N_i ... noun chunks in caption T_i"; a drawn caption without a maskable chunk is drawn
again among those with one, so that the image keeps pseudo-captions). Noun chunks come from the same rules as at
scoring (:mod:`capeval.metrics.bridge.templates`); everything is written to
``templates.jsonl`` in the run folder and read back on resume.

Per step (Sec. 4.1): "two noun chunks are randomly chosen" per caption (``train_chunks``);
validation draws them with a fixed seed, so its loss is comparable across epochs.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from capeval.errors import InputError
from capeval.metrics.bridge import templates as tpl
from capeval.metrics.bridge.sources import TemplateSource
from capeval.train.coco import CaptionedImage


@dataclass
class ImageTemplates:
    """The template caption(s) of one image and their chunks (one per caption in ``reference`` mode)."""

    templates: list[str]
    chunks: list[list[tpl.Chunk]]


def prepare_templates(items: Sequence[CaptionedImage], mode: str, captioner: Any = None, cache: Any = True,
                      spacy_model: str = tpl.DEFAULT_SPACY_MODEL, store: str | os.PathLike[str] | None = None,
                      progress: bool | None = None, batch_size: int = 32, device: str = "cpu") -> list[ImageTemplates]:
    """Templates and chunks of every item (read from ``store`` when it holds exactly these ids)."""
    if store is not None and Path(store).is_file():
        loaded = _read_store(Path(store), [it.id for it in items])
        if loaded is not None:
            return loaded
    if mode == "reference":
        texts = [list(it.captions) for it in items]
    else:
        source = TemplateSource(None if mode == "captioner" else mode, captioner, cache, batch_size, device)
        ids = [it.id for it in items]
        found, bad = source.get(ids, {it.id: it.image for it in items}, progress)
        if bad:
            first = next(i for i in ids if i in bad)
            raise InputError(f"BRIDGE templates: {bad[first]}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
        texts = [[found[it.id]] for it in items]
    flat = [t for group in texts for t in group]
    chunks = iter(tpl.noun_chunks(flat, spacy_model))
    out = [ImageTemplates(group, [next(chunks) for _ in group]) for group in texts]
    if store is not None:
        _write_store(Path(store), items, out)
    return out


def _write_store(path: Path, items: Sequence[CaptionedImage], data: Sequence[ImageTemplates]) -> None:
    from capeval.io.atomic import atomic_open

    with atomic_open(path) as f:
        for it, d in zip(items, data):
            f.write((json.dumps({"id": it.id, "templates": d.templates,
                                 "chunks": [[list(c) for c in cs] for cs in d.chunks]}, ensure_ascii=False) + "\n")
                    .encode("utf-8"))


def _read_store(path: Path, ids: list[str]) -> list[ImageTemplates] | None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if [r["id"] for r in rows] != ids:
        return None  # another data selection: recompute
    return [ImageTemplates(r["templates"], [[tpl.Chunk(*c) for c in cs] for cs in r["chunks"]]) for r in rows]


@dataclass
class StepBatch:
    """What one step needs besides pixels: replicas, ground-truth texts and chunk prompts (token ids)."""

    replicas: tpl.ReplicaBatch
    caption_ids: torch.Tensor
    caption_eot: torch.Tensor
    prompt_ids: torch.Tensor
    prompt_eot: torch.Tensor
    same_prompt: torch.Tensor  # (R, R): replicas whose chunk prompts are the same text

    def to(self, device: Any) -> "StepBatch":
        return StepBatch(self.replicas.to(device), self.caption_ids.to(device), self.caption_eot.to(device),
                         self.prompt_ids.to(device), self.prompt_eot.to(device), self.same_prompt.to(device))


def pad_ids(ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists with 0: ``(ids (B, L), eot index (B,))``."""
    longest = max((len(x) for x in ids), default=1)
    out = torch.zeros(len(ids), longest, dtype=torch.long)
    for k, x in enumerate(ids):
        out[k, : len(x)] = torch.as_tensor(list(x), dtype=torch.long)
    return out, torch.as_tensor([len(x) - 1 for x in ids], dtype=torch.long)


class StepBuilder:
    """Turns image indices into a :class:`StepBatch` (random caption and chunk choice per image)."""

    def __init__(self, items: Sequence[CaptionedImage], templates: Sequence[ImageTemplates], tokenizer: Any,
                 us: int, template: str, prompt: str, train_chunks: int, reference: bool, context_length: int = 77):
        self.items, self.templates, self.tok = items, templates, tokenizer
        self.us, self.template, self.prompt = us, template, prompt
        self.train_chunks, self.reference, self.context_length = train_chunks, reference, context_length
        self._replicas: dict[tuple[int, int], list[tpl.Replica]] = {}

    def replicas(self, index: int, variant: int) -> list[tpl.Replica]:
        key = (index, variant)
        if key not in self._replicas:
            t = self.templates[index]
            self._replicas[key] = tpl.make_replicas(t.templates[variant], t.chunks[variant], self.tok, self.us,
                                                    self.context_length)
        return self._replicas[key]

    def build(self, indices: Sequence[int], rng: random.Random) -> StepBatch:
        reps: list[tpl.Replica] = []
        owners: list[int] = []
        captions: list[str] = []
        for k, index in enumerate(indices):
            caps = self.items[index].captions
            c = rng.randrange(len(caps))
            if self.reference and self.template != "none" and not self.replicas(index, c):
                # a caption without a maskable chunk would leave the image without pseudo-captions,
                # hence out of both weighted losses (N_i = 0): draw among the captions that have one
                usable = [v for v in range(len(caps)) if self.replicas(index, v)]
                c = rng.choice(usable) if usable else c
            captions.append(self.prompt + caps[c])
            if self.template == "none":
                chosen = [tpl.prompt_replica(self.tok, self.us, context_length=self.context_length)]
            else:
                pool = self.replicas(index, c if self.reference else 0)
                chosen = rng.sample(pool, min(self.train_chunks, len(pool))) if self.train_chunks else list(pool)
            reps += chosen
            owners += [k] * len(chosen)
        texts = [tpl.chunk_prompt(r.chunk) for r in reps]
        cap_ids, cap_eot = pad_ids(self.tok.encode_batch(captions)[0])
        prm_ids, prm_eot = pad_ids(self.tok.encode_batch(texts)[0] if texts else [[0]])
        same = torch.tensor([[a == b for b in texts] for a in texts], dtype=torch.bool).reshape(len(texts), len(texts))
        return StepBatch(tpl.pack(reps, owners), cap_ids, cap_eot, prm_ids, prm_eot, same)


class ImageDataset(torch.utils.data.Dataset):
    """``(pixels (3, S, S), index)`` per item, preprocessed like the CLIP backbone does it."""

    def __init__(self, items: Sequence[CaptionedImage], preprocess: Any):
        self.items, self.preprocess = items, preprocess

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        item = self.items[index]
        return torch.from_numpy(self.preprocess(item.image, item.id)), index
