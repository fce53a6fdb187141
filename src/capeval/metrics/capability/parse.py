"""How CAPability reads a judge's reply and counts (ali-vilab/CAPability ``evaluation/eval.py``
at commit cebb82a; line numbers below are that file's).

1. :func:`read_reply` (``call_and_parse_single_meaasge``, eval.py:365-382): the text after the
   last ```` ```json```` up to the next ```` ``` ```` (stripped); then, if ```` ```python```` is in
   what is left, the same with it; else, if ```` ``` ```` is, the text between the first and
   the second fence; then ``ast.literal_eval``. A reply it cannot read (``SyntaxError``,
   ``ValueError``) is *unparsed*: the official loop asks again.
2. :func:`item_score` (``post_validate_format_<dimension>`` then ``post_process_<dimension>``,
   eval.py:120-343): the checks each dimension makes of the parsed reply, with their slips kept
   (``camera_angle``/``camera_movement`` fail on a ``pred`` entry that repeats a category's
   explanation, since they call ``.split`` on the list, eval.py:266/:288; a ``{object: number}``
   given as a dict fails in ``dynamic_object_number``, eval.py:188). Any exception there makes
   the item *invalid*: asked again, as an unparsed reply. The score is 1 (correct), 0 (not
   mentioned) or -1 (wrong); ``dynamic_object_number`` gives one per annotated object.
3. :func:`metrics` (``calculate_metric``, eval.py:470-491) over the scores of the items that
   got one: ``precision = 100 * correct / hit``, ``recall = 100 * correct / all``,
   ``hit_rate = 100 * hit / all``, ``f1 = 2PR / (P + R)`` (``hit``: scores != 0); the overall
   numbers are the plain means over the dimensions run (eval.py:505-508).

Differences (documented in docs/question-based.md): a reply longer than
:data:`MAX_LITERAL_CHARS` after the fences is not given to ``literal_eval`` (unparsed: bounded
work on a server's text); ``literal_eval`` errors the official code does not catch (an
unhashable dict key's ``TypeError``, ``RecursionError``, ``MemoryError``: the official run
stops) are unparsed replies here; a dimension with no hit gives ``precision`` NaN (the official
code divides by zero; lmms-eval's port writes 0) and one with hits but none correct ``f1`` 0
(official: division by zero; lmms-eval: 0). With ``strict_match`` (eval.py's constructor
default, which its ``__main__`` turns off, eval.py:539) the copied annotation must match.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Sequence

from capeval.metrics.capability import prompts as P

#: the longest text given to ``ast.literal_eval`` (a JSON object of a score and a reason is a
#: few hundred characters; Python's parser takes memory in proportion to what it reads)
MAX_LITERAL_CHARS = 256 * 1024
#: the key a score-type dimension's reply copies its annotation under (eval.py's checks)
_COPY_KEY = {d: d for d in P.TEXT_DIMENSIONS}


class Invalid(Exception):
    """The parsed reply does not pass the dimension's checks (the official loop asks again)."""


def _between(text: str, opening: str) -> str:
    """``text.split(opening)[-1].split("```")[0].strip()`` without splitting: after the last
    ``opening`` up to the next fence (``opening`` cannot overlap itself, so rfind is the last piece)."""
    start = text.rfind(opening) + len(opening)
    end = text.find("```", start)
    return text[start:end if end >= 0 else len(text)].strip()


def strip_fences(message: str) -> str:
    """The text eval.py:372-377 gives to ``literal_eval`` (linear: finds, no splits)."""
    if "```json" in message:
        message = _between(message, "```json")
    if "```python" in message:
        message = _between(message, "```python")
    elif "```" in message:  # message.split("```")[1]: between the first fence and the next
        start = message.find("```") + 3
        end = message.find("```", start)
        message = message[start:end if end >= 0 else len(message)].strip()
    return message


