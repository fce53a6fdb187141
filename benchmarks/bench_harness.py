"""lmms-eval's own COCO caption aggregation: pycocoevalcap (Java) vs ``CAPEVAL_AS_PYCOCOEVALCAP=1``.

lmms-eval 0.7.3's ``lmms_eval/tasks/coco_cap/utils.py`` (the installed wheel's file,
unmodified, loaded by path; ``loguru`` and lmms-eval's ``generate_submission_file``
stubbed) aggregates a task's results once per metric: ``coco_bleu1`` ... ``coco_cider``,
seven calls, each building the seven scorers, tokenising references and predictions and
scoring one metric. Each side runs the seven calls in one fresh Python process, timed from
process start to exit (and the aggregation alone, inside the process):

1. pycocoevalcap 1.2 with Java (14 tokenizer and 7 METEOR JVM starts);
2. the same file under ``CAPEVAL_AS_PYCOCOEVALCAP=1`` (the drop-in, its per-process memo on);
3. the same with the memo turned off in the child (what the memo saves: issue 48 item 4);
4. "one pass": each scorer once on one tokenisation (switched), the cost the seven calls
   approach: every metric's own work is done once in both.

Data: the first ``--items`` Flickr8k images (Flickr8k.token.txt): the first caption is the
prediction, the other four the references. A missing lmms-eval, pycocotools,
pycocoevalcap or ``java`` prints "skipped" for the rows that need it.

Start-up cost of the switch's ``.pth`` line: what ``site`` does for it per interpreter
(``site.addpackage`` on a folder holding only that file) with the variable unset, timed
in-process; and ``python -c pass`` start-up, unset vs set (set imports capeval).

    python benchmarks/bench_harness.py [--data ../shared/data] [--items 5000] [--starts 20] [--repeat 2] [--no-java]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

CHILD = """\
import importlib.util, json, os, sys, time, types
t0 = time.perf_counter()
path, results_file, out_dir, memo = sys.argv[1:5]
def stub(name, **attrs):
    m = types.ModuleType(name); m.__dict__.update(attrs); sys.modules[name] = m
class Log:
    def __getattr__(self, name): return lambda *a, **k: None
stub("loguru", logger=Log())
for name in ("lmms_eval", "lmms_eval.tasks", "lmms_eval.tasks._task_utils"):
    stub(name, __path__=[])
stub("lmms_eval.tasks._task_utils.file_utils", generate_submission_file=lambda name, args: os.path.join(out_dir, name))
if memo == "off":
    from capeval.compat.pycocoevalcap._memo import enable
    enable(False)
spec = importlib.util.spec_from_file_location("coco_cap_utils", path)
utils = importlib.util.module_from_spec(spec); spec.loader.exec_module(utils)
results = json.load(open(results_file))
t1 = time.perf_counter()
out, each = {}, {}
for f in ("coco_bleu1", "coco_bleu2", "coco_bleu3", "coco_bleu4", "coco_meteor", "coco_rougel", "coco_cider"):
    s = time.perf_counter()
    out[f] = float(getattr(utils, f)(results, None))
    each[f] = time.perf_counter() - s
print("RESULT " + json.dumps({"scores": out, "each": each, "aggregation": time.perf_counter() - t1,
                              "module": utils.Bleu.__module__}))
"""


# the "one" of "seven calls cost about one": each metric once on one tokenisation (the drop-in, switched)
ONE_PASS = """\
import json, sys, time
t1 = time.perf_counter()
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
results = json.load(open(sys.argv[2]))
tok = PTBTokenizer()
gts = tok.tokenize({int(r["image_id"]): [{"caption": a} for a in r["answer"]] for r in results})
res = tok.tokenize({int(r["image_id"]): [{"caption": r["pred"]}] for r in results})
for scorer in (Bleu(4), Meteor(), Rouge(), Cider()):
    scorer.compute_score(gts, res)
each = {"one pass": time.perf_counter() - t1}
print("RESULT " + json.dumps({"scores": {}, "each": each, "aggregation": each["one pass"], "module": Bleu.__module__}))
"""


def lmms_utils() -> Path | None:
    """lmms-eval 0.7.3's coco_cap/utils.py from the installed wheel, or None."""
    from importlib import metadata

    try:
        dist = metadata.distribution("lmms_eval")
    except metadata.PackageNotFoundError:
        return None
    entry = next((f for f in dist.files or [] if str(f) == "lmms_eval/tasks/coco_cap/utils.py"), None)
    return Path(str(dist.locate_file(entry))) if entry else None


def build_results(data: Path, n: int) -> list[dict]:
    """lmms-eval's per-document results: first caption as the prediction, the other four as answers."""
    caps: dict[str, list[str]] = {}
    for line in (data / "flickr8k" / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines():
        key, _, text = line.partition("\t")
        caps.setdefault(key.split("#")[0], []).append(text)
    images = [k for k, v in caps.items() if len(v) >= 5][:n]
    return [{"image_id": i, "id": i, "pred": caps[k][0], "answer": caps[k][1:5]} for i, k in enumerate(images)]


def run_side(utils: Path, results: Path, *, switch: bool, memo: str = "on", code: str = CHILD) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CAPEVAL_AS_PYCOCOEVALCAP"}
    if switch:
        env["CAPEVAL_AS_PYCOCOEVALCAP"] = "1"
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, str(utils), str(results), out, memo], env=env,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr[-3000:]}")
    got = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])
    got["process"] = wall
    return got


