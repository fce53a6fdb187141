"""The Ray engine on this machine: 1 vs 2 worker processes, and its overhead vs in-process.

Flickr8k-Expert pairs (real data, ``$CAPEVAL_DATA`` or ../shared/data), coco-ngram metrics.
For each of 1 and 2 Ray workers a fresh local Ray instance is started *before* the clock
(start-up is reported apart); the timed part is ``score_ray`` itself: actor start and
Evaluator builds, the corpus pass, shard scoring, Parquet writes and the merge. The
in-process path is the baseline: one process (``workers=1``), and ``capeval.score``'s
default (forked worker processes above a few hundred items).
With 2 workers the same items are also read from a Parquet item table as a Ray dataset
(``score_ray(items=...)``): the cost of streaming the rows through Ray Data. Best of ``--repeat`` runs.

    python benchmarks/bench_ray.py                  # all 5,664 pairs, shards of 512
    python benchmarks/bench_ray.py --items 300 --shard 100 --json out.json   # the small-input overhead
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from _peers import missing, skipped

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=0, help="first N pairs (0: all)")
    ap.add_argument("--shard", type=int, default=512, help="items per shard")
    ap.add_argument("--metrics", default="coco-ngram")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args()

    import capeval
    from capeval.bench.flickr8k import expert_pairs

    data = Path(os.environ.get("CAPEVAL_DATA", ROOT.parent / "shared" / "data"))
    ids, cands, refs = expert_pairs(data)
    if args.items:
        ids = ids[: args.items]
    cands = {i: cands[i] for i in ids}
    refs = {i: refs[i] for i in ids}

    def best(fn):
        times, out = [], None
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return min(times), out

    # in-process baselines: one process (workers=1), and capeval's default (forked workers
    # for more than a few hundred items)
    local_s, local = best(lambda: capeval.Evaluator(args.metrics, workers=1).score(cands, refs))
    auto_s, _ = best(lambda: capeval.score(cands, refs, args.metrics))
    row = {"items": len(ids), "metrics": args.metrics, "shard": args.shard, "cpus": os.cpu_count(),
           "in_process_s": local_s, "in_process_default_workers_s": auto_s}
    peer = missing("ray", "pyarrow")
    if peer:
        row["ray"] = skipped("ray rows", peer)
    else:
        import ray

        from capeval.engines.ray_engine import score_ray

        for workers in (1, 2):
            t = time.perf_counter()
            # as score_ray's own local instance: one CPU slot beyond the actors' (Ray Data's tasks)
            ray.init(num_cpus=workers + 1, include_dashboard=False, log_to_driver=False, configure_logging=False)
            row[f"ray_init_{workers}_s"] = time.perf_counter() - t
            try:
                secs, rep = best(lambda w=workers: score_ray(cands, refs, args.metrics, num_workers=w, batch_size=args.shard))
                if workers == 2:  # the same items from a Parquet item table, read as a Ray dataset
                    import tempfile

                    import pyarrow as pa
                    import pyarrow.parquet as pq

                    with tempfile.TemporaryDirectory() as tmp:
                        table = Path(tmp) / "items.parquet"
                        pq.write_table(pa.Table.from_pylist(
                            [{"id": i, "candidate": cands[i], "references": refs[i]} for i in ids]), table)
                        tsecs, trep = best(lambda: score_ray(items=str(table), metrics=args.metrics, num_workers=2,
                                                             batch_size=args.shard))
                    row["ray_2w_items_parquet_s"] = tsecs
                    row["ray_2w_items_parquet_identical"] = all(
                        trep[m].system == local[m].system and dict(trep[m].items) == dict(local[m].items) for m in local)
            finally:
                ray.shutdown()
            same = all(rep[m].system == local[m].system and dict(rep[m].items) == dict(local[m].items) for m in local)
            row[f"ray_{workers}w_s"] = secs
            row[f"ray_{workers}w_identical"] = same
        row["speedup_2w_over_1w"] = row["ray_1w_s"] / row["ray_2w_s"]
        row["ratio_items_table_vs_mappings_2w"] = row["ray_2w_items_parquet_s"] / row["ray_2w_s"]
        row["overhead_1w_vs_in_process_s"] = row["ray_1w_s"] - local_s
        row["ratio_1w_vs_in_process"] = row["ray_1w_s"] / local_s
    for k, v in row.items():
        print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
