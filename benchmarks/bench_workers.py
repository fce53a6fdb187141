"""Does a pool of forked workers pay, and from how many items? (issue 36, item 4)

``capeval score -m coco-ngram`` (warm METEOR index) on the first N Flickr8k-Expert items, in
one process (``-O meteor.workers=1``) and with 2 .. ``--max-workers`` forked workers,
whole processes, alternated run by run. Printed per size: median wall and CPU time of the
process tree (user + system, workers included) and the ratio of one process's wall time
to the pool's (above 1: the pool pays). The per-item files of every worker count must be
byte-identical (sha256), else the script exits 1. On a shared machine read the CPU
column beside the wall one.

    python benchmarks/bench_workers.py --sizes 100,500,1000,2000,5664 --repeat 3
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _peers import flickr8k_data, missing, skipped  # noqa: E402
from bench_scale import measure, write_set  # noqa: E402

ROOT = HERE.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--sizes", default="100,500,1000,2000,5664", help="items per run (comma separated)")
    ap.add_argument("--max-workers", type=int, default=2, help="largest pool timed (from 2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each job (median reported)")
    args = ap.parse_args()
    data = flickr8k_data(args.data, "bench_workers")
    if data is None:
        return 2
    peer = missing("pycocoevalcap")  # METEOR's resources (coco-ngram includes METEOR)
    if peer is not None:
        skipped("bench_workers", peer)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    from capeval.bench.flickr8k import expert_pairs

    ids, cands, refs = expert_pairs(data)
    counts = list(range(1, args.max_workers + 1))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"median of {args.repeat} runs")
    print(f"{'items':>6} " + "".join(f" {f'{w} worker(s)':>22}" for w in counts) + "  ratio 1/2  per-item sha256")
    with tempfile.TemporaryDirectory(prefix="capeval-workers-") as tmp:
        folder = Path(tmp)
        env["CAPEVAL_CACHE"] = cache = os.environ.get("CAPEVAL_CACHE") or str(folder / "cache")
        from capeval.metrics.meteor import prepare

        prepare(Path(cache) / "meteor-1.5")  # the warm index (not timed)
        for n in [int(x) for x in args.sizes.split(",")]:
            sub = ids[:n]
            c, r = write_set(folder, f"e{n}", {k: cands[k] for k in sub}, {k: refs[k] for k in sub})
            walls = {w: [] for w in counts}
            cpus = {w: [] for w in counts}
            digests = set()
            for _ in range(args.repeat):
                for w in counts:
                    out = folder / f"items-{n}-{w}.json"
                    cmd = [sys.executable, "-m", "capeval.cli", "score", "-m", "coco-ngram", "-c", str(c), "-r",
                           str(r), "-q", "-O", f"meteor.workers={w}", "--per-item", str(out)]
                    res = measure(cmd, env, sample=False)
                    walls[w].append(res["wall"])
                    cpus[w].append(res["cpu"])
                    digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
            line = f"{len(sub):>6} " + "".join(
                f" {statistics.median(walls[w]):>7.2f}s wall {statistics.median(cpus[w]):>5.2f}s cpu" for w in counts)
            ratio = statistics.median(walls[1]) / statistics.median(walls[2]) if len(counts) > 1 else 1.0
            line += f"  {ratio:>8.2f}x  " + ("equal" if len(digests) == 1 else f"DIFFERENT {sorted(digests)}")
            print(line, flush=True)
            if len(digests) != 1:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
