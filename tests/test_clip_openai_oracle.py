"""CLIP-S and RefCLIP-S end to end against an independent oracle: OpenAI's own code.

A random ViT-B/32 is built by OpenAI's ``clip/model.py`` (from the installed ``clip-anytorch``
package, loaded by file path; see ``_upstream.py``) with a fixed seed and saved as a state
dict file; its keys are OpenAI's real layout. The oracle scores the clipscore example
(2 images, good and bad captions, references) the way ``jmhessel/clipscore`` does:

- images: torchvision's ``Resize(224, BICUBIC)``, ``CenterCrop(224)``, ``convert("RGB")``,
  ``ToTensor``, ``Normalize`` redone step by step with PIL and numpy (torchvision is absent);
- texts: ``"A photo depicts " + caption`` for candidates *and* references (clipscore's
  ``extract_all_captions`` runs both through ``CLIPCapDataset``, whose default prefix is
  ``'A photo depicts'``), OpenAI's ``simple_tokenizer`` ids, ``clip.tokenize(truncate=True)``
  (first 77 ids, the last set to EOT), padded with zeros to 77;
- ``model.encode_image`` / ``model.encode_text``, L2-normalised; CLIP-S = 2.5 * max(cos, 0);
  RefCLIP-S = harmonic mean of CLIP-S and the best candidate-reference cosine (clamped at
  0, as capeval documents; clipscore does not clamp, which only matters for negative cosines).

capeval scores the same file through its public API and must agree within 1e-5 per item.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _upstream import clip_model_module, openai_tokenize, real_vocab

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")

W = 2.5
PREFIX = "A photo depicts "
MEAN = np.array((0.48145466, 0.4578275, 0.40821073), dtype=np.float32)
STD = np.array((0.26862954, 0.26130258, 0.27577711), dtype=np.float32)
TOL = 1e-5


def openai_preprocess(path, n_px: int = 224) -> np.ndarray:
    """clipscore's ``_transform_test(224)`` step by step, as torchvision does it on a PIL image."""
    img = Image.open(path)
    w, h = img.size
    # Resize(n_px): the shorter side becomes n_px, the longer int(n_px * long / short)
    if w <= h:
        size = (n_px, int(n_px * h / w))
    else:
        size = (int(n_px * w / h), n_px)
    if size != (w, h):
        img = img.resize(size, Image.BICUBIC)
    # CenterCrop(n_px): torchvision rounds the offsets with Python's round
    w, h = img.size
    top, left = int(round((h - n_px) / 2.0)), int(round((w - n_px) / 2.0))
    img = img.crop((left, top, left + n_px, top + n_px)).convert("RGB")
    x = np.asarray(img, dtype=np.uint8).astype(np.float32) / np.float32(255.0)  # ToTensor
    x = (x - MEAN) / STD  # Normalize
    return x.transpose(2, 0, 1)


def _padded(ids: list[list[int]], n: int = 77):
    out = torch.zeros(len(ids), n, dtype=torch.long)
    for i, x in enumerate(ids):
        out[i, : len(x)] = torch.tensor(x)
    return out


def _normalize(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.sum(x**2, axis=1, keepdims=True))


@pytest.fixture(scope="module")
def example(shared_data):
    root = shared_data / "samples" / "clipscore_example"
    good = json.loads((root / "good_captions.json").read_text(encoding="utf-8"))
    bad = json.loads((root / "bad_captions.json").read_text(encoding="utf-8"))
    refs = json.loads((root / "refs.json").read_text(encoding="utf-8"))
    return root / "images", {"good": good, "bad": bad}, refs


@pytest.fixture(scope="module")
def openai_model():
    """A random ViT-B/32 from OpenAI's model code; norms and biases perturbed so every tensor matters."""
    mod = clip_model_module()
    torch.manual_seed(0)  # with this seed the image-text cosines fall on both sides of 0
    model = mod.CLIP(embed_dim=512, image_resolution=224, vision_layers=12, vision_width=768, vision_patch_size=32,
                     context_length=77, vocab_size=49408, transformer_width=512, transformer_heads=8,
                     transformer_layers=12)
    # initialize_parameters() (run by __init__) leaves LayerNorms at 1/0 and biases at 0; a
    # key mix-up between two such tensors would go unseen, so move them off their defaults
    gen = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "ln_" in name:
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model.float().eval()


