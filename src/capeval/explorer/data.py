"""The explorer's data: results turned into rows and columns, and JSON that stays data inside
an HTML ``<script type="application/json">`` block.

A row is ``[id, [candidate per system], [references], thumbnail or null, [score per column],
{extras} or null, [[marked words] per system] or null]``; the page's script reads it with
``JSON.parse`` and writes every string into the page as text (``textContent``), never as markup.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

#: characters that could end or confuse the ``<script>`` element around the JSON (``</script>``,
#: ``<!--``) or a JavaScript parser (U+2028/2029), written as JSON escapes: the same data for
#: ``JSON.parse``, no markup for the HTML tokenizer.
_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})

#: longest JSON text of one item's extras on the page; longer values are replaced by a note (the
#: page is a viewer: ``--per-item-extras`` keeps them whole)
MAX_EXTRAS_CHARS = 4000

#: the per-item extras whose words are marked in the candidate: CHAIR's ``hallucinated``
#: ``[[word, object], ...]`` (chair/scorer.py), AMBER's and ALOHa's ``[word, ...]``
MARKED_EXTRAS = ("hallucinated",)


def clean(value: Any) -> Any:
    """JSON data for the page: NaN and infinities as null, numpy values as Python, keys as text,
    tuples as lists, anything else as its text (a page never fails on an odd value)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2 ** 53 else float(value) if abs(value) < 1e308 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [clean(v) for v in value]
    if hasattr(value, "tolist"):
        return clean(value.tolist())
    return str(value)


def script_json(value: Any) -> str:
    """``value`` as compact JSON safe inside ``<script type="application/json">``: no ``<``,
    ``>``, ``&``, U+2028 or U+2029 left as such (JSON escapes instead); ``JSON.parse`` of the text
    gives ``value`` back. Lone surrogates stay JSON escapes when the text is encoded with
    :func:`encode`."""
    return json.dumps(clean(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False).translate(_SAFE)


def encode(text: str) -> bytes:
    """UTF-8 of :func:`script_json`'s text; a lone surrogate (only possible inside a JSON string)
    becomes the JSON escape ``\\udXXX``, so the bytes are valid UTF-8 and the same data."""
    return text.encode("utf-8", "backslashreplace")


def number(value: Any) -> float | None:
    """A per-item score as a JSON number, or None (missing, NaN, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def extras_columns(results: Sequence[Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``[(label, name, {id: value})]``: every per-item extra of ``results`` once (CHAIR-s and
    CHAIR-i share one ``hallucinated`` mapping: it is listed under the first), labelled
    ``metric.name``."""
    out: list[tuple[str, str, Mapping[str, Any]]] = []
    for r in results:
        extras = r.per_item_extras() if hasattr(r, "per_item_extras") else {}
        for name, values in extras.items():
            # the same object in memory; equal values once read back from --per-item-extras
            if any(n == name and (v is values or v == values) for _, n, v in out):
                continue
            out.append((f"{r.metric}.{name}", str(name), values))
    return out


def marked_words(value: Any) -> list[str]:
    """The words to mark from a ``hallucinated`` extra: ``[[word, object], ...]`` (CHAIR) or
    ``[word, ...]`` (AMBER, ALOHa); anything else marks nothing."""
    words: list[str] = []
    if not isinstance(value, (list, tuple)):
        return words
    for entry in value:
        word = entry[0] if isinstance(entry, (list, tuple)) and entry else entry
        if isinstance(word, str) and word.strip() and word not in words:
            words.append(word)
    return words


def item_extras(item: str, extras: Sequence[tuple[str, str, Mapping[str, Any]]]) -> tuple[dict[str, Any] | None,
                                                                                            list[str]]:
    """(``{label: value}`` of the item's extras, cut to :data:`MAX_EXTRAS_CHARS`, or None; the
    words to mark in its candidate)."""
    found: dict[str, Any] = {}
    marks: list[str] = []
    for label, name, values in extras:
        if item not in values:
            continue
        value = clean(values[item])
        if name in MARKED_EXTRAS:
            marks += [w for w in marked_words(value) if w not in marks]
        found[label] = value
    if not found:
        return None, marks
    size = len(json.dumps(found, ensure_ascii=False))
    if size > MAX_EXTRAS_CHARS:
        for label in sorted(found, key=lambda k: -len(json.dumps(found[k], ensure_ascii=False))):
            n = len(json.dumps(found[label], ensure_ascii=False))
            found[label] = f"({n} characters left out of the page; --per-item-extras has them)"
            size -= n
            if size <= MAX_EXTRAS_CHARS:
                break
    return found, marks


def summary(results: Sequence[Any]) -> list[dict[str, Any]]:
    """The page's header rows: metric, system score, items, signature, skipped count and the
    scalar extras (truncation counts and other counters)."""
    out = []
    for r in results:
        per_item = set(r.per_item_extras()) if hasattr(r, "per_item_extras") else set()
        scalars = {str(k): clean(v) for k, v in r.extras.items()
                   if k not in per_item and isinstance(v, (int, float, str, bool))}
        out.append({"metric": r.metric, "system": number(r.system), "n": len(r.items), "signature": str(r.signature),
                    "skipped": len(r.skipped), "counters": scalars})
    return out


def score_rows(texts: Iterable[tuple[str, str, Sequence[str]]], results: Sequence[Any],
               thumb: Any = None, explained: Any = None) -> Iterator[list[Any]]:
    """One row per item of ``texts`` (``(id, candidate, references)`` in order) with a score per
    result (None where the item has none: skipped, an error item), its extras, marked words,
    ``thumb(id)`` (a URL or None) and, when given, ``explained(id)`` (the URL of its explanation
    picture, the row's eighth field)."""
    extras = extras_columns(results)
    for item, candidate, refs in texts:
        found, marks = item_extras(item, extras)
        scores = [number(r.items.get(item)) for r in results]
        row = [item, [candidate], list(refs or ()), thumb(item) if thumb else None, scores, found,
               [marks] if marks else None]
        yield row + [explained(item)] if explained else row
