"""open_clip checkpoints (the base of PAC-S ViT-L/14) against open_clip's own model code.

``open-clip-torch`` is installed with ``--no-deps`` (its ``utils.py`` imports torchvision,
which does not exist for this torch), so ``import open_clip`` fails. Its model code needs
only torch: the modules are loaded under a private package name with a throw-away
``torchvision`` stub that is removed from ``sys.modules`` right after the import, so nothing
leaks into other tests (transformers checks for torchvision too).

The models use the true configs from ``open_clip/model_configs/*.json`` (widths, heads,
patch and image size, vocabulary) with fewer layers to keep the test quick; every parameter
is randomised (open_clip initialises biases to 0 and norms to 1, which would hide a swapped
or dropped tensor). The state dict open_clip writes is loaded by capeval from the file and
both encoders must agree with open_clip's ``encode_image`` / ``encode_text`` within 1e-5.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from capeval.models.clip import checkpoints as ck  # noqa: E402
from capeval.models.clip.backbone import load_backbone  # noqa: E402

from _reference import unavailable  # noqa: E402

PKG = "_capeval_upstream_open_clip"
TOL = 1e-5
CAPTIONS = [
    "a photo of a cat",
    "Two dogs play in the snow!",
    "A man (wearing a red hat) rides a bike, next to 3 children...",
    "x",
    " ".join(["a very long caption"] * 30),  # hits the 77-token truncation
]


@pytest.fixture(scope="module")
def oc():
    """open_clip's ``model``, ``tokenizer`` and ``pretrained`` modules, loaded without torchvision."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        unavailable("open_clip is not installed: pip install --no-deps open-clip-torch==3.3.0")
    root = Path(list(spec.submodule_search_locations)[0])
    stub_names = ("torchvision", "torchvision.ops", "torchvision.ops.misc", f"{PKG}.hf_model")
    saved = {k: sys.modules.get(k) for k in (PKG, *stub_names)}
    pkg = types.ModuleType(PKG)
    pkg.__path__ = [str(root)]
    tv, ops, misc = (types.ModuleType(n) for n in stub_names[:3])

    class FrozenBatchNorm2d(torch.nn.Module):  # only used by ResNet towers' freezing helper
        pass

    misc.FrozenBatchNorm2d = FrozenBatchNorm2d
    tv.ops, ops.misc = ops, misc
    # the HF text tower would import transformers while the stub is in place
    hf = types.ModuleType(f"{PKG}.hf_model")
    hf.HFTextEncoder = None
    sys.modules.update({PKG: pkg, stub_names[0]: tv, stub_names[1]: ops, stub_names[2]: misc, stub_names[3]: hf})
    try:
        mods = types.SimpleNamespace(
            model=importlib.import_module(f"{PKG}.model"),
            tokenizer=importlib.import_module(f"{PKG}.tokenizer"),
            pretrained=importlib.import_module(f"{PKG}.pretrained"),
            root=root,
        )
    finally:
        for name in stub_names[:3]:
            if saved[name] is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = saved[name]
    assert "torchvision" not in sys.modules or sys.modules["torchvision"] is saved["torchvision"]
    return mods


def _randomise(model, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "logit_scale":
                continue
            scale = 0.02 if p.dim() > 1 else 0.05
            p.add_(torch.randn(p.shape, generator=gen) * scale)


def _build(oc, config: str, layers: int, quick_gelu: bool, seed: int):
    cfg = json.loads((oc.root / "model_configs" / f"{config}.json").read_text())
    cfg.pop("quick_gelu", None)
    cfg["vision_cfg"]["layers"] = layers
    cfg["text_cfg"]["layers"] = layers
    torch.manual_seed(seed)
    model = oc.model.CLIP(**cfg, quick_gelu=quick_gelu).eval()
    _randomise(model, seed)
    return model, cfg


def _pixels(size: int, n: int = 3) -> torch.Tensor:
    # a preprocessed batch: the same tensor goes into both implementations
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(7))


