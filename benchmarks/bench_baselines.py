"""Speed of capeval's BERTScore next to the bert-score package (0.3.13), same weights, same run.

Architecture: roberta-large's (24 layers, hidden 1024, 16 heads, FFN 4096, vocab 50265),
layer 17 as the English default, random weights saved once with ``save_pretrained`` (the real
weights cannot be downloaded here; speed does not depend on the values). Tokenizer: a
byte-level BPE learned on the Flickr8k captions. Items: Flickr8k-Expert candidates with the
5 references of their image (``$CAPEVAL_DATA`` or ../shared/data). Both score the same items
with the same batch size on this CPU; the first call of each is a warm-up on 8 items.

    python benchmarks/bench_baselines.py --items 60      # a few minutes on 2 cores
    python benchmarks/bench_baselines.py --siglip-only --items 30
    CAPEVAL_BERTSPP_SRC=DIR python benchmarks/bench_baselines.py --bertspp-only --items 30

SigLIP (second part): CLIP-S on siglip-base-patch16-224's architecture (random weights,
synthetic 500x375 JPEGs, the same BPE tokenizer), capeval's ``clip-s`` next to transformers'
own ``model.get_*_features(**processor(...))`` per batch of 32 (the model cards' way).

BERT-S++ (third part): ``bertscore++`` on bert-base-uncased's architecture (12 x 768, vocab
30522, random weights, a WordPiece vocabulary of the Flickr8k words) next to the official
``run_metric.py`` run on the same folder when ``CAPEVAL_BERTSPP_SRC`` names a checkout of
ck0123/improved-bertscore-for-image-captioning-evaluation (its pytorch-pretrained-bert model
stubbed by transformers' as in ``tests/test_bertscore_plusplus.py``), else a ``skipped`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _peers import missing, skipped

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = Path(os.environ.get("CAPEVAL_DATA", ROOT.parent / "shared" / "data"))


def load_expert(limit: int) -> tuple[list[str], list[list[str]], list[str]]:
    """``(candidates, references, all captions)`` of the first ``limit`` Flickr8k-Expert items."""
    from capeval.bench.flickr8k import read_flickr8k_tokens

    captions, by_image = read_flickr8k_tokens(DATA / "flickr8k" / "Flickr8k.token.txt")
    cands, refs = [], []
    for line in (DATA / "flickr8k" / "ExpertAnnotations.txt").read_text(encoding="utf-8").splitlines():
        image, cid, *_ = line.split("\t")
        if cid.split("#")[0] == image:
            continue
        cands.append(captions[cid])
        refs.append(by_image[image])
        if len(cands) == limit:
            break
    return cands, refs, list(captions.values())


def roberta_large_random(folder: Path, texts: list[str]) -> Path:
    """roberta-large's architecture with random weights and a BPE tokenizer learned on ``texts``."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=8000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(folder))
    tok = RobertaTokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), model_max_length=512)
    tok.save_pretrained(str(folder))
    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                        intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1,
                        pad_token_id=1, bos_token_id=0, eos_token_id=2)
    RobertaModel(cfg).save_pretrained(str(folder))
    return folder


