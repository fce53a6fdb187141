"""Whole-process speed and memory of ``capeval score`` against pycocoevalcap 1.2.

capeval computes the metrics pycocoevalcap computes here: ``coco-ngram`` (BLEU-1..4, METEOR,
ROUGE-L, CIDEr-D; pycocoevalcap's SPICE cannot run without CoreNLP). The README's first
command (``coco`` = ``coco-ngram`` + capeval's Java-free SPICE) is timed too, cold and warm,
without a ratio (no pycocoevalcap SPICE to compare with).

Every job runs as a separate process; the script samples the resident memory of its whole
process tree (forked workers, pycocoevalcap's Java children) and prints wall time, peak
tree RSS and peak tree PSS (shared pages counted once, split between the processes that
share them: the fair figure for forked workers). All capeval / pycocoevalcap ratios are
measured in this one run.

1. The README's example captions (examples/) and Flickr8k-Expert (5,664
   candidates x 5 references) through the CLI: cold cache (a fresh ``CAPEVAL_CACHE``, so
   METEOR's index is built) and warm cache, against pycocoevalcap's Java toolkit on the
   same captions (PTBTokenizer, then Bleu / Meteor / Rouge / Cider as ``COCOEvalCap`` runs them).
2. Flickr8k leave-one-out: each of the 40,460 Flickr8k captions against the other four
   captions of its image, capeval against pycocoevalcap.
3. capeval alone on growing sets (leave-one-out items; beyond 40,460, copies with the
   images shuffled and unique ids): time and peak memory per size.

    python benchmarks/bench_scale.py                      # everything (pycocoevalcap ~3 min)
    python benchmarks/bench_scale.py --skip-java --sizes 5000,40000
    python benchmarks/bench_scale.py --quick              # one repeat, no 400k, no Java

Data: ``--data`` or ``$CAPEVAL_DATA`` (default ../shared/data), read with
``capeval.bench.flickr8k``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _peers import missing, skipped

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# pycocoevalcap as its COCOEvalCap runs the metrics, on {id: caption} / {id: [refs]} files
PYCOCO_RUNNER = """
import json, sys
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.cider.cider import Cider
cands = json.load(open(sys.argv[1], encoding="utf-8"))
refs = json.load(open(sys.argv[2], encoding="utf-8"))
tok = PTBTokenizer()
gts = tok.tokenize({i: [{"caption": r} for r in refs[i]] for i in cands})
res = tok.tokenize({i: [{"caption": c}] for i, c in cands.items()})
out = {}
for scorer, names in ((Bleu(4), ["bleu-1", "bleu-2", "bleu-3", "bleu-4"]), (Meteor(), ["meteor"]),
                      (Rouge(), ["rouge-l"]), (Cider(), ["cider-d"])):
    score, _ = scorer.compute_score(gts, res, **({"verbose": 0} if names[0] == "bleu-1" else {}))
    for n, s in zip(names, score if isinstance(score, list) else [score]):
        out[n] = float(s)
