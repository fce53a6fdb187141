"""Alpha-CLIP (``capeval.models.clip.alpha``) against OpenAI's ``clip/model.py`` run by hand.

Oracle: a tiny CLIP built by OpenAI's own model code (installed ``clip-anytorch``, loaded by
file path, see ``_upstream.py``) with every tensor randomised. Alpha-CLIP's image forward
(SunzeY/AlphaCLIP ``alpha_clip/model.py`` ``VisionTransformer.forward``) is OpenAI's with
one change, ``conv1(x) + conv1_alpha(alpha)``; the oracle takes OpenAI's modules and adds
``F.conv2d(alpha, w_alpha, stride=patch)`` itself. Fake released files are written in the
real layout: a visual-only state dict, no prefix, ``attn.in_proj.weight``/``in_proj.bias``,
``conv1_alpha.weight``. Mask preprocessing is checked against PIL's bilinear resize (the
filter torch's antialiased bilinear reproduces) and numpy block means.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
import torch.nn.functional as F  # noqa: E402

from _upstream import clip_model_module, openai_tokenize, real_vocab  # noqa: E402
from capeval.errors import InputError, ResourceError  # noqa: E402
from capeval.models.clip import checkpoints as ck  # noqa: E402
from capeval.models.clip.alpha import (AlphaClipBackbone, build_alpha_model, load_alpha_backbone,  # noqa: E402
                                       random_alpha_backbone)
from capeval.models.clip.alpha_mask import MaskPreprocess, full_alpha  # noqa: E402
from capeval.models.clip.backbone import load_backbone, random_backbone  # noqa: E402
from capeval.models.clip.model import ARCHITECTURES, clean_state_dict, infer_config  # noqa: E402
from capeval.models.clip.preprocess import Preprocess, center_crop, resize_shorter  # noqa: E402

TOL = 1e-5
RES, PATCH, WIDTH = 64, 16, 128
INSIDE, OUTSIDE = (1 - 0.5) / 0.26, (0 - 0.5) / 0.26


@pytest.fixture(scope="module")
def openai():
    """OpenAI's CLIP, ViT structure at a small size (2 heads of 64, 2 layers per tower)."""
    mod = clip_model_module()
    torch.manual_seed(0)
    model = mod.CLIP(embed_dim=96, image_resolution=RES, vision_layers=2, vision_width=WIDTH, vision_patch_size=PATCH,
                     context_length=77, vocab_size=49408, transformer_width=128, transformer_heads=2,
                     transformer_layers=2)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name != "logit_scale":  # biases start at 0 and norms at 1: randomise every tensor
                p.add_(torch.randn(p.shape, generator=gen) * (0.02 if p.dim() > 1 else 0.05))
    return model.float().eval()


def oracle_image(vt, pixels, alpha=None, w_alpha=None, grid=False):
    """OpenAI's ``VisionTransformer.forward`` step by step, with Alpha-CLIP's added alpha conv."""
    x = vt.conv1(pixels)
    if w_alpha is not None:
        x = x + F.conv2d(alpha, w_alpha, stride=PATCH)
    x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
    x = torch.cat([vt.class_embedding + torch.zeros(x.shape[0], 1, x.shape[-1]), x], dim=1)
    x = vt.ln_pre(x + vt.positional_embedding)
    x = vt.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
    return vt.ln_post(x) @ vt.proj if grid else vt.ln_post(x[:, 0, :]) @ vt.proj


def released_layout(visual_state, w_alpha):
    """A visual state dict the way Alpha-CLIP's zoo files hold it (``model.visual.state_dict()``)."""
    out = {}
    for k, v in visual_state.items():
        out[k.replace("attn.in_proj_weight", "attn.in_proj.weight").replace("attn.in_proj_bias", "attn.in_proj.bias")] = v
    out["conv1_alpha.weight"] = w_alpha
    return out


def _inputs(n=3, seed=5):
    gen = torch.Generator().manual_seed(seed)
    pixels = torch.randn(n, 3, RES, RES, generator=gen)
    masks = torch.rand(n, 1, RES, RES, generator=gen) > 0.5
    return pixels, (masks.float() - 0.5) / 0.26


