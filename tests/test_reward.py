"""capeval.reward.Reward: the numbers of capeval.score, built once, nothing loaded per call."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import capeval
from capeval.errors import InputError
from capeval.reward import Reward, parse_weights

CAPS = ["a red square on a table", "a blue circle", "two people ride bikes", "a red red square",
        "a dog on grass", "the man with a"]
IMG = ["x", "x", "y", "y", "z", "z"]  # two beams per image
REFS = {"x": ["a red square", "a square that is red"], "y": ["a blue circle on white"],
        "z": ["a dog runs on the grass", "a brown dog"]}


@pytest.fixture
def tiny_clip(monkeypatch):
    """load_backbone -> one tiny random CLIP (counted); encode_images counted too."""
    pytest.importorskip("torch")
    from capeval.models.clip import backbone as bbmod

    calls: list[str] = []
    encoded: list[int] = []
    bb = bbmod.random_backbone("tiny", seed=3)
    original = bb.encode_images

    def counting(px):
        encoded.append(len(px))
        return original(px)

    bb.encode_images = counting

    def fake_load(name, device="cpu", **kwargs):
        calls.append(str(name))
        return bb

    monkeypatch.setattr(bbmod, "load_backbone", fake_load)
    return calls, encoded


def _images():
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    return {k: Image.fromarray(rng.integers(0, 255, size=(36, 44, 3), dtype=np.uint8)) for k in REFS}


def _by_item(images):
    cands = {str(k): c for k, c in enumerate(CAPS)}
    refs = {str(k): REFS[IMG[k]] for k in range(len(CAPS))}
    imgs = {str(k): images[IMG[k]] for k in range(len(CAPS))}
    return cands, refs, imgs


def test_parse_weights():
    assert parse_weights({"cider": 0.5, "PAC-S++": 1}) == {"cider-d": 0.5, "pac-s++": 1.0}
    assert parse_weights("clip") == {"clip-s": 1.0, "ref-clip-s": 1.0}
    with pytest.raises(InputError, match="finite"):
        parse_weights({"cider-d": float("nan")})
    with pytest.raises(InputError, match="twice"):
        parse_weights({"cider-d": 1, "ciderd": 2})


def test_cider_reward_equals_capeval_score_and_fit():
    pytest.importorskip("torch")
    cands, refs, _ = _by_item({k: None for k in REFS})
    reward = Reward({"cider-d": 2.0, "bleu-4": 1.0}, fit=refs)
    r = reward(CAPS, [REFS[i] for i in IMG])
    expected = capeval.score(cands, refs, metrics="cider-d,bleu-4")
    got = reward.scores(CAPS, REFS, image_ids=IMG)
    assert got["cider-d"].tolist() == [expected["cider-d"].items[str(k)] for k in range(len(CAPS))]
    assert got["bleu-4"].tolist() == [expected["bleu-4"].items[str(k)] for k in range(len(CAPS))]
    want = 2.0 * got["cider-d"] + got["bleu-4"]
    assert r.dtype.__str__() == "torch.float32" and np.allclose(r.numpy(), want, rtol=1e-6)
    # fitted on a training corpus: df fixed, independent of the batch
    train = Reward("cider-d", fit={f"t{k}": ["a red square", "a dog"] for k in range(20)})
    one = train.scores(CAPS[:2], [REFS["x"]] * 2)["cider-d"]
    both = train.scores(CAPS, [REFS[i] for i in IMG])["cider-d"]
    assert one.tolist() == both[:2].tolist()


def test_mixed_reward_equals_capeval_score_and_loads_once(tiny_clip):
    calls, encoded = tiny_clip
    images = _images()
    metrics = {"pac-s++": 1.0, "ref-pac-s++": 0.25, "clip-s": 0.3, "cider-d": 0.5}
    cands, refs, imgs = _by_item(images)
    reward = Reward(metrics, fit=refs)
    assert reward.loads == 2 and sorted(calls) == ["openai/ViT-B-32", "pac-s++/ViT-B-32"]
    got = reward.scores(CAPS, REFS, image_ids=IMG, images=images)
    expected = capeval.score(cands, refs, metrics=list(metrics), images=imgs)
    for m in metrics:
        want = [expected[m].items[str(k)] for k in range(len(CAPS))]
        assert got[m].tolist() == want, m  # same embeddings, same arithmetic: the same numbers
    n_calls, n_encoded = len(calls), sum(encoded)
    r2 = reward(CAPS, REFS, image_ids=IMG)  # images kept by id: no images, no load, no encoding
    assert len(calls) == n_calls and reward.loads == 2 and sum(encoded) == n_encoded
    total = sum(w * got[m] for m, w in metrics.items())
    np.testing.assert_allclose(r2.numpy(), total, rtol=1e-6)


def test_precomputed_embeddings_are_reused(tiny_clip):
    _, encoded = tiny_clip
    images = _images()
    reward = Reward("clip-s")
    reward.precompute(images)
    n = sum(encoded)
    assert n == 3
    by_id = reward.scores(CAPS, image_ids=IMG)["clip-s"]
    rows = reward.image_embeddings(IMG)
    assert rows.shape == (6, reward.evaluator.scorers["clip-s"].backbone.embed_dim)
    by_array = reward.scores(CAPS, image_embeddings=rows)["clip-s"]
    by_map = reward.scores(CAPS, image_ids=IMG, image_embeddings={k: rows[IMG.index(k)] for k in REFS})["clip-s"]
    assert by_id.tolist() == by_array.tolist() == by_map.tolist() and sum(encoded) == n
    fresh = Reward("clip-s").scores(CAPS, images=[images[i] for i in IMG])["clip-s"]
    np.testing.assert_allclose(fresh, by_id, rtol=1e-6)


def test_empty_caption_gets_zero_from_clip_metrics(tiny_clip):
    reward = Reward("clip-s,ref-clip-s")
    s = reward.scores(["", "a dog"], [["a dog"], ["a dog"]], image_ids=["x", "z"], images=_images())
    assert s["clip-s"][0] == 0.0 and s["ref-clip-s"][0] == 0.0 and s["clip-s"][1] > 0


def test_reward_errors():
    pytest.importorskip("torch")
    reward = Reward("cider-d")
    with pytest.raises(InputError, match="needs references"):
        reward(CAPS)
    with pytest.raises(InputError, match="reference lists"):
        reward(CAPS, [["a"]])
    with pytest.raises(InputError, match="'q': no references"):
        reward(CAPS[:1], REFS, image_ids=["q"])
    with pytest.raises(InputError, match="list of captions"):
        reward("a dog", [["a dog"]])


def test_import_reward_without_torch():
    code = "import sys, capeval.reward; assert not {'torch', 'numpy'} & set(sys.modules), 'heavy import'"
    subprocess.run([sys.executable, "-c", code], check=True)