print(json.dumps(out))
"""


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (parent ids read from /proc/<pid>/stat)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(cmd: list[str], env: dict[str, str] | None = None, sample: bool = True) -> dict:
    """Run ``cmd``: wall time, CPU time of the whole tree (user + system, children included),
    peak RSS / PSS summed over its process tree and the largest single-process RSS (MB),
    and its stdout.

    The tree's RSS is sampled every 20 ms in the first second, then every 100 ms; its PSS
    (costlier to read) every other sample, then every fifth. Sampling still takes some of
    the two cores from the job (~0.15 s on a 1.3 s job), so ``sample=False`` runs are used
    for the times (``rss`` and ``pss`` are then 0).
    """
    import threading

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    out_chunks: list[str] = []
    errs: list[str] = []
    readers = [threading.Thread(target=lambda: out_chunks.append(proc.stdout.read())),
               threading.Thread(target=lambda: errs.append(proc.stderr.read()))]
    for t in readers:
        t.start()
    peak_rss = peak_pss = 0
    k = 0
    while True:
        # wait4 also gives the largest RSS of the process and its waited-for children
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if not sample:
            time.sleep(0.005)
            continue
        tree = _tree(proc.pid)
        peak_rss = max(peak_rss, sum(_rss(p) for p in tree))
        early = time.perf_counter() - t0 < 1.0
        if k % (2 if early else 5) == 0:
            peak_pss = max(peak_pss, sum(_pss(p) for p in tree))
        k += 1
        time.sleep(0.02 if early else 0.1)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}): {''.join(errs)[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": peak_rss / 2**20, "pss": peak_pss / 2**20,
            "maxrss": usage.ru_maxrss / 1024, "out": "".join(out_chunks)}


def capeval_cmd(cands: Path, refs: Path, metrics: str = "coco-ngram") -> list[str]:
    return [sys.executable, "-m", "capeval.cli", "score", "-m", metrics, "-c", str(cands), "-r", str(refs), "-q"]


def pycoco_cmd(runner: Path, cands: Path, refs: Path) -> list[str]:
    return [sys.executable, str(runner), str(cands), str(refs)]


def write_set(folder: Path, name: str, cands: dict, refs: dict) -> tuple[Path, Path]:
    c, r = folder / f"{name}_cands.json", folder / f"{name}_refs.json"
    c.write_text(json.dumps(cands, ensure_ascii=False), encoding="utf-8")
    r.write_text(json.dumps(refs, ensure_ascii=False), encoding="utf-8")
    return c, r


def leave_one_out(data: Path) -> tuple[dict, dict]:
    """Every Flickr8k caption against the other captions of its image."""
    from capeval.bench.flickr8k import read_flickr8k_tokens

    _, by_image = read_flickr8k_tokens(data / "flickr8k" / "Flickr8k.token.txt")
    cands, refs = {}, {}
    for image, texts in by_image.items():
        for k, text in enumerate(texts):
            cands[f"{image}#{k}"] = text
            refs[f"{image}#{k}"] = texts[:k] + texts[k + 1 :]
    return cands, refs


def scaled(cands: dict, refs: dict, size: int, seed: int = 0) -> tuple[dict, dict]:
    """``size`` items: the set itself in order, then copies with ids made unique.

    Each copy shuffles the images but keeps the items of one image together (as in
    COCO-style files, where an image's captions are adjacent).
    """
    groups: dict[str, list[str]] = {}
    for i in cands:
        groups.setdefault(i.split("#")[0], []).append(i)
    order = list(groups)
    out_c, out_r = {}, {}
    rng = random.Random(seed)
    rep = 0
    while len(out_c) < size:
        images = order if rep == 0 else rng.sample(order, len(order))
        for image in images:
            for i in groups[image]:
                if len(out_c) == size:
                    break
                key = i if rep == 0 else f"{i}~{rep}"
                out_c[key] = cands[i]
                out_r[key] = refs[i]
        rep += 1
    return out_c, out_r


def env_with(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.update(extra)
    return env


def build_index(env: dict[str, str]) -> None:
    """METEOR's full index in the ``CAPEVAL_CACHE`` of ``env`` (what a warm run loads; a small
    first run only scans the paraphrase table), and its compiled beam search where numba is
    installed (built ahead of time into the cache, or numba's JIT cache where that build fails)."""
    code = ("from capeval.metrics.meteor import prepare; prepare()\n"
            "try:\n    from capeval.metrics.meteor import jit_align; jit_align.load()\nexcept ImportError:\n    pass")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)


