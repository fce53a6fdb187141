"""Generated positives for PAC-S training: a caption per image (BLIP) and an image per caption (Stable Diffusion).

Sarto et al. 2023 / 2024: T' from BLIP, V' from Stable Diffusion v1.5 (journal Table 7).
Work is split by image: shard ``i`` of ``n`` takes the images whose position in the split
is ``i`` modulo ``n``, so GPU workers run ``--shard 0/8`` ... ``--shard 7/8`` on one output
folder. Each shard appends to its own ``positives-<i>-of-<n>.jsonl`` (records: see
:mod:`capeval.train.pacs_data`, each with the sha256 of its text or PNG file) and writes
``provenance-<i>-of-<n>.json`` (models, revisions, seeds, settings, capeval version).
Resuming skips the records already in the shard file. The image of caption j of image i
uses seed ``seed + crc32(f"{image_id}/{j}")``: the same image whatever the sharding.

Generators are objects: a captioner with ``key`` and ``caption(images) -> list[str]``
(:func:`capeval.train.captioner.load_captioner`), a text-to-image model with
``provenance`` (dict) and ``generate(prompts, seeds) -> list[PIL.Image]``
(:class:`DiffusersTextToImage`, which needs the ``diffusers`` package).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from capeval._optional import require
from capeval._version import __version__
from capeval.errors import InputError
from capeval.io.atomic import atomic_write_bytes, atomic_write_text
from capeval.train.coco import CaptionedImage

DEFAULT_T2I = "stable-diffusion-v1-5/stable-diffusion-v1-5"


def parse_shard(text: str) -> tuple[int, int]:
    """``"3/8"`` -> (3, 8); InputError unless 0 <= i < n."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f"--shard {text!r}: expected I/N, e.g. 0/8") from None
    if not 0 <= i < n:
        raise InputError(f"--shard {text!r}: need 0 <= I < N")
    return i, n


def image_seed(seed: int, image_id: str, caption_index: int) -> int:
    return (seed + zlib.crc32(f"{image_id}/{caption_index}".encode())) % 2**32


class DiffusersTextToImage:
    """Stable Diffusion through diffusers' ``StableDiffusionPipeline`` (settings recorded in ``provenance``).

    ``safety_checker`` (default on): the model's own safety checker runs on every image (a flagged
    image comes back black), as the PAC-S++ journal (Sec. 4.1, "Positive Image-Text
    Generation": "we utilize a safety checker module to minimize the probability of explicit
    images") and diffusers' default do; a model without one is an error unless it is off.
    Recorded as ``safety_checker`` in the provenance. (The journal also disables invisible
    watermarking: ``StableDiffusionPipeline`` adds none.)
    """

    def __init__(self, model: str = DEFAULT_T2I, revision: str | None = None, steps: int = 50,
                 guidance: float = 7.5, size: int = 512, device: str = "cpu", dtype: str = "float32",
                 safety_checker: bool = True):
        diffusers = require("diffusers", purpose="generated positive images")
        import torch

        off = {} if safety_checker else {"safety_checker": None, "requires_safety_checker": False}
        self.pipe = diffusers.StableDiffusionPipeline.from_pretrained(
            model, revision=revision, torch_dtype=getattr(torch, dtype), **off).to(device)
        if safety_checker and getattr(self.pipe, "safety_checker", None) is None:
            raise InputError(f"text-to-image model {model} has no safety checker, which the PAC-S++ journal used: "
                             "use a model that ships one, or turn it off (--no-safety-checker)")
        self.pipe.set_progress_bar_config(disable=True)
        self.device = device
        self.provenance = {"model": model, "revision": revision, "steps": steps, "guidance": guidance,
                           "size": size, "dtype": dtype, "safety_checker": bool(safety_checker),
                           "diffusers": diffusers.__version__, "scheduler": type(self.pipe.scheduler).__name__}

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Any]:
        import torch

        gens = [torch.Generator(self.device).manual_seed(s) for s in seeds]
        p = self.provenance
        out = self.pipe(list(prompts), num_inference_steps=p["steps"], guidance_scale=p["guidance"],
                        height=p["size"], width=p["size"], generator=gens)
        return list(out.images)


