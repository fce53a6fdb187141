"""SCST reward throughput (captions/s) of ``capeval.Reward`` at batch 32 images x 5 beams, on this CPU.

Rewards timed: CIDEr-D (document frequencies fitted once on a synthetic training corpus),
CLIP-S and PAC-S++ (random weights of the ViT-B/32 architecture: speed does not depend on the
values; image embeddings computed once and kept in memory, as in SCST where every image is
seen again each epoch), and the mix ``{pac-s++: 1, cider-d: 0.5}``. Baseline: pycocoevalcap's
``Cider`` (its CIDEr-D), called per batch the way SCST code does (captions already
tokenised, document frequencies from the batch's references); capeval also PTB-tokenises
each batch. Captions are synthetic; each beam's 5 captions share the image's 5 references.

    python benchmarks/bench_reward.py                      # 5 timed batches after 1 warm-up
    python benchmarks/bench_reward.py --batches 10 --threads 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from _peers import missing, skipped

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SUBJECTS = ("a man", "a woman", "two dogs", "a red bus", "a small cat", "a group of people", "a white plate")
PLACES = ("on a street", "near the water", "in a kitchen", "on a green field", "next to a wooden table")
VERBS = ("standing", "sitting", "running", "waiting", "playing")


def caption(rng: np.random.Generator) -> str:
    return (f"{SUBJECTS[rng.integers(len(SUBJECTS))]} {VERBS[rng.integers(len(VERBS))]} "
            f"{PLACES[rng.integers(len(PLACES))]}")


def batches(n: int, images: int, beam: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for b in range(n):
        ids = [f"b{b}-{k}" for k in range(images)]
        refs = {i: [caption(rng) for _ in range(5)] for i in ids}
        image_ids = [i for i in ids for _ in range(beam)]
        out.append({"captions": [caption(rng) for _ in image_ids], "image_ids": image_ids, "refs": refs,
                    "images": {i: rng.integers(0, 255, size=(240, 320, 3), dtype=np.uint8) for i in ids}})
    return out


def timed(fn, data: list[dict]) -> float:
    fn(data[0])  # warm-up (first tokenisation, first embeddings of batch 0's images)
    start = time.perf_counter()
    for d in data[1:]:
        fn(d)
    return sum(len(d["captions"]) for d in data[1:]) / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=5, help="timed batches (after one warm-up batch)")
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from capeval.models.clip import backbone as bbmod
    from capeval.models.clip.tokenizer import find_vocab
    from capeval.reward import Reward

    try:
        vocab_dir, tokenizer = find_vocab(), "clip-bpe"
    except Exception:  # noqa: BLE001 - no CLIP vocabulary installed: the toy BPE (longer sequences)
        vocab_dir, tokenizer = None, "toy-bpe"
    random_vit = bbmod.random_backbone("ViT-B-32", seed=0, tokenizer_dir=vocab_dir)
    bbmod.load_backbone = lambda name, device="cpu", **kw: random_vit  # every CLIP-family name -> random weights

    data = batches(args.batches + 1, args.images, args.beam)
    corpus = {f"t{k}": [caption(np.random.default_rng(k)) for _ in range(5)] for k in range(2000)}
    results: dict[str, float] = {}
    for label, metrics in (("cider-d", {"cider-d": 1.0}), ("clip-s", {"clip-s": 1.0}),
                           ("pac-s++", {"pac-s++": 1.0}), ("pac-s++ + 0.5 cider-d", {"pac-s++": 1.0, "cider-d": 0.5})):
        reward = Reward(metrics, fit=corpus)
        for d in data:  # image embeddings once, before training (what SCST does after the first epoch)
            reward.precompute(d["images"]) if any(m != "cider-d" for m in metrics) else None

        def step(d, reward=reward):
            return reward(d["captions"], d["refs"], image_ids=d["image_ids"])

        results[label] = timed(step, data)
        print(f"capeval.Reward {label:24s} {results[label]:9.0f} captions/s", flush=True)

    peer = missing("pycocoevalcap")
    if peer:
        results["pycocoevalcap Cider per batch"] = skipped("pycocoevalcap Cider (CIDEr-D) per batch", peer)
    else:
        from pycocoevalcap.cider.cider import Cider

        scorer = Cider()

        def coco_step(d):
            res = {k: [c.lower()] for k, c in enumerate(d["captions"])}
            gts = {k: [r.lower() for r in d["refs"][i]] for k, i in enumerate(d["image_ids"])}
            return scorer.compute_score(gts, res)

        results["pycocoevalcap Cider per batch"] = timed(coco_step, data)
        print(f"pycocoevalcap Cider (CIDEr-D) per batch {results['pycocoevalcap Cider per batch']:9.0f} captions/s")
    info = {"batch": f"{args.images}x{args.beam}", "threads": torch.get_num_threads(), "tokenizer": tokenizer,
            "backbone": "ViT-B-32 (random)", "captions_per_s": results}
    if args.json:
        Path(args.json).write_text(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