def repeat(cmd: list[str], env: dict[str, str], n: int, memory: bool = True) -> dict:
    """``n`` timed runs (median, min) and, with ``memory``, one more run sampling the tree's memory."""
    runs = [measure(cmd, env, sample=False) for _ in range(n)]
    sampled = [measure(cmd, env)] if memory else []
    return {
        "wall": statistics.median(r["wall"] for r in runs),
        "min": min(r["wall"] for r in runs),
        "rss": max((r["rss"] for r in sampled), default=0.0),
        "pss": max((r["pss"] for r in sampled), default=0.0),
        "maxrss": max(r["maxrss"] for r in runs + sampled),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "out": runs[-1]["out"],
        "n": n,
    }


def fmt(r: dict | None) -> str:
    if r is None:
        return f"{'-':>9}"
    return f"{r['wall']:>8.2f}s"


def row(job: str, ref: dict | None, ours: dict) -> None:
    ratio = f"{ref['wall'] / ours['wall']:>6.1f}x" if ref else f"{'-':>7}"
    cpu = f"{ref['cpu']:>7.1f}s {ours['cpu']:>6.1f}s" if ref else f"{'-':>8} {ours['cpu']:>6.1f}s"
    print(f"{job:<40} {fmt(ref)} {fmt(ours)} {ratio}  {ours['min']:>6.2f}s {ours['n']:>2}  {cpu}"
          f" {ours['maxrss']:>7.0f} {ours['rss']:>6.0f} {ours['pss']:>6.0f}", flush=True)


