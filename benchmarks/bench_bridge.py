"""BRIDGE speed on this machine: training steps/s and scoring images/s, ViT-B/32-size random weights.

Weights are random (CLIP ViT-B/32 architecture: 12+12 layers, widths 768/512; psi with the
paper's 2 layers, US = 3), images synthetic 640x480 arrays, template captions given as a
mapping (no captioner runs: BLIP's cost is separate, one generation per image, cached).
Speed does not depend on the weight values. Tokenizer: CLIP's real BPE vocabulary when
capeval finds it (e.g. in an installed ``clip``/``open_clip`` package), else the toy BPE of
``random_backbone``, whose byte-level tokens make text sequences ~2.5x longer (slower).

    python benchmarks/bench_bridge.py                       # batch 16, 4 steps, 32 images scored
    python benchmarks/bench_bridge.py --batch 32 --steps 6 --images 64 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SUBJECTS = ("a man", "a woman", "two dogs", "a red bus", "a small cat", "a group of people", "a white plate")
PLACES = ("on a street", "near the water", "in a kitchen", "on a green field", "next to a wooden table")
VERBS = ("standing", "sitting", "running", "waiting", "playing")


def captions(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"{SUBJECTS[rng.integers(len(SUBJECTS))]} {VERBS[rng.integers(len(VERBS))]} "
            f"{PLACES[rng.integers(len(PLACES))]} with {SUBJECTS[rng.integers(len(SUBJECTS))]}" for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16, help="training batch (images); the paper uses 256 on a GPU")
    ap.add_argument("--steps", type=int, default=4, help="timed training steps (after one warm-up step)")
    ap.add_argument("--images", type=int, default=32, help="images scored")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    import torch

    from capeval.metrics.bridge.scorer import BridgeScore
    from capeval.models.clip.backbone import random_backbone
    from capeval.train.bridge import train_bridge
    from capeval.train.bridge_config import BridgeTrainConfig
    from capeval.train.coco import CaptionedImage

    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    from capeval.errors import ResourceError
    from capeval.models.clip.tokenizer import find_vocab

    try:
        vocab_dir, tokenizer = find_vocab(), "clip-bpe"
    except ResourceError:
        vocab_dir, tokenizer = None, "toy-bpe"
    backbone = random_backbone("ViT-B-32", seed=0, tokenizer_dir=vocab_dir)
    n_train = args.batch * (args.steps + 1)
    train_caps, tpl_caps = captions(n_train, 1), captions(n_train, 2)
    items = [CaptionedImage(f"im{k}", rng.integers(0, 256, (480, 640, 3), dtype=np.uint8), (train_caps[k],))
             for k in range(n_train)]
    out: dict[str, object] = {"device": "cpu", "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                              "backbone": "ViT-B-32 (random)", "tokenizer": tokenizer, "batch": args.batch}
    with tempfile.TemporaryDirectory() as tmp:
        tfile = Path(tmp) / "templates.json"
        tfile.write_text(json.dumps({it.id: t for it, t in zip(items, tpl_caps)}))
        cfg = BridgeTrainConfig(output_dir=str(Path(tmp) / "run"), templates=str(tfile), batch_size=args.batch,
                                max_epochs=1, workers=0, device="cpu", accelerate="no", log_every=1, dropout=0.1)
        start = time.perf_counter()
        result = train_bridge(cfg, backbone=backbone, train_data=items, progress=False)
        total = time.perf_counter() - start
        from capeval.train.logging import read_log

        times = [float(r["time"]) for r in read_log(result.run_dir / "metrics.csv") if r["phase"] == "train"]
        steady = np.diff(times)  # seconds per step after the first (warm-up, spaCy, templates)
        out["train"] = {"steps": result.steps, "seconds_per_step": round(float(np.mean(steady)), 3),
                        "steps_per_s": round(float(1 / np.mean(steady)), 3),
                        "images_per_s": round(float(args.batch / np.mean(steady)), 2),
                        "run_seconds_incl_setup": round(total, 1)}
        scorer = BridgeScore(checkpoint=str(result.last), backbone=backbone, templates=tfile, batch_size=16)
        ids = [it.id for it in items[: args.images]]
        images = {it.id: it.image for it in items[: args.images]}
        cands = dict(zip(ids, captions(len(ids), 3)))
        scorer.score(dict(list(cands.items())[:2]), images={i: images[i] for i in ids[:2]})  # warm-up
        start = time.perf_counter()
        rep = scorer.score(cands, images=images)["bridge"]
        seconds = time.perf_counter() - start
        out["score"] = {"images": len(ids), "seconds": round(seconds, 2), "images_per_s": round(len(ids) / seconds, 2),
                        "pseudo_captions_per_image": round(float(np.mean(list(rep.extras["pseudo_captions"].values()))), 2)}
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
