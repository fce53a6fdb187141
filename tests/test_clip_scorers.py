"""CLIP-S / RefCLIP-S / PAC-S formulas, end to end on the bundled samples (API and CLI) with a
random tiny CLIP, bad inputs, skipping, no partial output files, and the embedding cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import capeval  # noqa: E402
from capeval.cli.main import main  # noqa: E402
from capeval.models.clip.backbone import random_backbone  # noqa: E402
from capeval.metrics.clip_score import ClipScore, PacScore, PacScorePlusPlus  # noqa: E402
from capeval.errors import InputError  # noqa: E402
from _reference import SHARED_DATA, unavailable  # noqa: E402

SAMPLES = SHARED_DATA / "samples" / "clipscore_example"


class StubBackbone:
    """Embeddings chosen by the test: texts -> given vectors, images -> the array itself."""

    embed_dim = 2
    context_length = 77
    signature = {"backbone": "stub", "arch": "stub"}
    signature_hash = "0" * 64

    def __init__(self, text_vectors: dict[str, list[float]]):
        self.vectors = text_vectors
        self.names = list(text_vectors)

    def tokenize(self, texts):
        return [[self.names.index(t.removeprefix("A photo depicts "))] for t in texts], 0

    def encode_texts(self, ids):
        return torch.tensor([self.vectors[self.names[i[0]]] for i in ids], dtype=torch.float32)

    def load_image(self, image, name=None):
        return torch.as_tensor(image, dtype=torch.float32)

    def encode_images(self, pixels):
        return pixels


def _angle(deg: float) -> list[float]:
    return [float(np.cos(np.radians(deg))), float(np.sin(np.radians(deg)))]


def test_formulas_clamp_harmonic_mean_and_zero_case():
    texts = {"c1": _angle(60), "c2": _angle(120), "c3": _angle(100), "r1": _angle(30), "r2": _angle(80),
             "r3": _angle(270), "c4": _angle(10), "r4": _angle(190)}
    bb = StubBackbone(texts)
    images = {k: np.array(_angle(0)) for k in ("a", "b", "c", "d")}
    cands = {"a": "c1", "b": "c2", "c": "c3", "d": "c4"}
    refs = {"a": ["r1", "r2"], "b": ["r3"], "c": ["r1"], "d": ["r4"]}
    rep = ClipScore(backbone=bb).score(cands, refs, images=images)
    clip = rep["clip-s"].items
    assert clip["a"] == pytest.approx(2.5 * 0.5, abs=1e-6)  # w * cos(60)
    assert clip["b"] == 0.0 and clip["c"] == 0.0  # negative cosine clamped at 0
    ref = rep["ref-clip-s"].items
    p, t = 2.5 * 0.5, float(np.cos(np.radians(20)))  # best reference: r2, 20 degrees from c1 (r1 is 30)
    assert ref["a"] == pytest.approx(2 * p * t / (p + t), abs=1e-6)
    # b: p = 0, t = max(0, cos(150)) = 0 -> 0 (the reference code gives NaN)
    assert ref["b"] == 0.0 and not np.isnan(ref["b"])
    # d: p > 0 but the reference similarity is negative -> clamped -> harmonic mean 0
    assert rep["clip-s"].items["d"] > 0 and ref["d"] == 0.0
    assert rep["ref-clip-s"].extras["ref_similarity"]["b"] == 0.0
    assert rep["clip-s"].system == pytest.approx(np.mean(list(clip.values())))
    assert PacScore(backbone=bb).w == 2.0


def _stub_arch(arch: str) -> StubBackbone:
    bb = StubBackbone({"c": _angle(30), "r": _angle(50)})
    bb.signature = {"backbone": "x", "arch": arch}
    return bb


@pytest.mark.parametrize(("arch", "paper"), [("ViT-B-32", 2.5), ("ViT-L-14", 3.0)])
def test_pac_s_plus_plus_w_code_default_and_paper_option(arch, paper):
    # default: the released evaluation code's w (pacscore compute_correlations.py: PACScore(..., w=2.0))
    bb = _stub_arch(arch)
    default = PacScorePlusPlus(backbone=bb)
    assert (default.w, default.w_from) == (2.0, "code")
    assert (PacScorePlusPlus(backbone=bb, w="code").w, PacScorePlusPlus(backbone=bb, w="code").w_from) == (2.0, "code")
    paper_scorer = PacScorePlusPlus(backbone=bb, w="paper")
    assert (paper_scorer.w, paper_scorer.w_from) == (paper, "paper")
    assert (PacScorePlusPlus(backbone=bb, w=2.7).w, PacScorePlusPlus(backbone=bb, w="2.7").w_from) == (2.7, "user")
    image = {"a": np.array(_angle(0))}
    got = {}
    for name, scorer in (("code", default), ("paper", paper_scorer)):
        rep = scorer.score({"a": "c"}, {"a": ["r"]}, images=image)
        got[name] = rep
        sig = str(rep["ref-pac-s++"].signature)
        assert f"w:{scorer.w}" in sig and f"w_from:{name}" in sig
    cos = float(np.cos(np.radians(30)))
    assert got["code"]["pac-s++"].items["a"] == pytest.approx(2.0 * cos, abs=1e-6)
    assert got["paper"]["pac-s++"].items["a"] == pytest.approx(paper * cos, abs=1e-6)
    # w rescales the reference-free score but changes the harmonic mean non-linearly
    t = float(np.cos(np.radians(20)))
    for name, w in (("code", 2.0), ("paper", paper)):
        p = w * cos
        assert got[name]["ref-pac-s++"].items["a"] == pytest.approx(2 * p * t / (p + t), abs=1e-6)


def test_pac_s_plus_plus_w_bad_values_are_named():
    with pytest.raises(InputError, match=r"w='paper'.*ViT-B/32 \(2\.5\).*ViT-L/14 \(3\.0\).*stub-arch"):
        PacScorePlusPlus(backbone=_stub_arch("stub-arch"), w="paper")
    for bad in ("papr", -1, 0, "nan", True):
        with pytest.raises(InputError, match=r"pac-s\+\+ option w"):
            PacScorePlusPlus(backbone=_stub_arch("ViT-B-32"), w=bad)
    with pytest.raises(InputError, match=r"pac-s option w"):
        PacScore(backbone=_stub_arch("ViT-B-32"), w="paper")  # only PAC-S++ has two published values


def test_pac_s_plus_plus_paper_w_from_the_model_shape():
    # a checkpoint loaded by path has arch "inferred": the paper value comes from the architecture
    bb = random_backbone("ViT-B-32", seed=0)
    bb.signature = dict(bb.signature, arch="inferred")
    assert PacScorePlusPlus(backbone=bb, w="paper").w == 2.5


@pytest.fixture(scope="module")
def tiny():
    return random_backbone("tiny", seed=7)


@pytest.fixture(scope="module")
def sample():
    if not SAMPLES.is_dir():
        unavailable(f"CLIPScore example samples not found: {SAMPLES}")
    return (json.loads((SAMPLES / "good_captions.json").read_text()),
            json.loads((SAMPLES / "bad_captions.json").read_text()),
            json.loads((SAMPLES / "refs.json").read_text()))


def _manual(bb, cands, refs, w):
    out, outref = {}, {}
    for i, c in cands.items():
        v = bb.encode_images(bb.load_image(SAMPLES / "images" / f"{i}.jpg")[None])[0]
        ids, _ = bb.tokenize(["A photo depicts " + c] + ["A photo depicts " + r for r in refs[i]])
        t = bb.encode_texts(ids)
        v, t = v / v.norm(), t / t.norm(dim=1, keepdim=True)
        p = w * max(float(t[0] @ v), 0.0)
        s = max(0.0, float((t[1:] @ t[0]).max()))
        out[i] = p
        outref[i] = 2 * p * s / (p + s) if p + s > 0 else 0.0
    return out, outref


def test_end_to_end_on_samples_matches_manual_computation(tiny, sample):
    good, bad, refs = sample
    for cands in (good, bad):
        rep = capeval.load("ref-pac-s", backbone=tiny).score(cands, refs, images=SAMPLES / "images")
        scorer = capeval.load("pac-s", backbone=tiny)
        free = scorer.score(cands, images=str(SAMPLES / "images"))
        exp, exp_ref = _manual(tiny, cands, refs, 2.0)
        for i in cands:
            assert free["pac-s"].items[i] == pytest.approx(exp[i], abs=1e-5)
            assert rep["ref-pac-s"].items[i] == pytest.approx(exp_ref[i], abs=1e-5)
        sig = str(rep["ref-pac-s"].signature)
        for part in ("metric:ref-pac-s", "w:2.0", 'prompt:"A photo depicts "', "nrefs:3", "precision:fp32",
                     "img_size:32", "torch:", "trunc:77"):
            assert part in sig


def test_score_api_with_groups(tiny, sample):
    good, _, refs = sample
    rep = capeval.score(good, refs, metrics="clip-s,ref-clip-s,ref-pac-s",
                        options={"clip": {"backbone": tiny}, "pac-s": {"backbone": tiny}}, images=SAMPLES / "images")
    assert list(rep) == ["clip-s", "ref-clip-s", "ref-pac-s"]
    # same backbone: PAC-S = CLIP-S * 2.0 / 2.5
    for i in good:
        assert rep["ref-pac-s"].extras["pac-s"][i] == pytest.approx(rep["clip-s"].items[i] * 2.0 / 2.5, abs=1e-6)


@pytest.fixture()
def saved_tiny(tmp_path, monkeypatch, tiny):
    from capeval.models.clip.tokenizer import write_vocab

    path = tmp_path / "tiny_clip.pth"
    torch.save(tiny.model.state_dict(), path)
    vocab = write_vocab(tmp_path / "vocab", sorted(tiny.tokenizer.ranks, key=tiny.tokenizer.ranks.get))
    monkeypatch.setenv("CAPEVAL_CLIP_VOCAB", str(vocab))
    return path


def _cli(tmp_path, backbone, images, out=None, extra=()):
    args = ["score", "-q", "--metrics", "clip-s,ref-pac-s", "--images", str(images),
            "--candidates", str(SAMPLES / "good_captions.json"), "--references", str(SAMPLES / "refs.json"),
            "--backbone", str(backbone), *extra]
    if out:
        args += ["--out", str(out)]
    return main(args)


def test_cli_end_to_end(tmp_path, saved_tiny, tiny, sample, capsys):
    good, _, refs = sample
    out = tmp_path / "scores.json"
    assert _cli(tmp_path, saved_tiny, SAMPLES / "images", out) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == printed
    api = capeval.score(good, refs, metrics="clip-s,ref-pac-s",
                        options={"clip": {"backbone": tiny}, "pac-s": {"backbone": tiny}}, images=SAMPLES / "images")
    for m in ("clip-s", "ref-pac-s"):
        assert printed["scores"][m] == pytest.approx(api[m].system, abs=1e-6)
        assert "sha256:" in printed["signatures"][m]


def _bad_images_dir(tmp_path: Path) -> Path:
    d = tmp_path / "imgs"
    shutil.copytree(SAMPLES / "images", d)
    data = (d / "image2.jpg").read_bytes()
    (d / "image2.jpg").write_bytes(data[: len(data) // 3])  # truncated JPEG
    return d


def test_cli_failure_leaves_no_output_file(tmp_path, saved_tiny, sample, capsys):
    out = tmp_path / "scores.json"
    assert _cli(tmp_path, saved_tiny, _bad_images_dir(tmp_path), out) == 2
    err = capsys.readouterr().err
    assert "image2" in err and "image2.jpg" in err
    assert not out.exists() and not list(tmp_path.glob(".scores.json*"))
    assert _cli(tmp_path, saved_tiny, _bad_images_dir(tmp_path / "again"), out, ["--skip-bad-items"]) == 0
    report = json.loads(out.read_text())
    assert report["results"][0]["skipped"] == ["image2"] and report["results"][0]["n"] == 1


def test_bad_inputs_name_item_and_file(tmp_path, tiny, sample):
    good, _, refs = sample
    scorer = ClipScore(metrics=("clip-s",), backbone=tiny)
    d = _bad_images_dir(tmp_path)
    with pytest.raises(InputError) as err:
        scorer.score(good, images=d)
    assert err.value.item_id == "image2" and "image2.jpg" in str(err.value)
    (d / "image3.png").write_text("not an image")
    cands = {**good, "image3": "a cat", "image4": "a dog", "image5": "   "}
    (d / "image5.jpg").write_bytes((SAMPLES / "images" / "image1.jpg").read_bytes())
    rep = scorer.score(cands, images=d, skip_bad_items=True)
    assert rep["clip-s"].skipped == ("image2", "image3", "image4", "image5")
    assert list(rep["clip-s"].items) == ["image1"]
    with pytest.raises(InputError, match="image4"):
        scorer.score({"image4": "a dog"}, images=d)
    with pytest.raises(InputError, match="empty"):
        scorer.score({"image5": " "}, images=d)
    arr = {"x": np.zeros((2, 5, 5, 3), dtype=np.uint8)}
    with pytest.raises(InputError) as err:
        scorer.score({"x": "a cat"}, images=arr)
    assert err.value.item_id == "x" and "shape" in str(err.value)
    with pytest.raises(InputError, match="references"):
        capeval.load("ref-clip-s", backbone=tiny).score(good, images=d)


def test_mixed_inputs_and_duplicates(tiny, sample):
    from PIL import Image

    good, _, _ = sample
    p1 = SAMPLES / "images" / "image1.jpg"
    pil = Image.open(p1)
    arr = np.asarray(Image.open(p1).convert("RGB"))
    rep = ClipScore(("clip-s",), backbone=tiny).score({"a": good["image1"], "b": good["image1"], "c": good["image1"]},
                                         images={"a": p1, "b": pil, "c": arr})
    vals = list(rep["clip-s"].items.values())
    assert vals[0] == pytest.approx(vals[1], abs=1e-6) and vals[0] == pytest.approx(vals[2], abs=1e-6)


def test_cache_hit_equals_fresh_computation(tmp_path, tiny, sample, monkeypatch):
    good, _, refs = sample
    scorer = capeval.load("ref-clip-s", backbone=tiny, cache=tmp_path / "cache")
    first = scorer.score(good, refs, images=SAMPLES / "images")
    files = list((tmp_path / "cache").rglob("*.emb"))
    assert len(files) == 2 + 2 + 6  # 2 images, 2 candidates, 6 references
    calls = {"n": 0}

    def boom(*a, **k):
        calls["n"] += 1
        raise AssertionError("the model must not run on a cache hit")

    monkeypatch.setattr(tiny, "encode_images", boom)
    monkeypatch.setattr(tiny, "encode_texts", boom)
    second = scorer.score(good, refs, images=SAMPLES / "images")
    assert dict(second["ref-clip-s"].items) == dict(first["ref-clip-s"].items)
    assert calls["n"] == 0


def test_cli_pac_s_plus_plus_w_option(tmp_path, saved_tiny, sample, capsys):
    base = ["score", "-q", "--metrics", "pac-s++", "--images", str(SAMPLES / "images"),
            "--candidates", str(SAMPLES / "good_captions.json"), "--backbone", str(saved_tiny)]
    assert main([*base, "-O", "pac-s++.w=2.5"]) == 0
    sig = json.loads(capsys.readouterr().out)["signatures"]["pac-s++"]
    assert "w:2.5" in sig and "w_from:user" in sig
    assert main(base) == 0
    sig = json.loads(capsys.readouterr().out)["signatures"]["pac-s++"]
    assert "w:2.0" in sig and "w_from:code" in sig
    # the tiny test model is neither ViT-B/32 nor ViT-L/14: the paper gives no w for it
    assert main([*base, "-O", "pac-s++.w=paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert "w='paper'" in err and len(err.splitlines()) == 1
