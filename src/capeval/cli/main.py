"""Entry point: builds the parser from the subcommand modules and maps errors to messages."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import warnings
from typing import Any, Callable, Sequence

from capeval._version import __version__
from capeval.cli.repeats import enforce
from capeval.errors import CapevalError

# Each module defines ``add_parser(subparsers)`` and sets ``func`` on its parser.
SUBCOMMANDS = (
    "capeval.cli.score",
    "capeval.cli.compare",
    "capeval.cli.bench",
    "capeval.cli.reproduce",
    "capeval.cli.caparena_auto",
    "capeval.cli.report",
    "capeval.cli.listing",
    "capeval.cli.info",
    "capeval.cli.check",
    "capeval.cli.download",
    "capeval.cli.convert",
    "capeval.cli.scene_graph",
    "capeval.cli.train",
    "capeval.cli.harness",
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
    return enforce(parser)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so the run unwinds as on Ctrl-C (workers stopped, no output)."""


def _on_sigterm(owner: int) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a forked worker inherits this handler: it just ends, silently
            os._exit(128 + signum)
        raise Terminated()

    return handler


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A warning as one ``capeval: warning: ...`` line (Python's default prints two, the second
    a line of the library's source)."""
    text = " ".join(str(message).split()) or category.__name__
    try:
        (file or sys.stderr).write(f"capeval: warning: {text}\n")
    except OSError:  # stderr gone: nothing to tell
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """The ``capeval`` command. Run as a program (``argv`` None: the process's command line),
    every warning, capeval's or a library's, is one ``capeval: warning:`` line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous = signal.signal(signal.SIGTERM, _on_sigterm(os.getpid()))
    shown = warnings.showwarning
    if argv is None:  # a program of its own; an embedding caller (or pytest) keeps its warnings as they are
        warnings.showwarning = _warning_line
        from capeval.malloc_tuning import tune_for_program

        tune_for_program()  # freed memory reused, not fresh pages (capeval/malloc_tuning.py)
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
        warnings.showwarning = shown


def _run(args: argparse.Namespace) -> int:
    """The subcommand, its errors mapped to one ``capeval: ...`` line and an exit status."""
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
    except KeyboardInterrupt as exc:  # Ctrl-C: 130; SIGTERM: 143 (128 + signal number, as a shell reports)
        print("capeval: interrupted", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
