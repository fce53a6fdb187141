"""The COCO caption evaluation flow: pycocoevalcap 1.2 (Java) vs capeval.compat.pycocoevalcap.

Builds a COCO-format annotation file (Flickr8k test images, their 5 captions) and a results
file (each image's first Flickr8k-Expert candidate) in a temporary folder, then runs the
example flow of pycocoevalcap's README (``COCO(ann)``, ``coco.loadRes(res)``,
``COCOEvalCap(coco, cocoRes).evaluate()``) as a whole Python process per package, timed
from process start to exit, and prints the ratio. SPICE is left out of both timed runs
(the original's needs CoreNLP 3.6.0, ~400 MB, and is not the same parser as capeval's);
capeval's flow with its SPICE is timed once more on its own. A missing pycocoevalcap or
``java`` is reported as ``skipped: ... not installed``.

    python benchmarks/bench_compat.py [--data ../shared/data] [--images 1000] [--no-spice]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# the flow of pycocoevalcap's example/coco_eval_example.py; PREFIX is the package to use
CHILD = """\
import json, sys
from pycocotools.coco import COCO
import {prefix}.eval as ev
if sys.argv[3] == "no-spice":  # the original's SPICE needs CoreNLP: both sides leave it out
    class _NoSpice:
        def compute_score(self, gts, res):
            return 0.0, [0.0] * len(gts)
        def method(self):
            return "SPICE"
    ev.Spice = _NoSpice
coco = COCO(sys.argv[1])
coco_result = coco.loadRes(sys.argv[2])
coco_eval = ev.COCOEvalCap(coco, coco_result)
coco_eval.params["image_id"] = coco_result.getImgIds()
coco_eval.evaluate()
print("RESULT " + json.dumps({{m: float(s) for m, s in coco_eval.eval.items()}}))
"""


def build_files(data: Path, out: Path, n_images: int) -> tuple[Path, Path, int]:
    """COCO annotation and results files of up to ``n_images`` Flickr8k test images."""
    from capeval.bench.flickr8k import expert_pairs

    ids, cands, refs = expert_pairs(data)
    tests = set((data / "flickr8k" / "Flickr_8k.testImages.txt").read_text().split())
    first: dict[str, str] = {}
    for key in ids:
        image = key.split("|")[0]
        if image in tests and image not in first:
            first[image] = key
    chosen = list(first.items())[:n_images]
    random.Random(0).shuffle(chosen)
    images, anns, results = [], [], []
    for img_id, (name, key) in enumerate(chosen, start=1):
        images.append({"id": img_id, "file_name": name})
        anns += [{"id": len(anns) + k + 1, "image_id": img_id, "caption": r} for k, r in enumerate(refs[key])]
        results.append({"image_id": img_id, "caption": cands[key]})
    ann, res = out / "captions.json", out / "results.json"
    ann.write_text(json.dumps({"images": images, "annotations": anns, "type": "captions"}))
    res.write_text(json.dumps(results))
    return ann, res, len(chosen)


def run_flow(prefix: str, ann: Path, res: Path, spice: bool) -> tuple[float, dict[str, float]]:
    """(wall seconds of the whole process, its ``eval`` dict)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    code = CHILD.format(prefix=prefix)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, str(ann), str(res), "spice" if spice else "no-spice"],
                          capture_output=True, text=True, env=env, check=False)  # fmt: skip
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{prefix} flow failed:\n{proc.stderr[-3000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return seconds, json.loads(line[len("RESULT "):])


def reference_missing() -> str | None:
    for module in ("pycocoevalcap", "pycocotools"):
        if importlib.util.find_spec(module) is None:
            return f"skipped: {module} not installed"
    if shutil.which("java") is None:
        return "skipped: java not installed (pycocoevalcap's tokenizer and METEOR run in Java)"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(HERE.parents[1] / "shared" / "data")))
    ap.add_argument("--images", type=int, default=1000, help="images to evaluate (1..1000; default all test images)")
    ap.add_argument("--no-spice", action="store_true", help="do not time capeval's flow with its SPICE")
    args = ap.parse_args()
    if not 1 <= args.images <= 1000:
        print(f"bench_compat: --images must be in 1..1000, got {args.images}", file=sys.stderr)
        return 2
    data = Path(args.data)
    if not (data / "flickr8k" / "ExpertAnnotations.txt").exists():
        print(f"bench_compat: Flickr8k data not found under {data}; pass --data", file=sys.stderr)
        return 2
    if importlib.util.find_spec("pycocotools") is None:
        print("skipped: pycocotools not installed (the flow reads the COCO files with it)")
        return 0
    missing = reference_missing()
    if missing is None:  # METEOR's one-time resource index, outside the timed runs
        from capeval.metrics.meteor import prepare

        prepare()
    with tempfile.TemporaryDirectory() as tmp:
        ann, res, n = build_files(data, Path(tmp), args.images)
        print(f"COCO flow on {n} Flickr8k test images (5 references each), whole process per package")
        ours_s, ours = run_flow("capeval.compat.pycocoevalcap", ann, res, spice=False)
        print(f"capeval.compat.pycocoevalcap (no SPICE): {ours_s:7.2f} s")
        if missing:
            print(f"pycocoevalcap 1.2:                       {missing}")
        else:
            ref_s, ref = run_flow("pycocoevalcap", ann, res, spice=False)
            print(f"pycocoevalcap 1.2 (Java, no SPICE):      {ref_s:7.2f} s")
            print(f"ratio pycocoevalcap / capeval: {ref_s / ours_s:.2f}x")
            worst = max(abs(ours[m] - ref[m]) for m in ref if m != "SPICE")
            print(f"max |difference| of the system scores: {worst:.3g}")
        if not args.no_spice:
            if importlib.util.find_spec("spacy") is None:
                print("capeval.compat.pycocoevalcap with SPICE: skipped: spacy not installed (spice extra)")
            else:
                s, scores = run_flow("capeval.compat.pycocoevalcap", ann, res, spice=True)
                print(f"capeval.compat.pycocoevalcap with SPICE (spaCy): {s:.2f} s (SPICE {scores['SPICE']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
