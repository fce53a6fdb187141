"""SCST reward throughput (captions/s) of ``capeval.Reward`` at batch 32 images x 5 beams, on this CPU.

Rewards timed: CIDEr-D (document frequencies fitted once on a synthetic training corpus),
CLIP-S and PAC-S++ (random weights of the ViT-B/32 architecture: speed does not depend on the
values; image embeddings computed once and kept in memory, as in SCST where every image is
seen again each epoch), and the mix ``{pac-s++: 1, cider-d: 0.5}``. Baseline: pycocoevalcap's
``Cider`` (its CIDEr-D), called per batch the way SCST code does (captions already
tokenised, document frequencies from the batch's references); capeval also PTB-tokenises
each batch. Captions are synthetic; each beam's 5 captions share the image's 5 references.

    python benchmarks/bench_reward.py                      # 5 timed batches after 1 warm-up
    python benchmarks/bench_reward.py --batches 10 --threads 2 --json out.json

``--tokens`` runs the token-id rows instead (issue 49): CIDEr-D of batch 1,024 and 4,096 captions
padded to T = 32 and 128 tokens, 5 references per item, GRPO groups of 8 samples per item, document
frequencies fitted once on 5,000 training items (Zipf-distributed ids of a 10,000-id vocabulary;
captions are a reference of their item with a third of the tokens replaced, lengths T/2..T).
``capeval.Reward({"cider-d": 1}, fit=...)`` on the same ids written as words (strings already
decoded; decoding is not timed) vs ``CiderDTokens.table`` on the CPU, and on CUDA when a GPU is
there (else one line "GPU: skipped (no CUDA)"). Both give the same numbers (float64); the script
checks that before timing, and that call is each side's untimed warm-up; times are medians of
``--repeats-strings`` / ``--repeats`` calls on the same inputs, the two sides' calls taken in
turn. ``--threads N`` gives both sides N cores: N torch threads and N worker processes for
Reward's CIDEr-D (without it, each its default).

    python benchmarks/bench_reward.py --tokens --threads 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from _peers import missing, skipped

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SUBJECTS = ("a man", "a woman", "two dogs", "a red bus", "a small cat", "a group of people", "a white plate")
PLACES = ("on a street", "near the water", "in a kitchen", "on a green field", "next to a wooden table")
VERBS = ("standing", "sitting", "running", "waiting", "playing")


def caption(rng: np.random.Generator) -> str:
    return (f"{SUBJECTS[rng.integers(len(SUBJECTS))]} {VERBS[rng.integers(len(VERBS))]} "
            f"{PLACES[rng.integers(len(PLACES))]}")


def batches(n: int, images: int, beam: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for b in range(n):
        ids = [f"b{b}-{k}" for k in range(images)]
        refs = {i: [caption(rng) for _ in range(5)] for i in ids}
        image_ids = [i for i in ids for _ in range(beam)]
        out.append({"captions": [caption(rng) for _ in image_ids], "image_ids": image_ids, "refs": refs,
                    "images": {i: rng.integers(0, 255, size=(240, 320, 3), dtype=np.uint8) for i in ids}})
    return out


def timed(fn, data: list[dict]) -> float:
    fn(data[0])  # warm-up (first tokenisation, first embeddings of batch 0's images)
    start = time.perf_counter()
    for d in data[1:]:
        fn(d)
    return sum(len(d["captions"]) for d in data[1:]) / (time.perf_counter() - start)


def token_data(batch: int, t: int, seed: int = 0, items: int = 5000, group: int = 8):
    """(training references as id lists, candidates [batch, t] LongTensor, items [batch] LongTensor)."""
    import torch

    rng = np.random.default_rng(seed)
    vocab = 10_000
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1))
    cdf /= cdf[-1]

    def zipf(size: int) -> np.ndarray:  # ids 1..vocab, Zipf-distributed
        return np.minimum(np.searchsorted(cdf, rng.random(size)), vocab - 1) + 1

    refs = [[zipf(int(rng.integers(8, 21))).tolist() for _ in range(5)] for _ in range(items)]
    item = np.repeat(rng.choice(items, size=batch // group, replace=False), group)
    cand = np.zeros((batch, t), dtype=np.int64)
    for b, i in enumerate(item):
        length = int(rng.integers(t // 2, t + 1))
        base = np.resize(np.asarray(refs[i][rng.integers(5)]), length)
        swap = rng.random(length) < 1 / 3
        base[swap] = zipf(int(swap.sum()))
        cand[b, :length] = base
    return refs, torch.from_numpy(cand), torch.from_numpy(item)


def median_of(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls (the caller has made one untimed call first: the warm-up)."""
    return medians_interleaved([(fn, repeats)])[0]


def medians_interleaved(calls: list[tuple]) -> list[float]:
    """Median wall time of each ``(fn, repeats)``, their calls taken in turn (A B A B ...), so that
    a load that comes and goes on a shared machine falls on every side alike."""
    times: list[list[float]] = [[] for _ in calls]
    for r in range(max(repeats for _, repeats in calls)):
        for (fn, repeats), out in zip(calls, times):
            if r < repeats:
                start = time.perf_counter()
                fn()
                out.append(time.perf_counter() - start)
    return [float(np.median(t)) for t in times]