def read_reply(message: str) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, why)`` for one reply (eval.py:371-382)."""
    text = strip_fences(message)
    if len(text) > MAX_LITERAL_CHARS:
        return None, f"a reply of {len(text):,} characters, more than the {MAX_LITERAL_CHARS:,} read"
    try:
        return ast.literal_eval(text), None
    except (SyntaxError, ValueError) as exc:
        return None, f"not a Python literal ({type(exc).__name__})"
    except (TypeError, RecursionError, MemoryError) as exc:  # uncaught there: the official run stops
        return None, f"not a Python literal ({type(exc).__name__})"


def _score(response: Any) -> int:
    """eval.py's ``if score in ["-1", "0", "1"]: int(score)`` and ``assert score in [1, 0, -1]``;
    the value that passes, as the int it equals (True and 1.0 count as 1 there too)."""
    value = response["score"]
    if value in ["-1", "0", "1"]:
        value = int(value)
    for v in (1, 0, -1):
        if value == v:
            return v
    raise Invalid(f"score {value!r} is not 1, 0 or -1")


def _pair_value(field: Any, *, dynamic: bool = False, color: bool = False) -> Any:
    """The value of a copied ``{object: value}`` (eval.py:159-168, :183-192, :208-221)."""
    if isinstance(field, str):
        if ":" not in field:
            raise Invalid("the copied {object: value} has no ':'")
        parts = field.lstrip("{").rstrip("}").split(":")
        if color:
            value = parts[-1] if len(parts) > 2 else parts[1]  # more colons: the last part is the color
            return value.strip()
        _, value = parts  # ValueError on more than one ':' (caught as invalid)
        return int(value.strip())
    if isinstance(field, dict) and not dynamic:
        _, value = list(field.items())[0]
        return value.strip() if color else int(value.strip())
    # dynamic_object_number tests response['object_number'] of the wrapper (eval.py:188): KeyError
    raise Invalid("the copied {object: value} is not a string" + (" (a dict fails there)" if dynamic else ""))


def _pred(response: Any, dimension: str) -> list[Any]:
    """The checked ``pred`` list of a classification reply (eval.py:255-331)."""
    if not isinstance(response, dict) or "pred" not in response:
        raise Invalid("no 'pred' in the reply")
    if response["pred"] == "N/A" or "N/A" in response["pred"]:
        response["pred"] = ["N/A"]
    if isinstance(response["pred"], str):
        response["pred"] = ast.literal_eval(response["pred"])
    pred = response["pred"]
    if not isinstance(pred, list):
        raise Invalid("'pred' is not a list")
    names, explains = P.categories(dimension)
    for i in range(len(pred)):
        if pred[i] in explains:
            if dimension != "style":  # response["pred"].split(":"): a list has no split (eval.py:266, :288)
                raise Invalid("'pred' repeats a category's explanation (eval.py calls .split on the list)")
            pred[i] = pred[i].split(":")[0].lower()
        if not (pred[i] == "N/A" or pred[i] in names):
            raise Invalid(f"'pred' entry {pred[i]!r} is not a category")
    return pred


def item_score(dimension: str, replies: Sequence[Any], annotation: Any, strict_match: bool = False) -> Any:
    """The item's score (1, 0 or -1; a list of them for ``dynamic_object_number``) from its
    parsed replies, or :class:`Invalid`. Any error of the checks is invalid, as eval.py:401-405."""
    try:
        return _item_score(dimension, replies, annotation, strict_match)
    except Invalid:
        raise
    except Exception as exc:  # noqa: BLE001 - eval.py catches every exception of the checks
        raise Invalid(f"{type(exc).__name__} in the checks of the reply") from None


def _item_score(dimension: str, replies: Sequence[Any], annotation: Any, strict: bool) -> Any:
    if dimension == "dynamic_object_number":
        values = list(annotation.values())
        scores = []
        for i, r in enumerate(replies):
            value = _pair_value(r["object_number"], dynamic=True)
            if strict and value != values[i]:
                raise Invalid("the copied number differs from the annotation")
            scores.append(_score(r))
        return scores
    response = replies[0]
    if not isinstance(response, dict):
        raise Invalid("the reply is not a dict")
    if dimension in P.CLASS_DIMENSIONS:
        pred = _pred(response, dimension)
        if len(pred) == 1 and pred[0] == "N/A":
            return 0
        return 1 if annotation in pred else -1
    if dimension in P.PAIR_DIMENSIONS:
        value = _pair_value(response[dimension], color=dimension == "object_color")
        if strict and value != list(annotation.values())[0]:
            raise Invalid("the copied value differs from the annotation")
    elif strict and response[_COPY_KEY[dimension]].strip() != annotation.strip():
        raise Invalid("the copied annotation differs")
    return _score(response)


def metrics(scores: Sequence[int]) -> dict[str, float | int]:
    """``calculate_metric`` of one dimension (eval.py:470-491) on the flat list of scores:
    ``all``, ``hit``, ``correct`` and ``precision``, ``recall``, ``hit_rate``, ``f1_score`` (x100)."""
    n = len(scores)
    hit = sum(1 for s in scores if s != 0)
    correct = sum(1 for s in scores if s == 1)
    precision = 100 * correct / hit if hit else math.nan
    recall = 100 * correct / n if n else math.nan
    hit_rate = 100 * hit / n if n else math.nan
    if math.isnan(precision) or math.isnan(recall):
        f1 = math.nan
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"all": n, "hit": hit, "correct": correct, "precision": precision, "recall": recall,
            "hit_rate": hit_rate, "f1_score": f1}


def flatten(per_item: dict[str, Any]) -> list[int]:
    """The scores of the items, a list score counted per entry (eval.py:472-476)."""
    out: list[int] = []
    for s in per_item.values():
        out.extend(s if isinstance(s, list) else [s])
    return out


def average(per_dimension: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The overall numbers: means over the dimensions (``np.mean``, eval.py:505-508)."""
    import numpy as np

    out = {}
    for key in ("precision", "recall", "hit_rate", "f1_score"):
        vals = [float(m[key]) for m in per_dimension.values()]
        out[key] = float(np.mean(vals)) if vals else math.nan  # numpy's summation order, as there
    return out