def _capeval_model(openai, w_alpha=None):
    state = clean_state_dict(openai.state_dict())
    if w_alpha is not None:
        state["visual.conv1_alpha.weight"] = w_alpha
    return build_alpha_model(infer_config(state), state)


# -- (a), (b): the model against OpenAI's code ----------------------------------------------


def test_zero_alpha_conv_is_exactly_clip(openai):
    model = _capeval_model(openai)  # OpenAI's state dict has no conv1_alpha: zeros, as upstream
    assert torch.count_nonzero(model.visual.conv1_alpha.weight) == 0
    pixels, alpha = _inputs()
    with torch.no_grad():
        expected = openai.encode_image(pixels)
        for a in (alpha, None):
            got = model.encode_image(pixels, a)
            assert float((got - expected).abs().max()) <= TOL


def test_alpha_conv_matches_openai_forward_by_hand(openai):
    w_alpha = torch.randn(WIDTH, 1, PATCH, PATCH, generator=torch.Generator().manual_seed(7)) * 0.05
    model = _capeval_model(openai, w_alpha)
    pixels, alpha = _inputs()
    with torch.no_grad():
        expected = oracle_image(openai.visual, pixels, alpha, w_alpha)
        got = model.encode_image(pixels, alpha)
        plain = openai.encode_image(pixels)
        assert float((got - expected).abs().max()) <= TOL
        assert float((got - plain).abs().max()) > 1e-2  # the mask matters: the test can fail
        grid = model.encode_image_grid(pixels, alpha)
        assert float((grid - oracle_image(openai.visual, pixels, alpha, w_alpha, grid=True)).abs().max()) <= TOL
        full = torch.full((3, 1, RES, RES), INSIDE)
        assert float((model.encode_image(pixels) - oracle_image(openai.visual, pixels, full, w_alpha)).abs().max()) <= TOL
    with pytest.raises(InputError, match="alpha must have shape"):
        model.encode_image(pixels, alpha[:, :, :32])


def test_random_alpha_backbone_mirrors_random_backbone():
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    plain = random_backbone("tiny", seed=4)
    zero = random_alpha_backbone("tiny", seed=4, alpha_std=0.0)
    assert torch.equal(zero.encode_images(pixels), plain.encode_images(pixels))
    bb = random_alpha_backbone("tiny", seed=4)
    assert isinstance(bb, AlphaClipBackbone) and bb.signature_hash != zero.signature_hash
    masks = np.zeros((2, 40, 60), bool)
    masks[0, 5:20, 10:40] = True
    masks[1, 20:, :] = True
    alpha = torch.stack([bb.load_mask(m) for m in masks])
    regions = bb.encode_images_with_masks(pixels, alpha)
    assert regions.shape == (2, bb.embed_dim) and float((regions - bb.encode_images(pixels)).abs().max()) > 1e-3
    assert torch.allclose(bb.encode_images_with_masks(pixels, bb.full_alpha(2)), bb.encode_images(pixels), atol=1e-6)
    assert torch.allclose(bb.encode_regions(pixels[0], alpha), bb.encode_images_with_masks(pixels[:1].expand(2, -1, -1, -1),
                                                                                           alpha), atol=1e-6)
    ids, _ = bb.tokenize(["a dog on the grass"])
    assert torch.equal(bb.encode_texts(ids), plain.encode_texts(ids))


# -- (c): mask preprocessing ------------------------------------------------------------------


def test_mask_values_and_resolution():
    mask = np.zeros((48, 64), bool)
    mask[8:40, 16:48] = True
    for prep in (MaskPreprocess(32), MaskPreprocess(32, "squash"), MaskPreprocess(32, antialias=False)):
        alpha = prep(mask)
        assert alpha.shape == (1, 32, 32) and alpha.dtype == torch.float32
        a = alpha.numpy()
        assert np.isclose(a.min(), OUTSIDE, atol=1e-6) and np.isclose(a.max(), INSIDE, atol=1e-6)
        assert a.min() >= OUTSIDE - 1e-6 and a.max() <= INSIDE + 1e-6
    full = MaskPreprocess(32)(np.ones((48, 64), bool))
    # a resampled all-ones mask is 1 up to the filter weights' rounding; full_alpha is the exact constant
    assert float((full - full_alpha(1, 32)[0]).abs().max()) <= 1e-6
    assert torch.all(full_alpha(2, 32) == (torch.tensor(1.0) - 0.5) / 0.26)
    assert np.isclose(float(full_alpha(1, 32)[0, 0, 0, 0]), INSIDE, atol=1e-6)
    ref = MaskPreprocess(32)(mask)
    assert torch.equal(MaskPreprocess(32)(mask.astype(np.uint8) * 255), ref)  # README: (mask * 255).astype(uint8)
    assert torch.equal(MaskPreprocess(32)(mask.astype(np.float32)), ref)
    assert torch.equal(MaskPreprocess(32)(Image.fromarray(mask.astype(np.uint8) * 255, "L")), ref)
    assert torch.equal(MaskPreprocess(32)(Image.fromarray(mask)), ref)


