"""AMBER's discriminative (yes/no) scoring, as ``inference.py`` (junyangwang0410/AMBER@534babf) computes it.

A response is correct when it is exactly ``"Yes"`` for a ``yes`` question or exactly ``"No"`` for
a ``no`` one (no lower-casing, no stripping: ``"yes"`` and ``"No."`` are wrong answers). "No" is
the positive class: precision = correct "No" answers / "No" answers, recall = correct "No" answers
/ ``no`` questions. All in percent, rounded to one decimal, every denominator starting at 0.001;
``F1 = round(2 P R / (P + R + 0.0001) * 100, 1)`` on the *rounded* P and R as fractions
(``+ 0.001`` for the existence dimension, as the script has it).

Dimensions (the ``type`` of annotations.json): existence (``discriminative-hallucination``),
attribute (``discriminative-attribute-{state,number,action}``, also reported one by one) and
relation (every other discriminative type: ``discriminative-relation`` and ``relation``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from capeval.metrics.amber.generative import START

DIMENSIONS = {"discriminative-hallucination": "existence", "discriminative-attribute-state": "state",
              "discriminative-attribute-number": "number", "discriminative-attribute-action": "action"}
ATTRIBUTE = ("state", "number", "action")


def dimension(kind: str) -> str:
    """The script's dimension of an annotation type (``relation`` for any other discriminative type)."""
    return DIMENSIONS.get(kind, "relation")


def correct(truth: str, response: str) -> bool:
    """The script's test: ``"Yes"`` for yes, ``"No"`` for no, compared exactly."""
    return response == ("Yes" if truth == "yes" else "No")


@dataclass
class Counts:
    """The script's four counter pairs of one dimension (denominators start at 0.001)."""

    correct: int = 0
    questions: float = START
    no_correct: int = 0  # truth no, answered No (recall's numerator)
    no_questions: float = START
    no_right: int = 0  # answered No, truth no (precision's numerator)
    no_answers: float = START

    def add(self, truth: str, response: str) -> None:
        self.questions += 1
        if truth == "yes":
            self.correct += response == "Yes"
        else:
            self.no_questions += 1
            if response == "No":
                self.correct += 1
                self.no_correct += 1
        if response == "No":
            self.no_answers += 1
            self.no_right += truth == "no"


def _f1(p: float, r: float, eps: float) -> float:
    if math.isnan(p) or math.isnan(r):
        return math.nan
    return round(2 * (p / 100) * (r / 100) / ((p / 100) + (r / 100) + eps) * 100, 1)


def figures(parts: Iterable[Counts], eps: float = 0.0001) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of one or several dimensions' counters summed as the
    script sums them (the attribute figure adds state, number and action counters)."""
    parts = list(parts)

    def total(name: str) -> float:
        # the script adds the counters themselves, 0.001 starts included
        return sum(getattr(c, name) for c in parts)

    acc = math.nan if all(c.questions == START for c in parts) else round(total("correct") / total("questions") * 100, 1)
    p = math.nan if all(c.no_answers == START for c in parts) else round(total("no_right") / total("no_answers") * 100, 1)
    r = math.nan if all(c.no_questions == START for c in parts) else round(total("no_correct") / total("no_questions") * 100, 1)
    return {"accuracy": acc, "precision": p, "recall": r, "f1": _f1(p, r, eps)}
