"""``capeval train captioner``: the SCST captioner of PAC-S++ (XE, then SCST with capeval metrics as reward)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from capeval.cli.train_args import add_config_arguments, run_trainer


def add_captioner(sub: Any) -> None:
    """Add the ``captioner`` trainer to ``capeval train``'s subparsers."""
    c = sub.add_parser(
        "captioner", help="train a captioner with cross-entropy, then SCST with capeval metrics as reward",
        description="Train PAC-S++'s encoder-decoder Transformer captioner (3+3 layers, d=512, 8 heads) over "
                    "CLIP grid features on COCO (Karpathy splits): stage xe (cross-entropy), stage scst "
                    "(self-critical, beam 5, reward = the config's weighted metrics). Writes xe.pt / scst.pt, "
                    "last.pt (resume), metrics.csv, eval-<stage>.json and config.yaml into output_dir.")
    add_config_arguments(c, "--set 'reward={pac-s++: 1.0}'", "continue the run in output_dir from last.pt")
    c.set_defaults(func=run_captioner)


def run_captioner(args: argparse.Namespace) -> int:
    from capeval.train.scst import CaptionerTrainConfig, train_captioner

    result = run_trainer(args, CaptionerTrainConfig,
                         lambda cfg, progress: train_captioner(cfg, resume=args.resume, progress=progress))
    # None: --print-config; not the main process of a multi-process run: the main one reports
    if result is None or not result.is_main:
        return 0
    print(json.dumps({"run_dir": str(result.run_dir), "checkpoints": {k: str(v) for k, v in result.checkpoints.items()},
                      "steps": result.steps, "evaluations": result.evaluations}, indent=2))
    return 0
