"""The cost of the torchmetrics face: CaptionScore (update in batches, then compute) against
capeval.score on the same items, in one process and one run.

Flickr8k leave-one-out: each of the 40,460 captions against its image's four other captions,
metrics coco-ngram (METEOR's index prepared beforehand). The overhead is what CaptionScore adds:
encoding the captions into tensor states per batch and decoding them in compute(); under DDP
the states also travel through all_gather (gloo: one tensor per state and rank).

    python benchmarks/bench_torchmetrics.py [--items 40460] [--batch 64] [--metrics coco-ngram]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA = Path(os.environ.get("CAPEVAL_DATA", ROOT.parent / "shared" / "data"))

from _peers import missing, skipped  # noqa: E402


def leave_one_out(limit: int) -> tuple[list[str], list[list[str]]]:
    from capeval.bench.flickr8k import read_flickr8k_tokens

    _, by_image = read_flickr8k_tokens(DATA / "flickr8k" / "Flickr8k.token.txt")
    cands, refs = [], []
    for caps in by_image.values():
        for k, cap in enumerate(caps):
            cands.append(cap)
            refs.append(caps[:k] + caps[k + 1:])
            if len(cands) == limit:
                return cands, refs
    return cands, refs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40460)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--metrics", default="coco-ngram")
    args = parser.parse_args()
    need = missing("torch", "torchmetrics")
    if need:
        skipped("CaptionScore vs capeval.score", need)
        return
    import capeval
    from capeval.torchmetrics import CaptionScore

    cands, refs = leave_one_out(args.items)
    capeval.score({"0": "a dog"}, {"0": ["a dog runs"]}, "meteor")  # METEOR's one-time index, not timed
    keys = [str(i) for i in range(len(cands))]
    t0 = time.perf_counter()
    direct = capeval.score(dict(zip(keys, cands)), dict(zip(keys, refs)), args.metrics)
    t_score = time.perf_counter() - t0

    metric = CaptionScore(args.metrics)
    t0 = time.perf_counter()
    for start in range(0, len(cands), args.batch):
        metric.update(cands[start:start + args.batch], refs[start:start + args.batch],
                      ids=list(range(start, min(start + args.batch, len(cands)))))
    t_update = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = metric.compute()
    t_compute = time.perf_counter() - t0
    same = all(float(got[m]) == direct[m].system for m in direct)
    total = t_update + t_compute
    print(f"{len(cands)} items, {args.metrics}, batches of {args.batch}; same system scores: {same}")
    print(f"capeval.score                 {t_score:8.2f} s")
    print(f"CaptionScore update (all)     {t_update:8.2f} s")
    print(f"CaptionScore compute          {t_compute:8.2f} s")
    print(f"CaptionScore / capeval.score  {total / t_score:8.2f} x  (overhead {total - t_score:+.2f} s)")


if __name__ == "__main__":
    main()
