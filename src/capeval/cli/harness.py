"""``capeval harness lmms-eval [--print-path]``: where capeval's lmms-eval task files are."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "harness",
        help="capeval inside evaluation harnesses (lmms-eval task files)",
        description="Print the folder of capeval's lmms-eval task files (caption tasks scored by capeval, SPICE and "
        "CLIP-S included): lmms-eval --include_path $(capeval harness lmms-eval --print-path) --tasks "
        "capeval_coco2017_cap_val. To score a run a harness already made: capeval score --from HARNESS FILE.",
    )
    p.add_argument("harness", choices=("lmms-eval",), help="the harness")
    p.add_argument("--print-path", action="store_true", help="print the folder only (for --include_path)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from capeval.harness import lmms_eval_tasks

    folder = lmms_eval_tasks()
    if args.print_path:
        sys.stdout.write(f"{folder}\n")
        return 0
    tasks = sorted(p.stem for p in folder.glob("*.yaml"))
    sys.stdout.write(f"{folder}\n\ntasks: {', '.join(tasks)}\n\nlmms-eval --model MODEL --include_path {folder} "
                     "--tasks capeval_coco2017_cap_val --log_samples --output_path OUT\n")
    return 0
