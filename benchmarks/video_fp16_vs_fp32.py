"""How far EMScore moves when CLIP runs in fp16 (the reference code on a GPU) instead of fp32 (capeval).

EMScore's reference (ShiYaya/emscore) loads CLIP with ``clip.load("ViT-B/32", device)``: on
a GPU that is OpenAI's fp16 model (``convert_weights``: conv/linear/attention weights and the
projections in half precision, LayerNorm computed in fp32 and cast back to half), and only
the outputs are turned to fp32 (``.float()``) before the matching. capeval runs fp32
throughout. This script builds OpenAI's own model code (``clip/model.py`` from the
``clip-anytorch`` wheel, loaded by file path: the package's ``__init__`` needs torchvision)
from the weights of capeval's random ViT-B/32, runs it in fp16 and in fp32 *on the CPU*, and
computes EMScore from both sets of features with capeval's formulas. The weights are rounded
to fp16 values first, as OpenAI's released checkpoints are, so that only the arithmetic differs;
the fp32 run is also checked against capeval's own pipeline (they must agree to ~1e-6).

CPU fp16 stands in for the GPU: each operation still rounds its output to half precision,
but the kernels (and their accumulation order) are not cuBLAS's, and random weights do not
have the large activation outliers of trained CLIP, so read the numbers as the order of
magnitude of the difference, not its exact value for OpenAI's checkpoint.

    python benchmarks/video_fp16_vs_fp32.py [--data ../shared/data] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _peers import missing, skipped  # noqa: E402

CANDIDATES = {
    "demo": "A person is frying a pan of eggs that are colored pink and green.",
    "cook": "someone is cooking eggs in a pan on the stove",
    "yolks": "Two egg yolks are placed in food flavored white yolk on a pan until they are cooked.",
    "dog": "a dog runs on the grass",
    "short": "eggs",
    "kitchen": "a woman in a kitchen stirs food in a frying pan with a wooden spoon",
    "punct": "A man, wearing a hat, cooks 2 eggs!",
    "guitar": "a man plays the guitar on a stage in front of a crowd",
}
REFERENCES = {
    k: ["a person cooks eggs in a pan", "two eggs are fried in a pan on the stove"] for k in CANDIDATES
}


def _openai_model_module():
    """OpenAI's ``clip/model.py`` from the installed clip-anytorch wheel, by file path."""
    spec = importlib.util.find_spec("clip")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("clip-anytorch is not installed (pip install --no-deps clip-anytorch==2.6.0)")
    path = Path(list(spec.submodule_search_locations)[0]) / "model.py"
    mod_spec = importlib.util.spec_from_file_location("_openai_clip_model", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


def _token_features(model, ids, torch):
    """EMScore's patched ``encode_text(text, local=True)``: every position after ln_final @ projection."""
    x = model.token_embedding(ids).type(model.dtype)
    x = x + model.positional_embedding.type(model.dtype)
    x = model.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
    x = model.ln_final(x).type(model.dtype)
    return (x @ model.text_projection).float()


def _emscore(frames, texts, tok_feats, cand_of, refs_of, idf, em, torch):
    """Item EMScore (reference-free) and EMScore with references from given features."""
    frames = em.l2_normalize(frames)
    video = em.video_embedding(frames[None])[0]
    free, both, parts = {}, {}, {}
    for k, c in cand_of.items():
        ids, feats = texts[c], tok_feats[c]
        w = torch.tensor(idf.weights(ids), dtype=torch.float32)
        m = em.video_match(feats[None], torch.ones(1, len(ids), dtype=torch.bool), w[None], frames[None])
        coarse = em.cosine(feats[-1], video)
        v_full = float(em.full_score(m.F, coarse)[0])
        parts[k] = {"P": float(m.P[0]), "R": float(m.R[0]), "F": float(m.F[0]), "coarse": float(coarse)}
        best = None
        for r in refs_of[k]:
            rw = torch.tensor(idf.weights(texts[r]), dtype=torch.float32)
            rm = em.text_match(feats[None], torch.ones(1, len(ids), dtype=torch.bool), w[None],
                               tok_feats[r][None], torch.ones(1, len(texts[r]), dtype=torch.bool), rw[None])
            row = (float(rm.F[0]), float(em.cosine(feats[-1], tok_feats[r][-1])))
            best = row if best is None else (max(best[0], row[0]), max(best[1], row[1]))
        free[k] = v_full
        both[k] = (v_full + (best[0] + best[1]) / 2) / 2
    return free, both, parts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CAPEVAL_DATA", str(HERE.parents[1] / "shared" / "data")))
    ap.add_argument("--seed", type=int, default=0, help="seed of the random ViT-B/32 weights")
    args = ap.parse_args()
    if missing("clip"):  # every row compares with OpenAI's model code (clip-anytorch)
        skipped("fp16 vs fp32", "clip-anytorch")
        return 0
    sample = Path(args.data) / "samples" / "video" / "Bfyp0C02sko_000248_000258.mp4"
    if not sample.exists():
        print(f"sample video not found: {sample}; pass --data", file=sys.stderr)
        return 2

    import numpy as np
    import torch

    import capeval
    from capeval.models.clip.backbone import random_backbone
    from capeval.metrics.emscore import formulas as em
    from capeval.io import video as vf

    torch.manual_seed(0)
    bb = random_backbone("ViT-B-32", seed=args.seed)
    openai = _openai_model_module()
    # OpenAI's checkpoints hold fp16 values (build_model loads them into fp16 parameters even
    # before a .float()), so both sides get fp16-representable weights: the difference measured
    # below is then the arithmetic's alone
    state = {k: v.detach().half().float() for k, v in bb.model.state_dict().items()}
    bb.model.load_state_dict(state)
    fp16 = openai.build_model(dict(state)).eval()  # convert_weights: the GPU path's precision
    fp32 = openai.build_model(dict(state)).float().eval()  # clip.load(..., device="cpu") does model.float()
    assert fp16.dtype == torch.float16 and fp32.dtype == torch.float32

    sampled = vf.decode_video(sample, 10)
    pixels = torch.stack([bb.load_image(f) for f in sampled.frames])
    texts = {t: bb.tokenize([t])[0][0] for t in [*CANDIDATES.values(), *{r for rs in REFERENCES.values() for r in rs}]}
    ctx = bb.context_length
    padded = torch.tensor([ids + [0] * (ctx - len(ids)) for ids in texts.values()])
    cand_of = dict(CANDIDATES)
    refs_of = REFERENCES
    # the official default corpus when references are given: the references, flattened per candidate
    corpus = [texts[r] for k in cand_of for r in refs_of[k]]
    idf = em.compute_idf(corpus, eot_id=corpus[0][-1], context_length=ctx)

    results = {}
    with torch.inference_mode():
        for name, model in (("fp32", fp32), ("fp16", fp16)):
            frames = model.encode_image(pixels).float()
            states = _token_features(model, padded, torch)
            feats = {t: em.l2_normalize(states[i, : len(ids)]) for i, (t, ids) in enumerate(texts.items())}
            results[name] = _emscore(frames, texts, feats, cand_of, refs_of, idf, em, torch)

    # capeval's own fp32 pipeline on the same weights, frames and texts
    mine = capeval.score(cand_of, refs_of, "emscore,ref-emscore", videos={k: str(sample) for k in cand_of},
                         options={"emscore": {"backbone": bb}})
    check = max(max(abs(mine["emscore"].items[k] - results["fp32"][0][k]),
                    abs(mine["ref-emscore"].items[k] - results["fp32"][1][k])) for k in cand_of)

    def stats(a: dict, b: dict) -> dict:
        d = np.array([abs(a[k] - b[k]) for k in a])
        return {"max_abs_diff": float(d.max()), "mean_abs_diff": float(d.mean())}

    lo, hi = results["fp16"][2], results["fp32"][2]
    stable = [k for k in hi if abs(hi[k]["P"] + hi[k]["R"]) >= 0.01]
    components = {c: stats({k: lo[k][c] for k in lo}, {k: hi[k][c] for k in hi}) for c in ("P", "R", "coarse", "F")}

    out = {
        "video": sample.name,
        "frames": 10,
        "captions": len(cand_of),
        "backbone": f"random ViT-B/32 (seed {args.seed}), OpenAI clip/model.py fp16 (convert_weights) vs fp32, CPU",
        "capeval_fp32_vs_openai_fp32_max_abs_diff": check,
        "emscore_fp16_vs_fp32": stats(results["fp16"][0], results["fp32"][0]),
        "ref_emscore_fp16_vs_fp32": stats(results["fp16"][1], results["fp32"][1]),
        # the video part's pieces: F = 2PR/(P+R) amplifies differences where P + R is near 0,
        # which random weights (cosines near 0, of either sign) produce and trained CLIP does not
        "video_part_components_fp16_vs_fp32": components,
        "emscore_fp16_vs_fp32_items_with_abs_P_plus_R_over_0.01": {
            "items": len(stable),
            **stats({k: results["fp16"][0][k] for k in stable}, {k: results["fp32"][0][k] for k in stable}),
        },
        "per_item": {k: {"emscore_fp32": results["fp32"][0][k], "emscore_fp16": results["fp16"][0][k],
                         "ref_emscore_fp32": results["fp32"][1][k], "ref_emscore_fp16": results["fp16"][1][k],
                         "fp32_P_R": [hi[k]["P"], hi[k]["R"]]} for k in cand_of},
        "torch": torch.__version__,
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
