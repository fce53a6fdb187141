"""Peak memory of METEOR against caption length (issue 25: METEOR's memory was quadratic).

Each (source tree, length) runs in a fresh subprocess; the peak is that process's
``ru_maxrss`` minus its peak after loading the METEOR resources (so the number is what
scoring one long caption costs). ``--src`` may be given several times (e.g. a base
checkout's ``src`` and this tree's) to print both in one table::

    python benchmarks/bench_meteor_memory.py --src /tmp/base/src --src src

The caption is ``n`` words drawn (seeded) from the references' words and a few others,
so most of its words have exact/stem/synonym candidates in every reference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, random, resource, sys, time
from capeval.metrics.meteor.engine import Meteor15
refs = ["a man riding a horse on a dirt road", "a person rides a brown horse down a path",
        "the rider is on a horse near some trees", "a man on horseback on a country road",
        "someone riding an animal outside"]
n = int(sys.argv[1])
rng = random.Random(0)
vocab = sorted({w for r in refs for w in r.split()} | {"dog", "running", "grass", "men", "rode", "roads", "horses"})
hyp = " ".join(rng.choice(vocab) for _ in range(n))
m = Meteor15()
m.score(["a man riding a horse"], [refs], workers=1)  # resources loaded, caches warm
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
corpus, items = m.score([hyp], [refs], workers=1)
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"score": repr(items[0]), "peak_mb": peak / 1024, "delta_mb": (peak - base) / 1024, "seconds": dt}))
"""


def run(src: str, n: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n)], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"rc {out.returncode}"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", help="a capeval src directory (repeatable; default: this tree's)")
    ap.add_argument("--sizes", default="1000,10000,30000,100000", help="caption lengths in words")
    a = ap.parse_args()
    srcs = a.src or [os.path.join(os.path.dirname(__file__), "..", "src")]
    print(f"{'src':<28} {'words':>7} {'peak MB':>9} {'delta MB':>9} {'s':>7}  score")
    for src in srcs:
        for n in [int(x) for x in a.sizes.split(",")]:
            r = run(src, n)
            if "error" in r:
                print(f"{src:<28} {n:>7}  {r['error']}")
            else:
                print(f"{src:<28} {n:>7} {r['peak_mb']:>9.0f} {r['delta_mb']:>9.0f} {r['seconds']:>7.1f}  {r['score']}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
