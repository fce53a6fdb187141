"""PAC-S++ LoRA: the default applies the deltas the official pipeline really uses (attention
q/k/v/out + patch conv, not the MLP ones); ``lora="all"`` applies every delta."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from capeval.models.clip.backbone import load_backbone, random_backbone  # noqa: E402
from capeval.models.clip.tokenizer import write_vocab  # noqa: E402

R, ALPHA = 4, 1.0
S = ALPHA / R


def lora_state(seed: int = 0):
    bb = random_backbone("tiny", seed=seed)
    g = torch.Generator().manual_seed(seed + 100)
    state = {k: v.clone() for k, v in bb.model.state_dict().items()}

    def rnd(*shape):
        return torch.randn(*shape, generator=g) * 0.3

    for prefix, width, layers in (("transformer.resblocks", 32, 2), ("visual.transformer.resblocks", 32, 2)):
        for i in range(layers):
            p = f"{prefix}.{i}"
            state[f"{p}.attn.in_proj_weight_lora_A"] = rnd(R, width)
            state[f"{p}.attn.in_proj_weight_lora_B"] = rnd(3 * width, R)
            state[f"{p}.attn.out_proj.lora_A"] = rnd(R, width)
            state[f"{p}.attn.out_proj.lora_B"] = rnd(width, R)
            state[f"{p}.mlp.c_fc.lora_A"] = rnd(R, width)
            state[f"{p}.mlp.c_fc.lora_B"] = rnd(4 * width, R)
            state[f"{p}.mlp.c_proj.lora_A"] = rnd(R, 4 * width)
            state[f"{p}.mlp.c_proj.lora_B"] = rnd(width, R)
    k = 8  # patch size; pacscore's LoRA Conv2d: A (r*k, in*k), B (out*k, r*k)
    state["visual.conv1.lora_A"] = rnd(R * k, 3 * k)
    state["visual.conv1.lora_B"] = rnd(32 * k, R * k)
    return bb, state


# -- an independent forward with pacscore's semantics: LoRA branches computed separately --

def _ln(x, st, p):
    return F.layer_norm(x, x.shape[-1:], st[f"{p}.weight"], st[f"{p}.bias"], 1e-5)


def _block(x, st, p, heads, causal):
    h = _ln(x, st, f"{p}.ln_1")
    qkv = F.linear(h, st[f"{p}.attn.in_proj_weight"], st[f"{p}.attn.in_proj_bias"])
    qkv = qkv + F.linear(F.linear(h, st[f"{p}.attn.in_proj_weight_lora_A"]), st[f"{p}.attn.in_proj_weight_lora_B"]) * S
    q, k, v = qkv.chunk(3, dim=-1)
    b, n, d = q.shape
    split = lambda t: t.view(b, n, heads, d // heads).transpose(1, 2)  # noqa: E731
    att = split(q) @ split(k).transpose(-1, -2) / math.sqrt(d // heads)
    if causal:
        att = att + torch.full((n, n), float("-inf")).triu(1)
    o = (att.softmax(-1) @ split(v)).transpose(1, 2).reshape(b, n, d)
    o2 = F.linear(o, st[f"{p}.attn.out_proj.weight"], st[f"{p}.attn.out_proj.bias"])
    o2 = o2 + F.linear(F.linear(o, st[f"{p}.attn.out_proj.lora_A"]), st[f"{p}.attn.out_proj.lora_B"]) * S
    x = x + o2
    h = _ln(x, st, f"{p}.ln_2")
    # MLP: merged flag set before the checkpoint was loaded -> plain weights only
    h = F.linear(h, st[f"{p}.mlp.c_fc.weight"], st[f"{p}.mlp.c_fc.bias"])
    h = h * torch.sigmoid(1.702 * h)
    return x + F.linear(h, st[f"{p}.mlp.c_proj.weight"], st[f"{p}.mlp.c_proj.bias"])


def official_image(st, px):
    w = st["visual.conv1.weight"]
    w = w + (st["visual.conv1.lora_B"] @ st["visual.conv1.lora_A"]).view(w.shape) * S  # conv never merged
    x = F.conv2d(px, w, stride=8).flatten(2).transpose(1, 2)
    x = torch.cat([st["visual.class_embedding"].expand(x.shape[0], 1, -1), x], 1) + st["visual.positional_embedding"]
    x = _ln(x, st, "visual.ln_pre")
    for i in range(2):
        x = _block(x, st, f"visual.transformer.resblocks.{i}", 2, False)
    return _ln(x[:, 0], st, "visual.ln_post") @ st["visual.proj"]


def official_text(st, ids):
    x = st["token_embedding.weight"][torch.tensor([ids])] + st["positional_embedding"][: len(ids)]
    for i in range(2):
        x = _block(x, st, f"transformer.resblocks.{i}", 2, True)
    return _ln(x, st, "ln_final")[0, -1] @ st["text_projection"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lora")
    bb, state = lora_state()
    path = tmp / "PAC++_clip_tiny.pth"
    torch.save({"state_dict": state, "epoch": 3}, path)
    vocab = write_vocab(tmp / "vocab", sorted(bb.tokenizer.ranks, key=bb.tokenizer.ranks.get))
    return bb, state, path, vocab


def test_effective_equals_hand_computation_and_differs_from_all(setup):
    bb, state, path, vocab = setup
    eff = load_backbone(path, tokenizer=vocab)  # default: lora="effective"
    every = load_backbone(path, tokenizer=vocab, lora="all")
    none = load_backbone(path, tokenizer=vocab, lora="none")
    px = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    ids, _ = eff.tokenize(["a dog on the grass", "two cats"])
    with torch.no_grad():
        hand_img = official_image(state, px)
        hand_txt = torch.stack([official_text(state, x) for x in ids])
    img_e, txt_e = eff.encode_images(px), eff.encode_texts(ids)
    assert (img_e - hand_img).abs().max().item() < 1e-5
    assert (txt_e - hand_txt).abs().max().item() < 1e-5
    for other in (every, none):
        assert (other.encode_images(px) - img_e).abs().max().item() > 1e-3
        assert (other.encode_texts(ids) - txt_e).abs().max().item() > 1e-3
    assert eff.signature["lora"] == "effective(attention+conv1;r4;a1)"
    assert every.signature["lora"] == "all(attention+conv1+mlp;r4;a1)"


def test_all_mode_adds_the_mlp_delta(setup):
    bb, state, path, vocab = setup
    every = load_backbone(path, tokenizer=vocab, lora="all")
    p = "transformer.resblocks.1.mlp.c_fc"
    expected = state[f"{p}.weight"] + state[f"{p}.lora_B"] @ state[f"{p}.lora_A"] * S
    assert torch.allclose(every.model.state_dict()[f"{p}.weight"], expected, atol=1e-6)


def test_bad_lora_keys_are_named(setup, tmp_path):
    from capeval.errors import ResourceError

    bb, state, path, vocab = setup
    broken = dict(state)
    del broken["visual.conv1.lora_B"]
    bad = tmp_path / "bad.pth"
    torch.save({"state_dict": broken}, bad)
    with pytest.raises(ResourceError, match="visual.conv1.lora_A"):
        load_backbone(bad, tokenizer=vocab)
