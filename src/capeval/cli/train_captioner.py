"""``capeval train captioner``: the SCST captioner of PAC-S++ (XE, then SCST with capeval metrics as reward)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_captioner(sub: Any) -> None:
    """Add the ``captioner`` trainer to ``capeval train``'s subparsers."""
    c = sub.add_parser(
        "captioner", help="train a captioner with cross-entropy, then SCST with capeval metrics as reward",
        description="Train PAC-S++'s encoder-decoder Transformer captioner (3+3 layers, d=512, 8 heads) over "
                    "CLIP grid features on COCO (Karpathy splits): stage xe (cross-entropy), stage scst "
                    "(self-critical, beam 5, reward = the config's weighted metrics). Writes xe.pt / scst.pt, "
                    "last.pt (resume), metrics.csv, eval-<stage>.json and config.yaml into output_dir.")
    c.add_argument("--config", "-c", metavar="FILE", help="YAML settings (keys: see --print-config)")
    c.add_argument("--set", "-s", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting (value read as YAML), e.g. --set 'reward={pac-s++: 1.0}'")
    c.add_argument("--output-dir", "-o", metavar="DIR", help="run folder (overrides output_dir)")
    c.add_argument("--resume", action="store_true", help="continue the run in output_dir from last.pt")
    c.add_argument("--print-config", action="store_true", help="print the resolved settings as YAML and exit")
    c.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    c.set_defaults(func=run_captioner)


def run_captioner(args: argparse.Namespace) -> int:
    from capeval.train.config import config_from_args
    from capeval.train.scst import CaptionerTrainConfig

    cfg = config_from_args(CaptionerTrainConfig, args)
    if cfg is None:
        return 0
    from capeval.progress import progress_setting
    from capeval.train.scst import train_captioner

    progress = False if args.quiet else None
    with progress_setting(progress):
        result = train_captioner(cfg, resume=args.resume, progress=progress)
    if not result.is_main:  # the other processes of a multi-process run: the main one reports
        return 0
    print(json.dumps({"run_dir": str(result.run_dir), "checkpoints": {k: str(v) for k, v in result.checkpoints.items()},
                      "steps": result.steps, "evaluations": result.evaluations}, indent=2))
    return 0
