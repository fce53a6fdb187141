"""CLIP model parity with Hugging Face transformers' CLIPModel given the same random weights,
and loading of OpenAI-/open_clip-named state dicts (plain and TorchScript)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from capeval.models.clip.backbone import load_backbone, random_backbone  # noqa: E402
from capeval.models.clip.export_hf import hf_state_dict  # noqa: E402
from capeval.models.clip.model import get_config  # noqa: E402
from capeval.errors import ResourceError  # noqa: E402
from _reference import SHARED_DATA  # noqa: E402

SAMPLES = SHARED_DATA / "samples" / "clipscore_example" / "images"
CONFIG = {"base": "tiny", "vision_layers": 3, "text_layers": 3}  # 3 layers: catches block-order bugs


def to_hf(state: dict, cfg) -> tuple["transformers.CLIPModel", dict]:
    """Our (OpenAI-named) state dict -> an HF CLIPModel with the same weights."""
    from transformers import CLIPConfig, CLIPModel

    act = "quick_gelu" if cfg.activation == "quick_gelu" else "gelu"
    hf_cfg = CLIPConfig(
        text_config=dict(vocab_size=cfg.vocab_size, hidden_size=cfg.text_width, intermediate_size=4 * cfg.text_width,
                         num_hidden_layers=cfg.text_layers, num_attention_heads=cfg.text_heads,
                         max_position_embeddings=cfg.context_length, hidden_act=act, layer_norm_eps=1e-5,
                         eos_token_id=cfg.vocab_size - 1, bos_token_id=cfg.vocab_size - 2, pad_token_id=0),
        vision_config=dict(hidden_size=cfg.vision_width, intermediate_size=4 * cfg.vision_width,
                           num_hidden_layers=cfg.vision_layers, num_attention_heads=cfg.vision_heads,
                           image_size=cfg.image_size, patch_size=cfg.patch_size, hidden_act=act, layer_norm_eps=1e-5),
        projection_dim=cfg.embed_dim,
    )
    # the key mapping is capeval's (clip/hf.py, also used to export for torchmetrics); the
    # numerics under test are transformers' own CLIP implementation
    hf = hf_state_dict(state, cfg)
    model = CLIPModel(hf_cfg).eval()
    missing, unexpected = model.load_state_dict(hf, strict=False)
    # position_ids buffers are the only keys HF may keep for itself
    assert not [k for k in missing if "position_ids" not in k], missing
    assert not unexpected, unexpected
    return model, hf


def _features(out):
    return out if isinstance(out, torch.Tensor) else out.pooler_output


@pytest.fixture(scope="module")
def pair():
    bb = random_backbone(CONFIG, seed=3)
    # the toy tokenizer's EOT is the highest id; make HF's pooling use the same token
    assert bb.tokenizer.eot_id == bb.model.config.vocab_size - 1
    hf, _ = to_hf({k: v.clone() for k, v in bb.model.state_dict().items()}, bb.model.config)
    return bb, hf


def _images(bb):
    files = sorted(SAMPLES.glob("*.jpg")) if SAMPLES.is_dir() else []
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 256, (50, 70, 3), dtype=np.uint8), rng.integers(0, 256, (61, 40), dtype=np.uint8)]
    return torch.stack([bb.load_image(x) for x in [*files, *arrays]])


def test_image_embeddings_match_hf(pair):
    bb, hf = pair
    px = _images(bb)
    ours = bb.encode_images(px)
    with torch.no_grad():
        ref = _features(hf.get_image_features(pixel_values=px))
    diff = (ours - ref).abs().max().item()
    print("image max abs diff", diff)
    assert diff < 1e-5


def test_image_grid_matches_hf_tokens(pair):
    bb, hf = pair
    px = _images(bb)
    grid = bb.encode_image_grid(px)
    with torch.no_grad():
        states = hf.vision_model(pixel_values=px).last_hidden_state
        ref = hf.visual_projection(hf.vision_model.post_layernorm(states))
    assert grid.shape == (px.shape[0], 1 + (32 // 8) ** 2, bb.embed_dim)
    assert (grid - ref).abs().max().item() < 1e-5
    assert torch.allclose(grid[:, 0], bb.encode_images(px), atol=1e-6)


TEXTS = ["A photo depicts a dog.", "two cats", "a man rides a bike down the street near the water, while children play",
         "x" * 3]


def test_text_embeddings_match_hf_padded_batch(pair):
    bb, hf = pair
    ids, _ = bb.tokenize(TEXTS)
    assert len({len(x) for x in ids}) > 1  # really a padded batch
    ours = bb.encode_texts(ids)
    longest = max(len(x) for x in ids)
    batch = torch.zeros(len(ids), longest, dtype=torch.long)
    mask = torch.zeros_like(batch)
    for i, x in enumerate(ids):
        batch[i, : len(x)] = torch.tensor(x)
        mask[i, : len(x)] = 1
    with torch.no_grad():
        ref = _features(hf.get_text_features(input_ids=batch, attention_mask=mask))
    diff = (ours - ref).abs().max().item()
    print("text max abs diff", diff)
    assert diff < 1e-5
    # each row alone (no padding) gives the same vector: padding is exact under the causal mask
    single = torch.cat([bb.encode_texts([x]) for x in ids])
    assert (single - ours).abs().max().item() < 1e-5
    # and the same as padding to the full 77 positions, as the reference code does
    full = torch.zeros(len(ids), 77, dtype=torch.long)
    for i, x in enumerate(ids):
        full[i, : len(x)] = torch.tensor(x)
    with torch.no_grad():
        at77 = bb.model.encode_text(full, torch.tensor([len(x) - 1 for x in ids]))
    assert (at77 - ours).abs().max().item() < 1e-5


def test_text_tokens_match_hf(pair):
    bb, hf = pair
    ids, _ = bb.tokenize(TEXTS)
    states, mask = bb.encode_text_tokens(ids)
    assert mask.sum(1).tolist() == [len(x) for x in ids]
    eot = torch.stack([states[i, len(x) - 1] for i, x in enumerate(ids)])
    assert (eot - bb.encode_texts(ids)).abs().max().item() < 1e-5
    for i, x in enumerate(ids):
        with torch.no_grad():
            ref = hf.text_projection(hf.text_model(input_ids=torch.tensor([x])).last_hidden_state)[0]
        assert (states[i, : len(x)] - ref).abs().max().item() < 1e-5


def test_gelu_architecture_matches_hf():
    bb = random_backbone({"base": "tiny", "activation": "gelu"}, seed=5)
    hf, _ = to_hf(dict(bb.model.state_dict()), bb.model.config)
    px = _images(bb)
    with torch.no_grad():
        ref = _features(hf.get_image_features(pixel_values=px))
    assert (bb.encode_images(px) - ref).abs().max().item() < 1e-5
    # and differs from the QuickGELU model with the same weights (the activation matters)
    bb_q = random_backbone("tiny", seed=5)
    assert (bb_q.encode_images(px) - ref).abs().max().item() > 1e-4


def test_named_architectures_have_the_published_shapes():
    b32, l14 = get_config("ViT-B-32"), get_config("ViT-L-14")
    assert (b32.embed_dim, b32.vision_width, b32.vision_layers, b32.patch_size, b32.text_width) == (512, 768, 12, 32, 512)
    assert (l14.embed_dim, l14.vision_width, l14.vision_layers, l14.patch_size, l14.text_width) == (768, 1024, 24, 14, 768)
    assert get_config("ViT-L-14-336").image_size == 336
    assert get_config("ViT-B-16").patch_size == 16


def _save_vocab(bb, tmp_path: Path) -> Path:
    from capeval.models.clip.tokenizer import write_vocab

    merges = sorted(bb.tokenizer.ranks, key=bb.tokenizer.ranks.get)
    return write_vocab(tmp_path / "vocab", merges)


def test_openai_style_state_dict_file_loads(tmp_path):
    bb = random_backbone("tiny", seed=1)
    state = {k: v.half() for k, v in bb.model.state_dict().items()}  # OpenAI ships fp16
    state.update(input_resolution=torch.tensor(32), context_length=torch.tensor(77), vocab_size=torch.tensor(594))
    path = tmp_path / "model.pt"
    torch.save(state, path)
    loaded = load_backbone(path, tokenizer=_save_vocab(bb, tmp_path))
    px = _images(bb)
    ref = random_backbone("tiny", seed=1)
    ref.model.load_state_dict({k: v.half().float() for k, v in bb.model.state_dict().items()})
    assert (loaded.encode_images(px) - ref.encode_images(px)).abs().max().item() < 1e-6
    assert loaded.signature["sha256"] and len(loaded.signature["sha256"]) == 64


def test_torchscript_archive_loads_only_when_trusted(tmp_path, monkeypatch):
    from capeval.models.clip import checkpoints as ck

    bb = random_backbone("tiny", seed=2)
    px = _images(bb)[:1]
    scripted = torch.jit.trace_module(bb.model, {"encode_image": px})
    path = tmp_path / "my_clip.pt"
    scripted.save(str(path))
    assert ck.is_torchscript(path)
    vocab = _save_vocab(bb, tmp_path)
    # named directly by the user: trusted
    loaded = load_backbone(path, tokenizer=vocab)
    assert (loaded.encode_images(px) - bb.encode_images(px)).abs().max().item() < 1e-6
    # under the table name (or the official file name) its hash is checked against OpenAI's
    official = tmp_path / "openai" / "ViT-B-32.pt"
    official.parent.mkdir()
    official.write_bytes(path.read_bytes())
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    with pytest.raises(ResourceError, match="sha256") as err:
        load_backbone("openai/ViT-B-32", tokenizer=vocab)
    assert str(official) in str(err.value)
    with pytest.raises(ResourceError, match="sha256"):
        load_backbone(official, tokenizer=vocab)
    with pytest.raises(ResourceError, match="TorchScript"):
        ck.read_state_dict(path, trusted=False)


def test_wrong_shapes_and_missing_keys_are_named(tmp_path):
    bb = random_backbone("tiny", seed=1)
    state = dict(bb.model.state_dict())
    state["ln_final.weight"] = torch.ones(5)
    del state["visual.ln_post.bias"]
    path = tmp_path / "broken.pth"
    torch.save({"state_dict": state}, path)
    with pytest.raises(ResourceError) as err:
        load_backbone(path, tokenizer=_save_vocab(bb, tmp_path))
    msg = str(err.value)
    assert "broken.pth" in msg
    assert "visual.ln_post.bias" in msg or "ln_final.weight" in msg
