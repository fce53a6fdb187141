"""ALOHa's parsing, matching and score, as DavidMChan/aloha ``metrics/aloha.py`` computes them.

Steps of ``ALOHa.__call__`` (official names in brackets):

1. the LLM's answers are parsed into object *slots* (:func:`parse_objects`,
   ``_parse_objects_from_llm_response``): one slot per ``- object`` line, a list of the
   alternatives that line names (``a or b``, ``a, b``); for the references (``reference_mode``)
   each line gives a second slot: the spaCy root token of each alternative;
2. detections (a list of labels) add one slot each, deduplicated (``list(set(...))``);
3. every combination of one alternative per slot (:func:`combinations`, ``_flatten``) is
   scored with :func:`alohao` (``_compute_alohao_scores``): duplicates removed, the
   similarity matrix of candidate x reference objects, Hungarian matching maximising the total
   similarity (``scipy.optimize.linear_sum_assignment``), ALOHa_o = the matched similarity of
   each candidate object, ALOHa = their minimum; the best combination (first strict maximum) wins.

Quirks of the official code kept by default, each with the option that changes it:

- candidate objects left unmatched (more candidate than reference objects) get ALOHa_o 0 in
  the matches, but the score ignores them (``similarity_scores + np.array([0]) * n`` adds
  nothing): ``unmatched="zero"`` counts them as 0;
- a slot with no alternative (a line such as ``- ,``, or a reference object whose spaCy parse
  has no root) cuts off itself and every later slot (:func:`combinations`):
  ``empty_slots="skip"`` leaves only it out;
- a caption or reference set with no object (or whose first slot is empty) has no
  combination: the official score stays ``-inf``. Such items are reported as errors (not
  averaged) unless ``no_objects="branch"``: the values ``_compute_alohao_scores`` gives for
  empty lists (no candidate object: 0.0 under ``min``, 1.0 under ``mean``; no reference
  object: 0.0);
- ``list(set(...))`` orders objects by string hash (varies per process); here first-seen order,
  which only matters between assignments of equal total similarity.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Iterator, Sequence

import numpy as np

Similarity = Callable[[list[str], list[str]], np.ndarray]
RootNoun = Callable[[str], "str | None"]
AGGREGATES = ("min", "mean")
UNMATCHED = ("official", "zero")
NO_OBJECTS = ("error", "branch", "clean")
EMPTY_SLOTS = ("truncate", "skip")


def count_alternatives(answer: str | None, reference_mode: bool, min_object_length: int = 3) -> int:
    """How many objects (alternatives) :func:`parse_objects` reads in ``answer``, without a
    parse: a bound checked before spaCy looks at any of them."""
    return sum(len(slot) for slot in parse_objects(answer, reference_mode, lambda _: None, min_object_length))


def parse_objects(answer: str | None, reference_mode: bool, root_noun: RootNoun | None = None,
                  min_object_length: int = 3) -> list[list[str]]:
    """Object slots of one LLM answer (``_parse_objects_from_llm_response``).

    A line is kept when it has at least ``min_object_length`` characters, starts with ``-``
    (only the whole answer is stripped, so an indented line is dropped) and, for the candidate,
    does not contain ``possibly``. ``root_noun(text)`` gives the root token's text of ``text``
    (spaCy's token whose head is itself), or None; needed in ``reference_mode``.

    Linear in the answer's length (no regex; one pass of string methods per line).
    """
    if answer is None or not answer.strip():
        return []
    slots: list[list[str]] = []
    for line in answer.strip().split("\n"):
        if len(line) < min_object_length or line[0] != "-" or ("possibly" in line and not reference_mode):
            continue
        text = line
        if "possibly" in line:
            text = text.replace("(possibly)", "").strip().replace("possibly", "").strip()
        text = text[1:].strip()  # the dash
        text = text.partition("(")[0].strip()  # a parenthetical and all after it (split("(")[0], no list)
        alternatives: list[str] = []
        for part in (text.split(",") if "," in text else [text]):
            alternatives += part.split(" or ") if " or " in part else [part]
        slots.append([a.lower().strip() for a in alternatives if a])
        if reference_mode:
            if root_noun is None:
                raise ValueError("parse_objects: reference_mode needs root_noun")
            roots = [root_noun(a) for a in alternatives]  # unstripped, as the official code
            slots.append([r.lower().strip() for r in roots if r is not None])
    return slots


def combinations(slots: Sequence[Sequence[str]], empty_slots: str = "truncate") -> Iterator[tuple[str, ...]]:
    """One alternative per slot, in ``_flatten``'s order.

    ``_flatten`` yields ``[item]`` wherever the rest of the slots yields nothing, so a slot with
    no alternative cuts off itself and every slot after it (``"truncate"``, the official); the
    combinations are those of the slots before it, none when it is the first. ``"skip"``
    leaves empty slots out instead.
    """
    if empty_slots == "skip":
        slots = [s for s in slots if s]
    else:
        cut = next((k for k, s in enumerate(slots) if not s), len(slots))
        slots = slots[:cut]
    if not slots:
        return iter(())
    return itertools.product(*slots)


def count_combinations(slots: Sequence[Sequence[str]], empty_slots: str = "truncate") -> int:
    """How many combinations :func:`combinations` yields (without making them)."""
    kept = [s for s in slots if s] if empty_slots == "skip" else \
        slots[:next((k for k, s in enumerate(slots) if not s), len(slots))]
    return math.prod(len(s) for s in kept) if kept else 0


def dedupe(words: Sequence[str]) -> list[str]:
    """Duplicates removed, first occurrence kept (the official ``list(set(...))``, ordered)."""
    return list(dict.fromkeys(words))


def alohao(targets: list[str], references: list[str], similarity: Similarity, aggregate: str = "min",
           unmatched: str = "official") -> tuple[float, list[dict[str, Any]]]:
    """(ALOHa, matches) of one combination (``_compute_alohao_scores``).

    ``matches``: per candidate object ``{"target_word", "ref_word", "similarity"}`` (ALOHa_o;
    ``ref_word`` None and 0 when unmatched). ``similarity(targets, references)`` is the
    candidate x reference matrix (the official MPNet's: float32 dot products of unit vectors).
    """
    from scipy.optimize import linear_sum_assignment

    if not targets:
        return (1.0 if aggregate == "mean" else 0.0), []
    if not references:
        return 0.0, [{"target_word": t, "ref_word": None, "similarity": 0} for t in targets]
    sim = similarity(targets, references)
    rows, cols = linear_sum_assignment(sim, maximize=True)
    # float64 as the official ``+ np.array([0]) * n`` promotes it (the mean then sums in float64)
    matched = np.asarray(sim[rows, cols], dtype=np.float64)
    where = {int(r): k for k, r in enumerate(rows)}
    matches: list[dict[str, Any]] = []
    for i, word in enumerate(targets):
        if i in where:
            k = where[i]
            matches.append({"target_word": word, "ref_word": references[int(cols[k])], "similarity": float(matched[k])})
        else:
            matches.append({"target_word": word, "ref_word": None, "similarity": float(0)})
    if unmatched == "zero" and len(targets) > len(matched):
        matched = np.concatenate([matched, np.zeros(len(targets) - len(matched), dtype=matched.dtype)])
    return float(np.mean(matched) if aggregate == "mean" else np.min(matched)), matches


def best(target_slots: Sequence[Sequence[str]], reference_slots: Sequence[Sequence[str]], similarity: Similarity,
         aggregate: str = "min", unmatched: str = "official",
         empty_slots: str = "truncate") -> tuple[float, list[dict[str, Any]] | None]:
    """The best (first strict maximum) ALOHa over all combinations, and its matches;
    ``(-inf, None)`` when there is no combination (the official result)."""
    score, matches = -math.inf, None
    refs = [dedupe(c) for c in combinations(reference_slots, empty_slots)]
    for t in combinations(target_slots, empty_slots):
        targets = dedupe(t)
        for r in refs:
            s, m = alohao(targets, r, similarity, aggregate, unmatched)
            if s > score:
                score, matches = s, m
    return score, matches


def no_combination_score(target_slots: Sequence[Sequence[str]], reference_slots: Sequence[Sequence[str]],
                         similarity: Similarity, aggregate: str = "min", unmatched: str = "official",
                         empty_slots: str = "truncate", clean: bool = False) -> tuple[float, list[dict[str, Any]]]:
    """``no_objects="branch"``: what ``_compute_alohao_scores`` gives when a side has no
    combination (it is then scored as an empty list); both sides empty: the candidate's branch.

    ``clean=True`` (``no_objects="clean"``): a candidate with no object scores 1.0, the top of
    the range, as the official branch's comment says ("If no target objects predicted, no
    hallucinations") where its ``min`` value 0.0 would rank such a caption as the most
    hallucinated; no reference object is scored as by the branch."""
    first = next(iter(combinations(target_slots, empty_slots)), None)
    if first is None:
        return (1.0, []) if clean else alohao([], [], similarity, aggregate, unmatched)
    # no reference combination: every candidate combination scores 0.0; the first one wins
    return alohao(dedupe(first), [], similarity, aggregate, unmatched)


def localize(matches: Sequence[dict[str, Any]] | None) -> str | None:
    """The candidate object with the lowest ALOHa_o (first of equals): where ALOHa says the
    hallucination is (the paper's localization); None without matches."""
    if not matches:
        return None
    low = min(float(m["similarity"]) for m in matches)
    return next(str(m["target_word"]) for m in matches if float(m["similarity"]) == low)
