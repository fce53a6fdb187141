"""Speed of capeval's CLIP metrics against the reference code's way and torchmetrics.

(a) RefPAC-S on the Flickr8k-Expert structure (images x candidates x 5 references):
    capeval (unique images/texts once, length-sorted batches padded to their longest,
    threaded decoding) vs the reference code's way (pacscore/clipscore: every caption
    padded to 77, no de-duplication, each candidate's image encoded again).
(b) CLIP-S vs torchmetrics' CLIPScore given the same weights saved in HF format.
(c) images/s and captions/s end to end beside the pure model-forward rate.

Weights are random (ViT-B/32 architecture), images synthetic 500x375 JPEGs, captions the
real Flickr8k texts, tokenizer a BPE learned on those captions (the real vocabulary cannot
be downloaded here). Speed does not depend on the weight values.

    python benchmarks/bench_clip.py --quick          # 100 images, ~570 candidates (minutes)
    python benchmarks/bench_clip.py                   # 1,000 images, 5,664 candidates (long on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from _peers import missing, skipped

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = Path(os.environ.get("CAPEVAL_DATA", ROOT.parent / "shared" / "data"))


def load_expert(limit_images: int | None):
    from capeval.bench.flickr8k import read_flickr8k_tokens

    captions, by_image = read_flickr8k_tokens(DATA / "flickr8k" / "Flickr8k.token.txt")
    pairs, seen, order = [], set(), []
    for line in (DATA / "flickr8k" / "ExpertAnnotations.txt").read_text(encoding="utf-8").splitlines():
        image, cid, *_ = line.split("\t")
        if cid.split("#")[0] == image or (image, cid) in seen:
            continue
        if image not in order:
            order.append(image)
        seen.add((image, cid))
        pairs.append((image, cid))
    keep = set(order[:limit_images]) if limit_images else set(order)
    pairs = [p for p in pairs if p[0] in keep]
    ids = [f"{im}|{cid}" for im, cid in pairs]
    cands = {k: captions[cid] for k, (im, cid) in zip(ids, pairs)}
    refs = {k: by_image[im] for k, (im, _) in zip(ids, pairs)}
    image_of = {k: im for k, (im, _) in zip(ids, pairs)}
    return ids, cands, refs, image_of, sorted(keep), list(captions.values())


def make_images(names, folder: Path) -> dict[str, Path]:
    from PIL import Image

    rng = np.random.default_rng(0)
    out = {}
    for n in names:
        p = folder / n
        # smooth noise compresses like a photo rather than like white noise
        small = rng.integers(0, 256, (47, 63, 3), dtype=np.uint8)
        Image.fromarray(small).resize((500, 375), Image.BILINEAR).save(p, quality=90)
        out[n] = p
    return out


def reference_way(bb, cands, refs, image_paths, w=2.0, batch_images=64, batch_texts=256):
    """What pacscore/clipscore do: one image per candidate, every caption at 77 tokens."""
    import torch

    ids = list(cands)
    paths = [image_paths[i] for i in ids]  # repeated per candidate, as the reference code lists them
    feats = []
    with ThreadPoolExecutor(4) as pool:  # stands in for the DataLoader's prefetching workers
        for s in range(0, len(paths), batch_images):
            px = torch.stack([torch.from_numpy(a) for a in pool.map(bb.preprocess, paths[s : s + batch_images])])
            feats.append(bb.encode_images(px).numpy())
    images = np.vstack(feats)

    def texts77(texts):
        toks, _ = bb.tokenize(["A photo depicts " + t for t in texts])
        out = []
        for s in range(0, len(toks), batch_texts):
            chunk = toks[s : s + batch_texts]
            full = torch.zeros(len(chunk), 77, dtype=torch.long)
            for j, x in enumerate(chunk):
                full[j, : len(x)] = torch.tensor(x)
            with torch.inference_mode():
                out.append(bb.model.encode_text(full, full.argmax(dim=-1)).numpy())
        return np.vstack(out)

    c = texts77([cands[i] for i in ids])
    flat = [r for i in ids for r in refs[i]]
    r = texts77(flat)
    images = images / np.sqrt(np.sum(images**2, axis=1, keepdims=True))
    c = c / np.sqrt(np.sum(c**2, axis=1, keepdims=True))
    r = r / np.sqrt(np.sum(r**2, axis=1, keepdims=True))
    per = w * np.clip(np.sum(images * c, axis=1), 0, None)
    pos, out = 0, []
    for k, i in enumerate(ids):
        n = len(refs[i])
        t = float(np.max(r[pos : pos + n] @ c[k]))
        pos += n
        out.append(2 * per[k] * t / (per[k] + t))
    return dict(zip(ids, out))


def torchmetrics_clipscore(hf_dir: Path, cands, image_paths, batch=64):
    import torch
    from PIL import Image
    from torchmetrics.multimodal.clip_score import CLIPScore
    from transformers import CLIPModel, CLIPProcessor

    class Model(CLIPModel):  # torchmetrics 1.9 expects tensors; transformers 5 returns output objects
        def get_image_features(self, *a, **k):
            o = super().get_image_features(*a, **k)
            return o if isinstance(o, torch.Tensor) else o.pooler_output

        def get_text_features(self, *a, **k):
            o = super().get_text_features(*a, **k)
            return o if isinstance(o, torch.Tensor) else o.pooler_output

    metric = CLIPScore(model_name_or_path=lambda: (Model.from_pretrained(str(hf_dir)).eval(),
                                                   CLIPProcessor.from_pretrained(str(hf_dir))))
    ids = list(cands)

    def decode(p):
        return torch.from_numpy(np.array(Image.open(p).convert("RGB"))).permute(2, 0, 1)

    with torch.no_grad(), ThreadPoolExecutor(4) as pool:
        for s in range(0, len(ids), batch):
            chunk = ids[s : s + batch]
            imgs = list(pool.map(decode, [image_paths[i] for i in chunk]))
            metric.update(imgs, [cands[i] for i in chunk])
    return float(metric.compute())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 images instead of 1,000")
    ap.add_argument("--images", type=int, help="number of Flickr8k-Expert images (default 1000, quick 100)")
    ap.add_argument("--arch", default="ViT-B-32")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: a,b,c")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    n_images = args.images or (100 if args.quick else 1000)
    skip = set(args.skip.split(",")) - {""}

    import torch

    from capeval.models.clip.backbone import random_backbone
    from capeval.models.clip.embed import embed_images, embed_texts
    from capeval.metrics.clip_score import ClipScore, PacScore
    from capeval.models.clip.tokenizer import train_bpe, write_vocab

    ids, cands, refs, image_of, names, all_caps = load_expert(n_images)
    print(f"data: {len(names)} images, {len(ids)} candidates, {sum(map(len, refs.values()))} references; "
          f"torch threads {torch.get_num_threads()}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="capeval-bench-"))
    t0 = time.perf_counter()
    vocab = write_vocab(tmp / "vocab", train_bpe(all_caps, 8000))
    bb = random_backbone(args.arch, seed=0, tokenizer_dir=vocab)
    files = make_images(names, tmp)
    paths = {i: files[image_of[i]] for i in ids}
    print(f"setup {time.perf_counter() - t0:.1f}s (vocab, random {args.arch}, synthetic 500x375 JPEGs)", flush=True)
    results: dict = {"images": len(names), "candidates": len(ids), "arch": args.arch}

    # (c) first: forward-only rates, then end-to-end rates of the embedding helpers
    if "c" not in skip:
        px = torch.stack([bb.load_image(files[n]) for n in names[:32]])
        bb.encode_images(px[:4])
        t = time.perf_counter()
        bb.encode_images(px)
        fwd_img = len(px) / (time.perf_counter() - t)
        toks, _ = bb.tokenize(["A photo depicts " + cands[i] for i in ids[:256]])
        toks.sort(key=len)
        t = time.perf_counter()
        bb.encode_texts(toks)
        fwd_txt = len(toks) / (time.perf_counter() - t)
        some = [files[n] for n in names[: min(len(names), 64)]]
        t = time.perf_counter()
        embed_images(bb, some, batch_size=32)
        e2e_img = len(some) / (time.perf_counter() - t)
        texts = ["A photo depicts " + c for c in list(dict.fromkeys(all_caps))[:1024]]
        t = time.perf_counter()
        embed_texts(bb, texts)
        e2e_txt = len(texts) / (time.perf_counter() - t)
        results["c"] = {"forward_images_per_s": fwd_img, "end_to_end_images_per_s": e2e_img,
                        "forward_captions_per_s": fwd_txt, "end_to_end_captions_per_s": e2e_txt}
        print(f"(c) images/s: end-to-end {e2e_img:.1f} (decode+preprocess+model) vs forward {fwd_img:.1f}; "
              f"captions/s: end-to-end {e2e_txt:.0f} (tokenize+model) vs forward {fwd_txt:.0f}", flush=True)

    if "a" not in skip:
        est = len(ids) / max(results.get("c", {}).get("forward_images_per_s", 10), 1e-9)
        print(f"(a) reference way needs ~{est / 60:.1f} min for its {len(ids)} image encodings alone", flush=True)
        t = time.perf_counter()
        ours = PacScore(("ref-pac-s",), backbone=bb).score(cands, refs, images=paths)["ref-pac-s"]
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        theirs = reference_way(bb, cands, refs, paths)
        t_ref = time.perf_counter() - t
        diff = max(abs(ours.items[i] - theirs[i]) for i in ids)
        results["a"] = {"capeval_s": t_ours, "reference_way_s": t_ref, "speedup": t_ref / t_ours,
                        "max_abs_diff_per_item": diff}
        print(f"(a) RefPAC-S: capeval {t_ours:.1f}s, reference way {t_ref:.1f}s -> {t_ref / t_ours:.2f}x faster; "
              f"max |diff| per item {diff:.2e}", flush=True)

    peer = missing("torchmetrics", "transformers") if "b" not in skip else None
    if peer:
        results["b"] = skipped("(b) CLIP-S vs torchmetrics", peer)
    elif "b" not in skip:
        from capeval.models.clip.export_hf import export_hf

        hf_dir = export_hf(bb, tmp / "openai-random-vit-b-32")  # torchmetrics wants 'openai' in the path
        t = time.perf_counter()
        ours = ClipScore(("clip-s",), backbone=bb).score(cands, images=paths)["clip-s"]
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        tm = torchmetrics_clipscore(hf_dir, cands, paths)
        t_tm = time.perf_counter() - t
        results["b"] = {"capeval_s": t_ours, "torchmetrics_s": t_tm, "speedup": t_tm / t_ours,
                        "capeval_system": ours.system, "torchmetrics_system(100*cos, no prompt)": tm}
        print(f"(b) CLIP-S: capeval {t_ours:.1f}s, torchmetrics CLIPScore {t_tm:.1f}s -> {t_tm / t_ours:.2f}x faster "
              "(different metric definitions; speed only)", flush=True)

    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=float))
    print(json.dumps(results, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
