"""PAC-S / PAC-S++ training speed on this machine, ViT-B/32-size random weights, and a full-COCO estimate.

One optimizer step = encode the batch's real and generated images (2 x batch through the
ViT) and real and generated captions (2 x batch through the text tower), the loss of
:mod:`capeval.train.pacs`, backward, AdamW. Weights are random (speed does not depend on
them), images already preprocessed 224 px tensors (decoding is done by DataLoader workers
in a real run), captions COCO-like sentences with the toy BPE of ``random_backbone``.

    python benchmarks/bench_pacs_train.py                    # batch 8, 3 timed steps, both modes
    python benchmarks/bench_pacs_train.py --batch 16 --steps 4 --json out.json

Full-COCO estimate (printed): Karpathy train = 113,287 images -> 443 steps per epoch at
batch 256. The papers stop after 1,500 steps without a better validation loss; capeval
assumes ~5,000 steps (~11 epochs) for the estimate. A GPU step costs about
``FLOPs(step) / (achieved FLOP/s)``: ViT-B/32 forward ~4.4 GFLOPs per image and ~3 GFLOPs
per 20-token caption, backward ~2x forward for PAC-S++ (gradients flow through every
layer to the LoRA factors) and ~0 for PAC-S (only the projections train: the towers run
without gradients in practice) -> ~11 TFLOPs per PAC-S++ step at batch 256 with both
generated views; at ~100 TFLOP/s achieved (A100/H100 bf16, ~30-40% of peak) ~0.11 s/step,
i.e. ~10 minutes for 5,000 steps of compute, typically dominated by JPEG decoding
(~512 images/step: ~1-2 s/step with 8-16 decoding workers) -> 1.5-3 hours per run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

CAPTIONS = ("a man riding a bike down a city street", "two dogs playing with a ball on the grass",
            "a plate of food with broccoli and rice", "a red bus parked next to a building",
            "a woman holding an umbrella in the rain", "a cat sleeping on a wooden table")


def bench(mode: str, batch: int, steps: int) -> dict[str, float]:
    import torch

    from capeval.models.clip.backbone import random_backbone
    from capeval.train.pacs import PacsObjective
    from capeval.train.pacs_config import PacsTrainConfig

    bb = random_backbone("ViT-B-32")
    obj = PacsObjective(bb.model, bb.tokenizer, PacsTrainConfig(mode=mode))
    params = [p for p in obj.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    g = torch.Generator().manual_seed(0)
    data = {"v": torch.randn(batch, 3, 224, 224, generator=g), "v_gen": torch.randn(batch, 3, 224, 224, generator=g),
            "t": [CAPTIONS[i % 6] for i in range(batch)], "t_gen": [CAPTIONS[(i + 1) % 6] for i in range(batch)]}
    obj.train()
    times = []
    for k in range(steps + 1):  # the first step warms up allocators and is not timed
        start = time.perf_counter()
        obj(data)["loss"].backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if k:
            times.append(time.perf_counter() - start)
    sec = sum(times) / len(times)
    return {"mode": mode, "batch": batch, "sec_per_step": sec, "steps_per_s": 1 / sec, "images_per_s": batch / sec,
            "trainable": sum(p.numel() for p in params)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--modes", default="pacs,pacs++")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [bench(m, args.batch, args.steps) for m in args.modes.split(",")]
    steps_epoch = -(-113_287 // 256)
    for r in rows:
        cpu_hours = 5000 * 256 / r["images_per_s"] / 3600
        print(f"{r['mode']:7s} batch {r['batch']}: {r['sec_per_step']:.2f} s/step ({r['steps_per_s']:.3f} steps/s, "
              f"{r['images_per_s']:.1f} images/s), trainable {r['trainable']:,}; 5,000 steps x 256 on this CPU "
              f"~{cpu_hours:,.0f} h")
    print(f"full COCO: {steps_epoch} steps/epoch at batch 256; one GPU: see the docstring (~1.5-3 h per run)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "torch_threads": torch.get_num_threads()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
