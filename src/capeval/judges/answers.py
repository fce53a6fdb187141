"""The judges' answer-parsing rules, side by side (VisCE2's: :mod:`capeval.metrics.visce2.parse`).

CLAIR (Chan et al. 2023; DavidMChan/clair ``clair.py``): the first ``{...}`` of the answer is
read as JSON, ``score = float(data["score"])``, ``reason = data.get("reason", "Unknown")``;
otherwise the first match of ``\\d*\\.?\\d+`` is the score (times 100 when below 1, "models that
auto-normalise"), and the reason is what follows the first ``reason`` (case-insensitive) on its
line, colons removed; no number at all: the official code asks again (3 tries), then scores 0.
The value returned is ``score / 100`` (not clipped, as the official code).

FLEUR / RefFLEUR (Lee et al. 2024; Yebin46/FLEUR ``fleur.py``, ``reffleur.py``) and EXPERT
(Kim et al. 2025; hjkim811/EXPERT ``expert.py``): the answer is stripped to digits and dots,
leading and trailing dots removed, read as a float (``score_check``); outside [0, 1] the
official code skips the item. Score smoothing from the token probabilities (softmax over the
whole vocabulary) of the generated tokens:

- ``score_check < 1``: ``d1`` = the first decimal digit of ``str(score_check)``; at the token
  ``d1`` (several such tokens: the second one when ``d1 == 0`` -- the first 0 is the integer
  part -- else the first), ``sum_d p(d) * d * 0.1``; when ``str(score_check)`` has a second
  decimal digit ``d2``, add ``sum_d p(d) * d * 0.01`` at the token ``d2`` (several: the second);
- ``score_check == 1``: ``0.9 * p(0) + p(1)`` at the token of the 1.

Token log-probabilities come in OpenAI's ``logprobs.content`` layout (one entry per generated
token with ``top_logprobs``); a digit missing from a position's ``top_logprobs`` counts as
probability 0 and the digit mass found there is reported (``mass``; 1.0 means every digit
alternative was seen, e.g. the transformers backend, which lists all ten exactly).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from capeval.errors import shown

# -- CLAIR -----------------------------------------------------------------------------------
# Python's \d (any script's digits, which float() reads), as clair.py's and fleur.py's patterns
# are; VisCE2's reference reads [0-9]+ (capeval.metrics.visce2.parse). Both are linear: a failed
# try at a position costs O(1) (\d*\.?\d+ matches wherever a digit is; "reason" is a literal),
# and only the first match is looked for (search, not findall: no list of every number).
_CLAIR_NUMBER = re.compile(r"\d*\.?\d+")
_CLAIR_REASON = re.compile(r"(?i)reason.*")


@dataclass(frozen=True)
class ClairAnswer:
    """``score`` in CLAIR's 0-100 scale (None: nothing to read), ``reason``, ``how`` it was read."""

    score: float | None
    reason: str | None
    how: str  # "json", "number", "none", "non-finite" or "too-deep"


def _first_braces(answer: str) -> str | None:
    """clair.py's ``"{" + answer.split("{")[1].split("}")[0] + "}"`` without splitting the whole
    answer (an answer of 16 MB of ``{`` would make 16 million strings): the text from the first
    ``{`` to the next ``{`` or ``}``, whichever comes first; None without a ``{``."""
    start = answer.find("{")
    if start < 0:
        return None
    start += 1
    ends = [k for k in (answer.find("{", start), answer.find("}", start)) if k >= 0]
    return "{" + answer[start:min(ends) if ends else len(answer)] + "}"