def test_mask_resize_equals_pil_bilinear_and_the_image_geometry():
    """Same sizes, crop offsets and filter as Preprocess's path, with PIL's bilinear on a float image."""
    rng = np.random.default_rng(0)
    for h, w in ((48, 80), (80, 48), (32, 32), (50, 37)):
        soft = rng.random((h, w)).astype(np.float32)
        img = center_crop(resize_shorter(Image.fromarray(soft, "F"), 32, Image.BILINEAR), 32)
        expected = (np.asarray(img, dtype=np.float32) - 0.5) / 0.26
        got = MaskPreprocess(32)(soft).numpy()[0]
        assert np.abs(got - expected).max() <= TOL, (h, w)
        squashed = (np.asarray(Image.fromarray(soft, "F").resize((32, 32), Image.BILINEAR)) - 0.5) / 0.26
        assert np.abs(MaskPreprocess(32, "squash")(soft).numpy()[0] - squashed).max() <= TOL
    # without antialias, halving averages 2x2 blocks (bilinear, align_corners=False)
    soft = rng.random((64, 64)).astype(np.float32)
    blocks = soft.reshape(32, 2, 32, 2).mean(axis=(1, 3))
    got = MaskPreprocess(32, antialias=False).resized(soft).numpy()[0]
    assert np.abs(got - blocks).max() <= 1e-6


def test_crop_follows_the_image_not_the_squash():
    mask = np.zeros((40, 80), bool)
    mask[:, :10] = True  # the left eighth: cut away by the image's centre crop
    assert torch.all(MaskPreprocess(32)(mask) == MaskPreprocess(32)(np.zeros((40, 80), bool)))
    assert float(MaskPreprocess(32, "squash")(mask).max()) > 1.5
    assert tuple(Preprocess(32).transform_pil(Image.new("RGB", (80, 40))).size) == (32, 32)


@pytest.mark.parametrize("bad, match", [
    (np.array([[0, 1], [1, 0]], np.uint8), "ambiguous"),
    (np.zeros((4, 4, 3), bool), "HxW"),
    (np.full((4, 4), 1.5, np.float32), r"\[0, 1\]"),
    (np.zeros((4, 4), np.int64), "dtype"),
    (Image.new("RGB", (4, 4)), "PIL mode"),
    ("mask.png", "expected an HxW"),
])
def test_bad_masks_are_refused(bad, match):
    with pytest.raises(InputError, match=match):
        MaskPreprocess(8)(bad, name="item-1")


def test_mask_must_fit_its_image_and_geometry_is_known():
    with pytest.raises(InputError, match="mask is 60x40 but its image is 64x48"):
        MaskPreprocess(8)(np.zeros((40, 60), bool), "m", image_size=(64, 48))
    with pytest.raises(InputError, match="geometry"):
        MaskPreprocess(8, "stretch")


# -- (d): released files ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(openai, tmp_path_factory):
    """A base file (OpenAI's layout) and a fake zoo file: fine-tuned visual tower + conv1_alpha."""
    root = tmp_path_factory.mktemp("alpha")
    torch.save(openai.state_dict(), root / "base.pt")
    tuned = copy.deepcopy(openai.visual)
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in tuned.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.01)
    w_alpha = torch.randn(WIDTH, 1, PATCH, PATCH, generator=gen) * 0.05
    released = released_layout(tuned.state_dict(), w_alpha)
    torch.save(released, root / "fake_alpha.pth")
    return root, tuned, w_alpha, released


