"""SPICE 1.0 semantic tuples: concepts, matching, tuple categories and P/R/F.

A *concept* is a small set of words (lemmas) plus the WordNet synsets of those words; the
scene graph (:mod:`.graph`) merges concepts, so one concept may hold several words. A
*tuple* is ``(object,)``, ``(object, attribute)`` or ``(subject, relation, object)`` of
concepts. Reference: P. Anderson, B. Fernando, M. Johnson, S. Gould, "SPICE: Semantic
Propositional Image Caption Evaluation", ECCV 2016; what follows is SPICE 1.0's Java
(``SemanticConcept``, ``SemanticTuple``, ``TupleSet``, ``TupleFilter``, ``Evaluation``,
``SpiceStats``) behaviour, including its quirks:

- matching is greedy and *not* exclusive: every candidate tuple that matches some reference
  tuple is a true positive, even when several match the same reference tuple, so
  ``fn = |refs| - tp`` can be negative and recall, hence F1, can exceed 1
  (``TupleSet.match_similar``; e.g. candidate objects "motorcycle" and "wheel" both match
  the merged reference object "bicycle/bike": tp 2, fn -1, R 2, F1 4/3);
- with synonyms on, two concepts match when they share a word or a synset; without, they
  must be equal (same words and same synsets);
- a category (colour, size, cardinality) holds an attribute tuple only when its attribute
  concept is exactly one listed word (``TupleFilter`` tests the concept's ``toString``, the
  words joined by ``/``), so a merged attribute such as ``red/crimson`` is in no category.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np


class Concept:
    """``SemanticConcept``: words (lemmas) and their synset ids, both growing by :meth:`merge`."""

    __slots__ = ("words", "synsets")

    def __init__(self, word: str | Iterable[str], synsets: Iterable[int] = ()):
        self.words: set[str] = {word} if isinstance(word, str) else set(word)
        self.synsets: set[int] = set(synsets)

    def merge(self, other: "Concept") -> bool:
        """Add the other concept's words and synsets; True when something was added."""
        n_words, n_syn = len(self.words), len(self.synsets)
        self.words |= other.words
        self.synsets |= other.synsets
        return len(self.words) != n_words or len(self.synsets) != n_syn

    def __eq__(self, other: object) -> bool:
        # SemanticConcept.equals: the same words and the same synsets
        if not isinstance(other, Concept):
            return NotImplemented
        return self.words == other.words and self.synsets == other.synsets

    __hash__ = None  # mutable, like the Java object (whose hashCode is unusable anyway)

    def similar_to(self, other: "Concept") -> bool:
        """``SemanticConcept.similarTo``: a shared synset or a shared word."""
        return not self.synsets.isdisjoint(other.synsets) or not self.words.isdisjoint(other.words)

    def similarity(self, other: "Concept") -> float:
        """``SemanticConcept.similarity``: 1 for a shared word, else the synsets' Jaccard index.

        Computed in float32 as Java does (``(float) |A & B| / (float) |A | B|``); Java's 0/0
        (no synsets on either side) is NaN, which never beats a positive similarity: 0 here.
        """
        if not self.words.isdisjoint(other.words):
            return 1.0
        union = len(self.synsets | other.synsets)
        if union == 0:
            return 0.0
        return float(np.float32(len(self.synsets & other.synsets)) / np.float32(union))

    def text(self) -> str:
        """The words joined by ``/`` (sorted; Java joins them in hash-set order)."""
        return "/".join(sorted(self.words))

    def __repr__(self) -> str:
        return f"Concept({self.text()!r})"


#: a semantic tuple: (object,), (object, attribute) or (subject, relation, object)
SemanticTuple = tuple[Concept, ...]


def tuples_equal(a: SemanticTuple, b: SemanticTuple) -> bool:
    """``SemanticTuple.matchesTo``: same length, every position equal."""
    return len(a) == len(b) and all(x == y for x, y in zip(a, b))


def tuples_similar(a: SemanticTuple, b: SemanticTuple) -> bool:
    """``SemanticTuple.similarTo``: same length, every position similar (shared word or synset)."""
    return len(a) == len(b) and all(x.similar_to(y) for x, y in zip(a, b))


def count_matches(candidates: Sequence[SemanticTuple], references: Sequence[SemanticTuple], synonyms: bool = True) -> int:
    """True positives as ``TupleSet.match_similar`` / ``match_exact`` count them.

    Each candidate tuple counts once if *any* reference tuple matches it; reference tuples
    are not used up (non-exclusive), so the count depends on neither order.
    """
    match = tuples_similar if synonyms else tuples_equal
    by_len: dict[int, list[SemanticTuple]] = {}
    for r in references:
        by_len.setdefault(len(r), []).append(r)
    return sum(1 for c in candidates if any(match(c, r) for r in by_len.get(len(c), ())))


# TupleFilter's word lists (SPICE 1.0)
SMALL_NUMBERS = frozenset("one two three four five six seven eight nine ten".split())
COMMON_COLORS = frozenset(
    "black brown blue red yellow pink gray grey green dark light white cream orange purple maroon beige violet".split()
)
SIZE_ADJECTIVES = frozenset("""
    baby illimitable scrawny beefy immeasurable short big immense sizable bony infinitesimal skeletal boundless
    lanky skimpy brawny large skinny broad lean slender bulky life-size slim chunky limitless small colossal little
    squat compact mammoth stocky corpulent massive stout cosmic meager strapping cubby measly sturdy curvy
    microscopic tall elfin mini teensy emaciated miniature teeny endless minuscule teeny-tiny enormous minute
    teeny-weeny epic narrow thick expansive obese thickset extensive outsized thin fat oversize tiny fleshy
    overweight titanic full-size paltry towering gargantuan petite trifling gaunt pint-size trim giant plump tubby
    gigantic pocket-size undersized grand portly underweight great pudgy unlimited heavy puny vast hefty rotund wee
    huge scanty whopping hulking scraggy wide
""".split())


