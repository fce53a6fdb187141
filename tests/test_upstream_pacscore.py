"""PAC-S++ checkpoints: capeval's LoRA handling against the layers pacscore is built from.

pacscore (github.com/aimagelab/pacscore) is not on PyPI, so its model is rebuilt here from
installed upstream pieces and only the glue is ours:

- OpenAI's ``clip/model.py`` (``clip-anytorch``): the CLIP that pacscore's
  ``models/clip_lora/model.py`` copies (same module tree, so the same state-dict keys);
- ``loralib.Linear`` (PyPI ``loralib==0.1.2``): pacscore's ``models/custom_loralib/layers.py``
  ``Linear`` is this class verbatim (only a comment differs). It is used where pacscore uses
  it: the MLP's ``c_fc``/``c_proj`` (``merge_weights=True``, ``clip_lora/model.py`` l. 252-257)
  and the attention output projection (``merge_weights=False``, ``layers.py`` l. 373);
- assumptions read from pacscore and re-written below (no PyPI package has them):
  ``_LoraAttention`` (``layers.py`` l. 302-459 and 584-590: q/k/v LoRA as
  ``in_proj_weight_lora_{A,B}``, applied in every mode) and ``_LoraConv2d`` (l. 792-850:
  A ``(r*k, in*k)``, B ``(out*k, r*k)``; ``train()`` only un-merges and only the layer's own
  ``eval()`` merges, which ``Module.eval()`` never calls).

The checkpoint goes through pacscore's life cycle (``compute_correlations_pac++.py``):
build with ``lora=4`` ending in ``model.eval()`` -> ``load_state_dict(ckpt["state_dict"])``
(strict) -> ``model.eval()``. ``lora="effective"`` must reproduce that forward pass,
``lora="all"`` the forward with every LoRA branch active, ``lora="none"`` the base.

With ``CAPEVAL_PACSCORE_SRC`` pointing at a pacscore checkout, the last test also runs
pacscore's own ``clip_lora/model.py`` and ``custom_loralib`` (not installable, so opt-in).
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from capeval.models.clip.backbone import load_backbone  # noqa: E402

from _reference import require_module  # noqa: E402
from _upstream import clip_model_module, real_vocab  # noqa: E402

R = 4  # PAC-S++'s rank; lora_alpha is 1 everywhere in pacscore -> scaling 1/4
TOL = 1e-5
IDS = [[49406, 320, 1125, 539, 320, 2368, 49407], [49406, 500, 49407], [49406, *range(1000, 1075), 49407]]
SIZES = dict(embed_dim=96, image_resolution=64, vision_layers=3, vision_width=128, vision_patch_size=16,
             context_length=77, vocab_size=49408, transformer_width=128, transformer_heads=2, transformer_layers=3)


@pytest.fixture(scope="module")
def upstream():
    loralib = require_module("loralib", "pip install loralib==0.1.2 (the LoRA layers pacscore copies)")
    return types.SimpleNamespace(clip=clip_model_module(), loralib=loralib)


class _LoraAttention(nn.Module):
    """pacscore's LoRA ``MultiheadAttention`` (self-attention case), sequence-first like OpenAI's."""

    def __init__(self, width: int, heads: int, loralib):
        super().__init__()
        self.heads, self.scaling = heads, 1 / R
        self.in_proj_weight = nn.Parameter(torch.zeros(3 * width, width))
        self.in_proj_weight_lora_A = nn.Parameter(torch.zeros(R, width))
        self.in_proj_weight_lora_B = nn.Parameter(torch.zeros(3 * width, R))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = loralib.Linear(width, width, r=R, merge_weights=False)

    def forward(self, x, _k, _v, need_weights=False, attn_mask=None):
        n, b, d = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        qkv = qkv + F.linear(F.linear(x, self.in_proj_weight_lora_A), self.in_proj_weight_lora_B) * self.scaling
        q, k, v = (t.reshape(n, b * self.heads, d // self.heads).transpose(0, 1) for t in qkv.chunk(3, dim=-1))
        att = (q / math.sqrt(d // self.heads)) @ k.transpose(1, 2)
        if attn_mask is not None:
            att = att + attn_mask
        o = (att.softmax(-1) @ v).transpose(0, 1).reshape(n, b, d)
        # pacscore passes out_proj's weight and LoRA factors to its attention function directly
        p = self.out_proj
        out = F.linear(o, p.weight, p.bias) + F.linear(F.linear(o, p.lora_A), p.lora_B) * p.scaling
        return out, None


class _LoraConv2d(nn.Conv2d):
    """pacscore's LoRA ``Conv2d``: merged only by its own ``eval()``, which ``Module.eval()`` never calls."""

    def __init__(self, width: int, k: int):
        super().__init__(3, width, kernel_size=k, stride=k, bias=False)
        self.lora_A = nn.Parameter(torch.zeros(R * k, 3 * k))
        self.lora_B = nn.Parameter(torch.zeros(width * k, R * k))
        self.scaling, self.merged = 1 / R, False

    def train(self, mode: bool = True):
        nn.Conv2d.train(self, mode)
        if self.merged:
            self.weight.data -= (self.lora_B @ self.lora_A).view(self.weight.shape) * self.scaling
            self.merged = False
        return self

    def forward(self, x):
        if not self.merged:
            w = self.weight + (self.lora_B @ self.lora_A).view(self.weight.shape) * self.scaling
            return F.conv2d(x, w, None, self.stride)
        return nn.Conv2d.forward(self, x)


