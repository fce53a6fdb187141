"""capeval vs pycocoevalcap 1.2 on Flickr8k-Expert (5,664 candidates x 5 references).

Prints the time of each metric (tokenisation timed separately and included in the
preset) and the ratio pycocoevalcap / capeval, all measured in this one run. capeval
runs with warm caches: METEOR's resource index is prepared beforehand (that one-time
preparation is timed and reported separately) but in-process caches (tokeniser,
n-gram counts) are cleared before every timed run.

    python benchmarks/bench_coco.py [--data ../shared/data] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def clear_caches() -> None:
    """Empty every in-process cache (tokeniser, n-gram counts, stemmer, hashes)."""
    import importlib

    for name in ("capeval.metrics.bleu", "capeval.tokenize.ptb", "capeval.metrics.meteor.normalize",
                 "capeval.metrics.meteor.stemmer", "capeval.metrics.meteor.engine", "capeval.metrics.meteor.fast_align"):
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if callable(getattr(obj, "cache_clear", None)):
                obj.cache_clear()
    gc.collect()


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(HERE.parents[1] / "shared" / "data")))
    ap.add_argument("--skip-prepare", action="store_true", help="do not time METEOR's one-time preparation")
    args = ap.parse_args()
    data = Path(args.data)
    if not (data / "flickr8k" / "ExpertAnnotations.txt").exists():
        print(f"Flickr8k-Expert data not found under {data}; pass --data", file=sys.stderr)
        return 2
    import capeval
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    from capeval.bench.flickr8k import expert_pairs

    ids, cands, refs = expert_pairs(data)
    print(f"Flickr8k-Expert: {len(ids)} candidates, {sum(len(refs[i]) for i in ids)} references")

    if not args.skip_prepare:
        from capeval.metrics.meteor import prepare

        with tempfile.TemporaryDirectory() as tmp:
            t, _ = timed(lambda: prepare(cache_dir=tmp, force=True))
        print(f"one-time METEOR preparation (paraphrase/synonym index): {t:.1f} s")

    # --- pycocoevalcap -----------------------------------------------------------
    ref_times: dict[str, float] = {}
    tok = PTBTokenizer()
    ref_times["tokenize"], (gts, res) = timed(
        lambda: (
            tok.tokenize({i: [{"caption": r} for r in refs[i]] for i in ids}),
            tok.tokenize({i: [{"caption": cands[i]}] for i in ids}),
        )
    )
    for name, scorer in (("bleu", Bleu(4)), ("meteor", Meteor()), ("rouge-l", Rouge()), ("cider-d", Cider())):
        kwargs = {"verbose": 0} if name == "bleu" else {}
        ref_times[name], _ = timed(lambda: scorer.compute_score(gts, res, **kwargs))

    # --- capeval -----------------------------------------------------------------
    capeval.score(cands, refs, metrics="coco-ngram")  # warm-up: imports, METEOR index opened once
    ours: dict[str, float] = {}
    from capeval.tokenize import ptb_tokenize_batch

    clear_caches()
    ours["tokenize"], _ = timed(lambda: (ptb_tokenize_batch([cands[i] for i in ids]), ptb_tokenize_batch([r for i in ids for r in refs[i]])))
    tok_c = {i: res[i][0] for i in ids}
    tok_r = {i: gts[i] for i in ids}
    for name, metric in (("bleu", "bleu"), ("meteor", "meteor"), ("rouge-l", "rouge-l"), ("cider-d", "cider-d")):
        clear_caches()
        ours[name], _ = timed(lambda: capeval.score(tok_c, tok_r, metrics=metric, options={metric: {"tokenizer": "none"}}))
    clear_caches()
    preset_ours, _ = timed(lambda: capeval.score(cands, refs, metrics="coco-ngram"))
    preset_ref = sum(ref_times.values())

    print(f"{'step':<10} {'pycocoevalcap':>14} {'capeval':>10} {'ratio':>8}")
    for k in ref_times:
        print(f"{k:<10} {ref_times[k]:>13.3f}s {ours[k]:>9.3f}s {ref_times[k] / ours[k]:>7.1f}x")
    print(f"{'coco-ngram':<10} {preset_ref:>13.3f}s {preset_ours:>9.3f}s {preset_ref / preset_ours:>7.1f}x  (preset end to end, tokenisation included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
