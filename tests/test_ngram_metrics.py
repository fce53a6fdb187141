"""Unit tests of the n-gram metrics on hand-made inputs and edge cases."""

from __future__ import annotations

import random

import pytest

import capeval
from capeval.metrics.bleu import bleu_stats
from capeval.metrics.rouge import lcs_length, rouge_l


def _lcs_dp(a, b):
    m = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            m[i][j] = m[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(m[i - 1][j], m[i][j - 1])
    return m[-1][-1]


def test_bit_parallel_lcs_equals_dynamic_programme():
    rng = random.Random(0)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 30))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 30))]
        assert lcs_length(a, b) == _lcs_dp(a, b)


def test_bleu_closest_reference_length_prefers_shorter_on_tie():
    # candidate of 4 words, references of 3 and 5 words: both at distance 1 -> 3 is used
    testlen, reflen, guess, correct = bleu_stats("a b c d", ["a b c", "a b c d e"])
    assert (testlen, reflen) == (4, 3)
    assert guess == [4, 3, 2, 1]
    assert correct == [4, 3, 2, 1]


def test_identical_candidate_scores_one():
    rep = capeval.score({"x": "a dog runs on the grass"}, {"x": ["a dog runs on the grass"]}, metrics="bleu,rouge-l")
    for name in ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-l"):
        assert rep[name].items["x"] == pytest.approx(1.0, abs=1e-6)


def test_rouge_l_quirks_match_reference_code():
    assert rouge_l("", ["a b"]) == 0.0
    # the reference code splits on single spaces; two empty strings share one empty token
    assert rouge_l("", [""]) == pytest.approx(1.0)


@pytest.mark.parametrize("cand", ["", "   ", "... , !", "?"])
def test_empty_or_punctuation_candidate_scores_zero(cand):
    refs = {"a": ["a dog runs", "the dog is running"], "b": ["a cat sleeps"]}
    rep = capeval.score({"a": cand, "b": "a cat sleeps"}, refs, metrics="bleu,rouge-l,cider-d")
    for name in ("bleu-1", "bleu-4", "rouge-l", "cider-d"):
        assert rep[name].items["a"] == 0.0


def test_cider_zero_when_no_candidate_ngram_is_in_any_reference():
    """Issue 8's crash: one candidate "zzz" against "a dog" scores 0.0, as pycocoevalcap does
    (its value for these inputs; the randomized parity test compares many more such sets)."""
    rep = capeval.score({"x": "zzz"}, {"x": ["a dog"]}, metrics="cider-d")
    assert rep["cider-d"].items == {"x": 0.0} and rep["cider-d"].system == 0.0
    rep = capeval.score({"x": "zzz", "y": "qq"}, {"x": ["a dog"], "y": ["a cat"]}, metrics="cider-d")
    assert rep["cider-d"].items == {"x": 0.0, "y": 0.0}
    # every reference of the set empty after tokenisation: 0.0 (pycocoevalcap raises here)
    rep = capeval.score({"x": "a dog", "y": "!"}, {"x": ["."], "y": ["..."]}, metrics="cider-d")
    assert rep["cider-d"].items == {"x": 0.0, "y": 0.0}


def test_very_long_caption_is_scored():
    long = " ".join(["dog"] * 10_000)
    rep = capeval.score({"a": long, "b": "a cat"}, {"a": ["a dog"], "b": ["a cat sleeps"]}, metrics="bleu,rouge-l,cider-d")
    assert 0.0 <= rep["bleu-1"].items["a"] < 0.01
    assert 0.0 <= rep["rouge-l"].items["a"] < 0.01


def test_signature_names_what_matters():
    rep = capeval.score({"a": "a dog"}, {"a": ["a dog", "the dog"]}, metrics="cider-d,bleu-4")
    sig = str(rep["cider-d"].signature)
    for part in ("metric:cider-d", "tok:ptb", "nrefs:2", "sigma:6.0", "n:4", f"version:{capeval.__version__}"):
        assert part in sig
    assert "reflen:closest" in str(rep["bleu-4"].signature)


def test_report_layout_and_json():
    rep = capeval.score({"a": "a dog", "b": "a cat"}, {"a": ["a dog"], "b": ["a cat"]}, metrics="coco-free" if False else "bleu-1")
    d = rep.to_dict(per_item=True)
    assert set(d) == {"scores", "signatures", "results"}
    assert rep.per_item() == {"bleu-1": {"a": pytest.approx(1.0), "b": pytest.approx(1.0)}}
    import json

    json.loads(rep.to_json())


@pytest.mark.parametrize("seed", range(4))
def test_sorted_queries_find_what_searchsorted_finds(seed):
    """The corpus index searches many queries after sorting them: the same indices as
    ``np.searchsorted`` (duplicates, queries equal to keys, before the first and after the last)."""
    import numpy as np

    from capeval.metrics.ngrams import _SORT_QUERIES, _search

    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, 5000, 3000))
    for n in (0, 1, _SORT_QUERIES - 1, _SORT_QUERIES, 10 * _SORT_QUERIES):
        q = np.concatenate([rng.integers(-10, 5010, n), keys[: n // 3]])
        assert np.array_equal(_search(keys, q), np.searchsorted(keys, q))
