"""CAPTURE's matching stage, items/s: capeval beside capture-metric 0.1.13 on the same parsed graphs.

    python benchmarks/bench_capture.py [--items N] [--refs N] [--size real|tiny] [--threads N]

Both score the same random detailed-caption graphs (objects, attributes, relations drawn from a
small visual vocabulary, so exact, synonym and soft matches all occur) with the same
Sentence-BERT: a randomly initialised MPNet of all-mpnet-base-v2's size (``--size real``: 12
layers, 768 wide; no download) or a tiny one. The package gets them through
``compute_score(prev_gt_parsed=..., prev_cand_parsed=...)``, which skips its parser; its
CUDA-only setup is bypassed (``soft_matching`` switched on after construction, the encoder on
CPU). Parsing (FACTUAL, the same model for both) is not timed. The script checks that both
give the same per-item scores before printing the ratio.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _peers import missing, skipped  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RANK", "1")  # capture_metric's __init__ downloads nltk data when RANK == 0

OBJECTS = ("car automobile truck street road tower clock_tower sky tree man person woman horse bike bicycle "
           "building shirt hat cup glass table chair window door dog cat").split()
ADJECTIVES = "red blue green white black tall small large big wooden old young bright dark clear busy".split()
PREDICATES = "on near under above behind holding wearing riding beside in".split()


def graph(rng: random.Random) -> tuple[list, dict, list]:
    objs = [o.replace("_", " ") for o in rng.sample(OBJECTS, rng.randint(6, 14))]
    attrs = {o: rng.sample(ADJECTIVES, rng.randint(0, 3)) for o in objs}
    rels = list(dict.fromkeys((rng.choice(objs), rng.choice(PREDICATES), rng.choice(objs))
                              for _ in range(rng.randint(3, 9))))
    return objs, {k: v for k, v in attrs.items() if v}, rels


def sbert(size: str):
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    folder = Path(tempfile.mkdtemp(prefix="capture-bench-"))
    words = ["<s>", "<pad>", "</s>", "[UNK]", "<mask>", *OBJECTS, *ADJECTIVES, *PREDICATES, "clock"]
    tok = MPNetTokenizer(vocab={w: i for i, w in enumerate(dict.fromkeys(words))}, model_max_length=128)
    tok.save_pretrained(str(folder))
    torch.manual_seed(0)
    cfg = MPNetConfig(pad_token_id=tok.pad_token_id) if size == "real" else \
        MPNetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    pad_token_id=tok.pad_token_id)
    MPNetModel(cfg).save_pretrained(str(folder))
    return SentenceTransformer(modules=[modules.Transformer(str(folder)), modules.Pooling(cfg.hidden_size, "mean"),
                                        modules.Normalize()], device="cpu")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--refs", type=int, default=1, help="references per item (DetailCaps has 1-3)")
    ap.add_argument("--size", choices=("real", "tiny"), default="real")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    gone = missing("sentence_transformers", "nltk")
    if gone:
        skipped("capture", gone)
        return 0
    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from capeval.metrics.capture.matching import Matcher
    from capeval.metrics.capture.scorer import CaptureScore
    from capeval.metrics.capture.wordnet import ensure_wordnet

    ensure_wordnet()
    from nltk.corpus import wordnet

    wordnet.synsets("car")  # load WordNet (seconds) before any timing: both read this one corpus
    rng = random.Random(0)
    items = {f"i{k}": (graph(rng), [graph(rng) for _ in range(args.refs)]) for k in range(args.items)}
    model = sbert(args.size)
    print(f"CAPTURE matching stage, {args.items} items x {args.refs} refs, random MPNet ({args.size}), "
          f"torch threads {torch.get_num_threads()}")
    ours = CaptureScore.__new__(CaptureScore)  # the matching stage alone: no parser, no nltk tagger
    ours.sbert, ours.batch_size, ours._emb = model, 64, {}
    ours.matcher = Matcher(encode=ours.encode)
    t = time.perf_counter()
    ours.prefetch([g for cand, refs in items.values() for g in (cand, *refs)])  # as CaptureScore.score does
    mine = [ours.score_parsed(refs, cand)[0] for cand, refs in items.values()]
    t_ours = time.perf_counter() - t
    print(f"capeval          {args.items / t_ours:9.2f} items/s  ({t_ours:.2f} s)", flush=True)
    gone = missing("capture_metric", "factual_scene_graph", "tabulate")
    if gone:
        skipped("capture-metric", gone)
        return 0
    import contextlib
    import io

    from capture_metric.capture import CAPTURE

    cap = CAPTURE(soft_matching=False)
    cap.soft_matching, cap.text_encoder = True, model
    gts = {k: refs for k, (_, refs) in items.items()}
    res = {k: [cand] for k, (cand, _) in items.items()}
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        _, theirs = cap.compute_score({k: ["x"] * args.refs for k in gts}, {k: ["x"] for k in res},
                                      prev_gt_parsed=gts, prev_cand_parsed=res)
    t_pkg = time.perf_counter() - t
    diff = float(np.max(np.abs(np.array(mine) - np.array(theirs))))
    print(f"capture-metric   {args.items / t_pkg:9.2f} items/s  ({t_pkg:.2f} s)")
    print(f"ratio capeval / capture-metric: {t_pkg / t_ours:.2f}x   (max |per-item difference| {diff:.1e}; "
          "float32 encoder, different batching)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