def _lora_clip(up):
    """OpenAI's CLIP with pacscore's LoRA layers in the places ``clip_lora/model.py`` puts them."""
    model = up.clip.CLIP(**SIZES).float()
    towers = ((model.transformer, SIZES["transformer_width"], SIZES["transformer_heads"]),
              (model.visual.transformer, SIZES["vision_width"], SIZES["vision_width"] // 64))
    for tower, width, heads in towers:
        for block in tower.resblocks:
            block.attn = _LoraAttention(width, heads, up.loralib)
            block.mlp.c_fc = up.loralib.Linear(width, 4 * width, r=R)
            block.mlp.c_proj = up.loralib.Linear(4 * width, width, r=R)
    model.visual.conv1 = _LoraConv2d(SIZES["vision_width"], SIZES["vision_patch_size"])
    return model


def _fill(model, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name != "logit_scale":
                p.copy_(torch.randn(p.shape, generator=gen) * (0.1 if "lora_" in name else 0.05) + (
                    1.0 if name.endswith(("ln_1.weight", "ln_2.weight", "ln_pre.weight", "ln_post.weight",
                                          "ln_final.weight")) else 0.0))


def _encode(model, px):
    tokens = torch.zeros(len(IDS), 77, dtype=torch.long)
    for i, ids in enumerate(IDS):
        tokens[i, : len(ids)] = torch.tensor(ids)
    with torch.no_grad():
        return model.encode_image(px), model.encode_text(tokens)


def _capeval(path, vocab, mode, px):
    bb = load_backbone(path, tokenizer=vocab, lora=mode)
    return bb.encode_images(px), bb.encode_texts(IDS)


def _diff(a, b) -> float:
    return max((a[0] - b[0]).abs().max().item(), (a[1] - b[1]).abs().max().item())


@pytest.fixture(scope="module")
def checkpoint(upstream, tmp_path_factory):
    """A PAC-S++-shaped file: ``{"state_dict": ...}`` of a trained LoRA model (every B nonzero)."""
    trained = _lora_clip(upstream).train()
    _fill(trained, seed=1)
    path = tmp_path_factory.mktemp("pacpp") / "PAC++_tiny.pth"
    torch.save({"state_dict": trained.state_dict(), "epoch": 1}, path)
    return path, {k: v.clone() for k, v in trained.state_dict().items()}


def _pacscore_inference(upstream, path):
    """``clip_lora.load`` (build, ``eval()``) -> ``load_state_dict`` -> ``eval()``."""
    model = _lora_clip(upstream).eval()
    model.load_state_dict(torch.load(path, weights_only=True)["state_dict"])
    return model.eval()


def test_lora_keys_are_the_upstream_layers_keys(checkpoint):
    _, state = checkpoint
    lora = sorted({re.sub(r"^(visual\.)?transformer\.resblocks\.\d+\.", "", k) for k in state if "lora_" in k})
    assert lora == ["attn.in_proj_weight_lora_A", "attn.in_proj_weight_lora_B", "attn.out_proj.lora_A",
                    "attn.out_proj.lora_B", "mlp.c_fc.lora_A", "mlp.c_fc.lora_B", "mlp.c_proj.lora_A",
                    "mlp.c_proj.lora_B", "visual.conv1.lora_A", "visual.conv1.lora_B"]


def test_effective_is_what_pacscore_computes(upstream, checkpoint):
    path, state = checkpoint
    px = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    model = _pacscore_inference(upstream, path)
    # loralib merged the MLP layers' zero delta before the file was loaded; they stay merged
    mlp = model.transformer.resblocks[0].mlp.c_fc
    assert mlp.merged and torch.equal(mlp.weight, state["transformer.resblocks.0.mlp.c_fc.weight"])
    assert not model.visual.conv1.merged
    ref = _encode(model, px)
    got = {mode: _capeval(path, real_vocab(), mode, px) for mode in ("effective", "all", "none")}
    d = _diff(got["effective"], ref)
    print(f"PAC-S++ effective vs pacscore's inference: max|diff| {d:.2e}")
    assert d < TOL
    assert _diff(got["all"], ref) > 1e-3 and _diff(got["none"], ref) > 1e-3


def test_all_is_every_lora_branch(upstream, checkpoint):
    path, _ = checkpoint
    px = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    # loaded first and eval()'d afterwards, loralib merges the trained MLP deltas
    model = _lora_clip(upstream)
    model.load_state_dict(torch.load(path, weights_only=True)["state_dict"])
    ref = _encode(model.eval(), px)
    d = _diff(_capeval(path, real_vocab(), "all", px), ref)
    print(f"PAC-S++ all vs every LoRA branch: max|diff| {d:.2e}")
    assert d < TOL


def test_none_is_the_base_weights(upstream, checkpoint, tmp_path):
    path, state = checkpoint
    px = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    zeroed = {k: (torch.zeros_like(v) if k.endswith("lora_B") else v) for k, v in state.items()}
    model = _lora_clip(upstream)
    model.load_state_dict(zeroed)
    ref = _encode(model.eval(), px)
    d = _diff(_capeval(path, real_vocab(), "none", px), ref)
    print(f"PAC-S++ none vs base weights: max|diff| {d:.2e}")
    assert d < TOL


def test_pacscore_source_itself(checkpoint, tmp_path):
    """Opt-in: pacscore's own ``clip_lora/model.py`` and ``custom_loralib`` from a checkout."""
    src = os.environ.get("CAPEVAL_PACSCORE_SRC")
    if not src:
        pytest.skip("set CAPEVAL_PACSCORE_SRC to a pacscore checkout (github.com/aimagelab/pacscore) to run")
    models = Path(src) / "models"
    saved = {k: sys.modules.get(k) for k in ("models", "models.custom_loralib", "models.clip_lora")}
    try:
        pkg = types.ModuleType("models")
        pkg.__path__ = [str(models)]
        sub = types.ModuleType("models.clip_lora")  # its __init__ imports torchvision: skip it
        sub.__path__ = [str(models / "clip_lora")]
        sys.modules.update({"models": pkg, "models.clip_lora": sub})
        spec = importlib.util.spec_from_file_location("models.clip_lora.model", models / "clip_lora" / "model.py")
        pm = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(pm)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    path, state = checkpoint
    base = {k: v for k, v in state.items() if "lora_" not in k}
    model = pm.build_model(dict(base), lora=R).float()
    assert set(model.state_dict()) == set(state)  # the emulation above has pacscore's exact layout
    model.load_state_dict(torch.load(path, weights_only=True)["state_dict"])
    model.eval()
    px = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    d = _diff(_capeval(path, real_vocab(), "effective", px), _encode(model, px))
    print(f"PAC-S++ effective vs pacscore's own code: max|diff| {d:.2e}")
    assert d < TOL


def test_initial_lora_factors_are_pacscores(upstream):
    """q/k/v: pacscore's ``MultiheadAttention._reset_parameters`` draws A and B with
    ``xavier_uniform_`` (Glorot: U(+-sqrt(6 / (fan_in + fan_out)))); out_proj / MLP / conv1:
    ``loralib`` (A ~ U(+-1/sqrt(fan_in)), B = 0), checked against ``loralib.Linear`` itself."""
    from capeval.models.clip.backbone import random_backbone
    from capeval.train.pacs_lora import add_lora

    model = random_backbone("tiny").model
    deltas = {d._capeval[0]: d for d in add_lora(model, R, 1.0)}
    width = model.transformer.resblocks[0].mlp.c_fc.weight.shape[1]
    reference = upstream.loralib.Linear(width, 4 * width, r=R)
    ref_bound = float(reference.lora_A.abs().max())
    for stem, d in deltas.items():
        a, b = d.lora_A.detach(), d.lora_B.detach()
        if stem.endswith("in_proj_weight_"):
            (r, fan_in), (fan_out, _) = a.shape, b.shape
            for x, bound in ((a, math.sqrt(6 / (r + fan_in))), (b, math.sqrt(6 / (fan_out + r)))):
                assert float(x.abs().max()) <= bound and float(x.abs().max()) > 0.5 * bound, stem
        else:
            assert torch.count_nonzero(b) == 0 and torch.count_nonzero(reference.lora_B) == 0, stem
            assert float(a.abs().max()) <= 1 / math.sqrt(a.shape[1]), stem
    # loralib's bound for the same fan-in as the MLP's c_fc (1/sqrt(width)) is the one used above
    assert 0.5 / math.sqrt(width) < ref_bound <= 1 / math.sqrt(width)
    fc = deltas["transformer.resblocks.0.mlp.c_fc."].lora_A.detach()
    assert fc.shape == reference.lora_A.shape and float(fc.abs().max()) > 0.5 / math.sqrt(width)
    zeros = add_lora(random_backbone("tiny").model, R, 1.0, qkv_init="zeros")
    assert all(torch.count_nonzero(d.lora_B) == 0 for d in zeros)
