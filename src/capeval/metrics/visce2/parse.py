"""From a VLM's answer to a VisCE2 score.

Maeda et al. 2024 (Sec. 3): the score is the first integer in the answer, after removing the
canonical phrases the model sometimes echoes. ``rule="paper"`` (default) removes echoes of the
scale (``0-100``, ``(0-100)``, ``0 to 100``, ``0 and 100``, with any dash, also when a full
stop follows: "between 0 and 100. 90" -> 90) and takes the first integer of what is left,
clipped to [0, 100] (capeval's choice: the paper's range; a clipped answer is flagged). The
reference code (``src/data/capeval_dataset.py``, ``get_digit_scores``) takes the first
``[0-9]+`` with no echo removal and no clipping: ``rule="reference"`` (the scorer's
``parse_rule``). An answer without a
number is 0 there, silently; here it is an error item (``unparsed="error"``) unless the
reference's 0 is asked for (``unparsed="zero"``, the item is still listed).

Optionally, from a server's token log-probabilities, the probability-weighted expected score
over the candidate integers at the position of the chosen number (renormalised over the
numeric alternatives among the top log-probs), when that number is one token.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from capeval.errors import InputError

#: echoes of the 0-100 scale: "0-100", "(0-100)", "0 to 100", "between 0 and 100" (digits not
#: part of a longer number: "80-100", "5.0 to 100" and "0-100.5" are not echoes; a full stop ending the
#: sentence is not part of a number: "0-100. 42" is an echo, then 42)
SCALE_ECHO = re.compile(r"\(?(?<![0-9])(?<![0-9]\.)0\s*(?:-|\u2013|\u2014|to|and)\s*100(?![0-9]|\.[0-9])\)?",
                        re.IGNORECASE)
#: ASCII digits only, as the reference's ``[0-9]+`` (Python's ``\d`` also matches other scripts'
#: digits: "١٢" would read as 12)
_INT = re.compile(r"[0-9]+")
LOW, HIGH = 0.0, 100.0
UNPARSED = ("error", "zero")
#: "paper": echoes removed, first integer, clipped (Sec. 3); "reference": get_digit_scores' first [0-9]+
RULES = ("paper", "reference")
SIGNATURES = {"paper": "first-int,scale-echo-removed,clip[0,100]", "reference": "first-int(reference)"}


@dataclass(frozen=True)
class Parsed:
    """One answer: ``score`` (None: no number), the matched integer's span in the answer, ``error``."""

    score: float | None
    span: tuple[int, int] | None
    error: str | None = None
    clipped: bool = False  # the integer was outside [0, 100] and was clipped


def echo_spans(answer: str) -> list[tuple[int, int]]:
    """Character spans of scale echoes in ``answer``."""
    return [m.span() for m in SCALE_ECHO.finditer(answer)]


def _digits_value(digits: str) -> float:
    """``float(int(digits))`` for a run of ASCII digits of any length, without ``int()`` (whose
    digit limit raises from 4,301 digits and which is quadratic below it): ``float()`` of the
    digits rounds the same integer to the same double (both are correctly rounded), and is
    ``inf`` where ``float(int(...))`` would raise OverflowError."""
    return float(digits)


def parse_answer(answer: str, unparsed: str = "error", rule: str = "paper") -> Parsed:
    """The score of ``answer``: with ``rule="paper"`` the first integer outside scale echoes,
    clipped to [0, 100]; with ``rule="reference"`` the first integer, as it is.

    ``unparsed="error"``: no number -> ``Parsed(None, None, "no number in the answer")``;
    ``"zero"``: the reference's 0 (``error`` still says why). With ``rule="reference"`` an
    integer too large for a float (309 digits and more) is an error whatever ``unparsed`` says
    (the reference would average a Python int of that size).

    Linear in the answer's length: the integers and the echoes are two sorted streams of
    non-overlapping matches walked side by side (an integer inside an echo is passed over
    without looking at the earlier echoes again), and each regex fails at a position after a
    constant amount of work or a whitespace run that no other start position rescans.
    """
    if unparsed not in UNPARSED:
        raise InputError(f"visce2 option unparsed: expected one of {', '.join(UNPARSED)}, got {unparsed!r}")
    if rule not in RULES:
        raise InputError(f"visce2 option parse_rule: expected one of {', '.join(RULES)}, got {rule!r}")
    if not isinstance(answer, str):
        raise TypeError(f"answer must be a string, got {type(answer).__name__}")
    echoes = SCALE_ECHO.finditer(answer) if rule == "paper" else iter(())
    echo = next(echoes, None)
    any_echo = echo is not None
    for m in _INT.finditer(answer):
        start = m.start()
        while echo is not None and echo.end() <= start:  # echoes ending before this integer
            echo = next(echoes, None)
        if echo is not None and echo.start() <= start:  # inside an echo: not the score
            continue
        raw = _digits_value(m.group(0))
        if rule == "reference":
            if not math.isfinite(raw):
                return Parsed(None, m.span(), f"a number too large to be a score ({len(m.group(0)):,} digits)")
            return Parsed(raw, m.span())
        value = min(max(raw, LOW), HIGH)
        return Parsed(value, m.span(), clipped=value != raw)
    if not answer.strip():
        why = "empty answer"
    else:
        why = "no number besides the scale (0-100)" if any_echo else "no number in the answer"
    return Parsed(0.0 if unparsed == "zero" else None, None, why)


def expected_score(answer: str, tokens: Sequence[Any] | None, parsed: Parsed) -> float | None:
    """Probability-weighted mean of the integer alternatives where the chosen number was generated.

    ``tokens``: the OpenAI chat ``logprobs.content`` list (``{"token", "logprob",
    "top_logprobs": [{"token", "logprob"}]}``). Returns None (the caller keeps the parsed
    integer) when there are no log-probs, the tokens do not spell the answer, or the number
    is split over several tokens (e.g. Llama tokenizers write one digit per token), where a
    one-position expectation would be an expectation over first digits only, or the alternatives
    there are malformed (a log-probability that is not a number <= 0). Range [0, 100].
    """
    if not tokens or not isinstance(tokens, (list, tuple)) or parsed.span is None:
        return None
    texts = [_get(tok, "token") for tok in tokens]
    if not all(isinstance(t, str) for t in texts) or "".join(texts) != answer:
        return None
    start, end = parsed.span
    pos = 0
    for tok, text in zip(tokens, texts):
        lo, hi = pos, pos + len(text)
        pos = hi
        if lo <= start < hi:
            if text.strip() != answer[start:end] or hi < end:
                return None  # the number is not exactly this one token
            weights = 0.0
            total = 0.0
            alts = _get(tok, "top_logprobs") or []
            if not isinstance(alts, (list, tuple)):
                return None  # malformed: the parsed integer is kept
            for alt in alts:
                alt_text = _get(alt, "token")
                logprob = _get(alt, "logprob")
                if not isinstance(alt_text, str) or not _INT.fullmatch(alt_text.strip()) or logprob is None:
                    continue
                try:
                    lp = float(logprob)
                except (TypeError, ValueError, OverflowError):
                    return None  # a malformed alternative: the parsed integer is kept
                if lp > 1e-6:
                    return None  # a probability over 1 is no probability
                p = math.exp(lp)
                weights += p
                total += p * min(max(_digits_value(alt_text.strip()), LOW), HIGH)
            return total / weights if weights > 0 else None
    return None


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
