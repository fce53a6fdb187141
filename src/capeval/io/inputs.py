"""Validation of candidates and references: clear errors naming the item, never a silent drop."""

from __future__ import annotations

import contextlib
import contextvars
import numbers
import warnings
from typing import Any, Iterable, Iterator, Mapping, Sequence

from capeval.errors import InputError
from capeval.io.reading import max_references

Candidates = Mapping[Any, Any]
References = Mapping[Any, Any]

_MAX_LISTED = 5


def _ids_text(ids: Iterable[str]) -> str:
    ids = list(ids)
    shown = ", ".join(repr(i) for i in ids[:_MAX_LISTED])
    more = f" and {len(ids) - _MAX_LISTED} more" if len(ids) > _MAX_LISTED else ""
    return shown + more


def id_text(value: Any, where: str) -> str:
    """An item id as text: a string as it is, a number as ``str()`` writes it (a 0-d tensor or
    array by its value). Anything else (a list, a mapping, None, a bool) is an
    :class:`InputError` beginning with ``where``: ``str()`` would silently make the list
    ``[1, 2]`` the id ``"[1, 2]"``."""
    if isinstance(value, str):
        return str(value)
    if not isinstance(value, numbers.Number) and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # a torch 0-d tensor, whose str() is "tensor(3)"
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"{where}: an id must be a string or a number, got {type(value).__name__} ({value!r:.60})")


_EMPTY_EXPECTED: contextvars.ContextVar[bool] = contextvars.ContextVar("capeval_empty_expected", default=False)


@contextlib.contextmanager
def empty_candidates_expected() -> Iterator[None]:
    """Inside the block :func:`warn_empty_candidates` says nothing: the SCST reward scores
    sampled captions at every step, and 0 for an empty one is its documented reward."""
    token = _EMPTY_EXPECTED.set(True)
    try:
        yield
    finally:
        _EMPTY_EXPECTED.reset(token)


def warn_empty_candidates(ids: Sequence[str]) -> None:
    """One warning line for the candidates that are empty (or only spaces): the text metrics
    score them as the empty sentence, as pycocoevalcap does, but never without a word."""
    if ids and not _EMPTY_EXPECTED.get():
        warnings.warn(f"{len(ids):,} empty candidate caption{'s' if len(ids) > 1 else ''} ({_ids_text(ids)}) "
                      "scored as the empty sentence, as the reference implementations do (0 for BLEU, METEOR, "
                      "ROUGE-L, CIDEr-D and SPICE)", UserWarning, stacklevel=2)


class CheckedCandidates(dict):
    """``{id: caption}`` as :func:`normalize_candidates` (empty captions allowed) returned it,
    to be made of that output only: normalising it again with empty captions allowed copies it
    without checking it again (capeval compare hands each system to its scoring pass)."""


class CheckedReferences(dict):
    """``{id: [reference, ...]}`` as :func:`normalize_references` returned it, to be made of
    that output only: normalising it again copies it (each list too) without checking it again,
    and :func:`check_reference_counts` passes it (capeval compare hands the same references to
    every system's pass; checking 160,000 references took 0.15 s each time)."""


def normalize_candidates(candidates: Candidates | Sequence[str], *, allow_empty: bool = True) -> dict[str, str]:
    """Return ``{id: caption}`` with string ids, in input order.

    Accepts ``{id: caption}``, ``{id: [caption]}`` (the COCO results layout, exactly one
    caption) or a plain list of captions (ids become ``"0"``, ``"1"``, ...). Non-string
    captions, several captions for one id and (unless ``allow_empty``) empty captions raise
    :class:`InputError` naming the id.
    """
    if type(candidates) is CheckedCandidates and allow_empty and candidates:
        return dict(candidates)
    if isinstance(candidates, (str, bytes)):
        raise InputError("candidates must be a mapping {id: caption} or a list of captions, not a string")
    if not isinstance(candidates, Mapping):
        try:
            candidates = {str(i): c for i, c in enumerate(candidates)}
        except TypeError:
            raise InputError(
                f"candidates must be a mapping {{id: caption}} or a list of captions, got {type(candidates).__name__}"
            ) from None
    out: dict[str, str] = {}
    for key, value in candidates.items():
        item = key if type(key) is str else id_text(key, "candidates")
        if item in out:
            raise InputError(f"candidate id {item!r} appears twice (ids are compared as strings)", item)
        if isinstance(value, (list, tuple)):
            if len(value) != 1:
                raise InputError(
                    f"candidate {item!r}: expected one caption, got a list of {len(value)}", item
                )
            value = value[0]
        if not isinstance(value, str):
            raise InputError(
                f"candidate {item!r}: caption must be a string, got {type(value).__name__} ({value!r:.60})",
                item,
            )
        if not allow_empty and not value.strip():
            raise InputError(f"candidate {item!r}: caption is empty", item)
        out[item] = value
    if not out:
        raise InputError("no candidates given")
    return out


