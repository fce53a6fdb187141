"""The shortcuts of issue 36 give the results of the paths they replace, item by item.

* METEOR's beam search keeps a partial alignment's used positions as one int from its
  creation for pairs of up to ``EAGER_BITS`` words ("eager"), and makes them only for the
  partials that survive the beam otherwise ("lazy", linear memory for long captions): both
  schemes, forced on the same random pairs (empty, one word, repeated words, paraphrase-heavy,
  long), give the same statistics, and those of the reference implementation.
* ROUGE-L builds a short candidate's bit masks once for all its references: the scores equal
  the LCS dynamic programme's.
* The corpus pass's tokenised references go on to the scoring pass (tokenised once): the
  results equal those of tokenising them again.
"""

from __future__ import annotations

import random

import pytest

from capeval.metrics import rouge
from capeval.metrics.meteor import Meteor15, pycocoevalcap_fields
from capeval.metrics.meteor import fast_align
from capeval.metrics.meteor.fast_align import finish
from capeval.metrics.meteor.fast_match import match
from capeval.metrics.meteor.normalize import java_trim

from _reference import require_module

_WORDS = (
    "a a a the the man men woman dog dogs puppy kid kids child children boy young little is are "
    "running runs run ran jumping jumps in on at into of with two people person group street road "
    "grass field park red blue black white playing plays play ball water . , 's"
).split()
_PHRASES = ["a group of people", "in front of", "is playing with", "a young boy", "on the grass", "next to",
            "a man is", "a dog runs"]


def _caption(rng: random.Random) -> str:
    k = rng.choice([0, 1, 2, 5, 9, 14, 25, 60, 140])
    if rng.random() < 0.1:  # one word repeated
        return " ".join([rng.choice(_WORDS)] * k)
    heavy = rng.random() < 0.3  # paraphrase-heavy
    return " ".join(rng.choice(_PHRASES) if rng.random() < (0.5 if heavy else 0.1) else rng.choice(_WORDS)
                    for _ in range(k))


@pytest.fixture(scope="module")
def meteor() -> Meteor15:
    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    return Meteor15()


def test_eager_and_lazy_beam_schemes_agree_with_the_reference(meteor: Meteor15, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(36)
    texts = [meteor.normalize(java_trim(pycocoevalcap_fields(_caption(rng), ["r"])[0])) for _ in range(260)]
    sents = meteor.fast_sentences(texts)
    pairs = [(texts[k], texts[rng.randrange(len(texts))]) for k in range(len(texts))]
    pairs += [(t, t) for t in texts[:20]]  # identical sentences: the exact module only
    results = {}
    for scheme, bits in (("eager", 10**9), ("lazy", 0)):
        monkeypatch.setattr(fast_align, "EAGER_BITS", bits)
        results[scheme] = [finish(match(sents[a], sents[b])) for a, b in pairs]
    assert results["eager"] == results["lazy"]
    long_pairs = sum(sents[a].n + sents[b].n > 256 for a, b in pairs)
    assert long_pairs > 5  # the default threshold splits these pairs between the two schemes
    monkeypatch.undo()
    for (a, b), st in zip(pairs, results["eager"]):
        ref = meteor._pair_stats(meteor.sentence(a), meteor.sentence(b))
        assert fast_align.to_stats(st).to_string() == ref.to_string(), (a, b)


def _lcs_dp(a: list[str], b: list[str]) -> int:
    m = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            m[i][j] = m[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(m[i - 1][j], m[i][j - 1])
    return m[-1][-1]


def _rouge_dp(cand: str, refs: list[str], beta: float = 1.2) -> float:
    """pycocoevalcap's Rouge.calc_score with the dynamic programme."""
    c = cand.split(" ")
    prec = max(_lcs_dp(r.split(" "), c) / float(len(c)) for r in refs)
    rec = max(_lcs_dp(r.split(" "), c) / float(len(r.split(" "))) for r in refs)
    if prec != 0 and rec != 0:
        return ((1 + beta**2) * prec * rec) / float(rec + beta**2 * prec)
    return 0.0


@pytest.mark.parametrize("shared_max", [rouge.SHARED_MASKS_MAX, 0])
def test_rouge_l_with_shared_candidate_masks_equals_the_dynamic_programme(shared_max: int, monkeypatch) -> None:
    monkeypatch.setattr(rouge, "SHARED_MASKS_MAX", shared_max)
    rng = random.Random(7)
    for _ in range(400):
        cand = " ".join(rng.choice("abcde") for _ in range(rng.choice([0, 1, 3, 8, 20, 40])))
        refs = [" ".join(rng.choice("abcdef") for _ in range(rng.choice([0, 1, 4, 9, 30]))) for _ in range(rng.randint(1, 5))]
        assert rouge.rouge_l(cand, refs) == _rouge_dp(cand, refs)


@pytest.mark.parametrize("shared_max", [rouge.SHARED_MASKS_MAX, 0])
def test_rouge_l_reusing_mirrored_pairs_equals_the_dynamic_programme(shared_max: int, monkeypatch) -> None:
    """A chunk in leave-one-out order (each pair both ways), with repeated captions and
    references: every item as pycocoevalcap's formula with the dynamic programme."""
    from capeval.metrics.text import TextChunk

    monkeypatch.setattr(rouge, "SHARED_MASKS_MAX", shared_max)
    rng = random.Random(11)
    hyps, refs = [], []
    for _ in range(60):
        group = [" ".join(rng.choice("abcde") for _ in range(rng.choice([0, 1, 2, 6, 15]))) for _ in range(5)]
        if rng.random() < 0.3:
            group[rng.randrange(5)] = group[rng.randrange(5)]  # the same caption twice in a group
        for k, cand in enumerate(group):
            others = group[:k] + group[k + 1 :]
            hyps.append(cand)
            refs.append(others + [rng.choice(others)] if rng.random() < 0.2 else others)
    got = rouge.RougeL().score_chunk(TextChunk(hyps, refs), None).tolist()
    assert got == [_rouge_dp(h, rs) for h, rs in zip(hyps, refs)]


def test_captions_are_tokenised_once_with_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    import capeval
    from capeval import tokenize
    from capeval.metrics import text

    rng = random.Random(3)
    cands = {str(i): _caption(rng) + " , she said." for i in range(300)}
    refs = {str(i): [_caption(rng).upper() + " (x)" for _ in range(rng.randint(1, 5))] for i in range(300)}
    seen: list[str] = []
    real = tokenize.ptb_tokenize_batch

    def counting(texts, *args, **kwargs):
        texts = list(texts)
        seen.extend(texts)
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(tokenize, "ptb_tokenize_batch", counting)
    opts = {m: {"chunk_size": 64, "workers": 1} for m in ("bleu", "cider-d", "rouge-l")}
    once = capeval.score(cands, refs, metrics="bleu,cider-d,rouge-l", options=opts)
    n_refs = sum(len(v) for v in refs.values())
    assert len(seen) == len(cands) + n_refs  # each caption once
    monkeypatch.setattr(text, "KEEP_TOKENS_CHARS", 0)
    seen.clear()
    twice = capeval.score(cands, refs, metrics="bleu,cider-d,rouge-l", options=opts)
    assert len(seen) == 2 * (len(cands) + n_refs)  # nothing kept: both passes tokenise every caption
    for name in once.scores:
        assert once[name].items == twice[name].items and once[name].system == twice[name].system
