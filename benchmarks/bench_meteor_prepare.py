"""Time the one-time METEOR 1.5 resource preparation and report peak memory.

    python benchmarks/bench_meteor_prepare.py [--cache-dir DIR] [--keep] [--repeat N] [--score [--data DIR]]

Builds the index into a temporary folder (or ``--cache-dir``) with ``force=True``, so the
number is the real one-time cost; prints wall time and CPU time (user + system, all
threads: the build decompresses on one thread and indexes on two more) of each build,
peak RSS (the build peaks around 0.35 GB above the interpreter), the RSS before it, the
index size, and (with ``--score``) the time and peak RSS of scoring the Flickr8k-Expert
pairs with the fresh index (candidates/references whitespace-tokenised and lower-cased
here, since the point is speed, not parity). The machine's load average is printed too:
on a busy machine wall time is CPU-bound and varies a lot.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _current_rss_mb() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return float("nan")


def _flickr_pairs(root: Path) -> tuple[list[str], list[list[str]]]:
    from capeval.bench.flickr8k import expert_pairs

    ids, cands, refs = expert_pairs(root)
    return [cands[i].lower() for i in ids], [[r.lower() for r in refs[i]] for i in ids]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache-dir", type=Path, default=None, help="build here instead of a temporary folder")
    ap.add_argument("--keep", action="store_true", help="keep the temporary index")
    ap.add_argument("--repeat", type=int, default=1, help="build this many times (default 1)")
    ap.add_argument("--score", action="store_true", help="also time scoring Flickr8k-Expert with it")
    ap.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("CAPEVAL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")),
        help="benchmark data root (default: $CAPEVAL_DATA, else ../shared/data)",
    )
    args = ap.parse_args()

    from capeval.metrics.meteor import prepare

    tmp = None
    target = args.cache_dir
    if target is None:
        tmp = Path(tempfile.mkdtemp(prefix="capeval-meteor-bench-"))
        target = tmp / "meteor-1.5"
    rss_before = _current_rss_mb()
    walls, cpus = [], []
    for _ in range(args.repeat):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        out = prepare(target, force=True, verbose=True)
        walls.append(round(time.perf_counter() - t0, 2))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpus.append(round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 2))
    report = {
        "prepare_seconds": walls,
        "prepare_cpu_seconds": cpus,
        "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "prepare_peak_rss_mb": round(_peak_rss_mb(), 1),
        "rss_before_prepare_mb": round(rss_before, 1),
        "index_dir": str(out),
        "index_mb": round(sum(f.stat().st_size for f in out.iterdir()) / 2**20, 1),
    }
    if args.score:
        data = args.data
        if not (data / "flickr8k").is_dir():
            report["score"] = f"skipped: no data at {data}"
        else:
            from capeval.metrics.meteor import Meteor15

            hyps, refs = _flickr_pairs(data)
            t0 = time.perf_counter()
            m = Meteor15(out)
            load_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            corpus, _ = m.score(hyps, refs)
            report.update(
                pairs=len(hyps),
                load_seconds=round(load_s, 2),
                score_seconds=round(time.perf_counter() - t0, 2),
                corpus=corpus,
                peak_rss_mb_after_scoring=round(_peak_rss_mb(), 1),
            )
    print(json.dumps(report, indent=2))
    if tmp is not None and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
