"""The fast METEOR path's shortcuts: score bounds and mirrored pairs (leave-one-out jobs).

The fast path skips the beam search of references whose score bound is below the best
score found (``fast_match.upper_bound`` and the tighter ``chain_bound``), and takes the
candidates of a pair from its mirror (the reference scored against the hypothesis) when
that was matched first. Each shortcut is checked against a direct computation, and
leave-one-out scoring (where every pair has its mirror) against the reference
implementation, which has neither shortcut.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from capeval.metrics.meteor import Meteor15, pycocoevalcap_fields
from capeval.metrics.meteor import engine as meteor_engine
from capeval.metrics.meteor.fast_align import finish, score_of
from capeval.metrics.meteor.fast_match import chain_bound, match, mirrored, transposed
from capeval.metrics.meteor.normalize import java_trim

from _reference import require_module

_WORDS = (
    "a an the man men woman women dog dogs puppy kid kids child children boy boys young little "
    "is are was running runs run ran jumping jumps jumped in on at into of with to two people "
    "person group crowd street road grass field park red blue black white small large big "
    "playing plays play toy ball water . , 's"
).split()
_PHRASES = ["a group of people", "in front of", "is playing with", "a young boy", "on the grass", "next to"]


@pytest.fixture(scope="module")
def meteor() -> Meteor15:
    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    return Meteor15()


def _salad_groups(seed: int, n: int) -> list[list[str]]:
    """Groups of 2-6 word-salad captions with stem, synonym and paraphrase relations (and
    repeated, identical and empty captions)."""
    rng = random.Random(seed)

    def salad() -> str:
        k = rng.choice([0, 3, 8, 12, 20, 35])
        return " ".join(rng.choice(_PHRASES) if rng.random() < 0.15 else rng.choice(_WORDS) for _ in range(k))

    groups = []
    for _ in range(n):
        g = [salad() for _ in range(rng.randint(2, 6))]
        if rng.random() < 0.2:
            g.append(g[0])  # an identical caption: the pair is its own mirror
        groups.append(g)
    return groups


def _flickr_groups(root: Path, n: int) -> list[list[str]]:
    """The captions of ``n`` random Flickr8k images (raw text, five per image)."""
    by_image: dict[str, list[str]] = {}
    with open(root / "flickr8k" / "Flickr8k.token.txt", encoding="utf-8") as f:
        for line in f:
            if "\t" in line:
                key, cap = line.split("\t", 1)
                by_image.setdefault(key.split("#")[0], []).append(cap.strip())
    images = sorted(by_image)
    return [by_image[k] for k in random.Random(5).sample(images, n)]


def _leave_one_out(groups: list[list[str]]) -> list[tuple[str, list[str]]]:
    return [(g[i], g[:i] + g[i + 1 :]) for g in groups for i in range(len(g))]


def _pairs(meteor: Meteor15, groups: list[list[str]]):
    """(sentence a, sentence b) for every ordered pair of captions of a group."""
    for g in groups:
        texts = [meteor.normalize(java_trim(pycocoevalcap_fields(x, ["r"])[0])) for x in g]
        sents = meteor.fast_sentences(texts)
        for i, x in enumerate(texts):
            for y in texts[i + 1 :]:
                yield sents[x], sents[y]


def _state(matched: tuple) -> tuple:
    ub, st = matched
    h, r, singles, paras, n_matches, dup, fm, masks, n_first = st
    return ub, h, r, [(i, tuple(c), m) for i, c, m in singles], list(paras), n_matches, dup, fm, masks, n_first


def test_mirrored_pair_is_the_transposed_match(meteor: Meteor15, shared_data: Path) -> None:
    """``transposed(match(a, b))`` is ``match(b, a)`` (same candidates, same Java order, same
    coverage and bounds), and ``mirrored`` gives its bound without matching."""
    groups = _salad_groups(11, 60) + _flickr_groups(shared_data, 150)
    n = with_paraphrase = 0
    for a, b in _pairs(meteor, groups):
        forward = match(a, b)
        direct = match(b, a)
        assert mirrored(forward)[0] == direct[0]
        assert _state(transposed(forward)) == _state(direct)
        assert finish(transposed(forward)) == finish(direct)
        n += 1
        with_paraphrase += bool(direct[1][3]) and 0 < direct[1][8] < len(direct[1][3])
    assert n > 1500
    assert with_paraphrase > 50  # pairs with paraphrase matches found both ways


def test_score_bounds_hold(meteor: Meteor15, shared_data: Path) -> None:
    """score <= chain_bound <= upper_bound for every pair, not only the best references."""
    groups = _salad_groups(12, 80) + _flickr_groups(shared_data, 150)
    tighter = 0
    for a, b in _pairs(meteor, groups):
        for matched in (match(a, b), match(b, a)):
            score = score_of(finish(matched))
            bound = chain_bound(matched)
            assert score <= bound + 1e-12 <= matched[0] + 2e-12
            tighter += bound < matched[0] - 1e-9
    assert tighter > 1000  # the chain bound is not the plain bound


def test_leave_one_out_equals_reference(meteor: Meteor15, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave-one-out scoring (every pair has its mirror) gives the reference
    implementation's statistics, and the mirror shortcut is taken."""
    items = _leave_one_out(_flickr_groups(shared_data, 40) + _salad_groups(13, 40))
    calls = {"mirrored": 0, "transposed": 0}
    for name in calls:
        real = getattr(meteor_engine, name)

        def counted(*args, _real=real, _name=name):
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(meteor_engine, name, counted)
    fields = [pycocoevalcap_fields(h, refs) for h, refs in items]
    # the Python resolution, whose shortcuts are counted: a kernel built earlier in this process
    # (another test file in the same worker) would otherwise be used for any job
    fast = Meteor15(compiled=False).stats_many([f[0] for f in fields], [f[1] for f in fields])
    reference = [meteor.reference_segment_stats(*f) for f in fields]
    bad = [(items[i], a.to_string(), b.to_string()) for i, (a, b) in enumerate(zip(fast, reference)) if a.to_string() != b.to_string()]
    assert not bad, f"{len(bad)} of {len(items)} differ, e.g. {bad[:2]}"
    assert calls["mirrored"] > 300 and calls["transposed"] > 100