def parse_clair(answer: str) -> ClairAnswer:
    """CLAIR's reading of one answer (``clair.py``'s loop body, without the retry).

    Three deliberate differences: a JSON object whose ``score`` is not a number (``float()``
    raises ``ValueError``/``TypeError``, which the official code does not catch and crashes
    on) falls through to the number rule, like malformed JSON does; a score that is not
    finite (``{"score": NaN}``, ``Infinity``, which Python's ``json`` accepts, or a run of
    digits too long for a float) is no score (``how="non-finite"``): the answer counts as
    unparsed (asked again, then an error item), where the official code would return NaN;
    and a JSON object nested too deeply for Python's parser (``{"score": [[[[...``, where
    ``json`` raises ``RecursionError``) is no score either (``how="too-deep"``).

    Linear in the answer's length: each rule scans it once (no regex here backtracks more
    than a constant at a position); a number of any length is read by ``float()`` (linear,
    and never ``int()``'s digit limit: a 5,000-digit integer in the JSON is not valid JSON
    for Python's ``json``, so the number rule reads it, as ``inf``, i.e. non-finite).
    """
    blob = _first_braces(answer)
    if blob is not None:
        try:
            data = json.loads(blob)
            score = float(data["score"])
            if not math.isfinite(score):
                return ClairAnswer(None, None, "non-finite")
            reason = data.get("reason", "Unknown")
            return ClairAnswer(score, reason if isinstance(reason, str) else json.dumps(reason), "json")
        except RecursionError:
            return ClairAnswer(None, None, "too-deep")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError):
            pass
    number = _CLAIR_NUMBER.search(answer)
    if number is None:
        return ClairAnswer(None, None, "none")
    score = float(number.group(0))
    if not math.isfinite(score):
        return ClairAnswer(None, None, "non-finite")
    if score < 1:
        score *= 100  # the official comment: some models normalise the score themselves
    found = _CLAIR_REASON.search(answer)
    reason = found.group(0).strip()[len("reason"):].replace(":", "").strip() if found else "Unknown"
    return ClairAnswer(score, reason, "number")


# -- FLEUR / EXPERT --------------------------------------------------------------------------
_NOT_NUMBER = re.compile(r"[^\d\.]")


def fleur_number(answer: str) -> float | None:
    """``score_check``: the answer stripped to digits and dots, edge dots removed, as a float
    (None when that is not a number, e.g. empty or ``0.7.5``)."""
    numbers = _NOT_NUMBER.sub("", answer).strip(".")
    try:
        return float(numbers)
    except ValueError:
        return None


@dataclass(frozen=True)
class Smoothed:
    """A smoothed FLEUR/EXPERT score, or why there is none (``error``)."""

    score: float | None
    number: float | None  # score_check, the number the model wrote
    error: str | None = None
    positions: tuple[int, ...] = ()  # token positions read
    mass: tuple[float, ...] = ()  # digit probability mass found at each position read
    notes: tuple[str, ...] = field(default=())


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


class MalformedLogprobs(ValueError):
    """A server's token log-probabilities that cannot be read (``why`` says where)."""


def _probability(logprob: Any) -> float:
    """``exp(logprob)`` of one alternative; :class:`MalformedLogprobs` when ``logprob`` is not a
    number or is above 0 (a probability over 1: ``math.exp`` would even overflow from 710 on).
    NaN stays NaN (the digit's ``max`` then ignores it, as before)."""
    try:
        value = float(logprob)
    except (TypeError, ValueError, OverflowError):
        raise MalformedLogprobs(f"a log-probability that is not a number ({shown(logprob, 40)})") from None
    if value > 1e-6:  # rounding may give a hair above 0; more is no probability
        raise MalformedLogprobs(f"a log-probability above 0 ({value:g}: a probability over 1)")
    return math.exp(value)


