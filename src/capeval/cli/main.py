"""Entry point: builds the parser from the subcommand modules and maps errors to messages."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from capeval._version import __version__
from capeval.errors import CapevalError

# Each module defines ``add_parser(subparsers)`` and sets ``func`` on its parser.
SUBCOMMANDS = (
    "capeval.cli.score",
    "capeval.cli.bench",
    "capeval.cli.reproduce",
    "capeval.cli.listing",
    "capeval.cli.info",
    "capeval.cli.download",
    "capeval.cli.scene_graph",
    "capeval.cli.train",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capeval",
        description="Evaluate image and video captions: COCO metrics, CLIP-based metrics, meta-evaluation.",
    )
    parser.add_argument("--version", action="version", version=f"capeval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # subcommand not part of this build
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CapevalError as exc:
        print(f"capeval: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `capeval list | head`: the reader left, which is not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except OSError as exc:  # the environment (disk full, permissions), not the input: still one line
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"capeval: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("capeval: interrupted", file=sys.stderr)
        return 130
