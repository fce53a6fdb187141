"""``capeval compare``: paired significance of systems against a baseline on the same items."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from capeval.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="is system B better than A? paired bootstrap / approximate randomisation",
        description="Paired significance of each candidate file against the first (the baseline), per metric: "
        "paired bootstrap resampling (--method bs, as sacreBLEU --paired-bs) or approximate randomisation "
        "(--method ar, as --paired-ar), corpus scores recomputed on every resample. Prints JSON; a table on a "
        "terminal.",
    )
    p.add_argument("--candidates", "-c", nargs="+", required=True, metavar="[NAME=]FILE",
                   help="candidate files, the baseline first; NAME= names a system (default: the file name)")
    p.add_argument("--references", "-r", required=True, help="references file (.json, .jsonl, .csv, .tsv)")
    p.add_argument("--metrics", "-m", default="bleu-4,cider-d", help="metrics/presets, comma separated "
                   "(default: bleu-4,cider-d)")
    p.add_argument("--method", choices=("bs", "ar"), default="bs",
                   help="bs: paired bootstrap (default); ar: approximate randomisation")
    p.add_argument("--samples", type=int, help="bootstrap resamples or randomisation trials, 1 to 1000000 "
                   "(default 1000 for bs, 10000 for ar)")
    p.add_argument("--seed", type=int, default=12345, help="seed of numpy's default_rng (default 12345, as sacreBLEU)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the bootstrap interval of the "
                   "difference, in (0, 1) (default 0.95)")
    p.add_argument("--option", "-O", action="append", default=[], metavar="METRIC.KEY=VALUE",
                   help="constructor option for a metric or group (as capeval score); repeatable")
    p.add_argument("--out", "-o", metavar="FILE", help="also write the JSON to FILE")
    p.add_argument("--html", metavar="FILE", help="also write the comparison as an HTML page")
    p.add_argument("--table", action="store_true", help="print a table instead of JSON (default on a terminal)")
    p.set_defaults(func=run)


def _named_files(values: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or Path(value).exists():
            name, path = Path(value).stem, value
        if name in dict(out):
            raise InputError(f"--candidates: two systems are named {name!r}; name them with NAME=FILE")
        out.append((name, path))
    if len(out) < 2:
        raise InputError("--candidates: give at least two files, the baseline first")
    return out


def table(result: dict[str, Any]) -> str:
    """The comparison as an aligned text table (one row per system and metric)."""
    rows = [("system", "metric", "score", "diff", "p-value", "diff CI" if result["method"] == "bs" else "")]
    for name, metrics in result["systems"].items():
        for metric, row in metrics.items():
            if name == result["baseline"]:
                rows.append((f"{name} (baseline)", metric, f"{row['score']:.4f}", "", "", ""))
                continue
            ci = row.get("diff_ci")
            rows.append((name, metric, f"{row['score']:.4f}", f"{row['diff']:+.4f}", f"{row['p_value']:.4f}",
                         f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else ""))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    how = "paired bootstrap" if result["method"] == "bs" else "approximate randomisation"
    lines.append(f"{how}, {result['samples']} samples, seed {result['seed']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from capeval.cli.score import check_outputs, parse_options
    from capeval.io.atomic import atomic_write_text
    from capeval.io.captions import read_caption_file
    from capeval.significance.compare import compare

    named = _named_files(args.candidates)
    options = parse_options(args.option)
    check_outputs({"--out": args.out, "--html": args.html}, [p for _, p in named] + [args.references])
    systems = {name: read_caption_file(path, "candidates").data for name, path in named}
    references = read_caption_file(args.references, "references").data
    result = compare(systems, references, args.metrics, method=args.method, samples=args.samples, seed=args.seed,
                     confidence=args.confidence, options=options or None)
    text = json.dumps(result, indent=2)
    if args.out:
        atomic_write_text(args.out, text + "\n")
    if args.html:
        from capeval.significance.html import render_html

        atomic_write_text(args.html, render_html(result))
    print(table(result) if args.table or sys.stdout.isatty() else text)
    return 0