def _save(path, state):
    torch.save(state, path)
    return path


def test_released_layout_loads_over_the_base(openai, files):
    root, tuned, w_alpha, released = files
    bb = load_alpha_backbone(root / "fake_alpha.pth", base=root / "base.pt", tokenizer=real_vocab())
    pixels, alpha = _inputs(seed=9)
    with torch.no_grad():
        expected = oracle_image(tuned, pixels, alpha, w_alpha)
        assert float((bb.encode_images_with_masks(pixels, alpha) - expected).abs().max()) <= TOL
        full = oracle_image(tuned, pixels, torch.full((3, 1, RES, RES), INSIDE), w_alpha)
        assert float((bb.encode_images(pixels) - full).abs().max()) <= TOL
        texts = ["a photo of a cat", "two dogs play with a ball"]
        ids, _ = bb.tokenize(texts)
        padded = torch.zeros(2, 77, dtype=torch.long)
        for i, x in enumerate(openai_tokenize(texts)):
            padded[i, : len(x)] = torch.tensor(x)
        assert float((bb.encode_texts(ids) - openai.encode_text(padded)).abs().max()) <= TOL  # the base's text tower
    assert bb.signature["sha256"] == ck.sha256_file(root / "fake_alpha.pth")
    assert bb.signature["base_sha256"] == ck.sha256_file(root / "base.pt")
    # the training script saves a DDP-wrapped tower ("module."); a whole-model dict ("visual.") also loads
    for prefix in ("module.", "visual."):
        path = _save(root / f"prefixed-{prefix[:-1]}.pth", {prefix + k: v for k, v in released.items()})
        other = load_alpha_backbone(path, base=root / "base.pt", tokenizer=real_vocab())
        assert torch.equal(other.encode_images_with_masks(pixels, alpha), bb.encode_images_with_masks(pixels, alpha))


@pytest.mark.parametrize("edit, match", [
    (lambda s: {k: v for k, v in s.items() if k != "ln_post.bias"}, "missing keys: visual.ln_post.bias"),
    (lambda s: {k: v for k, v in s.items() if k != "conv1_alpha.weight"}, "missing keys: visual.conv1_alpha.weight"),
    (lambda s: {**s, "conv1_alpha.weight": torch.zeros(WIDTH, 1, 8, 8)}, "wrong shapes: visual.conv1_alpha.weight"),
    (lambda s: {**s, "transformer.resblocks.0.attn.in_proj.lora_A": torch.zeros(4, WIDTH)}, "LoRA"),
    (lambda s: {**s, "extra.weight": torch.zeros(1)}, "unexpected keys: visual.extra.weight"),
])
def test_mismatched_files_name_the_file(files, edit, match, tmp_path):
    root, _, _, released = files
    path = _save(tmp_path / "broken_alpha.pth", edit(dict(released)))
    with pytest.raises(ResourceError, match=match) as err:
        load_alpha_backbone(path, base=root / "base.pt", tokenizer=real_vocab())
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_broken_files_and_wrong_base(files, tmp_path):
    root, _, _, _ = files
    data = (root / "fake_alpha.pth").read_bytes()
    cut = tmp_path / "cut_alpha.pth"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ResourceError) as err:
        load_alpha_backbone(cut, base=root / "base.pt", tokenizer=real_vocab())
    assert str(cut) in str(err.value) and "\n" not in str(err.value)
    small = clip_model_module().CLIP(32, RES, 1, 64, PATCH, 77, 49408, 64, 1, 1)  # another width
    other_base = _save(tmp_path / "other_base.pt", small.state_dict())
    with pytest.raises(ResourceError, match="wrong shapes") as err:
        load_alpha_backbone(root / "fake_alpha.pth", base=other_base, tokenizer=real_vocab())
    assert "fake_alpha.pth" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ResourceError, match="base="):
        load_alpha_backbone(root / "fake_alpha.pth", tokenizer=real_vocab())  # no openai arch has these shapes


