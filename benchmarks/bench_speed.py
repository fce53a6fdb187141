"""The three rows of issue 36, before and after a change, against pycocoevalcap, in one run.

Rows (whole processes, ``capeval score -m coco-ngram``, the metrics pycocoevalcap runs):

1. Flickr8k leave-one-out: each of the 40,460 captions against the other four of its
   image, warm cache (METEOR's index built);
2. Flickr8k-Expert candidates (5,664 x 5 references), warm cache;
3. the README example (``examples/``), cold cache: an empty ``CAPEVAL_CACHE``, as on the
   first run after install;
4. (not an issue row, off by default) the leave-one-out set as JSONL files, scored as a
   stream (the read-once path), warm cache;
5. the first large run (issue 47 item 9): in an empty ``CAPEVAL_CACHE``, the README example
   first (a small run: METEOR scans its paraphrase table, nothing is built), then the
   leave-one-out set of row 1, which is timed: it pays METEOR's index and the compiled
   kernel's build. The README run is timed too and printed on its own line (``small first``).

Each capeval job runs with the code under test (this checkout's ``src``) and, with
``--before DIR``, with another capeval source tree (e.g. the main branch:
``--before /work/main/src``), the two alternated run by run so that both see the same
machine load; pycocoevalcap 1.2 (Java: PTBTokenizer, Bleu, Meteor, Rouge, Cider as
``COCOEvalCap`` runs them) runs once per row. Printed: median wall times, the ratio of
pycocoevalcap's time to each, the median CPU time of each capeval job's process tree (less
sensitive than wall time to other work on a shared machine), and whether the per-item files
(``--per-item``) of before and after have the same sha256. Missing pycocoevalcap or java: the pycoco column is "skipped".

    python benchmarks/bench_speed.py --before /work/main/src            # ~4 min
    python benchmarks/bench_speed.py --rows 2,3 --repeat 5
    python benchmarks/bench_speed.py --rows 5 --repeat 3          # the first large run

Data: ``--data`` or ``$CAPEVAL_DATA`` (default ../shared/data).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _peers import flickr8k_data, missing, skipped  # noqa: E402
from bench_scale import PYCOCO_RUNNER, build_index, leave_one_out, measure, write_set  # noqa: E402

ROOT = HERE.parent


def env_for(src: Path, cache: Path) -> dict[str, str]:
    """The environment of a capeval job run from the source tree ``src`` with cache ``cache``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    env["CAPEVAL_CACHE"] = str(cache)
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_capeval(src: Path, cands: Path, refs: Path, cache: Path, per_item: Path, cold: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``capeval score -m coco-ngram`` process and its children
    (cache emptied first if ``cold``). The CPU time counts every child the job waited for
    (forked workers, METEOR's build processes)."""
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    cmd = [sys.executable, "-m", "capeval.cli", "score", "-m", "coco-ngram", "-c", str(cands), "-r", str(refs),
           "-q", "--per-item", str(per_item)]
    r = measure(cmd, env_for(src, cache), sample=False)
    return r["wall"], r["cpu"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--before", help="another capeval source tree (its src folder) to time beside this one")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each capeval job (median reported)")
    ap.add_argument("--rows", default="1,2,3", help="which rows to run (comma separated: 1, 2, 3, 4, 5)")
    ap.add_argument("--skip-java", action="store_true", help="do not run pycocoevalcap")
    args = ap.parse_args()
    data = flickr8k_data(args.data, "bench_speed")
    if data is None:
        return 2
    sys.path.insert(0, str(ROOT / "src"))
    from capeval.bench.flickr8k import expert_pairs

    peer = None if args.skip_java else missing("pycocoevalcap", "java")
    run_peer = not args.skip_java and peer is None
    trees = {"after": ROOT / "src"}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    rows = {int(x) for x in args.rows.split(",") if x.strip()}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; capeval: median of {args.repeat} runs "
          f"(before and after alternated); pycoco: 1 run")
    with tempfile.TemporaryDirectory(prefix="capeval-speed-") as tmp:
        folder = Path(tmp)
        runner = folder / "pycoco_runner.py"
        runner.write_text(PYCOCO_RUNNER, encoding="utf-8")
        readme = (ROOT / "examples" / "candidates.json", ROOT / "examples" / "references.json")
        jobs = []
        if 1 in rows:
            loo_c, loo_r = leave_one_out(data)
            jobs.append((f"leave-one-out {len(loo_c)} x 4, warm", write_set(folder, "loo", loo_c, loo_r), False))
        if 2 in rows:
            _, ec, er = expert_pairs(data)
            jobs.append((f"Flickr8k-Expert {len(ec)} x 5, warm", write_set(folder, "expert", ec, er), False))
        if 3 in rows:
            jobs.append(("README example, cold cache", readme, True))
        if 4 in rows:
            loo_c, loo_r = leave_one_out(data)
            c, r = folder / "loo_cands.jsonl", folder / "loo_refs.jsonl"
            c.write_text("".join(json.dumps({"id": i, "caption": x}) + "\n" for i, x in loo_c.items()), encoding="utf-8")
            r.write_text("".join(json.dumps({"id": i, "references": x}) + "\n" for i, x in loo_r.items()),
                         encoding="utf-8")
            jobs.append(("leave-one-out JSONL (streamed), warm", (c, r), False))
        streamed = "leave-one-out JSONL (streamed), warm"
        if 5 in rows:
            loo_c, loo_r = leave_one_out(data)
            jobs.append((f"leave-one-out {len(loo_c)} x 4, first large", write_set(folder, "loo", loo_c, loo_r),
                         "after-small"))
        peer_walls: dict[Path, float] = {}  # pycocoevalcap once per input (rows 1 and 5 share one)
        warm = {name: folder / f"warm-{name}" for name in trees}
        for name, src in trees.items() if any(not cold for _, _, cold in jobs) else ():
            # the warm caches: METEOR's index (and kernel) built once per tree
            run_capeval(src, *readme, warm[name], folder / "warmup.json", False)
            build_index(env_for(src, warm[name]))
        head = (f"{'row':<36} {'pycoco':>8}" + "".join(f" {n:>8} {'ratio':>6}" for n in trees)
                + "  cpu (user+sys of the process tree, " + " / ".join(trees) + ")  per-item sha256")
        print(head)
        for label, (cands, refs), cold in jobs:
            if run_peer and label != streamed and cands not in peer_walls:  # the streamed row: row 1 has it
                peer_walls[cands] = measure([sys.executable, str(runner), str(cands), str(refs)], dict(os.environ),
                                            sample=False)["wall"]
            ref = peer_walls.get(cands) if label != streamed else None
            walls: dict[str, list[float]] = {n: [] for n in trees}
            cpus: dict[str, list[float]] = {n: [] for n in trees}
            digests: dict[str, set[str]] = {n: set() for n in trees}
            small: dict[str, list[float]] = {n: [] for n in trees}  # row 5: the README run before
            for _ in range(args.repeat):
                for name, src in trees.items():
                    out = folder / f"items-{name}.json"
                    cache = folder / f"cold-{name}" if cold else warm[name]
                    if cold == "after-small":  # an empty cache, the README example, then this input
                        wall, _ = run_capeval(src, *readme, cache, folder / "small.json", True)
                        small[name].append(wall)
                        wall, cpu = run_capeval(src, cands, refs, cache, out, False)
                    else:
                        wall, cpu = run_capeval(src, cands, refs, cache, out, bool(cold))
                    walls[name].append(wall)
                    cpus[name].append(cpu)
                    digests[name].add(sha256(out))
            line = f"{label:<36} " + (f"{ref:>7.2f}s" if ref is not None else f"{'-':>8}")
            for name in trees:
                t = statistics.median(walls[name])
                line += f" {t:>7.2f}s " + (f"{ref / t:>5.1f}x" if ref is not None else f"{'-':>6}")
            line += "  cpu " + " / ".join(f"{statistics.median(cpus[n]):.2f}s" for n in trees)
            every = set().union(*digests.values())
            line += "  equal " + next(iter(every))[:12] if len(every) == 1 else f"  DIFFERENT {sorted(every)}"
            print(line, flush=True)
            if cold == "after-small":
                print(f"{'  (small first: README, cold)':<36} {'':>8}" + "".join(
                    f" {statistics.median(small[n]):>7.2f}s {'':>6}" for n in trees), flush=True)
            if len(every) != 1:
                return 1
        if peer is not None:
            skipped("pycoco column", peer)
        elif args.skip_java:
            print("pycoco column: skipped (--skip-java)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
