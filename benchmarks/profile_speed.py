"""Profile of issue 36's 40k row (or the Flickr8k-Expert row): where the CPU goes, before and after.

Runs ``capeval score -m coco-ngram`` on the Flickr8k leave-one-out set (40,460 captions x 4
references, warm METEOR index) in ONE process (the worker-pool threshold raised, so that
cProfile sees every function), under cProfile, for this checkout and, with ``--before DIR``,
another capeval source tree. Prints, per tree, the total, a phase table (METEOR and its
parts, tokenisation, the n-gram metrics, the corpus pass, writing the outputs) and the top
functions by cumulative time. Times are under the profiler (function calls cost more than
without it): compare trees, not against the wall times of ``bench_speed.py``.

    python benchmarks/profile_speed.py --before /path/to/main/src      # ~2 min
    python benchmarks/profile_speed.py --row expert --top 40

Data: ``--data`` or ``$CAPEVAL_DATA`` (default ../shared/data).
"""

from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _peers import flickr8k_data  # noqa: E402
from bench_scale import build_index, leave_one_out, write_set  # noqa: E402

ROOT = HERE.parent

# runs in the child: every metric in this process, the CLI under cProfile
_CHILD = """
import cProfile, sys
import capeval.metrics.workers as workers
workers.PARALLEL_MIN_ITEMS = 1 << 62
from capeval.cli.main import main
out, argv = sys.argv[1], sys.argv[2:]
sys.argv = ["capeval"] + argv
prof = cProfile.Profile()
prof.enable()
try:
    main()
except SystemExit:
    pass
prof.disable()
prof.dump_stats(out)
"""

# (label, substring of "file:function" of the frame whose cumulative time is the phase)
PHASES = [
    ("whole run (CLI)", "cli/score.py:run"),
    ("METEOR (all items)", "meteor/engine.py:_best_many"),
    ("  sentence building", "meteor/engine.py:fast_sentences"),
    ("  matching (match)", "meteor/fast_match.py:match"),
    ("  resolution + statistics, Python (finish)", "meteor/fast_align.py:finish"),
    ("    beam search (_resolve)", "meteor/fast_beam.py:_resolve"),
    ("  the same, compiled (jit_align.finish)", "meteor/jit_align.py:finish"),
    ("  loading the kernel (jit_align.load)", "meteor/jit_align.py:load"),
    ("PTB tokenisation", "tokenize/ptb.py:ptb_tokenize_batch"),
    ("corpus pass: n-gram counts", "metrics/ngrams.py:part"),
    ("BLEU", "metrics/bleu.py:score_chunk"),
    ("ROUGE-L", "metrics/rouge.py:score_chunk"),
    ("CIDEr-D", "metrics/cider.py:score_chunk"),
    ("writing the outputs", "cli/score.py:_finish"),
]


def profile(src: Path, cands: Path, refs: Path, cache: Path, out: Path) -> pstats.Stats:
    env = dict(os.environ, PYTHONPATH=str(src), CAPEVAL_CACHE=str(cache))
    env.setdefault("HF_HUB_OFFLINE", "1")
    cmd = [sys.executable, "-c", _CHILD, str(out), "score", "-m", "coco-ngram", "-c", str(cands), "-r", str(refs),
           "-q", "--per-item", str(out.with_suffix(".json"))]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return pstats.Stats(str(out))


def phase_times(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative seconds of each phase's frame (summed over frames that match, e.g. two
    ``score_chunk`` of one file)."""
    out = {}
    for label, key in PHASES:
        where, func = key.rsplit(":", 1)
        out[label] = sum(v[3] for (f, _, name), v in stats.stats.items()  # type: ignore[attr-defined]
                         if name == func and f.replace(os.sep, "/").endswith(where))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--before", help="another capeval source tree (its src folder) to profile beside this one")
    ap.add_argument("--row", choices=["40k", "expert"], default="40k")
    ap.add_argument("--top", type=int, default=25, help="functions listed by cumulative time (per tree)")
    args = ap.parse_args()
    if args.top < 0:
        ap.error("--top must be >= 0")
    data = flickr8k_data(args.data, "profile_speed")
    if data is None:
        return 2
    sys.path.insert(0, str(ROOT / "src"))
    trees = {"after": ROOT / "src"}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    with tempfile.TemporaryDirectory(prefix="capeval-profile-") as tmp:
        folder = Path(tmp)
        if args.row == "40k":
            cands, refs = write_set(folder, "loo", *leave_one_out(data))
        else:
            from capeval.bench.flickr8k import expert_pairs

            _, ec, er = expert_pairs(data)
            cands, refs = write_set(folder, "expert", ec, er)
        results = {}
        for name, src in trees.items():
            cache = folder / f"cache-{name}"
            build_index(dict(os.environ, PYTHONPATH=str(src), CAPEVAL_CACHE=str(cache)))
            results[name] = profile(src, cands, refs, cache, folder / f"{name}.prof")
        print(f"{args.row} row, one process, cProfile, cumulative seconds under the profiler")
        print(f"{'phase':<44}" + "".join(f" {n:>9}" for n in trees))
        times = {n: phase_times(s) for n, s in results.items()}
        for label, _ in PHASES:
            print(f"{label:<44}" + "".join(f" {times[n][label]:>8.2f}s" for n in trees))
        for name, stats in results.items():
            print(f"\n== {name}: top {args.top} functions by cumulative time ({trees[name]})")
            stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
