"""Caption-quality diagnostics (rep-n, incorrect, length, vocab) on handmade captions."""

from __future__ import annotations

from collections import Counter

import pytest

import capeval
from capeval import registry
from capeval.errors import InputError
from capeval.metrics.diagnostics import Diagnostics, repeated_ngrams

CAPTIONS = {
    "a": "A dog and a dog.",                  # 5 words; rep-1 2, rep-2 1; ends with a noun
    "b": "a man riding a horse on the",       # 7 words; rep-1 1; ends with a determiner
    "c": "two cats sitting on a bench with",  # 7 words; ends with a preposition
    "d": "a red red red red car",             # 6 words; rep-1 3, rep-2 2, rep-3 1
}


@pytest.fixture
def registered():
    """The diagnostics are registry metrics (kept as a fixture so the tests say what they use)."""
    names = ("rep-1", "rep-2", "rep-3", "rep-4", "incorrect", "length", "vocab")
    assert all(registry.get(n).factory == "capeval.metrics.diagnostics:Diagnostics" for n in names)
    assert registry.presets()["diagnostics"] == names


def test_repeated_ngrams_by_hand():
    w = ["a", "red", "red", "red", "red", "car"]
    assert [repeated_ngrams(w, n) for n in (1, 2, 3, 4)] == [3, 2, 1, 0]
    assert repeated_ngrams([], 1) == 0 and repeated_ngrams(["a"], 2) == 0


def test_repeated_ngrams_equals_counter_definition():
    # independent formulation: sum over distinct n-grams of (count - 1)
    import random

    rng = random.Random(0)
    for _ in range(200):
        words = [rng.choice("abc") for _ in range(rng.randint(0, 12))]
        for n in (1, 2, 3, 4):
            grams = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
            assert repeated_ngrams(words, n) == sum(c - 1 for c in grams.values())


def test_diagnostics_hand_computed():
    pytest.importorskip("spacy")
    report = Diagnostics().score(CAPTIONS)
    assert dict(report["rep-1"].items) == {"a": 2.0, "b": 1.0, "c": 0.0, "d": 3.0}
    assert report["rep-1"].system == pytest.approx(6 / 4)
    assert report["rep-2"].system == pytest.approx((1 + 0 + 0 + 2) / 4)
    assert report["rep-3"].system == pytest.approx(1 / 4)
    assert report["rep-4"].system == 0.0
    assert dict(report["length"].items) == {"a": 5.0, "b": 7.0, "c": 7.0, "d": 6.0}
    assert report["length"].system == pytest.approx(6.25)
    # a dog and man riding horse on the two cats sitting bench with red car
    assert report["vocab"].system == 15.0
    assert report["vocab"].items["a"] == 3.0
    assert dict(report["incorrect"].items) == {"a": 0.0, "b": 100.0, "c": 100.0, "d": 0.0}
    assert report["incorrect"].system == 50.0
    assert report["incorrect"].extras["last_tag"]["b"] == "DT"


def test_incorrect_endings():
    pytest.importorskip("spacy")
    caps = ["a man sitting on a bench", "a woman holding an umbrella and", "a cat lying on", "a dog with its",
            "a boy in a red shirt", ""]
    items = Diagnostics(metrics=["incorrect"]).score(caps)["incorrect"].items
    assert [items[str(k)] for k in range(6)] == [0.0, 100.0, 100.0, 100.0, 0.0, 100.0]


def test_whitespace_tokenization_keeps_punctuation_words():
    d = Diagnostics(metrics=["rep-1", "length"], tokenize=False)
    r = d.score(["dog . dog ."])
    assert r["length"].items["0"] == 4.0 and r["rep-1"].items["0"] == 2.0


def test_registered_metrics_through_capeval_score(registered):
    pytest.importorskip("spacy")
    ev = capeval.Evaluator("rep-1,rep-2,incorrect,length,vocab")
    assert len(ev.scorers) == 1  # one group, one scorer
    no_refs = ev.score(CAPTIONS)
    with_refs = capeval.score(CAPTIONS, {k: ["a dog"] for k in CAPTIONS}, metrics="rep1,length")
    assert no_refs["rep-1"].system == with_refs["rep-1"].system == 1.5
    assert no_refs["incorrect"].system == 50.0
    assert with_refs["length"].items["b"] == 7.0


def test_unknown_diagnostic_is_an_error():
    with pytest.raises(InputError):
        Diagnostics(metrics=["rep-5"])
