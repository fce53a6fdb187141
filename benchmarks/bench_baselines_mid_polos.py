"""MID and Polos speed on this CPU, real architecture sizes, random weights (no download).

    python benchmarks/bench_baselines_mid_polos.py [--items N] [--threads N] [--batch N]

Rows (items/s):
  mid-stats        capeval.metrics.mid.gaussian_pmi on N x 512 float64 features (ViT-B/32 size:
                   the covariances, log-dets and inverses of 512/512/1024-d Gaussians + N PMIs)
  mid-official     naver-ai/mid.metric ``metrics/mid.py`` ``_compute_pmi`` on the same features
                   (needs ``CAPEVAL_MID_SRC`` = a checkout, and torchmetrics)
  polos-text       SimCSE-RoBERTa-base (random, 12 x 768) + capeval's layer mix, candidate + 1
                   reference per item, batches of ``--batch``
  polos-head       capeval's head (6144 -> 2304 -> 1152 -> 1) on random features
  polos-official   the ``polos`` package (needs Python <= 3.10.0 and its Lightning pins)
CLIP image/text encoding is the same as CLIP-S's (benchmarks/bench_clip.py) and is not timed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _peers import missing, skipped  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _rate(n: int, fn) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def _row(name: str, value: float, note: str = "") -> None:
    print(f"{name:16s} {value:10.1f} items/s {note}", flush=True)


def bench_mid(n: int) -> None:
    import numpy as np

    from capeval.metrics.mid import gaussian_pmi

    rng = np.random.default_rng(0)
    y = rng.normal(size=(n, 512))
    x = 0.6 * y + rng.normal(size=(n, 512))
    x0 = 0.5 * y + rng.normal(size=(n, 512))
    norm = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    x, y, x0 = norm(x), norm(y), norm(x0)
    _row("mid-stats", _rate(n, lambda: gaussian_pmi(x, y, x0)), f"(N={n}, d=512)")
    src = os.environ.get("CAPEVAL_MID_SRC")
    if not src or missing("torchmetrics"):
        skipped("mid-official", "naver-ai/mid.metric (CAPEVAL_MID_SRC)" if not src else "torchmetrics")
        return
    import torch

    spec = importlib.util.spec_from_file_location("_official_mid", Path(src) / "metrics" / "mid.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t = [torch.from_numpy(a) for a in (x, y, x0)]
    _row("mid-official", _rate(n, lambda: mod._compute_pmi(*t, reduction=False)), f"(N={n}, d=512)")


def bench_polos(n: int, batch: int) -> None:
    if missing("transformers"):
        skipped("polos-text", "transformers")
    else:
        import torch
        from transformers import RobertaConfig, RobertaModel

        from capeval.metrics.polos.head import PolosHead

        torch.manual_seed(0)
        model = RobertaModel(RobertaConfig(vocab_size=50265, max_position_embeddings=514)).eval()
        head = PolosHead().eval()
        ids = torch.randint(5, 50265, (batch, 14))
        ids[:, 0], ids[:, -1] = 0, 2
        mask = torch.ones_like(ids)

        def text():
            with torch.no_grad():
                for _ in range(0, n, batch):
                    for _ in range(2):  # candidate + one reference
                        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
                        head.sentence(list(out.hidden_states), mask)

        _row("polos-text", _rate(n, text), f"(batch {batch}, 14 tokens, roberta-base size)")
        feats = [torch.randn(n, d) for d in (768, 768, 512, 512, 512)]

        def run_head():
            with torch.no_grad():
                head(feats[0], [feats[1]], feats[2], feats[3], [feats[4]])

        _row("polos-head", _rate(n, run_head), "(6144 -> 2304 -> 1152 -> 1)")
    if missing("polos"):
        skipped("polos-official", "polos")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    bench_mid(max(args.items, 1100))
    bench_polos(min(args.items, 256), args.batch)


if __name__ == "__main__":
    main()
