"""SPICE speed on Flickr8k-Expert: capeval's parser (captions/s) and whole-metric rate, beside
the official SPICE 1.0 jar (Java + CoreNLP 3.6.0) when it is installed.

    python benchmarks/bench_spice.py [--data DIR] [--limit N] [--workers N] [--skip-java]

Stages, each on a cold parser (nothing cached):
  parse      distinct PTB-tokenised captions -> proposed tuples, one process (spaCy nlp.pipe)
  spice      the ``spice`` metric end to end (tokenise, parse each distinct caption once, build
             graphs, match), ``--workers`` processes
  spice-java the official jar through ``spice-java`` (its own parse cache in a temporary
             folder, so it is cold too); printed as a ratio against ``spice``
The jar needs ``capeval download spice`` (CoreNLP 3.6.0) and Java; without them the row says so.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _peers import missing, skipped  # noqa: E402
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _data_root(arg: str | None) -> Path | None:
    root = Path(arg) if arg else Path(__file__).resolve().parents[2] / "shared" / "data"
    return root if (root / "flickr8k" / "ExpertAnnotations.txt").exists() else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="folder holding flickr8k/ (default ../shared/data)")
    ap.add_argument("--limit", type=int, default=0, help="score only the first N pairs (0: all 5,664)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of the spice metric (default 2)")
    ap.add_argument("--skip-java", action="store_true", help="do not run the official jar")
    args = ap.parse_args()

    root = _data_root(args.data)
    if root is None:
        print("bench_spice: Flickr8k data not found (give --data DIR holding flickr8k/); nothing measured")
        return 0
    from capeval.bench.flickr8k import expert_pairs
    from capeval.metrics.spice.parser import SceneGraphParser
    from capeval.metrics.spice.scorer import Spice
    from capeval.tokenize import ptb_tokenize_batch

    ids, cands, refs = expert_pairs(root)
    if args.limit:
        ids = ids[: args.limit]
    cands = {i: cands[i] for i in ids}
    refs = {i: refs[i] for i in ids}
    raw = list(dict.fromkeys([cands[i] for i in ids] + [r for i in ids for r in refs[i]]))
    tokenised = list(dict.fromkeys(ptb_tokenize_batch(raw)))
    print(f"Flickr8k-Expert: {len(ids)} pairs, {len(tokenised)} distinct captions; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")

    parser = SceneGraphParser()
    t0 = time.perf_counter()
    parser._load()  # model load timed apart: a fixed cost, not a rate
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    parser.parse_many(tokenised)
    parse = time.perf_counter() - t0
    print(f"{'stage':<12}{'seconds':>9}{'rate':>22}")
    print(f"{'load model':<12}{load:>9.2f}")
    print(f"{'parse':<12}{parse:>9.2f}{len(tokenised) / parse:>14.0f} capt/s  (1 process)")

    scorer = Spice(workers=args.workers)
    t0 = time.perf_counter()
    report = scorer.score(cands, refs)
    ours = time.perf_counter() - t0
    print(f"{'spice':<12}{ours:>9.2f}{len(ids) / ours:>14.0f} items/s ({args.workers} workers; "
          f"system {report['spice'].system:.4f})")

    if args.skip_java:
        return 0
    if missing("java"):
        skipped(f"{'spice-java':<12}", "java")
        return 0
    from capeval.errors import CapevalError
    from capeval.metrics.spice.java import SpiceJava

    try:
        with tempfile.TemporaryDirectory() as tmp:
            jar = SpiceJava(cache_dir=tmp)
            t0 = time.perf_counter()
            jar.score(cands, refs)
            java = time.perf_counter() - t0
    except CapevalError as exc:
        print(f"{'spice-java':<12}{'-':>9}  not run: {str(exc).splitlines()[0]}")
        return 0
    print(f"{'spice-java':<12}{java:>9.2f}{len(ids) / java:>14.0f} items/s; spice is {java / ours:.1f}x faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
