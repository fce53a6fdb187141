"""``capeval train``: train a learnable metric. ``capeval train bridge --config FILE [--resume]``."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("train", help="train a learnable metric (bridge)",
                              description="Train a learnable caption metric from a YAML config.")
    sub = p.add_subparsers(dest="trainer", metavar="METRIC")
    b = sub.add_parser(
        "bridge", help="train BRIDGE's mapping module on COCO (Karpathy splits)",
        description="Train BRIDGE (Sarto et al. 2024) on a frozen CLIP: template captions (BLIP by default), "
                    "noun-chunk pseudo-captions, weighted InfoNCE (Eq. 3). Writes best.safetensors / "
                    "last.safetensors, metrics.csv and config.yaml into output_dir; score with "
                    "`capeval score -m bridge -O bridge.checkpoint=RUN/best.safetensors`.")
    b.add_argument("--config", "-c", metavar="FILE", help="YAML settings (keys: see --print-config)")
    b.add_argument("--set", "-s", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting (value read as YAML), e.g. --set lr=3e-4 --set mixed_precision=bf16")
    b.add_argument("--output-dir", "-o", metavar="DIR", help="run folder (overrides output_dir)")
    b.add_argument("--resume", action="store_true", help="continue the run in output_dir from its last epoch")
    b.add_argument("--print-config", action="store_true", help="print the resolved settings as YAML and exit")
    b.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    b.set_defaults(func=run_bridge)

    def usage(_: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=usage)


def run_bridge(args: argparse.Namespace) -> int:
    from capeval.train.bridge_config import BridgeTrainConfig
    from capeval.train.config import dump_yaml, load_config, parse_overrides

    overrides = parse_overrides(args.set)
    if args.output_dir:
        overrides["output_dir"] = args.output_dir
    cfg = load_config(BridgeTrainConfig, args.config, overrides)
    if args.print_config:
        print(dump_yaml(cfg), end="")
        return 0
    from capeval.progress import progress_setting
    from capeval.train.bridge import train_bridge

    progress = False if args.quiet else None
    with progress_setting(progress):
        result = train_bridge(cfg, resume=args.resume, progress=progress)
    print(json.dumps({"run_dir": str(result.run_dir), "best": str(result.best) if result.best else None,
                      "last": str(result.last), "epochs": result.epochs, "steps": result.steps,
                      "best_val_loss": result.best_val, "stopped": result.stopped}, indent=2))
    return 0
