"""``capeval list``: registered metrics and presets (never imports torch)."""

from __future__ import annotations

import argparse
import json


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
    print("metrics:")
    for name, spec in metrics.items():
        needs = "+".join(sorted(spec.needs)) or "-"
        extra = f" [extra: {spec.extra}]" if spec.extra else ""
        arrow = "higher" if spec.higher_is_better else "lower"
        span = f"[{spec.range[0]:g}, {spec.range[1] if isinstance(spec.range[1], str) else format(spec.range[1], 'g')}]"
        print(f"  {name:<{width}}  needs {needs:<18} {span:<9} {arrow:<6} {spec.description}{extra}")
    print("presets:")
    for name, members in presets.items():
        print(f"  {name:<{width}}  {', '.join(members)}")
    return 0
