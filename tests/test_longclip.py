"""Long-CLIP backbones (Zhang et al., ECCV 2024) under CLIP-S / RefCLIP-S.

One tiny Long-CLIP-shaped model (248 text positions, ``positional_embedding_res``, 128-wide
towers, the real 49,408-token vocabulary) is saved as a ``.pt`` in the released layout: the
state dict of ``model_longclip.CLIP`` after its ``convert_weights`` (fp16 linear/attention
weights, as ``build_model`` leaves them). capeval loads that file as ``backbone=`` and scores
captions of about 40, 150 and 300 tokens (the last one past 248) item by item against:

1. the official model code, ``model/model_longclip.py`` and ``model/simple_tokenizer.py`` of
   beichenzbc/Long-CLIP, taken from ``$CAPEVAL_LONGCLIP_SRC`` (a checkout) or from the
   fetched mirror; ``model/longclip.py`` imports torchvision (which breaks this torch), so its
   ``load`` (``torch.load`` -> ``build_model(load_from_clip=False)`` -> ``.float()`` on CPU) and
   ``tokenize(truncate=True)`` lines are restated. The official code is not on PyPI, so this
   test skips when neither source is there, under CI too;
2. an independent float64 transcription of the Long-CLIP forward pass written below from the
   paper and the code's maths (runs everywhere, CI included).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _upstream import openai_tokenize, real_vocab  # noqa: E402

MIRROR = Path("/work/.mirror/beichenzbc+Long-CLIP/repo")
PROMPT = "A photo depicts "
W = 2.5
TOL = 2e-5
SIZES = dict(embed_dim=64, image_resolution=32, vision_layers=2, vision_width=128, vision_patch_size=16,
             context_length=248, vocab_size=49408, transformer_width=128, transformer_heads=2, transformer_layers=2)


def _official_source(tmp: Path) -> Path | None:
    """A folder holding the official ``model_longclip.py`` and ``simple_tokenizer.py``, or None."""
    src = os.environ.get("CAPEVAL_LONGCLIP_SRC")
    if src and (Path(src) / "model" / "model_longclip.py").is_file():
        return Path(src) / "model"
    if not MIRROR.exists():
        return None
    for name in ("model_longclip.py", "simple_tokenizer.py", "bpe_simple_vocab_16e6.txt.gz"):
        blob = subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"HEAD:model/{name}"],
                              capture_output=True, check=False)
        if blob.returncode:
            return None
        (tmp / name).write_bytes(blob.stdout)
    return tmp


def _load_module(folder: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"_official_longclip_{name}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _captions() -> tuple[dict[str, str], dict[str, list[str]]]:
    """Candidates of ~40, ~150 and ~300 tokens (with the prompt), references short and long."""
    words = ("dog red grass park man woman street car blue sky tree water bike hat ball child "
             "table chair window house").split()
    rng = np.random.default_rng(3)

    def text(n):
        return " ".join(rng.choice(words, n))

    cands = {"c40": text(38), "c150": text(148), "c300": text(298)}
    refs = {"c40": [text(12), text(80)], "c150": [text(30), text(270)], "c300": [text(250), text(5)]}
    return cands, refs


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """The released-layout ``.pt`` and the images, from the official ``CLIP`` when available
    (else from the same random tensors, laid out by hand)."""
    tmp = tmp_path_factory.mktemp("longclip")
    folder = _official_source(tmp)
    gen = torch.Generator().manual_seed(0)
    images = {f"c{n}": np.asarray(torch.randint(0, 256, (32, 32, 3), generator=gen), dtype=np.uint8)
              for n in (40, 150, 300)}
    state = _random_state(gen)
    if folder is not None:
        official = _load_module(folder, "model_longclip")
        model = official.CLIP(**SIZES, load_from_clip=False)
        model.load_state_dict(state)
        official.convert_weights(model)  # what build_model leaves: the released file's dtypes
        state = model.state_dict()
    path = tmp / "tiny-longclip.pt"
    torch.save(state, path)
    return path, images, folder


def _random_state(gen) -> dict:
    """Every tensor of a Long-CLIP state dict, random (LayerNorms near 1, biases small)."""
    from capeval.models.clip.model import CLIP, get_config

    cfg = get_config("LongCLIP-ViT-B-16", embed_dim=64, image_size=32, vision_width=128, vision_layers=2,
                     vision_heads=2, text_width=128, text_layers=2, text_heads=2)
    out = {}
    for key, value in CLIP(cfg).state_dict().items():
        noise = torch.randn(value.shape, generator=gen)
        if key.endswith(("ln_1.weight", "ln_2.weight", "ln_pre.weight", "ln_post.weight", "ln_final.weight")):
            out[key] = 1 + 0.1 * noise
        elif key == "logit_scale":
            out[key] = torch.tensor(4.6052)
        else:
            std = 0.1 if "embedding" in key else value.shape[-1] ** -0.5 if value.dim() >= 2 else 0.02
            out[key] = noise * std
    # a shared direction in both towers' outputs (through the final LayerNorms' biases) keeps
    # most cosines positive, so CLIP-S is not clamped to 0
    u = torch.randn(out["text_projection"].shape[1], generator=gen)
    for ln, proj in (("ln_final", "text_projection"), ("visual.ln_post", "visual.proj")):
        out[ln + ".bias"][0] = 4.0
        out[proj][0] = u
    return out


def _ours(path, images):
    from capeval.metrics.clip_score import ClipScore

    cands, refs = _captions()
    scorer = ClipScore(backbone=_backbone(path))
    report = scorer.score(cands, refs, images=images)
    return report["clip-s"], report["ref-clip-s"]


def _backbone(path):
    from capeval.models.clip.backbone import load_backbone

    return load_backbone(path, tokenizer=real_vocab())


def _pixels(images) -> torch.Tensor:
    """CLIP's normalisation of 32x32 images (resize and centre crop are the identity at 32)."""
    mean = np.array([0.48145466, 0.4578275, 0.40821073])
    std = np.array([0.26862954, 0.26130258, 0.27577711])
    arr = np.stack([(images[k] / 255.0 - mean) / std for k in sorted(images, key=lambda k: int(k[1:]))])
    return torch.from_numpy(arr.transpose(0, 3, 1, 2).copy())


