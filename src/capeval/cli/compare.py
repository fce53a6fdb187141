"""``capeval compare``: paired significance of systems against a baseline on the same items."""

from __future__ import annotations

import argparse

from capeval.cli.repeats import CommaList


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="is system B better than A? paired bootstrap / approximate randomisation",
        description="Paired significance of each candidate file against the first (the baseline), per metric: "
        "paired bootstrap resampling (--method bs, as sacreBLEU --paired-bs) or approximate randomisation "
        "(--method ar, as --paired-ar), corpus scores recomputed on every resample from the statistics of one "
        "scoring pass per system. Prints JSON; a table on a terminal. Progress on stderr (-q: none).",
    )
    p.add_argument("--candidates", "-c", nargs="+", required=True, metavar="[NAME=]FILE",
                   help="candidate files, the baseline first; NAME= names a system (default: the file name)")
    p.add_argument("--references", "-r", required=True, help="references file (.json, .jsonl, .csv, .tsv)")
    p.add_argument("--metrics", "-m", default="bleu-4,cider-d", action=CommaList,
                   help="metrics/presets, comma separated or repeated (default: bleu-4,cider-d)")
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
    p.add_argument("--quiet", "-q", action="store_true", help="no progress (neither the bar on a terminal nor the "
                   "lines elsewhere)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from capeval.cli.score import check_outputs, parse_options
    from capeval.significance.output import compare_files

    # progress on stderr as capeval bench: a bar on a terminal, a line every few seconds elsewhere
    return compare_files(args.candidates, args.references, args.metrics, parse_options(args.option), check_outputs,
                         method=args.method, samples=args.samples, seed=args.seed, confidence=args.confidence,
                         out=args.out, html=args.html, as_table=args.table, progress=not args.quiet)
