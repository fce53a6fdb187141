"""Reading the judge's reply and scoring one video, as ``process_vdc_result.py`` (lines 243-265) does.

The script reads each step-2 reply with ``ast.literal_eval`` and merges it into the question's
record with ``dict.update`` (line 250); then, per video, ``float(qa['score'])`` summed and
``qa['pred'] == 'yes'`` counted (lines 253-260): video score = mean score, video accuracy = share
of ``'yes'``. Any exception on the way (a reply that is no Python literal, a literal ``dict.update``
refuses, a missing ``score`` or ``pred``, a score ``float()`` refuses) is caught around the whole
video (line 266): the video is left out of both means, its error printed. capeval does the same
reading, in the same order, and reports such a video as one error item naming the question and why.

Bounded, because the reply is a server's text: :func:`read_literal` refuses a reply over
:data:`MAX_REPLY_CHARS` characters or nested deeper than :data:`MAX_DEPTH` brackets or holding more
than :data:`MAX_OPERATORS` operator characters outside strings (each binary operator is one
level of the parser's recursion) before ``ast.literal_eval`` sees it; what ``literal_eval`` raises
on the rest (``SyntaxError``, ``ValueError``, ``MemoryError`` from the parser's own limit,
``RecursionError``) is a bad reply. One difference from the script, named: a score that
``float()`` reads as infinite or NaN (the strings ``'inf'``, ``'nan'``) is a bad reply here (the
script would carry it into the mean).
"""

from __future__ import annotations

import ast
import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

#: the longest reply read (characters): 256 tokens (the script's max_tokens) are ~1,000
MAX_REPLY_CHARS = 65536
#: the deepest bracket nesting read (a dict of two keys needs 1)
MAX_DEPTH = 100
#: the most operator characters outside strings (a signed score needs 1)
MAX_OPERATORS = 256
_OPERATORS = frozenset("+-*/%&|^~<>@")


def shape(text: str) -> tuple[int, int]:
    """``(deepest bracket nesting, operator characters)`` of ``text`` outside its quoted strings,
    in one linear pass (a backslash escapes the next character inside a string)."""
    depth = deepest = ops = 0
    quote = ""
    escaped = False
    for c in text:
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}":
            depth -= 1
        elif c in _OPERATORS:
            ops += 1
    return deepest, ops


def read_literal(text: str) -> tuple[Any, str]:
    """``(value, "")`` where ``ast.literal_eval(text)`` gives ``value``, else ``(None, why)``."""
    if len(text) > MAX_REPLY_CHARS:
        return None, f"a reply of {len(text):,} characters (more than the {MAX_REPLY_CHARS:,} read)"
    deepest, ops = shape(text)
    if deepest > MAX_DEPTH:
        return None, f"a reply nested {deepest} brackets deep (more than the {MAX_DEPTH} read)"
    if ops > MAX_OPERATORS:
        return None, f"a reply with {ops} operators (more than the {MAX_OPERATORS} read)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "invalid escape sequence" in the server's text
            return ast.literal_eval(text), ""
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        return None, f"not a Python literal ({type(exc).__name__}: {' '.join(str(exc).split())[:80]})"


@dataclass(frozen=True)
class Video:
    """One video's outcome: ``score`` (mean 0-5) and ``acc`` (share of ``'yes'``), or ``error``
    (the first bad reply: its question's index and why), and each question's merged record."""

    score: float | None
    acc: float | None
    error: str
    records: tuple[dict[str, Any], ...]


def score_video(questions: Sequence[tuple[str, str]], responses: Sequence[str], replies: Sequence[str]) -> Video:
    """Steps 3 and 4 of the script for one video: every reply merged into its question's record
    (``{"question", "answer", "response"}`` updated with the reply's literal), then the sums.

    Order as the script: all replies are read first (line 244), then scores and ``pred`` per
    question (line 254); the first failure in that order is the video's error."""
    records: list[dict[str, Any]] = []
    error = ""
    for k, ((question, answer), response, reply) in enumerate(zip(questions, responses, replies)):
        record: dict[str, Any] = {"question": question, "answer": answer, "response": response}
        records.append(record)
        if error:
            continue
        value, why = read_literal(reply)
        if why:
            error = f"question {k}: {why}"
            continue
        try:
            record.update(value)
        except (TypeError, ValueError) as exc:
            error = f"question {k}: the reply's literal is no dict ({type(exc).__name__}: {str(exc)[:80]})"
    if error:
        return Video(None, None, error, tuple(_plain(r) for r in records))
    total, yes = 0.0, 0
    for k, record in enumerate(records):
        if "score" not in record:
            return Video(None, None, f"question {k}: no 'score' in the reply", tuple(_plain(r) for r in records))
        try:
            value = float(record["score"])
        except (TypeError, ValueError, OverflowError) as exc:
            return Video(None, None, f"question {k}: score {str(record['score'])[:40]!r} is not a number "
                                     f"({type(exc).__name__})", tuple(_plain(r) for r in records))
        if not math.isfinite(value):
            return Video(None, None, f"question {k}: score {value!r} is not finite (capeval's rule; the script "
                                     "would average it)", tuple(_plain(r) for r in records))
        total += value
        if "pred" not in record:
            return Video(None, None, f"question {k}: no 'pred' in the reply", tuple(_plain(r) for r in records))
        if record["pred"] == "yes":
            yes += 1
    return Video(total / len(records), yes / len(records), "", tuple(_plain(r) for r in records))


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    """The record as JSON-safe data: keys as text, a string, bool, None, finite number kept, any
    other value (a tuple, an infinite float, a huge integer) as its repr (cut)."""
    out: dict[str, Any] = {}
    for key, value in list(record.items())[:16]:
        keep = value is None or isinstance(value, (str, bool)) or \
            (isinstance(value, int) and abs(value) < 2**53) or (isinstance(value, float) and math.isfinite(value))
        out[str(key)[:80]] = value if keep else repr(value)[:200]
    return out
