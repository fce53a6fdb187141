"""The one scorer contract: routing from declarations, load once / score many, corpus fitting."""

from __future__ import annotations

import random

import numpy as np
import pytest

import capeval
from capeval import registry
from capeval.errors import InputError
from capeval.metrics.cider import CiderD

from _reference import require_module


def _random_set(seed: int, n: int = 40) -> tuple[dict[str, str], dict[str, list[str]]]:
    rng = random.Random(seed)
    words = "a dog cat runs the on grass red blue man two people ride bikes street".split()

    def sent() -> str:
        return " ".join(rng.choices(words, k=rng.randint(1, 9)))

    cands = {f"i{k}": sent() for k in range(n)}
    refs = {f"i{k}": [sent() for _ in range(rng.randint(1, 5))] for k in range(n)}
    cands["i0"] = refs["i0"][0]  # a candidate equal to a reference
    cands["i1"] = "zebra"  # no overlap at all
    return cands, refs


# -- declarations -------------------------------------------------------------------------------

def test_every_spec_declares_inputs_range_direction():
    for name, spec in registry.metrics().items():
        assert spec.needs <= spec.accepts <= registry.INPUTS, name
        assert spec.direction in ("higher", "lower", "none"), name  # none: a diagnostic (length, vocab)
        assert len(spec.range) == 2, name
        if name.startswith("ref-"):
            assert "references" in spec.needs, name


def test_text_only_request_refuses_media_it_would_ignore():
    cands, refs = _random_set(0, 5)
    with pytest.raises(InputError, match="images given, but none of the metrics bleu-1 uses them"):
        capeval.score(cands, refs, metrics="bleu-1", images="somewhere")


def test_shared_options_reach_only_scorers_that_take_them():
    cands, refs = _random_set(1, 5)
    ev = capeval.Evaluator("bleu-4,cider-d", workers=1)  # no text scorer here has parallel stages
    ev.score(cands, refs)
    with pytest.raises(InputError, match="'batch_size' is taken by none of the metrics"):
        capeval.Evaluator("bleu-4", batch_size=3)
    with pytest.raises(InputError, match="workers must be a positive integer"):
        capeval.Evaluator("bleu-4", workers=0)


def test_per_metric_keyword_options():
    cands, refs = _random_set(2, 8)
    a = capeval.Evaluator("cider-d", cider_d={"sigma": 3.0}).score(cands, refs)["cider-d"]
    b = capeval.score(cands, refs, metrics="cider-d", options={"cider-d": {"sigma": 3.0}})["cider-d"]
    assert dict(a.items) == dict(b.items) and "sigma:3.0" in str(a.signature)


# -- load once, score many ---------------------------------------------------------------------

@pytest.fixture
def counted_loads(monkeypatch):
    """load_backbone replaced by a tiny random CLIP; returns the list of names loaded."""
    pytest.importorskip("torch")
    from capeval.models.clip import backbone as bbmod

    calls: list[str] = []
    cache: dict[str, object] = {}

    def fake_load(name, device="cpu", **kwargs):
        calls.append(str(name))
        if "tiny" not in cache:
            cache["tiny"] = bbmod.random_backbone("tiny", seed=3)
        return cache["tiny"]

    monkeypatch.setattr(bbmod, "load_backbone", fake_load)
    return calls


def _frames(seed: int, n: int = 4):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, size=(n, 40, 48, 3), dtype=np.uint8)


def _images(ids, seed: int = 0):
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(seed)
    return {i: Image.fromarray(rng.integers(0, 255, size=(36, 44, 3), dtype=np.uint8)) for i in ids}


def test_mixed_image_and_video_metrics_in_one_call(counted_loads):
    pytest.importorskip("av")
    cands = {"a": "a red square on a table", "b": "two people ride bikes"}
    refs = {"a": ["a square that is red"], "b": ["people riding bicycles", "two cyclists"]}
    images = _images(cands)
    videos = {k: _frames(i) for i, k in enumerate(cands)}
    report = capeval.score(cands, refs, metrics="clip-s,emscore,ref-clip-s,bleu-1", images=images, videos=videos)
    assert list(report) == ["clip-s", "emscore", "ref-clip-s", "bleu-1"]
    assert counted_loads == ["openai/ViT-B-32"]  # clip-s and emscore share one backbone
    alone_clip = capeval.score(cands, refs, metrics="clip-s,ref-clip-s", images=images)["clip-s"]
    alone_video = capeval.score(cands, refs, metrics="emscore", videos=videos)["emscore"]
    assert dict(report["clip-s"].items) == dict(alone_clip.items)
    assert dict(report["emscore"].items) == dict(alone_video.items)