def siglip_part(cands: list[str], folder: Path, batch: int = 32) -> None:
    """items/s of CLIP-S on a siglip-base-sized random model: capeval vs transformers' own calls."""
    import torch
    import transformers as tf
    from PIL import Image

    tok = tf.AutoTokenizer.from_pretrained(str(folder))  # the roberta-side BPE, saved again
    sig = folder / "siglip"
    tok.save_pretrained(str(sig))
    torch.manual_seed(0)
    cfg = tf.SiglipConfig(text_config=dict(vocab_size=32000, pad_token_id=tok.pad_token_id, bos_token_id=None,
                                           eos_token_id=None),
                          vision_config=dict(image_size=224, patch_size=16))  # the base defaults: 12 x 768
    tf.SiglipModel(cfg).save_pretrained(str(sig))
    tf.SiglipImageProcessor(size={"height": 224, "width": 224}).save_pretrained(str(sig))
    rng = np.random.default_rng(0)
    images = {}
    for k in range(len(cands)):
        p = sig / f"{k}.jpg"
        Image.fromarray(rng.integers(0, 256, (47, 63, 3), dtype=np.uint8)).resize((500, 375)).save(p, quality=90)
        images[str(k)] = p
    from capeval.metrics.clip_score import PROMPT, ClipScore

    scorer = ClipScore(metrics=("clip-s",), backbone=str(sig))
    t0 = time.perf_counter()
    ours = scorer.score({str(k): c for k, c in enumerate(cands)}, images=images)["clip-s"]
    dt = time.perf_counter() - t0
    print(f"capeval clip-s (SigLIP base arch): {len(cands) / dt:8.2f} items/s ({dt:.1f} s)", flush=True)
    model, proc = tf.SiglipModel.from_pretrained(str(sig)).eval(), tf.SiglipImageProcessor.from_pretrained(str(sig))
    t0 = time.perf_counter()
    ref = []
    with torch.no_grad():
        for s in range(0, len(cands), batch):
            texts = [PROMPT + c for c in cands[s:s + batch]]
            ims = [Image.open(images[str(k)]).convert("RGB") for k in range(s, min(s + batch, len(cands)))]
            t = model.get_text_features(**tok(texts, padding="max_length", max_length=64, truncation=True,
                                               return_tensors="pt"))
            i = model.get_image_features(**proc(images=ims, return_tensors="pt"))
            t, i = getattr(t, "pooler_output", t), getattr(i, "pooler_output", i)
            ref.append(2.5 * torch.clamp(torch.nn.functional.cosine_similarity(t, i), min=0))
    dt_peer = time.perf_counter() - t0
    diff = float(np.max(np.abs(torch.cat(ref).numpy() - np.array([ours.items[str(k)] for k in range(len(cands))]))))
    print(f"transformers SiglipModel (model-card calls): {len(cands) / dt_peer:8.2f} items/s ({dt_peer:.1f} s); "
          f"max |CLIP-S difference| {diff:.2e}", flush=True)


def bert_base_random(folder: Path, texts: list[str]) -> Path:
    """bert-base-uncased's architecture with random weights and a WordPiece vocabulary of ``texts``."""
    import re

    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    words = dict.fromkeys(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *list(words)[:30000]]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(vocab=str(folder / "vocab.txt"), model_max_length=512).save_pretrained(str(folder))
    torch.manual_seed(0)
    BertModel(BertConfig(), add_pooling_layer=False).save_pretrained(str(folder))  # the defaults: bert-base
    return folder


