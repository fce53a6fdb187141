"""Kendall's tau-b/tau-c on a Flickr8k-CF-sized input (47,830 pairs): capeval vs scipy.

The meta-evaluation computes these for every metric and, with bootstrap resampling, many
times over, so they have to stay fast (the target: well under a second per call at this
size). Synthetic scores with CF-like ties (12 distinct human ratings); prints JSON.

    python benchmarks/bench_stats.py [--n 47830] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=47830, help="pairs (Flickr8k-CF has 47,830)")
    ap.add_argument("--repeat", type=int, default=5, help="best of this many runs")
    args = ap.parse_args()

    import numpy as np

    from capeval.bench import statistics as stats

    rng = np.random.default_rng(4)
    x = rng.random(args.n)
    y = rng.integers(0, 12, args.n) / 11
    stats.kendall_taus(x, y)  # warm-up (imports, first allocation)
    report = {"n": args.n, "capeval_tau_b_and_c_seconds": round(_best_of(args.repeat, lambda: stats.kendall_taus(x, y)), 4)}
    try:
        from scipy import stats as scipy_stats
    except ImportError:
        report["scipy"] = "skipped: scipy not installed"  # one line of the JSON printed below
    else:
        report["scipy_tau_b_seconds"] = round(_best_of(args.repeat, lambda: scipy_stats.kendalltau(x, y)), 4)
        report["scipy_tau_c_seconds"] = round(
            _best_of(args.repeat, lambda: scipy_stats.kendalltau(x, y, variant="c")), 4
        )
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
