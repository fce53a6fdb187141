"""What every ``capeval train`` trainer shares on the command line: the settings flags, and
resolving them into a config before running the trainer under the progress setting."""

from __future__ import annotations

import argparse
from typing import Any, Callable


def add_config_arguments(p: argparse.ArgumentParser, set_example: str, resume_help: str) -> None:
    """``--config``, ``--set``, ``--output-dir``, ``--resume``, ``--print-config``, ``--quiet``."""
    p.add_argument("--config", "-c", metavar="FILE", help="YAML settings (keys: see --print-config)")
    p.add_argument("--set", "-s", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override one setting (value read as YAML), e.g. {set_example}")
    p.add_argument("--output-dir", "-o", metavar="DIR", help="run folder (overrides output_dir)")
    p.add_argument("--resume", action="store_true", help=resume_help)
    p.add_argument("--print-config", action="store_true", help="print the resolved settings as YAML and exit")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars")


def run_trainer(args: argparse.Namespace, config_cls: type, train: Callable[[Any, bool | None], Any]) -> Any:
    """``train(config, progress)`` with the config the flags resolve to; None when the flags
    only asked to print it (``--print-config``)."""
    from capeval.progress import progress_setting
    from capeval.train.config import config_from_args

    cfg = config_from_args(config_cls, args)
    if cfg is None:
        return None
    progress = False if args.quiet else None
    with progress_setting(progress):
        return train(cfg, progress)
