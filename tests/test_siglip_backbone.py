"""SigLIP backbone: embeddings equal transformers' own SiglipModel forward, and CLIP-S on it equals
w * max(cos, 0) computed from transformers' outputs (tiny random SiglipConfig, built here).

Both sides run the same float32 modules on the same inputs in the same batch shapes, so the
embeddings agree to float32 rounding of identical ops (compared with a float32-ulp-scale bound
that holds on any CPU: 1e-5 on features of unit scale; the CLIP-S step is float32 numpy).
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytest.importorskip("PIL")

from bertscore_models import tiny_roberta  # noqa: E402  (a tokenizer to save next to the model)

from capeval.models.clip.backbone import load_backbone  # noqa: E402
from capeval.models.clip.siglip import SiglipBackbone  # noqa: E402

TEXTS = ["a dog runs on the grass", "the cat sits", "two children play with a ball in the park"]


@pytest.fixture(scope="module")
def siglip_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("siglip")
    tiny_roberta(folder / "tok")
    tok = tf.AutoTokenizer.from_pretrained(str(folder / "tok"))
    tok.save_pretrained(str(folder))
    torch.manual_seed(0)
    cfg = tf.SiglipConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                         bos_token_id=None, eos_token_id=None),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8))
    tf.SiglipModel(cfg).save_pretrained(str(folder))
    tf.SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(str(folder))
    return folder


def _images(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = {}
    for k, size in enumerate([(50, 40), (31, 64), (32, 32)]):
        p = tmp_path / f"{k}.png"
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(p)
        paths[str(k)] = p
    return paths


def _reference(folder, texts, paths):
    from PIL import Image

    model = tf.SiglipModel.from_pretrained(str(folder)).eval()
    tok = tf.AutoTokenizer.from_pretrained(str(folder))
    proc = tf.SiglipImageProcessor.from_pretrained(str(folder))
    with torch.no_grad():
        t = model.get_text_features(**tok(texts, padding="max_length", max_length=64, truncation=True,
                                          return_tensors="pt"))
        i = model.get_image_features(**proc(images=[Image.open(p).convert("RGB") for p in paths], return_tensors="pt"))
    t, i = getattr(t, "pooler_output", t), getattr(i, "pooler_output", i)
    return t.numpy(), i.numpy()


def test_embeddings_equal_transformers(siglip_dir, tmp_path):
    paths = _images(tmp_path)
    bb = load_backbone(str(siglip_dir))
    assert isinstance(bb, SiglipBackbone) and bb.signature["arch"] == "siglip"
    ids, cut = bb.tokenize(TEXTS)
    assert cut == 0 and all(len(x) < 64 for x in ids)  # padded to 64 by encode_texts
    ours_t = bb.encode_texts(ids).numpy()
    ours_i = bb.encode_images(torch.stack([bb.load_image(p) for p in paths.values()])).numpy()
    ref_t, ref_i = _reference(siglip_dir, TEXTS, list(paths.values()))
    assert np.abs(ours_t - ref_t).max() <= 1e-5 and np.abs(ours_i - ref_i).max() <= 1e-5


def test_clip_s_on_siglip_equals_formula(siglip_dir, tmp_path):
    from capeval.metrics.clip_score import PROMPT, ClipScore

    paths = _images(tmp_path)
    res = ClipScore(metrics=("clip-s",), backbone=str(siglip_dir)).score({k: TEXTS[int(k)] for k in paths}, images=paths)["clip-s"]
    ref_t, ref_i = _reference(siglip_dir, [PROMPT + t for t in TEXTS], list(paths.values()))
    cos = np.sum(ref_t * ref_i, 1) / np.linalg.norm(ref_t, axis=1) / np.linalg.norm(ref_i, axis=1)
    expected = 2.5 * np.maximum(cos, 0)
    assert np.abs(np.array([res.items[k] for k in paths]) - expected).max() <= 1e-5
    assert f"backbone:{siglip_dir}" in str(res.signature) and "arch:siglip" in str(res.signature)


def test_text_without_attention_mask_as_siglip_tokenizer(siglip_dir):
    """SigLIP's own tokenizer returns input_ids only: the padded positions are attended to."""
    bb = load_backbone(str(siglip_dir))
    bb.tokenizer.model_input_names = ["input_ids"]
    ids, _ = bb.tokenize(TEXTS)
    ours = bb.encode_texts(ids).numpy()
    model = tf.SiglipModel.from_pretrained(str(siglip_dir)).eval()
    padded = [x + [bb.tokenizer.pad_token_id] * (64 - len(x)) for x in ids]
    with torch.no_grad():
        ref = model.get_text_features(input_ids=torch.tensor(padded))
    ref = getattr(ref, "pooler_output", ref).numpy()
    assert np.abs(ours - ref).max() <= 1e-5


