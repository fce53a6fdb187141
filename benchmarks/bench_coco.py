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
sys.path.insert(0, str(HERE))

from _peers import flickr8k_data, missing, skipped  # noqa: E402


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
    data = flickr8k_data(args.data, "bench_coco")
    if data is None:
        return 2
    import capeval
    from capeval.bench.flickr8k import expert_pairs
    from capeval.tokenize import ptb_tokenize_batch

    ids, cands, refs = expert_pairs(data)
    print(f"Flickr8k-Expert: {len(ids)} candidates, {sum(len(refs[i]) for i in ids)} references")
    peer = missing("pycocoevalcap", "java")  # pycocoevalcap's tokenizer and METEOR run Java
    # capeval's METEOR reads its resource files from the pycocoevalcap wheel (it never runs Java)
    meteor_peer = missing("pycocoevalcap")
    steps = ["tokenize", "bleu", "meteor", "rouge-l", "cider-d"]

    if not args.skip_prepare and not meteor_peer:
        from capeval.metrics.meteor import prepare

        with tempfile.TemporaryDirectory() as tmp:
            t, _ = timed(lambda: prepare(cache_dir=tmp, force=True))
        print(f"one-time METEOR preparation (paraphrase/synonym index): {t:.1f} s")

    # --- pycocoevalcap -----------------------------------------------------------
    ref_times: dict[str, float] = {}
    if peer:
        skipped("pycocoevalcap", peer)
    else:
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.meteor.meteor import Meteor
        from pycocoevalcap.rouge.rouge import Rouge
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

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
    ours: dict[str, float] = {}
    if meteor_peer:
        steps.remove("meteor")
        skipped("meteor (capeval: its resources ship in the pycocoevalcap wheel)", meteor_peer)
    preset = ",".join(s for s in steps if s != "tokenize")
    capeval.score(cands, refs, metrics=preset)  # warm-up: imports, METEOR index opened once
    clear_caches()
    ours["tokenize"], (flat_c, flat_r) = timed(
        lambda: (ptb_tokenize_batch([cands[i] for i in ids]), ptb_tokenize_batch([r for i in ids for r in refs[i]])))
    if peer:  # the same inputs from capeval's own tokenizer (identical to the Java PTB tokenizer's)
        tok_c = dict(zip(ids, flat_c))
        it = iter(flat_r)
        tok_r = {i: [next(it) for _ in refs[i]] for i in ids}
    else:
        tok_c = {i: res[i][0] for i in ids}
        tok_r = {i: gts[i] for i in ids}
    for name in steps[1:]:
        clear_caches()
        ours[name], _ = timed(lambda: capeval.score(tok_c, tok_r, metrics=name, options={name: {"tokenizer": "none"}}))
    clear_caches()
    preset_ours, _ = timed(lambda: capeval.score(cands, refs, metrics=preset))
    preset_name = "coco-ngram" if not meteor_peer else "coco-ngram without meteor"

    print(f"{'step':<10} {'pycocoevalcap':>14} {'capeval':>10} {'ratio':>8}")
    for k in steps:
        if k in ref_times:
            print(f"{k:<10} {ref_times[k]:>13.3f}s {ours[k]:>9.3f}s {ref_times[k] / ours[k]:>7.1f}x")
        else:
            print(f"{k:<10} {'-':>14} {ours[k]:>9.3f}s {'-':>8}")
    if ref_times:
        preset_ref = sum(ref_times[k] for k in steps)
        print(f"{preset_name:<10} {preset_ref:>13.3f}s {preset_ours:>9.3f}s {preset_ref / preset_ours:>7.1f}x  "
              "(preset end to end, tokenisation included)")
    else:
        print(f"{preset_name:<10} {'-':>14} {preset_ours:>9.3f}s {'-':>8}  (preset end to end, tokenisation included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