def test_table_entries():
    alpha = {n: e for n, e in ck.CHECKPOINTS.items() if e.kind == "alpha-clip"}
    assert len(alpha) == 8 and "alpha-clip/ViT-L-14-grit20m" in alpha
    for name, e in alpha.items():
        assert e.sha256 is None and e.base in ck.CHECKPOINTS and ck.CHECKPOINTS[e.base].arch == e.arch
        assert e.urls[0] == f"https://download.openxlab.org.cn/models/SunzeY/AlphaCLIP/weight/{e.filename}"
        assert e.urls[1].startswith("https://drive.usercontent.google.com/download?id=")
        assert e.preprocess.size == (336 if e.arch.endswith("-336") else 224) and e.preprocess == Preprocess(e.preprocess.size)
    assert alpha["alpha-clip/ViT-L-14-grit20m"].filename == "clip_l14_grit20m_fultune_2xe.pth"


@pytest.fixture
def tiny_table(openai, files, tmp_path, monkeypatch):
    """Table entries for the tiny architecture, files placed where ``resolve`` looks."""
    root, _, _, _ = files
    monkeypatch.setitem(ARCHITECTURES, "ViT-test", infer_config(clean_state_dict(openai.state_dict())))
    monkeypatch.setitem(ck.CHECKPOINTS, "openai/ViT-test", ck.Checkpoint(
        "openai/ViT-test", "ViT-test", "openai", "base.pt", (), None, Preprocess(RES)))
    for name, arch in (("alpha-clip/ViT-test-fake", "ViT-test"), ("alpha-clip/ViT-test-wrong", "ViT-B-16")):
        monkeypatch.setitem(ck.CHECKPOINTS, name, ck.Checkpoint(
            name, arch, "alpha-clip", "fake_alpha.pth", (), None, Preprocess(RES), base="openai/ViT-test"))
    for sub, fname in (("openai", "base.pt"), ("alpha-clip", "fake_alpha.pth")):
        (tmp_path / sub).mkdir(exist_ok=True)
        (tmp_path / sub / fname).write_bytes((root / fname).read_bytes())
    return tmp_path


def test_load_by_table_name(tiny_table, files):
    _, tuned, w_alpha, _ = files
    bb = load_backbone("alpha-clip/ViT-test-fake", checkpoint_dir=str(tiny_table), tokenizer=real_vocab())
    assert isinstance(bb, AlphaClipBackbone) and bb.name == "alpha-clip/ViT-test-fake"
    pixels, alpha = _inputs(seed=2)
    with torch.no_grad():
        assert float((bb.encode_images_with_masks(pixels, alpha) - oracle_image(tuned, pixels, alpha, w_alpha))
                     .abs().max()) <= TOL
    with pytest.raises(ResourceError, match="fine-tunes ViT-B-16"):
        load_alpha_backbone("alpha-clip/ViT-test-wrong", checkpoint_dir=str(tiny_table), tokenizer=real_vocab())
    with pytest.raises(ResourceError, match="not an Alpha-CLIP checkpoint"):
        load_alpha_backbone("openai/ViT-test", checkpoint_dir=str(tiny_table))


def test_plain_folder_search_ignores_alpha_files(files, tmp_path):
    """A folder with one plain CLIP file and an Alpha-CLIP zoo file still names the plain one."""
    root, _, _, _ = files
    (tmp_path / "clip_ViT-B-32.pth").write_bytes((root / "base.pt").read_bytes())
    (tmp_path / "clip_l14_grit20m_fultune_2xe.pth").write_bytes((root / "fake_alpha.pth").read_bytes())
    with pytest.raises(ResourceError) as err:
        load_backbone(tmp_path, tokenizer=real_vocab())
    assert "expected exactly one" not in str(err.value) and "pac-s/ViT-B-32" in str(err.value)


def test_base_is_guessed_from_the_visual_shapes():
    from capeval.models.clip.alpha import _guess_base

    for conv, pos, base in (((768, 3, 16, 16), 197, "openai/ViT-B-16"), ((1024, 3, 14, 14), 257, "openai/ViT-L-14"),
                            ((1024, 3, 14, 14), 577, "openai/ViT-L-14-336"), ((64, 3, 8, 8), 17, None)):
        vis = {"visual.conv1.weight": torch.empty(conv), "visual.positional_embedding": torch.empty(pos, conv[0])}
        assert _guess_base(vis) == base