def same_scores(ours: dict, ref: dict | None) -> str:
    if ref is None:
        return ""
    mine = json.loads(ours["out"])["scores"]
    theirs = json.loads(ref["out"])
    worst = max(abs(mine[k] - theirs[k]) for k in theirs)
    return f"system scores vs pycocoevalcap: max |diff| {worst:.1e}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--skip-java", action="store_true", help="do not run pycocoevalcap (Java)")
    ap.add_argument("--sizes", default="5000,40000,400000", help="sizes of part 3 (comma separated)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per capeval job (median reported)")
    ap.add_argument("--repeat-large", type=int, default=1, help="runs per capeval job of 100,000 items or more")
    ap.add_argument("--quick", action="store_true", help="one repeat, sizes 5000,40000, no Java")
    ap.add_argument("--parts", default="1,2,3", help="which parts to run (comma separated: 1, 2, 3)")
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.sizes, args.skip_java = 1, "5000,40000", True
    data = Path(args.data)
    if not (data / "flickr8k" / "ExpertAnnotations.txt").exists():
        print(f"bench_scale: Flickr8k data not found under {data} (pass --data or set CAPEVAL_DATA)", file=sys.stderr)
        return 2
    if not Path("/proc/self/smaps_rollup").exists():
        print("bench_scale: needs Linux /proc (smaps_rollup) to sample the process tree's memory", file=sys.stderr)
        return 2
    peer = None if args.skip_java else missing("pycocoevalcap", "java")
    java = not args.skip_java and peer is None
    if peer:
        skipped("pycocoevalcap columns", peer)
    from capeval.bench.flickr8k import expert_pairs

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; times: median wall of whole processes")
    with tempfile.TemporaryDirectory(prefix="capeval-bench-") as tmp:
        folder = Path(tmp)
        runner = folder / "pycoco_runner.py"
        runner.write_text(PYCOCO_RUNNER, encoding="utf-8")
        readme = (ROOT / "examples" / "candidates.json", ROOT / "examples" / "references.json")
        _, ec, er = expert_pairs(data)
        expert = write_set(folder, "expert", ec, er)
        loo_c, loo_r = leave_one_out(data)
        loo = write_set(folder, "loo", loo_c, loo_r)

        print("\npycoco: pycocoevalcap whole process (1 run); capeval: median of n runs, min; capeval memory in MB:")
        print("cpu: user+system of the whole process tree (pycoco, capeval); maxrss: largest single process;")
        print("tree / PSS: peak RSS / PSS summed over the process tree")
        print(f"{'job':<40} {'pycoco':>9} {'capeval':>9} {'ratio':>7}  {'min':>6}  n  {'cpu':>17}"
              f" {'maxrss':>7} {'tree':>6} {'PSS':>6}")
        parts = {int(x) for x in args.parts.split(",") if x.strip()}
        warm_cache = folder / "cache"
        if parts - {1}:  # a warm cache for parts 2 and 3 (part 1 makes its own from a cold run)
            build_index(env_with(CAPEVAL_CACHE=str(warm_cache)))
        for name, (c, r) in (("README example", readme), (f"Flickr8k-Expert ({len(ec)} x 5)", expert)):
            if 1 not in parts:
                break
            ref = repeat(pycoco_cmd(runner, c, r), env_with(), 1, memory=False) if java else None
            cold_runs = []
            for k in range(max(1, min(args.repeat, 2))):
                cache = folder / f"cold{k}"
                cold_runs.append(measure(capeval_cmd(c, r), env_with(CAPEVAL_CACHE=str(cache))))
                if not warm_cache.exists():  # a small cold run only scans (partial_index): build the index
                    build_index(env_with(CAPEVAL_CACHE=str(warm_cache)))
                shutil.rmtree(cache)
            cold = {"wall": statistics.median(x["wall"] for x in cold_runs), "min": min(x["wall"] for x in cold_runs),
                    "rss": max(x["rss"] for x in cold_runs), "pss": max(x["pss"] for x in cold_runs),
                    "maxrss": max(x["maxrss"] for x in cold_runs),
                    "cpu": statistics.median(x["cpu"] for x in cold_runs),
                    "out": cold_runs[-1]["out"], "n": len(cold_runs)}
            row(f"{name}, cold cache", ref, cold)
            warm = repeat(capeval_cmd(c, r), env_with(CAPEVAL_CACHE=str(warm_cache)), args.repeat)
            row(f"{name}, warm cache", ref, warm)
            if ref:
                print("    " + same_scores(warm, ref))
            if name == "README example":  # the README's command as written: coco, SPICE included
                cache = folder / "cold-spice"
                cold = measure(capeval_cmd(c, r, "coco"), env_with(CAPEVAL_CACHE=str(cache)))
                cold.update(min=cold["wall"], n=1)
                shutil.rmtree(cache)
                row("README command (coco + SPICE), cold", None, cold)
                row("README command (coco + SPICE), warm", None,
                    repeat(capeval_cmd(c, r, "coco"), env_with(CAPEVAL_CACHE=str(warm_cache)), args.repeat))

        if 2 in parts:
            ref = repeat(pycoco_cmd(runner, *loo), env_with(), 1, memory=False) if java else None
            warm = repeat(capeval_cmd(*loo), env_with(CAPEVAL_CACHE=str(warm_cache)), args.repeat)
            row(f"leave-one-out ({len(loo_c)} x 4)", ref, warm)
            if ref:
                print("    " + same_scores(warm, ref))

        sizes = [int(s) for s in args.sizes.split(",") if s.strip()] if 3 in parts else []
        if sizes:
            print(f"\ncapeval alone (warm cache, coco-ngram, {args.repeat} run(s) each, {args.repeat_large} from 100,000 items)")
            print(f"{'items':>8} {'wall':>8} {'us/item':>8} {'cpu':>8} {'maxrss':>9} {'tree RSS':>9} {'tree PSS':>9}")
        for size in sizes:
            c, r = write_set(folder, f"n{size}", *scaled(loo_c, loo_r, size))
            res = repeat(capeval_cmd(c, r), env_with(CAPEVAL_CACHE=str(warm_cache)),
                         args.repeat if size < 100_000 else args.repeat_large)
            print(f"{size:>8} {res['wall']:>7.2f}s {res['wall'] / size * 1e6:>8.0f} {res['cpu']:>7.1f}s {res['maxrss']:>6.0f} MB"
                  f" {res['rss']:>6.0f} MB {res['pss']:>6.0f} MB", flush=True)
            c.unlink()
            r.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