def digit_probs(entry: Any) -> tuple[list[float], float]:
    """``([p(0), ..., p(9)], mass)`` at one token position from its ``top_logprobs``
    (digits written as the token ``"d"``, edge whitespace ignored; absent: 0).

    :class:`MalformedLogprobs` when ``top_logprobs`` is neither absent nor a list, or a digit's
    log-probability is not a number <= 0 (what a broken or hostile server may send)."""
    probs = [0.0] * 10
    alts = _get(entry, "top_logprobs")
    if alts is None:
        alts = []
    if not isinstance(alts, (list, tuple)):
        raise MalformedLogprobs(f"top_logprobs is {type(alts).__name__}, not a list")
    for alt in alts:
        text, logprob = _get(alt, "token"), _get(alt, "logprob")
        if not isinstance(text, str) or logprob is None:
            continue
        t = text.strip()
        if len(t) == 1 and t.isdigit() and t.isascii():
            probs[int(t)] = max(probs[int(t)], _probability(logprob))  # " 7" and "7": one digit
    return probs, sum(probs)


def _positions(tokens: Sequence[Any], digit: int) -> list[int]:
    texts = [_get(t, "token") for t in tokens]
    return [k for k, t in enumerate(texts) if isinstance(t, str) and t.strip() == str(digit)]


def smooth(answer: str, tokens: Sequence[Any] | None) -> Smoothed:
    """FLEUR's / EXPERT's smoothed score of ``answer`` from its generated ``tokens``.

    Errors (``score`` None): no number, a number outside [0, 1], no token log-probabilities,
    the digit to read not among the generated tokens (the official code then fails on an
    empty index), a number ``str()`` writes without a decimal point (``1e-05``), and
    log-probabilities a server sent malformed (not a list, a log-probability that is not a
    number <= 0). Linear in the answer's length and the number of tokens.
    """
    number = fleur_number(answer)
    if number is None:
        return Smoothed(None, None, "no number in the answer")
    if not 0.0 <= number <= 1.0:
        return Smoothed(None, number, f"the number {number:g} is outside [0, 1]")
    if not tokens:
        return Smoothed(None, number, "no token log-probabilities in the answer")
    if not isinstance(tokens, (list, tuple)):
        return Smoothed(None, number, f"malformed token log-probabilities ({type(tokens).__name__}, not a list)")
    try:
        return _smooth(number, tokens)
    except MalformedLogprobs as exc:
        return Smoothed(None, number, f"malformed token log-probabilities: {exc}")


def _smooth(number: float, tokens: Sequence[Any]) -> Smoothed:
    text = str(number)
    notes: list[str] = []
    if number < 1.0:
        dot = text.find(".")
        if dot < 0 or dot + 1 >= len(text) or not text[dot + 1].isdigit():
            return Smoothed(None, number, f"cannot read the decimals of {text!r}")
        d1 = int(text[dot + 1])
        found = _positions(tokens, d1)
        if not found:
            return Smoothed(None, number, f"the digit {d1} is not a generated token")
        # several: the second for 0 (the first is the integer part), else the first
        pos = found[1] if len(found) > 1 and d1 == 0 else found[0]
        probs, mass = digit_probs(tokens[pos])
        score = sum(p * d * 0.1 for d, p in enumerate(probs))
        positions, masses = [pos], [mass]
        if len(text) > 3:
            d2 = int(text[dot + 2])
            found2 = _positions(tokens, d2)
            if not found2:
                return Smoothed(None, number, f"the digit {d2} is not a generated token")
            pos2 = found2[1] if len(found2) > 1 else found2[0]
            probs2, mass2 = digit_probs(tokens[pos2])
            score += sum(p * d * 0.01 for d, p in enumerate(probs2))
            positions.append(pos2)
            masses.append(mass2)
        return Smoothed(score, number, None, tuple(positions), tuple(masses), tuple(notes))
    found = _positions(tokens, 1)
    if not found:
        return Smoothed(None, number, "the digit 1 is not a generated token")
    if len(found) > 1:
        notes.append("several 1 tokens: the first is read")  # the official indexing fails there
    probs, mass = digit_probs(tokens[found[0]])
    return Smoothed(0.9 * probs[0] + probs[1], number, None, (found[0],), (mass,), tuple(notes))
