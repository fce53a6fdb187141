"""``capeval compare`` of two systems against ``capeval score`` of one, same machine, same run (issue 47 item 2).

Rows: 2,000 and 40,000 items (``--sizes``), 1,000 resamples (``--samples``), CIDEr-D
(``--metrics``; BLEU-4 and METEOR too with ``-m bleu-4,cider-d,meteor``). Each job is a whole
process (``capeval score -q`` / ``capeval compare -q``), its wall and CPU time measured (CPU:
the process tree's user + system), the median of ``--repeat`` runs, and its peak memory (the
largest resident size of one of its processes); printed: the ratio of compare's time to
score's (goal: at most 3).

The p-values, means and intervals are checked against the former implementation
(``benchmarks/_compare_before.py``, rescoring the whole CIDEr-D table per resample): run in full
at the sizes of ``--old-at`` (default 2,000; at 40,000 it takes about 0.5 s per resample and
system, half an hour for this row), and at the other sizes on the first ``--old-samples``
resamples only (default 64: one block of draws), beside a new run with the same number.

Data: Flickr8k's captions (``--data`` or ``$CAPEVAL_DATA``, default ../shared/data), each
caption against the other four of its image (leave-one-out, the 40,460 items of
bench_speed.py), the first N items in file order. System A is the held-out human caption;
system B the same caption with one word deleted at a seeded random position (captions of more
than three words), a real but small difference. ``--unedited F``: B keeps A's very caption for a
share F of the items, as two checkpoints of one model often do (the resampling copies those
items' scores from A's instead of computing them).

    python benchmarks/bench_compare.py                     # both sizes, CIDEr-D
    python benchmarks/bench_compare.py --sizes 2000 -m bleu-4,cider-d,meteor --repeat 3
    python benchmarks/bench_compare.py --sizes 40000 --unedited 0.5 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _peers import flickr8k_data  # noqa: E402
from bench_scale import leave_one_out, measure  # noqa: E402

_OLD = """
import json, sys, time, warnings
sys.path.insert(0, {here!r})
import _compare_before
a, b, r, metrics, samples, out = sys.argv[1:7]
load = lambda p: json.load(open(p, encoding="utf-8"))
warnings.simplefilter("ignore")
t = time.perf_counter()
res = _compare_before.compare({{"a": load(a), "b": load(b)}}, load(r), metrics, samples=int(samples))
res["seconds_in_process"] = time.perf_counter() - t
json.dump(res, open(out, "w"))
"""


def perturbed(cands: dict[str, str], seed: int = 1, unedited: float = 0.0) -> dict[str, str]:
    """Each caption with one word deleted at a random position (captions of more than 3 words);
    ``unedited``: the share of the items (drawn by a second generator) that keep their caption as
    it is, the others edited exactly as with ``unedited=0``."""
    rng = random.Random(seed)
    keep = random.Random(seed + 1)
    out = {}
    for i, text in cands.items():
        words = text.split()
        if len(words) > 3:
            del words[rng.randrange(len(words))]
        out[i] = text if unedited and keep.random() < unedited else " ".join(words)
    return out


def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    e.setdefault("HF_HUB_OFFLINE", "1")
    return e


def timed(cmd: list[str], repeat: int) -> tuple[float, float, float]:
    """(median wall s, median CPU s, peak MB) of ``cmd`` run ``repeat`` times (see :func:`alternated`)."""
    (walls, cpus, peak), = alternated([cmd], repeat)
    return statistics.median(walls), statistics.median(cpus), peak


def alternated(cmds: list[list[str]], repeat: int) -> list[tuple[list[float], list[float], float]]:
    """Per command: (wall times s, CPU times s, peak MB) of ``repeat`` runs, the commands run in
    turn (a, b, a, b, ...) so that each sees the same periods of the machine (a shared VM's
    speed drifts by 10-20% over minutes: all runs of one job, then all of the other, gave ratios
    that moved with the drift). CPU: the process tree's user + system; the peak: the largest
    resident size of the process or of any of its worker processes (``wait4``'s ``ru_maxrss``,
    so nothing samples the job), over the runs."""
    runs: list[tuple[list[float], list[float], list[float]]] = [([], [], []) for _ in cmds]
    for _ in range(repeat):
        for cmd, (walls, cpus, peaks) in zip(cmds, runs):
            r = measure(cmd, env(), sample=False)  # raises on a failed job
            walls.append(r["wall"])
            cpus.append(r["cpu"])
            peaks.append(r["maxrss"])
    return [(walls, cpus, max(peaks)) for walls, cpus, peaks in runs]


def same(old: dict, new: dict) -> tuple[bool, str]:
    """Whether every field of the former result equals the new one (==: to the last bit)."""
    for name, metrics in old["systems"].items():
        for metric, row in metrics.items():
            for key, value in row.items():
                got = new["systems"][name][metric].get(key)
                if got != value:
                    return False, f"{name}/{metric}/{key}: before {value!r}, now {got!r}"
    return True, "every p-value, score, difference, mean, ci and interval equal"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--sizes", default="2000,40000")
    ap.add_argument("--metrics", "-m", default="cider-d")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each timed job (median)")
    ap.add_argument("--unedited", type=float, default=0.0, help="share of the items whose caption system B keeps "
                    "unedited, in [0, 1] (default 0)")
    ap.add_argument("--old-at", default="2000", help="sizes at which the former implementation runs in full")
    ap.add_argument("--old-samples", type=int, default=64, help="resamples of the former implementation elsewhere "
                    "(0: not run)")
    args = ap.parse_args()
    if not 0.0 <= args.unedited <= 1.0:
        ap.error(f"--unedited: {args.unedited} is not in [0, 1]")
    data = flickr8k_data(args.data, "bench_compare")
    if data is None:
        return 1
    cands, refs = leave_one_out(data)
    ids = list(cands)
    sizes = [int(s) for s in args.sizes.split(",")]
    old_at = {int(s) for s in args.old_at.split(",") if s}
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_compare_") as tmp:
        folder = Path(tmp)
        files = {}
        for n in sizes:
            sub = ids[:n]
            a = {i: cands[i] for i in sub}
            paths = [folder / f"{k}{n}.json" for k in "abr"]
            for path, obj in zip(paths, (a, perturbed(a, unedited=args.unedited), {i: refs[i] for i in sub})):
                path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
            files[n] = paths
        # warm-up, once per size: METEOR's index, numba's compiled kernels (cached: a large job's
        # first run after the kernels' source changed compiles them), CIDEr-D's kernels built ahead
        # of time (significance/cider_aot.py: the first compare of 2,000 items builds them), the
        # OS file cache
        for n in sizes:
            a, b, r = files[n]
            timed([py, "-m", "capeval.cli", "compare", "-c", str(a), str(b), "-r", str(r), "-m", args.metrics,
                   "--samples", "300", "-q"], 1)
        for n in sizes:
            a, b, r = files[n]
            new_json = folder / f"new{n}.json"
            (score_walls, score_cpus, score_peak), (cmp_walls, cmp_cpus, cmp_peak) = alternated([
                [py, "-m", "capeval.cli", "score", "-c", str(a), "-r", str(r), "-m", args.metrics, "-q"],
                [py, "-m", "capeval.cli", "compare", "-c", f"a={a}", f"b={b}", "-r", str(r), "-m", args.metrics,
                 "--samples", str(args.samples), "-q", "--out", str(new_json)]], args.repeat)
            score_wall, score_cpu = statistics.median(score_walls), statistics.median(score_cpus)
            cmp_wall, cmp_cpu = statistics.median(cmp_walls), statistics.median(cmp_cpus)
            row = {"items": n, "metrics": args.metrics, "samples": args.samples, "unedited": args.unedited,
                   "score_one_wall_s": round(score_wall, 2), "score_one_cpu_s": round(score_cpu, 2),
                   "compare_two_wall_s": round(cmp_wall, 2), "compare_two_cpu_s": round(cmp_cpu, 2),
                   "ratio_wall": round(cmp_wall / score_wall, 2), "ratio_cpu": round(cmp_cpu / score_cpu, 2),
                   # each compare run over the score run just before it: the spread of the ratio
                   "ratio_wall_runs": [round(c / s, 2) for s, c in zip(score_walls, cmp_walls)],
                   "score_one_peak_mb": round(score_peak), "compare_two_peak_mb": round(cmp_peak)}
            samples_old = args.samples if n in old_at else args.old_samples
            if samples_old:
                new = json.loads(new_json.read_text())
                if samples_old != args.samples:  # the new implementation again, on the old one's draws
                    new_json = folder / f"new{n}_{samples_old}.json"
                    timed([py, "-m", "capeval.cli", "compare", "-c", f"a={a}", f"b={b}", "-r", str(r), "-m",
                           args.metrics, "--samples", str(samples_old), "-q", "--out", str(new_json)], 1)
                    new = json.loads(new_json.read_text())
                old_json = folder / f"old{n}.json"
                old_wall, old_cpu, _ = timed([py, "-c", _OLD.format(here=str(HERE)), str(a), str(b), str(r),
                                              args.metrics, str(samples_old), str(old_json)], 1)
                equal, why = same(json.loads(old_json.read_text()), new)
                row.update({"before_samples": samples_old, "before_wall_s": round(old_wall, 1),
                            "before_cpu_s": round(old_cpu, 1), "equal_to_before": equal, "check": why})
                p_values = {m: new["systems"]["b"][m]["p_value"] for m in new["systems"]["b"]}
                row["p_values"] = p_values
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    head = (f"{'items':>6}  {'metrics':<22} {'score one':>10} {'compare two':>12} {'ratio':>6} {'ratio cpu':>9} "
            f"{'peak MB':>13}  former implementation")
    print(head)
    for row in rows:
        before = (f"{row['before_wall_s']} s at {row['before_samples']} resamples, "
                  f"{'equal' if row['equal_to_before'] else 'DIFFERENT: ' + row['check']}" if "before_wall_s" in row
                  else "not run")
        print(f"{row['items']:>6}  {row['metrics']:<22} {row['score_one_wall_s']:>8.2f} s {row['compare_two_wall_s']:>10.2f}"
              f" s {row['ratio_wall']:>6.2f} {row['ratio_cpu']:>9.2f} "
              f"{row['score_one_peak_mb']:>6}/{row['compare_two_peak_mb']:<6}  {before}")
    for row in rows:
        print(f"{row['items']:>6} items: compare / score of each pair of runs {row['ratio_wall_runs']}")
    if args.unedited:
        print(f"(system B keeps system A's caption unedited for a share {args.unedited} of the items, drawn at random)")
    print(f"(wall and CPU: median of {args.repeat} run(s) per job, score and compare run in turn; CPU of the process "
          "tree; peak MB: the largest "
          "resident size of one process of the job, score / compare; "
          f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end)")
    return 0 if all(r.get("equal_to_before", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