def bertspp_part(cands: list[str], refs: list[list[str]], texts: list[str], folder: Path, batch: int) -> None:
    """items/s of BERT-S++ on a bert-base-sized random model: capeval vs the official script."""
    from capeval.metrics.bertscore.plusplus_scorer import BertScorePlusPlus

    src = os.environ.get("CAPEVAL_BERTSPP_SRC")
    stop = Path(src) / "stop_word_list.txt" if src else folder / "stop.txt"
    if not src:
        stop.write_text("a\nthe\non\nin\nof\n.\n", encoding="utf-8")
    bert = bert_base_random(folder / "bert", texts)
    t0 = time.perf_counter()
    scorer = BertScorePlusPlus(model=str(bert), stop_words=str(stop), batch_size=batch)
    load = time.perf_counter() - t0
    scorer.score(cands[:8], {str(i): refs[i] for i in range(8)})  # warm-up
    t0 = time.perf_counter()
    ours = scorer.score(cands, {str(i): g for i, g in enumerate(refs)})["bertscore++"]
    dt = time.perf_counter() - t0
    print(f"capeval bertscore++ (bert-base arch, layer 8): {len(cands) / dt:8.2f} items/s ({dt:.1f} s; model load "
          f"{load:.1f} s)", flush=True)
    if not src or not (Path(src) / "run_metric.py").is_file():
        skipped("BERT-S++ official run_metric.py", "ck0123/improved-bertscore-for-image-captioning-evaluation "
                "(CAPEVAL_BERTSPP_SRC)")
        return
    import pytest
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from test_bertscore_plusplus import _official

    items = [{"refs": g, "cand": c} for c, g in zip(cands, refs)]
    words = [w.strip() for w in stop.read_text(encoding="utf-8").splitlines()]
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as work:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # the script prints every sample's score
            theirs = _official(Path(src), bert, items, words, Path(work), mp, dtype=torch.float32)
        dt_peer = time.perf_counter() - t0
    diff = float(np.max(np.abs(theirs - np.array([ours.items[str(i)] for i in range(len(cands))]))))
    print(f"official run_metric.py (captions embedded one by one): {len(cands) / dt_peer:8.2f} items/s "
          f"({dt_peer:.1f} s, model load included); max |score difference| {diff:.2e}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=60, help="Flickr8k-Expert items to score (default 60)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--siglip-only", action="store_true", help="only the SigLIP part")
    ap.add_argument("--no-siglip", action="store_true", help="skip the SigLIP part")
    ap.add_argument("--bertspp-only", action="store_true", help="only the BERT-S++ part")
    ap.add_argument("--no-bertspp", action="store_true", help="skip the BERT-S++ part")
    args = ap.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    cands, refs, texts = load_expert(args.items)
    n_sent = len(set(cands) | {r for g in refs for r in g})
    arch = "" if args.bertspp_only else "roberta-large architecture (random weights), layer 17, "
    print(f"items: {len(cands)} Flickr8k-Expert candidates x {len(refs[0])} references ({n_sent} distinct sentences); "
          f"{arch}batch {args.batch_size}, torch threads {torch.get_num_threads()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.bertspp_only:
            bertspp_part(cands, refs, texts, Path(tmp), args.batch_size)
            return 0
        folder = roberta_large_random(Path(tmp), texts)
        if args.siglip_only:
            siglip_part(cands, folder)
            return 0
        from capeval.metrics.bertscore.scorer import BertScore

        t0 = time.perf_counter()
        scorer = BertScore(model=str(folder), num_layers=17, batch_size=args.batch_size)
        load = time.perf_counter() - t0
        refs_map = {str(i): g for i, g in enumerate(refs)}
        scorer.score(cands[:8], {str(i): refs[i] for i in range(8)})  # warm-up
        t0 = time.perf_counter()
        ours = scorer.score(cands, refs_map)["bertscore"]
        dt = time.perf_counter() - t0
        print(f"capeval bertscore: {len(cands) / dt:8.2f} items/s ({dt:.1f} s; model load {load:.1f} s)", flush=True)
        peer = missing("bert_score")
        if peer:
            skipped("bert_score 0.3.13", "bert_score")
        else:
            bert_score_part(cands, refs, folder, ours, args.batch_size)
        if not args.no_siglip:
            siglip_part(cands, folder)
        if not args.no_bertspp:
            bertspp_part(cands, refs, texts, Path(tmp), args.batch_size)
    return 0


def bert_score_part(cands: list[str], refs: list[list[str]], folder: Path, ours: Any, batch: int) -> None:
    """bert_score 0.3.13 on the same folder and items as capeval's ``ours``."""
    import bert_score

    kw = dict(model_type=str(folder), num_layers=17, batch_size=batch, nthreads=0, device="cpu")
    bert_score.score(cands[:8], refs[:8], **kw)  # warm-up (the package loads the model on every call)
    t0 = time.perf_counter()
    p, r, f = bert_score.score(cands, refs, **kw)
    dt_peer = time.perf_counter() - t0
    diff = float(np.max(np.abs(np.array([ours.items[str(i)] for i in range(len(cands))]) - f.numpy())))
    print(f"bert_score 0.3.13: {len(cands) / dt_peer:8.2f} items/s ({dt_peer:.1f} s, model load included: the "
          f"package loads it on every score() call); max |F1 difference| {diff:.2e}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
