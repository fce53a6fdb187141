"""Where EMScore's time goes on CPU: decoding, frame embedding, text embedding, matching.

The machine's load matters: run it on an idle machine. Uses the bundled 10 s clip (250 frames, 640x360 H.264), copied to ``--videos`` distinct
files so nothing is deduplicated, and a CLIP with *random* weights of the real ViT-B/32
architecture (same compute as OpenAI's checkpoint; no download needed). Prints JSON.

    python benchmarks/bench_video.py [--videos 8] [--arch ViT-B-32] [--frames 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(HERE.parents[1] / "shared" / "data")))
    ap.add_argument("--videos", type=int, default=8, help="distinct video files (copies of the sample)")
    ap.add_argument("--arch", default="ViT-B-32", help="architecture of the random-weight backbone")
    ap.add_argument("--frames", type=int, default=10)
    args = ap.parse_args()
    sample = Path(args.data) / "samples" / "video" / "Bfyp0C02sko_000248_000258.mp4"
    if not sample.exists():
        print(f"sample video not found: {sample}; pass --data", file=sys.stderr)
        return 2

    import torch

    import capeval
    from capeval.models.clip.backbone import random_backbone
    from capeval.io import video as vf

    out: dict[str, object] = {"torch_threads": torch.get_num_threads(), "arch": args.arch, "videos": args.videos}
    t = time.perf_counter()
    vf.decode_video(sample, args.frames)
    out["decode_sampled_s"] = round(time.perf_counter() - t, 4)
    t = time.perf_counter()
    vf.decode_video(sample, None)
    out["decode_all_frames_s"] = round(time.perf_counter() - t, 4)

    captions = [
        "a person is frying a pan of eggs that are colored pink and green",
        "someone cooks two eggs in a small pan on the stove",
        "a dog runs across the grass in a park",
        "a woman stirs food in a frying pan",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.videos):
            shutil.copy(sample, Path(tmp) / f"v{k}.mp4")
        cands = {f"v{k}": captions[k % len(captions)] for k in range(args.videos)}
        refs = {f"v{k}": [captions[(k + 1) % len(captions)], captions[(k + 2) % len(captions)]]
                for k in range(args.videos)}
        # "tiny" measures the pipeline (decoding, preprocessing, IDF, matching) with a model
        # whose forward passes cost next to nothing; the real architecture adds CLIP's cost.
        for arch in dict.fromkeys(["tiny", args.arch]):
            bb = random_backbone(arch, seed=0)
            scorer = capeval.load("emscore", backbone=bb, n_frames=args.frames)
            scorer.metrics = ("emscore", "ref-emscore")
            t = time.perf_counter()
            scorer.score(cands, refs, videos=tmp)
            total = time.perf_counter() - t
            out[f"score_{arch}_s"] = round(total, 3)
            out[f"per_video_{arch}_s"] = round(total / args.videos, 4)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
