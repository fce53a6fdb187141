"""``capeval list``: registered metrics and presets (never imports torch)."""

from __future__ import annotations

import argparse
import json
import re
import textwrap


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list metrics and presets", description="List registered metrics and presets.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from capeval import registry

    metrics = registry.metrics()
    presets = registry.presets()
    if args.json:
        print(
            json.dumps(
                {
                    "metrics": {
                        n: {
                            "description": s.description,
                            "needs": sorted(s.needs),
                            "accepts": sorted(s.accepts),
                            "range": list(s.range),
                            "direction": s.direction,
                            "group": s.group,
                            "extra": s.extra,
                            "reference": s.reference,
                        }
                        for n, s in metrics.items()
                    },
                    "presets": {k: list(v) for k, v in presets.items()},
                },
                indent=2,
            )
        )
        return 0
    width = max(len(n) for n in metrics)

    def bound(v: float | str) -> str:
        return v if isinstance(v, str) else format(v, "g")

    spans = {n: f"[{bound(s.range[0])}, {bound(s.range[1])}]" for n, s in metrics.items()}
    span_width = max(len(v) for v in spans.values())  # the widest range (mid's [-inf, inf]) sets the column
    needs_width = max(len("+".join(sorted(s.needs)) or "-") for s in metrics.values())
    print("metrics (name, inputs, range, better side, extra to install; then what it computes):")
    for name, spec in metrics.items():
        needs = "+".join(sorted(spec.needs)) or "-"
        extra = f"extra: {spec.extra}" if spec.extra else ""
        # better side: the registry's direction; "-" for diagnostics with none (length, vocab)
        arrow = {"higher": "higher", "lower": "lower"}.get(spec.direction, "-")
        head = f"  {name:<{width}}  {needs:<{needs_width}}  {spans[name]:<{span_width}}  {arrow:<6}  {extra}"
        print(head.rstrip())
        for line in textwrap.wrap(_described(spec.description, spans[name]), LINE_WIDTH - 6, break_on_hyphens=False):
            print(f"      {line}")
    print("presets:")
    for name, members in presets.items():
        lines = textwrap.wrap(", ".join(members), LINE_WIDTH - width - 4, break_on_hyphens=False)
        for k, line in enumerate(lines):
            print(f"  {name if k == 0 else '':<{width}}  {line}")
    return 0


#: ``capeval list`` fits a terminal of this many columns
LINE_WIDTH = 100


def _described(description: str, span: str) -> str:
    """The registry's description without what the columns already say: its better side
    ("higher is better") and a closing range equal to the range column."""
    text = re.sub(r";?\s*(higher|lower) is better", "", description).strip()
    if text.endswith(span):
        text = text[: -len(span)].rstrip().rstrip(";").rstrip()
    return text
