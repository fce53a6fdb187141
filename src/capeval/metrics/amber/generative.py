"""AMBER's generative-task judgement of one response, as ``inference.py`` (junyangwang0410/AMBER@534babf)
computes it, and the four corpus figures.

For a response with nouns ``n_1..n_k`` (see :mod:`capeval.metrics.amber.nouns`), keep those in
AMBER's vocabulary (every key and listed word of ``relation.json``). An annotated object list
(``truth`` or ``hallu``) is *expanded* as the script does: first the associated words of each
object in order, then the objects themselves; a match at position ``j`` of the expansion marks
the object that contributed position ``j`` as mentioned. Then, noun by noun:

1. a global safe word (``safe_words.txt``) is skipped: neither hallucinated nor covering;
2. a noun equal to a word of the truth expansion marks the first such position's object as
   covered and stops there;
3. otherwise a noun equal to a word of the hallu expansion marks its object; then the first hallu
   word whose similarity to the noun exceeds the threshold (0.8) is marked too;
4. the first truth word whose similarity exceeds the threshold marks its object as covered and
   the noun is not hallucinated; without one, the noun is hallucinated.

Corpus figures (percent, rounded to one decimal as the script prints them; every counter of
``data/metrics.txt`` that is a denominator starts at 0.001 instead of 0):

- CHAIR = hallucinated nouns / kept nouns (safe words stay in the denominator), lower is better;
- Cover = covered truth objects / truth objects, higher is better;
- Hal = 100 - share of responses without a hallucinated noun, lower is better;
- Cog = mentioned hallu objects / hallu objects, lower is better.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

#: ``data/metrics.txt``: the denominators' starting value
START = 0.001
#: ``inference.py --similarity_score``
THRESHOLD = 0.8
VARIANTS = ("official", "lowercase", "own-word", "lowercase+own-word")


@dataclass(frozen=True)
class Judged:
    """One response judged: the kept nouns, the hallucinated ones, which annotated objects were named."""

    nouns: tuple[str, ...]
    hallucinated: tuple[str, ...]
    covered: tuple[bool, ...]  # per truth object
    cognitive: tuple[bool, ...]  # per hallu object


def expand(objects: Sequence[str], association: dict[str, list[str]], own_first: bool = False
           ) -> tuple[list[str], list[int]]:
    """The words that name each object and, for each, the position of its object.

    Official order: every object's associated words, then the objects (``own_first``: the
    objects first, so an object named by its own word is never credited to another)."""
    words: list[str] = []
    owner: list[int] = []
    for idx, obj in enumerate(objects):
        words += association[obj]
        owner += [idx] * len(association[obj])
    if own_first:
        return list(objects) + words, list(range(len(objects))) + owner
    return words + list(objects), owner + list(range(len(objects)))


def _first(words: list[str], test: Callable[[str], bool]) -> int | None:
    for j, word in enumerate(words):
        if test(word):
            return j
    return None


def judge(nouns: Iterable[str], truth: Sequence[str], hallu: Sequence[str], association: dict[str, list[str]],
          vocabulary: frozenset[str], safe_words: Iterable[str], similar: Callable[[str, str], bool],
          own_first: bool = False) -> Judged:
    """The official loop over one response's nouns (see the module docs); ``similar(noun, word)``
    is the script's ``check_synonyms_word`` (similarity above the threshold)."""
    kept = tuple(n for n in nouns if n in vocabulary)
    safe = frozenset(safe_words)
    truth_words, truth_owner = expand(truth, association, own_first)
    hallu_words, hallu_owner = expand(hallu, association, own_first)
    covered = [False] * len(truth)
    cognitive = [False] * len(hallu)
    hallucinated = []
    for noun in kept:
        if noun in safe:
            continue
        j = _first(truth_words, noun.__eq__)
        if j is not None:
            covered[truth_owner[j]] = True
            continue
        j = _first(hallu_words, noun.__eq__)
        if j is not None:
            cognitive[hallu_owner[j]] = True
        # the script looks for a similar hallu word even after an exact match
        j = _first(hallu_words, lambda word: similar(noun, word))
        if j is not None:
            cognitive[hallu_owner[j]] = True
        j = _first(truth_words, lambda word: similar(noun, word))
        if j is not None:
            covered[truth_owner[j]] = True
            continue
        hallucinated.append(noun)
    return Judged(kept, tuple(hallucinated), tuple(covered), tuple(cognitive))


@dataclass
class Totals:
    """The script's counters, accumulated in its order (floats: the denominators start at 0.001)."""

    chair_score: int = 0
    chair_num: float = START
    cover_score: int = 0
    cover_num: float = START
    cog_score: int = 0
    cog_num: float = START
    clean_score: int = 0
    clean_num: float = START
    responses: int = 0

    def add(self, j: Judged) -> None:
        self.chair_score += len(j.hallucinated)
        self.chair_num += len(j.nouns)
        self.cover_score += sum(j.covered)
        self.cover_num += len(j.covered)
        self.cog_score += sum(j.cognitive)
        self.cog_num += len(j.cognitive)
        self.clean_score += 0 if j.hallucinated else 1
        self.clean_num += 1
        self.responses += 1

    def figures(self, rounded: bool = True) -> dict[str, float]:
        """``{chair, cover, hal, cog}`` as the script prints them (``rounded=False``: before its
        ``round(x, 1)``). A figure whose count is 0 is NaN (the script prints 0.0 there)."""
        def pct(score: int, num: float) -> float:
            return score / num * 100

        raw = {"chair": pct(self.chair_score, self.chair_num), "cover": pct(self.cover_score, self.cover_num),
               "hal": 100 - pct(self.clean_score, self.clean_num), "cog": pct(self.cog_score, self.cog_num)}
        empty = {"chair": self.chair_num == START, "cover": self.cover_num == START,
                 "hal": self.clean_num == START, "cog": self.cog_num == START}
        return {k: math.nan if empty[k] else (round(v, 1) if rounded else v) for k, v in raw.items()}
