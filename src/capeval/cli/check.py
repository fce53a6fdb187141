"""``capeval check -m METRICS [-O METRIC.KEY=VALUE ...] [--json]``: everything the metrics need
on this machine, at once, before any run (:mod:`capeval.requirements`).

A table of every requirement (packages, spaCy pipelines, NLTK data, WordNet, checkpoints, Hugging
Face models, data folders, options without a default, programs, servers) with its status and,
for what is missing, the command or option that provides it. Exit status 0 when nothing is
missing, 2 with one ``capeval: error:`` line after the table otherwise. Nothing is loaded or
downloaded, no model library is imported and no server is contacted.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from capeval.cli.repeats import CommaList
from capeval.errors import ResourceError

#: metrics named in the NEEDED BY column before "+N more"
_SHOWN_METRICS = 3


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="list everything the metrics need and what is missing, with the command that fetches each",
        description="List every requirement of the metrics on this machine (Python packages, spaCy pipelines, NLTK "
                    "data, WordNet, checkpoints, Hugging Face models, annotation folders, options without a default, "
                    "Java, servers) with its status and the command or option that provides it. Nothing is loaded, "
                    "downloaded or contacted. Exit status 2 when something is missing.")
    p.add_argument("--metrics", "-m", default="coco", action=CommaList,
                   help="metric names/presets, comma separated or repeated (default: coco)")
    p.add_argument("--option", "-O", action="append", default=[], metavar="METRIC.KEY=VALUE",
                   help="metric option as in score (e.g. clip-s.backbone=pac-s/ViT-B-32, chair.annotations=DIR): "
                        "options change what is needed; repeatable")
    p.add_argument("--json", action="store_true", help="print the requirements as JSON instead of a table")
    p.set_defaults(func=run)


def _metrics_cell(metrics: tuple[str, ...]) -> str:
    shown = ", ".join(metrics[:_SHOWN_METRICS])
    return shown + (f" +{len(metrics) - _SHOWN_METRICS} more" if len(metrics) > _SHOWN_METRICS else "")


def format_table(names: list[str], found: list[Any]) -> str:
    """The requirements as aligned columns: status, kind, name, the metrics needing it, and the
    fix (missing) or where it was found (present)."""
    rows = [("STATUS", "KIND", "NAME", "NEEDED BY", "FIX (missing) / WHERE (found)")]
    for r in found:
        last = r.where if r.status == "ok" else r.fix
        if r.note and r.status != "ok":
            last = f"{last}  [{r.note}]"
        elif r.status == "unchecked" and r.where:
            last = f"{r.where}; {r.fix}"
        rows.append((r.status, r.kind, r.name, _metrics_cell(r.metrics), last))
    widths = [max(len(row[k]) for row in rows) for k in range(4)]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(row[:4], widths)) + "  " + row[4] for row in rows]
    counts = {s: sum(r.status == s for r in found) for s in ("ok", "missing", "optional", "unchecked")}
    summary = f"{counts['ok']} present, {counts['missing']} missing"
    if counts["optional"]:
        summary += f", {counts['optional']} optional not installed"
    if counts["unchecked"]:
        summary += f", {counts['unchecked']} not checked (servers are never contacted)"
    return "\n".join([f"capeval check: {', '.join(names)}", *lines, summary])


def run(args: argparse.Namespace) -> int:
    from capeval import registry
    from capeval.cli.score import parse_options
    from capeval.requirements import requirements

    names = registry.expand(args.metrics)
    found = requirements(names, parse_options(args.option))
    missing = [r for r in found if r.missing]
    if args.json:
        print(json.dumps({"metrics": names, "ok": not missing, "missing": len(missing),
                          "requirements": [r.to_dict() for r in found]}, indent=2, ensure_ascii=False))
    elif found:
        print(format_table(names, found))
    else:
        print(f"capeval check: {', '.join(names)} need{'s' if len(names) == 1 else ''} nothing beyond capeval itself")
    if missing:
        needing = [n for n in names if any(n in r.metrics for r in missing)]
        where = "its \"fix\" in the JSON above" if args.json else "the fix of each in the table above"
        raise ResourceError(f"{len(missing)} requirement{'s' if len(missing) != 1 else ''} missing for "
                            f"{', '.join(needing)} ({where})")
    return 0