def test_evaluator_loads_its_backbone_once_for_three_batches(counted_loads):
    ev = capeval.Evaluator("clip-s,ref-clip-s,pac-s")
    assert sorted(counted_loads) == ["openai/ViT-B-32", "pac-s/ViT-B-32"] and ev.loads == 2
    firsts = []
    for seed in range(3):
        cands = {f"{seed}-{k}": f"caption {k} of batch {seed}" for k in range(3)}
        refs = {i: [f"a reference for {i}"] for i in cands}
        rep = ev.score(cands, refs, images=_images(cands, seed))
        firsts.append(list(rep["ref-clip-s"].items))
    assert len(counted_loads) == 2 and ev.loads == 2  # nothing reloaded by the second and third call
    assert firsts == [[f"{s}-{k}" for k in range(3)] for s in range(3)]


def test_bench_shares_one_cache_across_evaluators(counted_loads):
    from capeval.models.cache import ModelCache

    cache = ModelCache()
    capeval.Evaluator("clip-s", cache=cache)
    capeval.Evaluator("ref-clip-s", cache=cache)
    assert counted_loads == ["openai/ViT-B-32"] and cache.loads == 1


# -- corpus statistics ------------------------------------------------------------------------------

def test_cider_fit_on_own_references_is_the_unfitted_score():
    for seed in range(5):
        cands, refs = _random_set(seed)
        plain = CiderD(tokenizer="none").score(cands, refs)["cider-d"]
        fitted = CiderD(tokenizer="none").fit(refs).score(cands, refs)["cider-d"]
        assert dict(plain.items) == dict(fitted.items)
        assert "df:fitted(n=40," in str(fitted.signature) and "df:corpus" in str(plain.signature)


def test_cider_fitted_corpus_matches_pycocoevalcap_on_the_corpus():
    """Fitting on a corpus and scoring a subset = pycocoevalcap scoring the whole corpus, whose
    document frequencies and N are those of the corpus (independent oracle)."""
    require_module("pycocoevalcap", "pycocoevalcap is the CIDEr-D reference")
    from pycocoevalcap.cider.cider_scorer import CiderScorer

    for seed in range(5):
        cands, refs = _random_set(seed + 10, n=60)
        ref_scorer = CiderScorer(n=4, sigma=6.0)
        for i in cands:
            ref_scorer += (cands[i], refs[i])
        _, oracle = ref_scorer.compute_score()
        oracle = dict(zip(cands, oracle))
        subset = [i for k, i in enumerate(cands) if k % 3 == 0]
        fitted = CiderD(tokenizer="none").fit(refs)
        got = fitted.score({i: cands[i] for i in subset}, {i: refs[i] for i in subset})["cider-d"]
        for i in subset:
            assert got.items[i] == pytest.approx(oracle[i], abs=1e-12), (seed, i)
        # the fitted statistics stay fixed over many batches
        again = fitted.score({i: cands[i] for i in subset[:3]}, {i: refs[i] for i in subset[:3]})["cider-d"]
        assert [again.items[i] for i in subset[:3]] == [got.items[i] for i in subset[:3]]


def test_evaluator_fit_reaches_every_scorer_and_text_metrics_ignore_it():
    cands, refs = _random_set(7)
    ev = capeval.Evaluator("bleu-4,cider-d", options={"bleu": {"tokenizer": "none"}, "cider-d": {"tokenizer": "none"}})
    before = ev.score(cands, refs)
    ev.fit(list(refs.values()))
    after = ev.score(cands, refs)
    assert dict(before["bleu-4"].items) == dict(after["bleu-4"].items)
    assert dict(before["cider-d"].items) == dict(after["cider-d"].items)


def test_emscore_fit_equals_idf_from_the_same_references(counted_loads):
    pytest.importorskip("av")
    cands = {"a": "a red square on a table", "b": "two people ride bikes", "c": "a dog"}
    refs = {"a": ["a square that is red"], "b": ["people riding bicycles", "two cyclists"], "c": ["a dog runs"]}
    videos = {k: _frames(i) for i, k in enumerate(cands)}
    plain = capeval.load("emscore", backbone="x", idf="references").score(cands, refs, videos=videos)["emscore"]
    fitted = capeval.load("emscore", backbone="x").fit(refs).score(cands, videos=videos)["emscore"]
    assert dict(plain.items) == dict(fitted.items)
    assert "corpus(n=4," in str(fitted.signature)


def test_preset_names_never_shadow_metric_names():
    from capeval import registry

    metrics = registry.metrics()
    names = set(metrics) | {a for s in metrics.values() for a in s.aliases}
    assert not names & set(registry.presets()), "a preset with a metric's name would hide the metric"
    for preset, members in registry.presets().items():
        assert members and all(m in metrics for m in members), preset