def _compare(oc, model, backbone, size: int) -> tuple[float, float]:
    px = _pixels(size)
    tokens = oc.tokenizer.SimpleTokenizer()(CAPTIONS)  # (n, 77), EOT = highest id, 0-padded
    eot = tokens.argmax(-1)
    ids = [row[: int(e) + 1].tolist() for row, e in zip(tokens, eot)]
    with torch.no_grad():
        ref_img = model.encode_image(px)
        ref_txt = model.encode_text(tokens)
    img = backbone.encode_images(px)
    txt = backbone.encode_texts(ids)
    return (img - ref_img).abs().max().item(), (txt - ref_txt).abs().max().item()


@pytest.mark.parametrize(
    "config,layers,quick_gelu",
    [("ViT-L-14", 2, False), ("ViT-B-32", 3, False), ("ViT-B-32", 3, True)],
    ids=["ViT-L-14-gelu", "ViT-B-32-gelu", "ViT-B-32-quickgelu"],
)
def test_open_clip_state_dict_gives_open_clips_embeddings(oc, tmp_path, config, layers, quick_gelu):
    model, cfg = _build(oc, config, layers, quick_gelu, seed=layers)
    path = tmp_path / "open_clip_model.bin"  # not a table file name: nothing is taken from the table
    torch.save(model.state_dict(), path)
    vocab = oc.root / "bpe_simple_vocab_16e6.txt.gz"
    size = cfg["vision_cfg"]["image_size"]
    entry = ck.get_checkpoint("open_clip/ViT-L-14-laion2b_s32b_b82k")
    backbone = load_backbone(path, tokenizer=vocab, activation="quick_gelu" if quick_gelu else "gelu",
                             preprocess=entry.preprocess)
    got = backbone.model.config
    assert (got.vision_width, got.vision_heads, got.text_width, got.text_heads, got.patch_size, got.image_size) == (
        cfg["vision_cfg"]["width"], cfg["vision_cfg"]["width"] // 64, cfg["text_cfg"]["width"],
        cfg["text_cfg"]["heads"], cfg["vision_cfg"]["patch_size"], size)
    d_img, d_txt = _compare(oc, model, backbone, size)
    print(f"{config} quick_gelu={quick_gelu}: max|diff| image {d_img:.2e} text {d_txt:.2e}")
    assert d_img < TOL and d_txt < TOL
    # the wrong activation must be visible at this tolerance, or the check above proves nothing
    other = load_backbone(path, tokenizer=vocab, activation="gelu" if quick_gelu else "quick_gelu",
                          preprocess=entry.preprocess)
    wrong_img, wrong_txt = _compare(oc, model, other, size)
    assert wrong_img > 100 * TOL and wrong_txt > 100 * TOL


def test_table_entry_matches_open_clips_pretrained_config(oc):
    """PAC-S ViT-L/14's base: GELU and mean = std = 0.5, as open_clip defines laion2b_s32b_b82k."""
    pre = oc.pretrained.get_pretrained_cfg("ViT-L-14", "laion2b_s32b_b82k")
    cfg = json.loads((oc.root / "model_configs" / "ViT-L-14.json").read_text())
    quick = bool(cfg.get("quick_gelu", False) or pre.get("quick_gelu", False))
    for name in ("open_clip/ViT-L-14-laion2b_s32b_b82k", "pac-s/ViT-L-14"):
        entry = ck.get_checkpoint(name)
        assert entry.activation == ("quick_gelu" if quick else "gelu"), name
        sig = entry.preprocess
        assert tuple(sig.mean) == tuple(pre["mean"]) and tuple(sig.std) == tuple(pre["std"]), name
        assert sig.size == cfg["vision_cfg"]["image_size"], name
        assert sig.interpolation == pre["interpolation"], name
    assert pre["resize_mode"] == "shortest"  # capeval: resize the shorter side, then centre-crop
    assert pre["hf_hub"].rstrip("/") in ck.get_checkpoint("open_clip/ViT-L-14-laion2b_s32b_b82k").urls[0]