@pytest.fixture(scope="module")
def weights_file(openai_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("oracle") / "random-ViT-B-32.pt"
    torch.save(openai_model.state_dict(), path)
    return path


def oracle_scores(model, images: dict, cands: dict[str, str], refs: dict[str, list[str]]):
    ids = list(cands)
    with torch.no_grad():
        pixels = torch.from_numpy(np.stack([openai_preprocess(images[i]) for i in ids]))
        img = _normalize(model.encode_image(pixels).numpy().astype(np.float64))
        cand = _normalize(model.encode_text(_padded(openai_tokenize([PREFIX + cands[i] for i in ids]))).numpy()
                          .astype(np.float64))
        flat = [PREFIX + r for i in ids for r in refs[i]]
        ref = _normalize(model.encode_text(_padded(openai_tokenize(flat))).numpy().astype(np.float64))
    clip_s = W * np.clip(np.sum(img * cand, axis=1), 0, None)
    ref_sim, pos = [], 0
    for k, i in enumerate(ids):
        n = len(refs[i])
        ref_sim.append(max(0.0, float(np.max(ref[pos : pos + n] @ cand[k]))))
        pos += n
    ref_sim = np.array(ref_sim)
    denom = clip_s + ref_sim
    ref_clip_s = np.where(denom > 0, 2 * clip_s * ref_sim / np.where(denom > 0, denom, 1), 0.0)
    raw = np.sum(img * cand, axis=1)
    return dict(zip(ids, clip_s)), dict(zip(ids, ref_clip_s)), raw, ref_sim


def test_clip_s_and_ref_clip_s_equal_openai_code(openai_model, weights_file, example, monkeypatch):
    import capeval

    images_dir, captions, refs = example
    # good and bad captions in one run (one model load): ids "good/image1", ...
    cands = {f"{kind}/{i}": c for kind, caps in captions.items() for i, c in caps.items()}
    item_refs = {k: refs[k.split("/")[1]] for k in cands}
    images = {k: images_dir / f"{k.split('/')[1]}.jpg" for k in cands}
    exp_clip, exp_ref, raw, ref_sim = oracle_scores(openai_model, images, cands, item_refs)
    # the comparison means something only if cosines fall on both sides of the clamp at 0
    assert np.any(raw > 0) and np.any(raw < 0) and np.all(ref_sim > 0), (raw, ref_sim)

    monkeypatch.setenv("CAPEVAL_CLIP_VOCAB", str(real_vocab()))
    report = capeval.score(cands, item_refs, metrics=["clip-s", "ref-clip-s"],
                           options={"clip": {"backbone": str(weights_file)}},
                           images={k: str(v) for k, v in images.items()})
    worst = 0.0
    for metric, expected in (("clip-s", exp_clip), ("ref-clip-s", exp_ref)):
        got = report[metric].items
        assert set(got) == set(expected)
        for i in expected:
            diff = abs(got[i] - expected[i])
            worst = max(worst, diff)
            assert diff <= TOL, (metric, i, got[i], expected[i])
    print(f"\nclip-s {exp_clip}\nref-clip-s {exp_ref}\nmax |capeval - OpenAI oracle| = {worst:.3g}")


def test_backbone_features_equal_openai_code(openai_model, weights_file, example):
    """The raw features (before any clamp): images, texts with the prompt, the real key layout."""
    from capeval.models.clip.backbone import load_backbone

    images_dir, captions, refs = example
    bb = load_backbone(weights_file, tokenizer=real_vocab())
    texts = [PREFIX + c for c in captions["good"].values()] + [PREFIX + r for rs in refs.values() for r in rs]
    ids, _ = bb.tokenize(texts)
    assert ids == openai_tokenize(texts)
    paths = sorted(images_dir.glob("*.jpg"))
    with torch.no_grad():
        exp_img = openai_model.encode_image(torch.from_numpy(np.stack([openai_preprocess(p) for p in paths]))).numpy()
        exp_txt = openai_model.encode_text(_padded(ids)).numpy()
    pixels = torch.stack([bb.load_image(p) for p in paths])
    got_img = bb.encode_images(pixels).numpy()
    got_txt = bb.encode_texts(ids).numpy()
    scale = float(np.max(np.abs(exp_img)))
    assert np.max(np.abs(got_img - exp_img)) <= 1e-4 * scale
    assert np.max(np.abs(got_txt - exp_txt)) <= 1e-4 * float(np.max(np.abs(exp_txt)))
    np.testing.assert_allclose(_normalize(got_img), _normalize(exp_img), atol=TOL)
    np.testing.assert_allclose(_normalize(got_txt), _normalize(exp_txt), atol=TOL)
