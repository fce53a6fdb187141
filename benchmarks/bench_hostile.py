"""Hostile and huge inputs of ``capeval score``: time and peak memory of whole processes.

1. A large JSONL job on the local engine (default 1,000,000 Flickr8k leave-one-out items,
   copied with unique ids as in ``bench_scale.py``): ``capeval score -m coco-ngram -c
   cands.jsonl -r refs.jsonl``, wall time and peak PSS of the whole process tree (forked
   workers included), sampled as ``bench_scale.measure`` does.
2. 2 GB sparse files of zero bytes (``truncate -s 2G``) as ``.json``, ``.jsonl``, ``.csv``
   candidates, and ``-c /dev/zero``: each must end at once with a one-line error; its
   time, peak tree PSS and exit status are printed.
3. One item with many references (default 1,000,000, ``--references``): with the default
   ``--max-references`` (10,000) it is refused with one line; the same item cut to the
   limit (10,000 references) is scored. BLEU-4/ROUGE-L/CIDEr-D and METEOR, peak memory of each.

    python benchmarks/bench_hostile.py                   # both parts
    python benchmarks/bench_hostile.py --items 200000    # a smaller job
    python benchmarks/bench_hostile.py --parts 2         # only the hostile files
    python benchmarks/bench_hostile.py --parts 3         # only the many-references item

``--src`` runs another checkout's ``src`` (e.g. the code before a change) for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import _pss, _tree, leave_one_out, scaled


def run(cmd: list[str], env: dict[str, str]) -> dict:
    """``cmd``'s wall time, exit status, last stderr line and peak PSS (MB) of its process tree."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        peak = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, sum(_pss(p) for p in _tree(proc.pid)))
            time.sleep(0.05 if time.perf_counter() - t0 < 2 else 0.2)
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    return {"wall": time.perf_counter() - t0, "rc": os.waitstatus_to_exitcode(status), "pss": peak / 2**20,
            "maxrss": usage.ru_maxrss / 1024, "err": lines[-1] if lines else ""}


def write_jsonl(folder: Path, n: int, data: Path) -> tuple[Path, Path]:
    cands, refs = scaled(*leave_one_out(data), n)
    c, r = folder / "cands.jsonl", folder / "refs.jsonl"
    with open(c, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"image_id": i, "caption": text}) + "\n" for i, text in cands.items())
    with open(r, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"image_id": i, "references": texts}) + "\n" for i, texts in refs.items())
    return c, r


def many_references(folder: Path, n: int, cli: list[str], env: dict[str, str]) -> None:
    """Part 3: one item with ``n`` references, then the same item cut to 10,000 (the default limit)."""
    c = folder / "one.json"
    c.write_text(json.dumps({"1": "a dog runs on the grass"}), encoding="utf-8")
    print(f"{'one item':<40} {'rc':>3} {'wall':>7} {'PSS':>7} {'maxrss':>7}  stderr")
    for count in (n, 10_000):
        r = folder / f"refs{count}.json"
        r.write_text(json.dumps({"1": [f"a dog number {k} runs on the grass" for k in range(count)]}), encoding="utf-8")
        for metrics in ("bleu-4,rouge-l,cider-d", "meteor"):
            res = run([*cli, "-m", metrics, "-c", str(c), "-r", str(r)], env)
            label = f"{count:,} refs, {metrics}"
            print(f"{label:<40} {res['rc']:>3} {res['wall']:>6.2f}s {res['pss']:>5.0f}MB {res['maxrss']:>5.0f}MB  "
                  f"{res['err'][:100]}", flush=True)
        r.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--items", type=int, default=1_000_000, help="items of the JSONL job (default 1,000,000)")
    ap.add_argument("--parts", default="1,2,3",
                    help="which parts to run (1: JSONL job, 2: hostile files, 3: many references)")
    ap.add_argument("--references", type=int, default=1_000_000, help="references of the one item of part 3")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the capeval source folder to run")
    ap.add_argument("--per-item", action="store_true", help="part 1 also writes --per-item scores")
    ap.add_argument("--files", help="existing cands.jsonl,refs.jsonl instead of writing them")
    args = ap.parse_args()
    parts = {int(p) for p in args.parts.split(",") if p.strip()}
    env = dict(os.environ, PYTHONPATH=args.src, HF_HUB_OFFLINE="1")
    cli = [sys.executable, "-m", "capeval.cli", "score", "-q"]
    with tempfile.TemporaryDirectory(prefix="capeval-hostile-") as tmp:
        folder = Path(tmp)
        if 1 in parts:
            if args.files:
                c, r = (Path(p) for p in args.files.split(","))
            else:
                c, r = write_jsonl(folder, args.items, Path(args.data))
            with open(c, "rb") as f:
                n = sum(1 for _ in f)
            extra = ["--per-item", str(folder / "per_item.json")] if args.per_item else []
            res = run([*cli, "-m", "coco-ngram", "-c", str(c), "-r", str(r), *extra], env)
            print(f"JSONL job, {n:,} items, coco-ngram, local engine{', --per-item' if extra else ''}: rc {res['rc']}, "
                  f"{res['wall']:.1f} s, peak tree PSS {res['pss']:.0f} MB, largest process {res['maxrss']:.0f} MB",
                  flush=True)
            if res["rc"]:
                print("    " + res["err"])
        if 2 in parts:
            print(f"{'input':<28} {'rc':>3} {'wall':>7} {'PSS':>7} {'maxrss':>7}  stderr (PSS: sampled, 50 ms)")
            for suffix in (".json", ".jsonl", ".csv"):
                path = folder / f"zeros{suffix}"
                subprocess.run(["truncate", "-s", "2G", str(path)], check=True)
                res = run([*cli, "-m", "bleu-1", "-c", str(path)], env)
                print(f"{'2 GB ' + suffix:<28} {res['rc']:>3} {res['wall']:>6.2f}s {res['pss']:>5.0f}MB "
                      f"{res['maxrss']:>5.0f}MB  {res['err']}", flush=True)
                path.unlink()
            res = run([*cli, "-m", "bleu-1", "-c", "/dev/zero"], env)
            print(f"{'-c /dev/zero':<28} {res['rc']:>3} {res['wall']:>6.2f}s {res['pss']:>5.0f}MB "
                  f"{res['maxrss']:>5.0f}MB  {res['err']}", flush=True)
        if 3 in parts:
            many_references(folder, args.references, cli, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
