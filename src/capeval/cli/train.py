"""``capeval train``: train a learnable metric. ``capeval train bridge|pacs --config FILE [--resume]``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from capeval.cli.train_args import add_config_arguments, run_trainer


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("train", help="train a learnable metric (bridge, pacs)",
                              description="Train a learnable caption metric from a YAML config.")
    sub = p.add_subparsers(dest="trainer", metavar="METRIC")
    b = sub.add_parser(
        "bridge", help="train BRIDGE's mapping module on COCO (Karpathy splits)",
        description="Train BRIDGE (Sarto et al. 2024) on a frozen CLIP: template captions (BLIP by default), "
                    "noun-chunk pseudo-captions, weighted InfoNCE (Eq. 3). Writes best.safetensors / "
                    "last.safetensors, metrics.csv and config.yaml into output_dir; score with "
                    "`capeval score -m bridge -O bridge.checkpoint=RUN/best.safetensors`.")
    add_config_arguments(b, "--set lr=3e-4 --set mixed_precision=bf16", "continue the run in output_dir from its last epoch")
    b.set_defaults(func=run_bridge)
    _add_pacs(sub)
    from capeval.cli.train_captioner import add_captioner

    add_captioner(sub)

    def usage(_: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=usage)


def run_bridge(args: argparse.Namespace) -> int:
    from capeval.train.bridge import train_bridge
    from capeval.train.bridge_config import BridgeTrainConfig

    result = run_trainer(args, BridgeTrainConfig,
                         lambda cfg, progress: train_bridge(cfg, resume=args.resume, progress=progress))
    if result is None:
        return 0
    print(json.dumps({"run_dir": str(result.run_dir), "best": str(result.best) if result.best else None,
                      "last": str(result.last), "epochs": result.epochs, "steps": result.steps,
                      "best_val_loss": result.best_val, "stopped": result.stopped}, indent=2))
    return 0


def _add_pacs(sub: Any) -> None:
    p = sub.add_parser(
        "pacs", help="train PAC-S / PAC-S++ (positive-augmented contrastive CLIP fine-tuning)",
        description="Fine-tune CLIP as PAC-S (mode: pacs, projections only) or PAC-S++ (mode: pacs++, LoRA) on COCO "
                    "with generated positives (`capeval train pacs generate`). Writes best.safetensors / best.pth "
                    "(the released checkpoint layouts), metrics.csv, config.yaml and run.json into output_dir; "
                    "score with `capeval score -m pac-s++ --backbone RUN/best.safetensors`.")
    add_config_arguments(p, "--set mode=pacs --set lambda_v=0.05", "continue the run in output_dir")
    p.add_argument("--dry-run", action="store_true", help="print the plan (steps, memory estimate) and exit")
    p.set_defaults(func=run_pacs)
    gsub = p.add_subparsers(dest="pacs_command", metavar="generate")
    g = gsub.add_parser(
        "generate", help="generate positives: BLIP captions per image, Stable Diffusion images per caption",
        description="Write generated positives for one shard of a COCO Karpathy split (resumable; provenance and "
                    "sha256 recorded). Images need the diffusers package.")
    g.add_argument("--coco-root", required=True, metavar="DIR")
    g.add_argument("--annotations", metavar="FILE", help="dataset_coco.json (default: in --coco-root)")
    g.add_argument("--split", default="train")
    g.add_argument("--output", "-o", required=True, metavar="DIR", help="positives folder (the config's positives)")
    g.add_argument("--shard", default="0/1", metavar="I/N")
    g.add_argument("--what", choices=("both", "captions", "images"), default="both")
    g.add_argument("--captioner", default=None, help="captioner name or path (default: BLIP large, COCO)")
    g.add_argument("--t2i", default=None, help="diffusers model (default: Stable Diffusion v1.5)")
    g.add_argument("--revision", default=None, help="t2i model revision (recorded)")
    g.add_argument("--steps", type=int, default=50)
    g.add_argument("--guidance", type=float, default=7.5)
    g.add_argument("--size", type=int, default=512)
    g.add_argument("--no-safety-checker", dest="safety_checker", action="store_false",
                   help="skip the model's NSFW safety checker (the PAC-S++ journal used it; recorded)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--batch-size", type=int, default=8)
    g.add_argument("--device", default="cpu")
    g.add_argument("--limit", type=int, default=None, help="first N images of the split only")
    g.add_argument("--quiet", "-q", action="store_true")
    g.set_defaults(func=run_pacs_generate)


def run_pacs(args: argparse.Namespace) -> int:
    from capeval.train.pacs_config import PacsTrainConfig

    def train(cfg: Any, progress: bool | None) -> Any:
        from capeval.train.pacs import train_pacs  # torch: only once the config has been read and checked

        return train_pacs(cfg, resume=args.resume, dry_run=args.dry_run, progress=progress)

    result = run_trainer(args, PacsTrainConfig, train)
    # None: --print-config; not the main process of a multi-process run: the main one reports
    if result is None or not getattr(result, "is_main", True):
        return 0
    if args.dry_run:
        print(json.dumps(result, indent=2))
        return 0
    print(json.dumps({"run_dir": str(result.run_dir), "best": str(result.best) if result.best else None,
                      "last": str(result.last), "steps": result.steps, "best_val_loss": result.best_val,
                      "stopped": result.stopped}, indent=2))
    return 0


def run_pacs_generate(args: argparse.Namespace) -> int:
    from capeval.train.coco import load_karpathy
    from capeval.train.pacs_generate import (
        DEFAULT_T2I,
        DiffusersTextToImage,
        generate_positives,
        parse_shard,
    )

    shard = parse_shard(args.shard)
    items = load_karpathy(args.coco_root, args.split, args.annotations, args.limit)
    captioner = t2i = None
    if args.what in ("both", "captions"):
        from capeval.train.captioner import DEFAULT_CAPTIONER, load_captioner

        captioner = load_captioner(args.captioner or DEFAULT_CAPTIONER, device=args.device)
    if args.what in ("both", "images"):
        t2i = DiffusersTextToImage(args.t2i or DEFAULT_T2I, args.revision, args.steps, args.guidance, args.size,
                                   args.device, safety_checker=args.safety_checker)
    counts = generate_positives(items, args.output, captioner=captioner, text_to_image=t2i, shard=shard,
                                seed=args.seed, batch_size=args.batch_size, progress=False if args.quiet else None)
    print(json.dumps(counts))
    return 0
