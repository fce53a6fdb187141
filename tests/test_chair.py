"""CHAIR against what the official code computes.

tests/data/chair_official.json was written by tools/chair_reference.py, which runs
LisaAnne/Hallucination's utils/chair.py itself (prints turned into calls) with the libraries
its requirements.txt pins: NLTK 3.2.5's word_tokenize (from the PyPI sdist) and Pattern's
singularize (clips/pattern). The cases (tests/_chair_cases.py) are 1,200 random captions
and a random COCO 2014 folder built from the synonym list: plurals, double words, toilet
seat, baby animals, several sentences, abbreviations.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import _chair_cases

pytest.importorskip("ijson")
pytest.importorskip("punkt.data.english")

from capeval.errors import InputError  # noqa: E402
from capeval.metrics.chair.objects import ObjectVocabulary, vocabulary  # noqa: E402
from capeval.metrics.chair.scorer import Chair  # noqa: E402
from capeval.metrics.chair.singular import singularize  # noqa: E402
from capeval.metrics.chair.words import word_tokenize  # noqa: E402

OFFICIAL = json.loads((Path(__file__).parent / "data" / "chair_official.json").read_text(encoding="utf-8"))
SYNONYMS = resources.files("capeval.data").joinpath("chair/synonyms.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    folder = tmp_path_factory.mktemp("coco2014")
    candidates = _chair_cases.build(folder, SYNONYMS)
    return folder, candidates


def test_shipped_synonyms_are_the_official_file():
    import hashlib

    assert hashlib.sha256(SYNONYMS.encode()).hexdigest() == (
        "b685537b36fe21b791c87151b96a991ceb582edff19f3da204dcc7a7905502f2")


def test_singularize_equals_pattern():
    words = OFFICIAL["singularize"]
    assert len(words) > 6000
    bad = {w: (want, singularize(w)) for w, want in words.items() if singularize(w) != want}
    assert not bad, list(bad.items())[:10]


def test_word_tokenize_equals_nltk_3_2_5():
    texts = _chair_cases.tokenizer_texts()
    want = OFFICIAL["word_tokenize"]
    assert len(texts) == len(want)
    bad = [(t, w, word_tokenize(t)) for t, w in zip(texts, want) if word_tokenize(t) != w]
    assert not bad, bad[:3]


def test_every_caption_counted_as_the_official_code(coco, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    folder, candidates = coco
    scorer = Chair(annotations=str(folder))
    sentences = OFFICIAL["sentences"]
    assert len(candidates) == len(sentences) >= 1000
    for item, text in candidates.items():
        want = sentences[item]
        mentions = scorer.vocab.mentions(text)
        assert scorer.vocab.merged_words(text) == want["words"], item
        assert [m.object for m in mentions] == want["generated"], item
        assert sorted(scorer.ground_truth(int(item))) == want["gt"], item
    report = scorer.score(candidates)
    for item in candidates:
        want = sentences[item]
        assert report["chair-s"].items[item] == want["chair_s"], item
        assert report["chair-i"].items[item] == want["chair_i"], item
        assert [list(p) for p in report["chair-s"].extras["hallucinated"][item]] == want["hallucinated"], item
    assert report["chair-s"].system == OFFICIAL["overall"]["chair_s"]
    assert report["chair-i"].system == OFFICIAL["overall"]["chair_i"]
    # the cases exercise what they should
    assert 0.2 < report["chair-s"].system < 0.95
    assert sum(1 for s in sentences.values() if not s["generated"]) > 10
    assert any("toilet" in s["generated"] and "seat" in " ".join(s["words"]) for s in sentences.values())


def test_official_quirks_and_the_stripped_variant():
    official, stripped = vocabulary("official"), vocabulary("stripped")
    assert official.mentions("a motor bike and a cheesecake") == []
    assert [m.object for m in stripped.mentions("a motor bike and a cheesecake")] == ["motorcycle", "cake"]
    assert [m.object for m in official.mentions("a baby bird and a passenger jet")] == ["bird", "airplane"]
    assert [m.word for m in official.mentions("two wine glasses and a bow tie")] == ["wine glass", "tie"]
    # the two sentences are split first: "dog." alone would not be a word of the list
    assert [m.object for m in official.mentions("A dog. A cat.")] == ["dog", "cat"]
    with pytest.raises(InputError, match="chair.variant"):
        ObjectVocabulary([], "fixed")


def test_annotation_cache_is_used_and_a_damaged_one_rebuilt(coco, tmp_path, monkeypatch):
    from capeval.metrics.chair.annotations import load_annotations

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path))
    folder, _ = coco
    first = load_annotations(folder)
    [cached] = (tmp_path / "chair").glob("coco2014-*.json")
    second = load_annotations(folder)
    assert second.captions == first.captions and second.categories == first.categories
    cached.write_bytes(cached.read_bytes()[:100])
    third = load_annotations(folder)
    assert third.captions == first.captions
    assert json.loads(cached.read_text())["digest"] == first.digest


def test_file_names_and_ids_name_the_same_image(coco, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path))
    folder, candidates = coco
    scorer = Chair(annotations=str(folder), metrics=["chair-i"])
    by_id = scorer.score({"4": candidates["4"]})
    by_name = scorer.score({"val2014/COCO_val2014_000000000004.jpg": candidates["4"]})
    assert list(by_id["chair-i"].items.values()) == list(by_name["chair-i"].items.values())
    with pytest.raises(InputError, match="999999"):
        scorer.score({"999999": "a dog"})
    with pytest.raises(InputError, match="not a COCO 2014 image id or file name"):
        scorer.score({"my-image.jpg": "a dog"})


def test_no_object_mentioned_leaves_chair_i_undefined(coco, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path))
    folder, _ = coco
    report = Chair(annotations=str(folder)).score({"1": "nothing here at all", "2": "just words"})
    assert report["chair-s"].system == 0.0
    assert math.isnan(report["chair-i"].system)


def _cli(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True, env=env)


def test_cli_scores_a_coco_folder_and_refuses_bad_options(coco, tmp_path):
    folder, candidates = coco
    cands = tmp_path / "cands.json"
    cands.write_text(json.dumps({k: candidates[k] for k in list(candidates)[:50]}))
    env = {"CAPEVAL_CACHE": str(tmp_path / "cache")}
    ok = _cli("score", "-m", "chair", "-O", f"chair.annotations={folder}", "-c", str(cands), env_extra=env)
    assert ok.returncode == 0, ok.stderr
    scores = json.loads(ok.stdout)["scores"]
    assert set(scores) == {"chair-s", "chair-i"} and 0 <= scores["chair-i"] <= 1
    for args, pattern in (
        ((), "chair.annotations=DIR"),
        (("-O", f"chair.annotations={tmp_path / 'none'}"), "not a folder"),
        (("-O", f"chair.annotations={tmp_path}"), "missing instances_train2014.json"),
        (("-O", f"chair.annotations={folder}", "-O", "chair.variant=fixed"), "chair.variant"),
    ):
        bad = _cli("score", "-m", "chair", "-c", str(cands), *args, env_extra=env)
        assert bad.returncode == 2, bad.stderr
        lines = [line for line in bad.stderr.splitlines() if line.startswith("capeval: error")]
        assert len(lines) == 1 and pattern in lines[0], bad.stderr
        assert "Traceback" not in bad.stderr