@pytest.mark.parametrize("with_mask", [True, False])
def test_text_mask_is_the_tokenizers_own_with_pad_equal_to_eos(siglip_dir, tmp_path, with_mask):
    """SigLIP's pad token is its EOS: equal to get_text_features(**tokenizer(..., padding="max_length",
    max_length=64)) whether the tokenizer returns a mask (the EOS stays attended) or not."""
    import shutil

    folder = tmp_path / "siglip-pad-eos"
    shutil.copytree(siglip_dir, folder)
    tok = tf.AutoTokenizer.from_pretrained(str(siglip_dir))
    tok.pad_token = tok.eos_token
    tok.save_pretrained(str(folder))
    texts = [*TEXTS, "a", " ".join(["two children play with a ball in the park"] * 12)]  # the last is cut at 64
    bb = load_backbone(str(folder))
    ref_tok = tf.AutoTokenizer.from_pretrained(str(folder))
    assert bb.tokenizer.pad_token_id == bb.tokenizer.eos_token_id
    if not with_mask:
        bb.tokenizer.model_input_names = ref_tok.model_input_names = ["input_ids"]
    ids, cut = bb.tokenize(texts)
    assert cut == 1
    ours = bb.encode_texts(ids).numpy()
    model = tf.SiglipModel.from_pretrained(str(folder)).eval()
    inputs = ref_tok(texts, padding="max_length", max_length=64, truncation=True, return_tensors="pt")
    assert ("attention_mask" in inputs) == with_mask
    with torch.no_grad():
        ref = model.get_text_features(**inputs)
    ref = getattr(ref, "pooler_output", ref).numpy()
    assert np.abs(ours - ref).max() <= 1e-5


@pytest.fixture(scope="module")
def siglip_spm_dir(siglip_dir, tmp_path_factory):
    """The tiny SigLIP with SigLIP v1's own tokenizer class (a sentencepiece model trained here)."""
    import shutil

    spm = pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("siglip-spm")
    shutil.copytree(siglip_dir, folder, dirs_exist_ok=True)
    for f in folder.glob("*.json"):
        if f.name not in ("config.json", "preprocessor_config.json"):
            f.unlink()
    for f in ("vocab.json", "merges.txt"):
        (folder / f).unlink(missing_ok=True)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS * 20), model_prefix=str(tmp_path_factory.mktemp("spm") / "spiece"),
                                   vocab_size=40, hard_vocab_limit=False, minloglevel=2)
    model_file = next(iter(tmp_path_factory.getbasetemp().glob("spm*/spiece.model")))
    tf.SiglipTokenizer(vocab_file=str(model_file)).save_pretrained(str(folder))
    return folder


def test_siglip_tokenizer_without_sentencepiece_is_one_line(siglip_spm_dir, tmp_path):
    """SigLIP v1's tokenizer loads with sentencepiece (the hf extra brings it); without it (simulated:
    the module blocked in a subprocess) the CLI says so in one line naming the extra, exit 2."""
    import json
    import subprocess
    import sys

    assert type(load_backbone(str(siglip_spm_dir)).tokenizer).__name__ == "SiglipTokenizer"
    (tmp_path / "c.json").write_text(json.dumps({"0": "a dog"}))
    (tmp_path / "0.png").write_bytes(b"")  # never read: the backbone fails to load first
    code = ("import sys; sys.modules['sentencepiece'] = None\n"
            "from capeval.cli.main import main\n"
            f"sys.exit(main(['score', '--metrics', 'clip-s', '-c', {str(tmp_path / 'c.json')!r}, '--images', "
            f"{str(tmp_path)!r}, '-O', 'clip-s.backbone={siglip_spm_dir}']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    lines = [x for x in out.stderr.splitlines() if x.startswith("capeval: error:")]
    assert out.returncode == 2, out.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "SentencePiece" in lines[0] and 'pip install ".[hf]"' in lines[0], lines[0]


def test_siglip_v1_tokenizer_text_features(siglip_spm_dir):
    """SigLIP v1's own tokenizer (pad = EOS, and it returns a mask) as the
    model cards call it: get_text_features(**tokenizer(texts, padding="max_length", max_length=64))."""
    bb = load_backbone(str(siglip_spm_dir))
    tok = tf.AutoTokenizer.from_pretrained(str(siglip_spm_dir))
    assert tok.pad_token_id == tok.eos_token_id
    texts = [*TEXTS, "a"]
    ours = bb.encode_texts(bb.tokenize(texts)[0]).numpy()
    model = tf.SiglipModel.from_pretrained(str(siglip_spm_dir)).eval()
    with torch.no_grad():
        ref = model.get_text_features(**tok(texts, padding="max_length", max_length=64, truncation=True,
                                            return_tensors="pt"))
    ref = getattr(ref, "pooler_output", ref).numpy()
    assert np.abs(ours - ref).max() <= 1e-5
