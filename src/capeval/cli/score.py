"""``capeval score``: score candidates with metrics/presets, print JSON, optionally save files."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from capeval.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score candidate captions",
        description="Score candidates against references (and images/videos for the learned metrics). "
        "Prints JSON with system scores and signatures.",
    )
    p.add_argument("--metrics", "-m", default="coco", help="metric names/presets, comma separated (default: coco)")
    p.add_argument("--candidates", "-c", required=True, help="candidates file (.json, .jsonl, .csv, .tsv)")
    p.add_argument("--references", "-r", help="references file (.json, .jsonl, .csv, .tsv)")
    p.add_argument("--images", help="folder of images named <id>.<ext> (image metrics)")
    p.add_argument("--videos", help="folder of videos <id>.<ext> or frame folders <id>/ (video metrics)")
    p.add_argument("--per-item", metavar="FILE", help="write per-item scores {metric: {id: score}} as JSON")
    p.add_argument("--out", "-o", metavar="FILE", help="also write the printed JSON to FILE")
    p.add_argument(
        "--option",
        "-O",
        action="append",
        default=[],
        metavar="METRIC.KEY=VALUE",
        help="constructor option for a metric or group, e.g. ref-pac-s.w=2.5 or clip-s.device=cpu "
        "(VALUE parsed as JSON when possible); repeatable",
    )
    p.add_argument("--tokenizer", choices=("ptb", "none"), help="tokenizer of the n-gram metrics (default ptb)")
    p.add_argument("--device", help="torch device for model-based metrics (default: cpu)")
    p.add_argument("--backbone", help="backbone/checkpoint name or path for CLIP-based metrics")
    p.add_argument("--skip-bad-items", action="store_true", help="record unusable items as skipped instead of failing")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def parse_options(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """``["pac-s.w=2", ...]`` -> ``{"pac-s": {"w": 2}}``."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        target, sep, value = pair.partition("=")
        metric, dot, key = target.partition(".")
        if not sep or not dot or not metric or not key:
            raise InputError(f"--option {pair!r}: expected METRIC.KEY=VALUE")
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.setdefault(metric.strip().lower(), {})[key.strip()] = parsed
    return out


def run(args: argparse.Namespace) -> int:
    from capeval import registry
    from capeval.api import score
    from capeval.fileio import atomic_write_json, read_captions

    names = registry.expand(args.metrics)
    options = parse_options(args.option)
    for name in names:
        spec = registry.get(name)
        opts = options.setdefault(spec.group, {})
        if args.tokenizer and spec.needs == frozenset({"references"}):
            opts.setdefault("tokenizer", args.tokenizer)
        if spec.needs & {"images", "videos"}:
            if args.device:
                opts.setdefault("device", args.device)
            if args.backbone:
                opts.setdefault("backbone", args.backbone)
    candidates = read_captions(args.candidates, "candidates")
    references = read_captions(args.references, "references") if args.references else None
    inputs: dict[str, Any] = {}
    if args.images:
        inputs["images"] = args.images
    if args.videos:
        inputs["videos"] = args.videos
    if args.skip_bad_items:
        inputs["skip_bad_items"] = True
    report = score(
        candidates,
        references,
        metrics=names,
        options=options,
        progress=False if args.quiet else None,
        **inputs,
    )
    payload = report.to_dict(per_item=False)
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    if args.per_item:
        atomic_write_json(args.per_item, report.per_item())
    if args.out:
        atomic_write_json(args.out, payload)
    sys.stdout.write(text + "\n")
    return 0