def tokens_main(args: argparse.Namespace) -> int:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from capeval.reward import CiderDTokens, Reward

    rows = []
    gpu = torch.cuda.is_available()
    print(f"torch threads {torch.get_num_threads()}, Reward's CIDEr-D workers "
          f"{args.threads or 'automatic (1 below 2,000 captions)'}; median of {args.repeats_strings} Reward / "
          f"{args.repeats} CiderDTokens calls, taken in turn, after one untimed call each on the same inputs",
          flush=True)
    for batch in (1024, 4096):
        for t in (32, 128):
            refs, cand, items = token_data(batch, t)
            words = [" ".join(f"w{x}" for x in row if x) for row in cand.tolist()]
            wrefs = [[" ".join(f"w{x}" for x in r) for r in item] for item in refs]
            # --threads: the same number of cores on both sides (Reward's worker processes, torch's threads)
            options = {"cider-d": {"workers": args.threads}} if args.threads else None
            reward = Reward({"cider-d": 1.0}, fit=wrefs, options=options)
            scorer = CiderDTokens(refs, pad_id=0)
            batch_refs = [wrefs[i] for i in items.tolist()]
            want = reward.scores(words, batch_refs)["cider-d"]  # also both sides' warm-up, on the timed inputs
            got = scorer.table(cand, items)
            diff = float(np.abs(got.numpy() - want).max())
            strings, cpu = medians_interleaved([(lambda: reward(words, batch_refs), args.repeats_strings),
                                                (lambda: scorer.table(cand, items), args.repeats)])
            row = {"batch": batch, "T": t, "reward_strings_s": strings, "tokens_cpu_s": cpu,
                   "speedup_cpu": strings / cpu, "max_abs_diff": diff}
            line = (f"batch {batch:5d} T {t:4d}: Reward on strings {strings * 1e3:9.1f} ms | CiderDTokens CPU "
                    f"{cpu * 1e3:8.1f} ms ({strings / cpu:6.1f}x)")
            if gpu:
                c, i = cand.cuda(), items.cuda()

                def on_gpu():
                    scorer.table(c, i)
                    torch.cuda.synchronize()

                on_gpu()  # warm-up: the tables' copy on the device, CUDA's first-call work
                g = median_of(on_gpu, args.repeats)
                gdiff = float((scorer.table(c, i).cpu() - got).abs().max())
                row.update(tokens_cuda_s=g, speedup_cuda=strings / g, cuda_vs_cpu_max_abs_diff=gdiff)
                line += f" | CUDA {g * 1e3:7.2f} ms ({strings / g:7.1f}x, |CUDA-CPU| {gdiff:.2g})"
            line += f" | max |diff| vs Reward {diff:.2g}"
            print(line, flush=True)
            rows.append(row)
    if not gpu:
        print("GPU: skipped (no CUDA)")
    info = {"threads": torch.get_num_threads(), "reward_workers": args.threads, "torch": torch.__version__,
            "cuda": torch.cuda.get_device_name(0) if gpu else None, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(info, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=5, help="timed batches (after one warm-up batch)")
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads; with --tokens also Reward's CIDEr-D worker processes (default: their choice)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--tokens", action="store_true", help="the token-id rows (CiderDTokens vs Reward on strings)")
    ap.add_argument("--repeats", type=int, default=7, help="--tokens: timed CiderDTokens calls (median kept)")
    ap.add_argument("--repeats-strings", type=int, default=3, help="--tokens: timed Reward calls (median kept)")
    args = ap.parse_args()
    if args.tokens:
        return tokens_main(args)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from capeval.models.clip import backbone as bbmod
    from capeval.models.clip.tokenizer import find_vocab
    from capeval.reward import Reward

    try:
        vocab_dir, tokenizer = find_vocab(), "clip-bpe"
    except Exception:  # noqa: BLE001 - no CLIP vocabulary installed: the toy BPE (longer sequences)
        vocab_dir, tokenizer = None, "toy-bpe"
    random_vit = bbmod.random_backbone("ViT-B-32", seed=0, tokenizer_dir=vocab_dir)
    bbmod.load_backbone = lambda name, device="cpu", **kw: random_vit  # every CLIP-family name -> random weights

    data = batches(args.batches + 1, args.images, args.beam)
    corpus = {f"t{k}": [caption(np.random.default_rng(k)) for _ in range(5)] for k in range(2000)}
    results: dict[str, float] = {}
    for label, metrics in (("cider-d", {"cider-d": 1.0}), ("clip-s", {"clip-s": 1.0}),
                           ("pac-s++", {"pac-s++": 1.0}), ("pac-s++ + 0.5 cider-d", {"pac-s++": 1.0, "cider-d": 0.5})):
        reward = Reward(metrics, fit=corpus)
        for d in data:  # image embeddings once, before training (what SCST does after the first epoch)
            reward.precompute(d["images"]) if any(m != "cider-d" for m in metrics) else None

        def step(d, reward=reward):
            return reward(d["captions"], d["refs"], image_ids=d["image_ids"])

        results[label] = timed(step, data)
        print(f"capeval.Reward {label:24s} {results[label]:9.0f} captions/s", flush=True)

    peer = missing("pycocoevalcap")
    if peer:
        results["pycocoevalcap Cider per batch"] = skipped("pycocoevalcap Cider (CIDEr-D) per batch", peer)
    else:
        from pycocoevalcap.cider.cider import Cider

        scorer = Cider()

        def coco_step(d):
            res = {k: [c.lower()] for k, c in enumerate(d["captions"])}
            gts = {k: [r.lower() for r in d["refs"][i]] for k, i in enumerate(d["image_ids"])}
            return scorer.compute_score(gts, res)

        results["pycocoevalcap Cider per batch"] = timed(coco_step, data)
        print(f"pycocoevalcap Cider (CIDEr-D) per batch {results['pycocoevalcap Cider per batch']:9.0f} captions/s")
    info = {"batch": f"{args.images}x{args.beam}", "threads": torch.get_num_threads(), "tokenizer": tokenizer,
            "backbone": "ViT-B-32 (random)", "captions_per_s": results}
    if args.json:
        Path(args.json).write_text(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