def startup(starts: int) -> None:
    """The .pth line's cost unset (in-process, as site runs it) and interpreter start-up unset vs set."""
    import site

    from capeval.compat.pycocoevalcap.switch import PTH_LINE, PTH_NAME, VARIABLE, hook_files

    saved = os.environ.pop(VARIABLE, None)
    with tempfile.TemporaryDirectory() as d:
        Path(d, PTH_NAME).write_text(PTH_LINE + "\n")
        reps = 2000
        per = min(timeit.repeat(lambda: site.addpackage(d, PTH_NAME, set()), number=reps, repeat=5)) / reps
        # the peer: an editable install's path-only .pth (one folder line), as setuptools writes it
        Path(d, "__editable__.x.pth").write_text(d + "\n")
        base = min(timeit.repeat(lambda: site.addpackage(d, "__editable__.x.pth", set()), number=reps, repeat=5)) / reps
    if saved is not None:
        os.environ[VARIABLE] = saved
    print(f"start-up: site processing {PTH_NAME} with {VARIABLE} unset: {per * 1e6:.1f} us per interpreter "
          f"(read the file, run the line); a path-only .pth: {base * 1e6:.1f} us; ratio {per / base:.2f}")
    if not hook_files():
        print(f"start-up: python -c pass unset vs set: skipped ({PTH_NAME} not installed in this environment)")
        return

    def median_start(value: str | None) -> float:
        env = {k: v for k, v in os.environ.items() if k != VARIABLE}
        if value is not None:
            env[VARIABLE] = value
        times = []
        for _ in range(starts):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    unset, on = median_start(None), median_start("1")
    print(f"start-up: python -c pass, median of {starts}: unset {unset * 1000:.1f} ms, {VARIABLE}=1 {on * 1000:.1f} ms "
          f"(+{(on - unset) * 1000:.1f} ms: capeval and the finder imported)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--no-java", action="store_true", help="leave the pycocoevalcap (Java) row out")
    ap.add_argument("--repeat", type=int, default=2, choices=range(1, 11), metavar="1..10",
                    help="runs of each capeval side, interleaved; the fastest is reported (Java: once)")
    args = ap.parse_args()
    startup(args.starts)

    utils = lmms_utils()
    missing = [m for m in ("pycocotools", "pycocoevalcap") if __import__("importlib").util.find_spec(m) is None]
    if utils is None or missing:
        print(f"lmms-eval coco_cap aggregation: skipped ({'lmms-eval' if utils is None else ', '.join(missing)} "
              "not installed)")
        return
    results = build_results(args.data, args.items)
    with tempfile.TemporaryDirectory() as d:
        res_file = Path(d, "results.json")
        res_file.write_text(json.dumps(results))
        runs: dict[str, list[dict]] = {"switch": [], "nomemo": [], "one": []}
        for _ in range(args.repeat):  # interleaved, the fastest of each kept: a shared machine's noise
            runs["switch"].append(run_side(utils, res_file, switch=True))
            runs["nomemo"].append(run_side(utils, res_file, switch=True, memo="off"))
            runs["one"].append(run_side(utils, res_file, switch=True, code=ONE_PASS))
        switch, nomemo, one = (min(runs[k], key=lambda r: r["aggregation"]) for k in ("switch", "nomemo", "one"))
        assert switch["module"].startswith("capeval."), switch["module"]
        java = None
        if args.no_java:
            print("pycocoevalcap (Java): skipped (--no-java)")
        elif shutil.which("java") is None:
            print("pycocoevalcap (Java): skipped (java not installed)")
        else:
            java = run_side(utils, res_file, switch=False)
    n = len(results)
    print(f"\nlmms-eval 0.7.3 coco_cap aggregation, seven calls, {n} items (seconds; process = start to exit; "
          f"capeval rows: fastest of {args.repeat})")
    print(f"{'side':42s} {'process':>9s} {'aggregation':>12s} {'first call':>11s} {'other six':>10s}")
    rows = [("pycocoevalcap 1.2 (Java)", java), ("CAPEVAL_AS_PYCOCOEVALCAP=1", switch),
            ("CAPEVAL_AS_PYCOCOEVALCAP=1, memo off", nomemo)]
    for name, r in rows:
        if r is None:
            print(f"{name:42s} skipped")
            continue
        each = list(r["each"].values())
        print(f"{name:42s} {r['process']:9.2f} {r['aggregation']:12.2f} {each[0]:11.2f} {sum(each[1:]):10.2f}")
    print(f"{'one pass (tokenise once, each scorer once)':42s} {one['process']:9.2f} {one['aggregation']:12.2f}")
    print(f"memo: lmms-eval's seven calls cost {switch['aggregation'] / one['aggregation']:.2f} x one pass "
          f"(memo off: {nomemo['aggregation'] / one['aggregation']:.2f} x); the coco_bleu2..4 calls "
          f"{sum(switch['each'][f] for f in ('coco_bleu2', 'coco_bleu3', 'coco_bleu4')):.2f} s "
          f"(memo off {sum(nomemo['each'][f] for f in ('coco_bleu2', 'coco_bleu3', 'coco_bleu4')):.2f} s)")
    if java is not None:
        print(f"ratio pycocoevalcap (Java) / switch: {java['process'] / switch['process']:.1f}x process, "
              f"{java['aggregation'] / switch['aggregation']:.1f}x aggregation")
        diff = {f: abs(java["scores"][f] - switch["scores"][f]) for f in java["scores"]}
        print("scores (Java | switch | |diff|):")
        for f in java["scores"]:
            print(f"  {f:12s} {java['scores'][f]!r:>22} {switch['scores'][f]!r:>22} {diff[f]:.1e}")
    assert switch["scores"] == nomemo["scores"], "the memo changed a score"


if __name__ == "__main__":
    main()