def _scores(img: np.ndarray, cand: np.ndarray, refs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """CLIP-S and RefCLIP-S (Hessel et al. 2021) in float64 from unnormalised features."""
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    img, cand = unit(img), unit(cand)
    clip = W * np.maximum(np.sum(img * cand, axis=1), 0)
    best = np.array([max(0.0, float(np.max(unit(r) @ c))) for r, c in zip(refs, cand)])
    ref = np.where(clip + best > 0, 2 * clip * best / np.where(clip + best > 0, clip + best, 1), 0)
    return clip, ref


def _keys():
    return ["c40", "c150", "c300"]


def _texts():
    cands, refs = _captions()
    return [PROMPT + cands[k] for k in _keys()], [[PROMPT + r for r in refs[k]] for k in _keys()]


def test_token_lengths_cover_short_long_and_past_248():
    lengths = [len(x) for x in openai_tokenize(_texts()[0], context_length=10_000)]
    assert lengths[0] == 40 + 3 and 77 < lengths[1] < 248 < lengths[2]


def test_clip_s_and_ref_clip_s_equal_official_longclip(released):
    path, images, folder = released
    if folder is None:
        pytest.skip("official Long-CLIP code not found: set CAPEVAL_LONGCLIP_SRC to a beichenzbc/Long-CLIP checkout")
    official = _load_module(folder, "model_longclip")
    tok = _load_module(folder, "simple_tokenizer").SimpleTokenizer(str(folder / "bpe_simple_vocab_16e6.txt.gz"))
    # longclip.load: torch.load -> build_model(load_from_clip=False) -> .float() on the CPU
    model = official.build_model(torch.load(path, map_location="cpu"), load_from_clip=False).float()

    def tokenize(texts):  # longclip.tokenize(texts, truncate=True): 248 ids, the 248th made EOT
        sot, eot = tok.encoder["<|startoftext|>"], tok.encoder["<|endoftext|>"]
        out = torch.zeros(len(texts), 248, dtype=torch.int)
        for i, t in enumerate(texts):
            ids = [sot, *tok.encode(t), eot]
            if len(ids) > 248:
                ids = ids[:248]
                ids[-1] = eot
            out[i, : len(ids)] = torch.tensor(ids)
        return out

    cands, refs = _texts()
    with torch.no_grad():
        img = model.encode_image(_pixels(images).float()).double().numpy()
        cand = model.encode_text(tokenize(cands)).double().numpy()
        ref = [model.encode_text(tokenize(r)).double().numpy() for r in refs]
    _compare(*_scores(img, cand, ref), *_ours(path, images), "official model_longclip.py")


def _compare(clip, ref, got_clip, got_ref, what):
    for k, key in enumerate(_keys()):
        print(f"{what}: {key}: CLIP-S {clip[k]:.6f} (capeval {got_clip.items[key]:.6f}), "
              f"RefCLIP-S {ref[k]:.6f} (capeval {got_ref.items[key]:.6f})")
        assert got_clip.items[key] == pytest.approx(clip[k], abs=TOL)
        assert got_ref.items[key] == pytest.approx(ref[k], abs=TOL)
    assert got_clip.extras["truncated_candidates"] == 1  # the 300-token caption
    assert got_ref.extras["truncated_references"] == 2  # the 270- and 250-word references
    assert got_clip.signature.fields["trunc"] == "248:keep-first+eot"


# -- an independent float64 transcription (runs in CI) ---------------------------------------

def _ln(x, state, key):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * state[key + ".weight"] + state[key + ".bias"]


def _block(x, state, key, heads, mask):
    """One pre-LN residual block of OpenAI's CLIP: x (L, D) in float64."""
    h = _ln(x, state, key + ".ln_1")
    qkv = h @ state[key + ".attn.in_proj_weight"].T + state[key + ".attn.in_proj_bias"]
    q, k, v = np.split(qkv, 3, axis=-1)
    d = x.shape[-1] // heads
    outs = []
    for j in range(heads):
        s = q[:, j * d:(j + 1) * d] @ k[:, j * d:(j + 1) * d].T / np.sqrt(d) + mask
        p = np.exp(s - s.max(-1, keepdims=True))
        outs.append((p / p.sum(-1, keepdims=True)) @ v[:, j * d:(j + 1) * d])
    x = x + np.concatenate(outs, -1) @ state[key + ".attn.out_proj.weight"].T + state[key + ".attn.out_proj.bias"]
    h = _ln(x, state, key + ".ln_2") @ state[key + ".mlp.c_fc.weight"].T + state[key + ".mlp.c_fc.bias"]
    h = h / (1 + np.exp(-1.702 * h))
    return x + h @ state[key + ".mlp.c_proj.weight"].T + state[key + ".mlp.c_proj.bias"]


def _text64(ids: list[int], state) -> np.ndarray:
    """The paper's text tower at the full 248 positions: row p of the positions is row p of
    ``positional_embedding`` for p < 20, of ``positional_embedding_res`` otherwise."""
    padded = np.zeros(248, dtype=int)
    padded[: len(ids)] = ids
    pos = np.concatenate([state["positional_embedding"][:20], state["positional_embedding_res"][20:]])
    x = state["token_embedding.weight"][padded] + pos
    mask = np.triu(np.full((248, 248), -np.inf), 1)
    for i in range(2):
        x = _block(x, state, f"transformer.resblocks.{i}", 2, mask)
    return _ln(x, state, "ln_final")[int(np.argmax(padded))] @ state["text_projection"]


def _image64(px: np.ndarray, state) -> np.ndarray:
    w = state["visual.conv1.weight"]  # (D, 3, 16, 16)
    patches = [px[:, r:r + 16, c:c + 16].ravel() for r in (0, 16) for c in (0, 16)]
    x = np.stack(patches) @ w.reshape(w.shape[0], -1).T
    x = np.concatenate([state["visual.class_embedding"][None], x]) + state["visual.positional_embedding"]
    x = _ln(x, state, "visual.ln_pre")
    for i in range(2):
        x = _block(x, state, f"visual.transformer.resblocks.{i}", 2, 0.0)
    return _ln(x[0], state, "visual.ln_post") @ state["visual.proj"]


def test_clip_s_and_ref_clip_s_equal_float64_transcription(released):
    path, images, _ = released
    state = {k: v.double().numpy() for k, v in torch.load(path, weights_only=True).items()}
    cands, refs = _texts()
    # the real vocabulary, tokenised and truncated as longclip.tokenize(truncate=True) does
    img = np.stack([_image64(p, state) for p in _pixels(images).numpy()])
    cand = np.stack([_text64(ids, state) for ids in openai_tokenize(cands, 248)])
    ref = [np.stack([_text64(ids, state) for ids in openai_tokenize(r, 248)]) for r in refs]
    _compare(*_scores(img, cand, ref), *_ours(path, images), "float64 transcription")


def test_loader_recognises_a_longclip_file_by_its_keys(released):
    path, _, _ = released
    bb = _backbone(path)
    assert bb.context_length == 248 and bb.model.config.keep_positions == 20
    assert bb.signature["trunc"] == "248:keep-first+eot"


def test_longclip_names_are_checkpoints():
    from capeval.models.clip import checkpoints as ck

    for name, fname, arch in (("longclip/ViT-B-16", "longclip-B.pt", "LongCLIP-ViT-B-16"),
                              ("longclip/ViT-L-14", "longclip-L.pt", "LongCLIP-ViT-L-14")):
        entry = ck.get_checkpoint(name)
        assert entry.filename == fname and entry.arch == arch and entry.urls[0].endswith(fname)
        assert "huggingface.co/BeichenZhang/LongCLIP-" in entry.urls[0]


def test_positions_pick_rows_exactly():
    from capeval.models.clip.model import build_model, get_config

    cfg = get_config("LongCLIP-ViT-B-16", embed_dim=16, image_size=32, patch_size=16, vision_width=32,
                     vision_layers=1, vision_heads=2, text_width=32, text_layers=1, text_heads=2, vocab_size=50)
    m = build_model(cfg, seed=1)
    pos = m.positions(248)
    assert torch.equal(pos[:20], m.positional_embedding[:20])
    assert torch.equal(pos[20:], m.positional_embedding_res[20:])
    assert torch.equal(m.positions(12), m.positional_embedding[:12])


def test_hf_export_folds_the_two_position_tables(released, tmp_path):
    """``export_hf`` of a Long-CLIP: transformers' ``CLIPModel`` (one 248-row table) gives the
    same text features, past position 20 included."""
    transformers = pytest.importorskip("transformers")
    from capeval.models.clip.export_hf import export_hf

    path, _, _ = released
    bb = _backbone(path)
    hf = transformers.CLIPModel.from_pretrained(str(export_hf(bb, tmp_path / "hf"))).eval()
    ids, _ = bb.tokenize(_texts()[0])
    with torch.no_grad():
        for row in ids:
            got = hf.get_text_features(input_ids=torch.tensor([row]))
            got = getattr(got, "pooler_output", got)
            ours = bb.encode_texts([row])
            assert torch.allclose(got.float(), ours, atol=1e-4), (len(row), (got - ours).abs().max())
