"""Parity with pycocoevalcap 1.2 on all Flickr8k-Expert candidates (BLEU, ROUGE-L, CIDEr-D).

Inputs are tokenised by pycocoevalcap's own (Java) PTB tokenizer so that these tests
check the metrics alone; the pure-Python tokenizer has its own parity tests.
"""

from __future__ import annotations

import numpy as np
import pytest

import capeval
from _reference import java_ptb, require_module

TOL = 1e-9


@pytest.fixture(scope="module")
def tokenized(expert_pairs):
    ids, cands, refs = expert_pairs
    gts, res = java_ptb(ids, cands, refs)
    return ids, gts, res


def _ours(ids, gts, res, metrics):
    cands = {i: res[i][0] for i in ids}
    refs = {i: gts[i] for i in ids}
    return capeval.score(cands, refs, metrics=metrics, options={m: {"tokenizer": "none"} for m in ("bleu", "rouge-l", "cider-d")})


def test_bleu_parity(tokenized):
    from pycocoevalcap.bleu.bleu import Bleu

    ids, gts, res = tokenized
    ref_sys, ref_items = Bleu(4).compute_score(gts, res, verbose=0)
    report = _ours(ids, gts, res, "bleu")
    assert len(ids) == 5664
    for k in range(4):
        r = report[f"bleu-{k + 1}"]
        assert abs(r.system - ref_sys[k]) <= TOL
        ours = np.array([r.items[i] for i in ids])
        np.testing.assert_allclose(ours, np.array(ref_items[k]), rtol=0, atol=TOL)


def test_rouge_parity(tokenized):
    from pycocoevalcap.rouge.rouge import Rouge

    ids, gts, res = tokenized
    ref_sys, ref_items = Rouge().compute_score(gts, res)
    r = _ours(ids, gts, res, "rouge-l")["rouge-l"]
    assert abs(r.system - ref_sys) <= TOL
    np.testing.assert_allclose([r.items[i] for i in ids], ref_items, rtol=0, atol=TOL)


def test_cider_parity(tokenized):
    from pycocoevalcap.cider.cider import Cider

    ids, gts, res = tokenized
    ref_sys, ref_items = Cider().compute_score(gts, res)
    r = _ours(ids, gts, res, "cider-d")["cider-d"]
    assert abs(r.system - ref_sys) <= TOL
    np.testing.assert_allclose([r.items[i] for i in ids], ref_items, rtol=0, atol=TOL)


def test_cider_parity_subset_changes_df(tokenized):
    """CIDEr-D's document frequency is over the evaluated set: a subset scores differently."""
    from pycocoevalcap.cider.cider import Cider

    ids, gts, res = tokenized
    sub = ids[:300]
    g = {i: gts[i] for i in sub}
    s = {i: res[i] for i in sub}
    ref_sys, ref_items = Cider().compute_score(g, s)
    r = _ours(sub, g, s, "cider-d")["cider-d"]
    assert abs(r.system - ref_sys) <= TOL
    np.testing.assert_allclose([r.items[i] for i in sub], ref_items, rtol=0, atol=TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_sentences_parity(seed):
    """Random small vocabularies: many shared n-grams, repeated words, empty and 1-word sentences."""
    require_module("pycocoevalcap", "pycocoevalcap==1.2 is the reference implementation (test extra)")
    import random

    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(12)]

    def sent(lo=0, hi=25):
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(lo, hi)))

    ids = [str(i) for i in range(200)]
    res = {i: [sent(0, 30)] for i in ids}
    gts = {i: [sent(1, 20) for _ in range(rng.randint(1, 6))] for i in ids}
    shared = gts["0"]
    for i in ids[1:20]:  # items sharing one reference list, as images with several candidates do
        gts[i] = list(shared)
    report = _ours(ids, gts, res, "bleu,rouge-l,cider-d")
    b_sys, b_items = Bleu(4).compute_score(gts, res, verbose=0)
    for k in range(4):
        r = report[f"bleu-{k + 1}"]
        assert abs(r.system - b_sys[k]) <= TOL
        np.testing.assert_allclose([r.items[i] for i in ids], b_items[k], rtol=0, atol=TOL)
    for name, ref in (("rouge-l", Rouge()), ("cider-d", Cider())):
        sys_, items = ref.compute_score(gts, res)
        r = report[name]
        assert abs(r.system - sys_) <= TOL
        np.testing.assert_allclose([r.items[i] for i in ids], items, rtol=0, atol=TOL)


def test_end_to_end_with_python_tokenizer(expert_pairs, tokenized):
    """Raw captions through capeval's own PTB tokenizer give pycocoevalcap's numbers."""
    from pycocoevalcap.cider.cider import Cider

    ids, cands, refs = expert_pairs
    _, gts, res = tokenized
    report = capeval.score(cands, refs, metrics="cider-d,bleu-4")
    ref_sys, ref_items = Cider().compute_score(gts, res)
    r = report["cider-d"]
    assert abs(r.system - ref_sys) <= TOL
    np.testing.assert_allclose([r.items[i] for i in ids], ref_items, rtol=0, atol=TOL)