def _done(path: Path) -> set[tuple[str, str, int]]:
    keys: set[tuple[str, str, int]] = set()
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by an interrupted worker: redone
            keys.add((rec.get("kind", ""), str(rec.get("image_id")), int(rec.get("caption_index", -1))))
    return keys


def generate_positives(items: Sequence[CaptionedImage], out_dir: str | os.PathLike[str], *, captioner: Any = None,
                       text_to_image: Any = None, shard: tuple[int, int] = (0, 1), seed: int = 0,
                       batch_size: int = 8, progress: bool | None = None) -> dict[str, Any]:
    """Write this shard's positives (module docstring); ``captioner`` / ``text_to_image`` None: skip that kind.

    Returns counts: ``{"captions": made, "images": made, "skipped": already there}``.
    """
    from capeval.progress import make_progress

    if captioner is None and text_to_image is None:
        raise InputError("nothing to generate: give a captioner, a text-to-image model, or both")
    i, n = shard
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    mine = [it for k, it in enumerate(items) if k % n == i]
    records = out / f"positives-{i:03d}-of-{n:03d}.jsonl"
    done = _done(records)
    prov = {"capeval_version": __version__, "shard": f"{i}/{n}", "seed": seed, "images_in_shard": len(mine),
            "captioner": getattr(captioner, "key", None) if captioner is not None else None,
            "text_to_image": getattr(text_to_image, "provenance", None) if text_to_image is not None else None,
            "seed_rule": "seed + crc32('<image_id>/<caption_index>') mod 2^32"}
    atomic_write_text(out / f"provenance-{i:03d}-of-{n:03d}.json", json.dumps(prov, indent=2))
    counts = {"captions": 0, "images": 0, "skipped": 0}
    jobs: list[tuple[str, Any]] = []
    for it in mine:
        if captioner is not None:
            if ("caption", it.id, -1) in done:
                counts["skipped"] += 1
            else:
                jobs.append(("caption", it))
        if text_to_image is not None:
            for j in range(len(it.captions)):
                if ("image", it.id, j) in done:
                    counts["skipped"] += 1
                else:
                    jobs.append(("image", (it, j)))
    with open(records, "a", encoding="utf-8") as f, make_progress(len(jobs), f"positives {i}/{n}", progress) as bar:
        for kind in ("caption", "image"):
            todo = [x for k, x in jobs if k == kind]
            for start in range(0, len(todo), batch_size):
                chunk = todo[start : start + batch_size]
                lines = _captions(captioner, chunk) if kind == "caption" else _images(text_to_image, chunk, out, seed)
                f.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
                f.flush()  # a crash loses at most the current batch
                counts[kind + "s"] += len(chunk)
                bar.update(len(chunk))
    return counts


def _captions(captioner: Any, chunk: Sequence[CaptionedImage]) -> list[dict[str, Any]]:
    texts = captioner.caption([it.image for it in chunk])
    if len(texts) != len(chunk):
        raise InputError(f"captioner returned {len(texts)} captions for {len(chunk)} images")
    return [{"kind": "caption", "image_id": it.id, "text": t, "sha256": hashlib.sha256(t.encode()).hexdigest()}
            for it, t in zip(chunk, texts)]


def _images(t2i: Any, chunk: Sequence[tuple[CaptionedImage, int]], out: Path, seed: int) -> list[dict[str, Any]]:
    prompts = [it.captions[j] for it, j in chunk]
    seeds = [image_seed(seed, it.id, j) for it, j in chunk]
    images = t2i.generate(prompts, seeds)
    if len(images) != len(chunk):
        raise InputError(f"text-to-image model returned {len(images)} images for {len(chunk)} captions")
    lines = []
    for (it, j), img, s in zip(chunk, images, seeds):
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        data = buf.getvalue()
        rel = f"images/{it.id}_{j}.png"
        atomic_write_bytes(out / rel, data)
        lines.append({"kind": "image", "image_id": it.id, "caption_index": j, "path": rel, "seed": s,
                      "sha256": hashlib.sha256(data).hexdigest()})
    return lines
