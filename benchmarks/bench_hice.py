"""HICE-S speed per stage on this CPU, with random weights of the real sizes (no download).

    python benchmarks/bench_hice.py [--images N] [--regions N] [--points N] [--stages LIST] [--threads N]

Stages (images/s unless said otherwise), on the sample images (../shared/data/samples),
repeated/cropped to ``--images`` pictures:
  segment        SAM everything-mode with a random SamModel of sam-vit-base's size (transformers'
                 default SamConfig), ``--points``^2 prompt points, IoU/stability filters off (a
                 random model's predicted IoUs are meaningless, so every mask goes through the
                 upsampling, the stability score and NMS: the upper bound of the post-processing)
  embed-regions  random Alpha-CLIP ViT-L/14: the global view + ``--regions`` grid masks per image
                 (the region count is fixed so the stage does not depend on the segmenter)
  parse          capeval's SPICE scene-graph parser, cold, on the sample captions and references
                 (captions/s)
  score          the formulas (set_match / hMean / RefHICE-S) on random matrices of
                 ``--regions`` x 5 phrases (items/s)
  end-to-end     HiceScore (grid regions, random ViT-L/14, SPICE parser) on the images, cold
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _peers import missing, skipped  # noqa: E402
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "samples" / "clipscore_example"


def _images(n: int) -> list:
    from PIL import Image

    base = [Image.open(p).convert("RGB") for p in sorted((SAMPLES / "images").glob("*.jpg"))]
    out = []
    for k in range(n):  # crops make distinct pictures (no cache or de-duplication helps)
        im = base[k % len(base)]
        d = 10 * (k // len(base))
        out.append(im.crop((d, d, im.width - d, im.height - d)))
    return out


def _row(stage: str, count: int, unit: str, seconds: float, note: str = "") -> None:
    rate = count / seconds if seconds > 0 else float("inf")
    print(f"{stage:14} {count:6d} {unit:9} {seconds:9.2f} s  {rate:9.3f} {unit}/s  {note}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2, help="pictures per stage (default 2)")
    ap.add_argument("--regions", type=int, default=16, help="regions per image for embed-regions (default 16)")
    ap.add_argument("--points", type=int, default=16, help="SAM prompt points per side (default 16; SAM's own: 32)")
    ap.add_argument("--stages", default="segment,embed,parse,score,e2e",
                    help="comma list of stages to run (default: all: segment,embed,parse,score,e2e)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if not (SAMPLES / "images").is_dir():
        print(f"bench_hice: sample images not found at {SAMPLES}; nothing measured")
        return 0
    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    stages = {x.strip() for x in args.stages.split(",")}
    images = _images(args.images)
    print(f"{len(images)} images {images[0].size}; {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'stage':14} {'n':>6} {'unit':9} {'time':>11}  {'rate':>9}")

    if "segment" in stages and missing("transformers"):
        skipped(f"{'segment':14}", "transformers")
    elif "segment" in stages:
        import transformers as tf

        from capeval.models.regions import region_backend

        torch.manual_seed(0)
        model = tf.SamModel(tf.SamConfig()).eval()  # the default config is sam-vit-base's
        proc = tf.SamImageProcessorPil()
        sam = region_backend("sam", model=model, processor=proc, checkpoint="random-vit-base",
                             points_per_side=args.points, pred_iou_thresh=0.0, stability_score_thresh=0.0)
        t = time.perf_counter()
        found = [len(sam.masks(im)) for im in images]
        _row("segment", len(images), "images", time.perf_counter() - t,
             f"random sam-vit-base, {args.points}x{args.points} points, {sum(found)} masks kept after NMS")
        del model, sam

    from capeval.metrics.hice.visual import RegionEmbedder
    from capeval.models.clip.alpha import random_alpha_backbone
    from capeval.models.regions import region_backend

    bb = random_alpha_backbone("ViT-L-14", seed=0)
    side = max(1, int(round(args.regions ** 0.5)))
    grid = region_backend("grid", rows=side, cols=max(1, args.regions // side))
    if "embed" in stages:
        emb = RegionEmbedder(bb, grid, batch_size=32)
        t = time.perf_counter()
        emb.embed(images, [f"img{k}" for k in range(len(images))])
        dt = time.perf_counter() - t
        passes = emb.stats["regions"] + emb.stats["images"]
        _row("embed-regions", len(images), "images", dt, f"random Alpha-CLIP ViT-L/14, {passes} image-mask passes "
             f"({passes / dt:.2f}/s)")

    from capeval.metrics.hice.phrases import SpicePhrases

    texts = list(json.loads((SAMPLES / "good_captions.json").read_text()).values())
    texts += list(json.loads((SAMPLES / "bad_captions.json").read_text()).values())
    texts += [r for refs in json.loads((SAMPLES / "refs.json").read_text()).values() for r in refs]
    parser = None
    try:
        if missing("spacy"):
            raise ModuleNotFoundError("spacy not installed")
        parser = SpicePhrases()
        t = time.perf_counter()
        parser.phrases(texts)
        if "parse" in stages:
            _row("parse", len(texts), "captions", time.perf_counter() - t, "SPICE parser, cold (includes loading spaCy)")
    except Exception as exc:  # noqa: BLE001 - a benchmark row says why it is missing
        print(f"{'parse':14} skipped: {exc}")
        parser = None

    from capeval.functional import hice as F

    rng = np.random.default_rng(0)
    n_items = 2000
    mats = [rng.uniform(-0.1, 0.4, size=(args.regions, 5)) for _ in range(n_items)]
    refs = [rng.uniform(-0.1, 0.6, size=(12, 5)) for _ in range(n_items)]
    t = time.perf_counter()
    for s, r in zip(mats, refs):
        lm, tm = F.set_match(s), F.set_match(r)
        F.ref_hice_s(0.25, lm.f, 0.6, tm.f)
    if "score" in stages:
        _row("score", n_items, "items", time.perf_counter() - t, f"{args.regions} regions x 5 phrases + 12 x 5")

    if parser is not None and "e2e" in stages:
        from capeval.metrics.hice.scorer import HiceScore

        cands = {f"img{k}": texts[k % 2] for k in range(len(images))}
        scorer = HiceScore(metrics=("hice-s",), backbone=bb, regions=grid, parser=parser)
        t = time.perf_counter()
        scorer.score(cands, images={k: im for k, im in zip(cands, images)})
        _row("end-to-end", len(images), "images", time.perf_counter() - t, "grid regions, random ViT-L/14, hice-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