def _attribute_in(words: AbstractSet[str]) -> Callable[[SemanticTuple], bool]:
    # TupleFilter compares the attribute's toString(): only a one-word concept can be listed
    def keep(t: SemanticTuple) -> bool:
        if len(t) != 2 or len(t[1].words) != 1:
            return False
        return next(iter(t[1].words)) in words

    return keep


#: SPICE's tuple categories (``-subset``), in the order its report lists them
CATEGORIES: Mapping[str, Callable[[SemanticTuple], bool]] = {
    "Object": lambda t: len(t) == 1,
    "Attribute": lambda t: len(t) == 2,
    "Relation": lambda t: len(t) == 3,
    "Cardinality": _attribute_in(SMALL_NUMBERS),
    "Color": _attribute_in(COMMON_COLORS),
    "Size": _attribute_in(SIZE_ADJECTIVES),
}


@dataclass
class Evaluation:
    """SPICE's ``Evaluation``: F1, precision, recall and counts of one item (or an average).

    Field names are those of SPICE's JSON output (``f``, ``pr``, ``re``, ``tp``, ``fp``,
    ``fn``, ``numImages``). ``f`` is in [0, 1] but for SPICE's non-exclusive matching, which
    can push ``re`` and ``f`` above 1 (see the module docs).
    """

    f: float = 0.0
    pr: float = 0.0
    re: float = 0.0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    num_images: int = 0

    @classmethod
    def of_counts(cls, n_candidate: int, n_reference: int, tp: int, allow_nan: bool) -> "Evaluation":
        """``new Evaluation(candidates, references, allowNan, ...)`` from the counts.

        P = tp / |cand| (0 when the candidate has no tuples), R = tp / |ref|,
        F = 2PR / (P + R) (0 unless both are positive). With no reference tuple: all three
        are 0 (``allow_nan=False``, the "All" score) or NaN (the categories).
        """
        ev = cls(tp=tp, fp=n_candidate - tp, fn=n_reference - tp, num_images=1)
        ev.compute(allow_nan)
        return ev

    def compute(self, allow_nan: bool) -> None:
        """``Evaluation.calcFScore``, with Java's order of operations (beta = 1)."""
        ref_n = self.fn + self.tp
        test_n = self.fp + self.tp
        if ref_n > 0:
            self.re = self.tp / ref_n
            if test_n > 0:
                self.pr = self.tp / test_n
            if self.pr > 0 and self.re > 0:
                self.f = 2.0 * (self.pr * self.re) / (1.0 * self.pr + self.re)
        if allow_nan and ref_n == 0:
            self.f = self.pr = self.re = math.nan

    def to_dict(self) -> dict[str, float | int]:
        """The JSON object SPICE writes for one score (NaN stays NaN here)."""
        return {"tp": self.tp, "fp": self.fp, "fn": self.fn, "f": self.f, "pr": self.pr, "re": self.re,
                "numImages": self.num_images}

    @classmethod
    def from_dict(cls, d: Mapping[str, float | int | None]) -> "Evaluation":
        """Read SPICE's JSON object (``null`` -> NaN)."""

        def num(key: str) -> float:
            v = d.get(key)
            return math.nan if v is None else float(v)

        return cls(num("f"), num("pr"), num("re"), int(d["tp"] or 0), int(d["fp"] or 0), int(d["fn"] or 0),
                   int(d.get("numImages") or 0))


def macro_average(evaluations: Iterable[Evaluation]) -> Evaluation:
    """``SpiceStats.macroAverage``: means of F, P, R over the items where none is NaN.

    Counts are summed over all items; ``num_images`` is the number of items averaged; with
    no such item F, P and R are NaN.
    """
    out = Evaluation()
    n = 0
    for s in evaluations:
        out.tp += s.tp
        out.fp += s.fp
        out.fn += s.fn
        if not (math.isnan(s.f) or math.isnan(s.pr) or math.isnan(s.re)):
            out.f += s.f
            out.pr += s.pr
            out.re += s.re
            n += 1
    if n > 0:
        out.f /= n
        out.pr /= n
        out.re /= n
    else:
        out.f = out.pr = out.re = math.nan
    out.num_images = n
    return out


def evaluate(candidates: Sequence[SemanticTuple], references: Sequence[SemanticTuple],
             synonyms: bool = True) -> dict[str, Evaluation]:
    """``SpiceStats.score`` for one item: ``"All"`` then every category of :data:`CATEGORIES`.

    ``"All"`` is never NaN (no reference tuple gives 0); a category with no reference tuple
    gives NaN, which the averages skip.
    """
    out = {"All": Evaluation.of_counts(len(candidates), len(references),
                                       count_matches(candidates, references, synonyms), allow_nan=False)}
    for name, keep in CATEGORIES.items():
        cand = [t for t in candidates if keep(t)]
        ref = [t for t in references if keep(t)]
        out[name] = Evaluation.of_counts(len(cand), len(ref), count_matches(cand, ref, synonyms), allow_nan=True)
    return out