def normalize_references(references: References) -> dict[str, list[str]]:
    """Return ``{id: [reference, ...]}`` with string ids.

    A single string is accepted as a one-element list. Empty lists, non-string
    references, empty reference strings and more than
    :func:`capeval.io.reading.max_references` references raise :class:`InputError` naming the id.
    """
    if type(references) is CheckedReferences:
        return {key: value.copy() for key, value in references.items()}
    if not isinstance(references, Mapping):
        raise InputError(
            f"references must be a mapping {{id: [reference, ...]}}, got {type(references).__name__}"
        )
    out: dict[str, list[str]] = {}
    limit = max_references()
    for key, value in references.items():
        # the common case checked at C speed (string id, a list of non-blank strings); the
        # loop below finds and names what is wrong otherwise
        if (type(key) is str and type(value) is list and 0 < len(value) <= limit and key not in out
                and all(type(r) is str for r in value) and all(map(str.strip, value))):
            out[key] = value.copy()
            continue
        item = key if type(key) is str else id_text(key, "references")
        if item in out:
            raise InputError(f"reference id {item!r} appears twice (ids are compared as strings)", item)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise InputError(
                f"references of {item!r} must be a list of strings, got {type(value).__name__}", item
            )
        if len(value) == 0:
            raise InputError(f"item {item!r} has an empty reference list", item)
        check_reference_count(item, len(value), limit)
        refs: list[str] = []
        for k, ref in enumerate(value):
            if not isinstance(ref, str):
                raise InputError(
                    f"reference #{k} of item {item!r} must be a string, got {type(ref).__name__} ({ref!r:.60})",
                    item,
                )
            if not ref.strip():
                raise InputError(f"reference #{k} of item {item!r} is empty", item)
            refs.append(ref)
        out[item] = refs
    return out


def check_reference_count(item: str, count: int, limit: int) -> None:
    """One item's number of references against the limit (``--max-references``): the n-gram
    metrics' memory grows with it (1,000,000 references of one image took 4-6 GB)."""
    if count > limit:
        raise InputError(f"item {item!r} has {count:,} references, more than the {limit:,} an item may have "
                         "(set CAPEVAL_MAX_REFERENCES or --max-references to raise the limit)", item)


def check_reference_counts(references: Any) -> None:
    """:func:`check_reference_count` for every item of a references mapping, and nothing else:
    run before any scorer is built (METEOR prepares its resources then), in one pass of
    ``len()`` calls, no copy."""
    if not isinstance(references, Mapping) or type(references) is CheckedReferences:
        return  # normalize_references says what is wrong with it, or checked it already
    limit = max_references()
    for key, value in references.items():
        if isinstance(value, (list, tuple)):
            check_reference_count(str(key), len(value), limit)


def check_same_ids(candidates: Mapping[str, Any], references: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` listing ids present on one side only."""
    if candidates.keys() == references.keys():
        return
    only_c = [i for i in candidates if i not in references]
    only_r = [i for i in references if i not in candidates]
    parts = []
    if only_c:
        parts.append(f"{len(only_c)} candidate id(s) have no references: {_ids_text(only_c)}")
    if only_r:
        parts.append(f"{len(only_r)} reference id(s) have no candidate: {_ids_text(only_r)}")
    raise InputError("; ".join(parts), (only_c or only_r)[0])


def prepare_text_inputs(
    candidates: Candidates | Sequence[str],
    references: References | None,
    *,
    needs_references: bool,
    allow_empty_candidates: bool = True,
) -> tuple[dict[str, str], dict[str, list[str]] | None]:
    """Normalise and cross-check candidates and references for a text metric (empty
    candidates are scored, with one warning naming them: :func:`warn_empty_candidates`)."""
    cands = normalize_candidates(candidates, allow_empty=allow_empty_candidates)
    warn_empty_candidates([i for i, c in cands.items() if not c.strip()])
    if references is None:
        if needs_references:
            raise InputError("this metric needs references; none were given")
        return cands, None
    refs = normalize_references(references)
    check_same_ids(cands, refs)
    return cands, refs


def raise_bad_items(ids: Sequence[str], bad: Mapping[str, str], skip_bad_items: bool) -> None:
    """Unless ``skip_bad_items``: an :class:`InputError` with the first bad item's message (in
    input order; ``bad`` maps id -> one-line problem) and how many more there are."""
    if bad and not skip_bad_items:
        first = next(i for i in ids if i in bad)
        more = f" (and {len(bad) - 1} more bad items; use skip_bad_items to skip them)" if len(bad) > 1 else ""
        raise InputError(bad[first] + more, first)
