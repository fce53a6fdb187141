"""Input checks and the chunked runner shared by the pycocoevalcap drop-in scorers.

pycocoevalcap 1.2 checks its inputs with ``assert`` statements (the same dict keys on both
sides; per item a list of exactly one hypothesis and a non-empty list of references). The
drop-in checks the same conditions, always (also under ``python -O``), and raises
:class:`CompatInputError`: a one-line message naming the item that is both an
``AssertionError`` (what code written against pycocoevalcap may catch) and capeval's
:class:`~capeval.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from capeval.errors import InputError


class CompatInputError(InputError, AssertionError):
    """Input pycocoevalcap would reject with a failed ``assert``; the message names the item."""


def check_keys(gts: Mapping[Any, Any], res: Mapping[Any, Any], *, sort: bool = False) -> list[Any]:
    """The item ids in pycocoevalcap's order: ``gts``'s iteration order (SPICE: sorted).

    pycocoevalcap: ``assert(gts.keys() == res.keys())`` (set equality of the key views).
    """
    if not isinstance(gts, Mapping) or not isinstance(res, Mapping):
        raise CompatInputError(
            f"gts and res must be dicts {{image_id: [caption, ...]}}, got {type(gts).__name__} and {type(res).__name__}"
        )
    if gts.keys() != res.keys():
        only_g = [k for k in gts if k not in res]
        only_r = [k for k in res if k not in gts]
        first = (only_g or only_r)[0]
        raise CompatInputError(
            f"gts and res must have the same image ids: {len(only_g)} only in gts, {len(only_r)} only in res "
            f"(first: {first!r})",
            str(first),
        )
    return sorted(gts) if sort else list(gts)


def collect(
    ids: Sequence[Any], gts: Mapping[Any, Any], res: Mapping[Any, Any], *, strict: bool = True
) -> tuple[list[str], list[list[str]]]:
    """(hypotheses, reference lists) of ``ids``, each item checked as pycocoevalcap asserts.

    ``strict``: hypothesis and references must be ``list`` objects (Bleu, Cider, Rouge, Spice
    assert ``type(x) is list``); METEOR only asserts one hypothesis and takes any sequence.
    """
    hyps: list[str] = []
    refs: list[list[str]] = []
    for i in ids:
        hypo, ref = res[i], gts[i]
        if strict and (type(hypo) is not list or type(ref) is not list):
            raise CompatInputError(
                f"image {i!r}: res and gts values must be lists, got {type(hypo).__name__} and {type(ref).__name__}",
                str(i),
            )
        if isinstance(hypo, (str, bytes)) or len(hypo) != 1:
            n = "a string" if isinstance(hypo, (str, bytes)) else f"{len(hypo)} captions"
            raise CompatInputError(f"image {i!r}: res must hold exactly one caption, got {n}", str(i))
        if isinstance(ref, (str, bytes)) or len(ref) < 1:
            raise CompatInputError(f"image {i!r}: gts must hold a non-empty list of captions", str(i))
        for text in (hypo[0], *ref):
            if not isinstance(text, str):
                raise CompatInputError(f"image {i!r}: captions must be strings, got {type(text).__name__}", str(i))
        hyps.append(hypo[0])
        refs.append(list(ref))
    return hyps, refs


def run_chunks(job: Callable[[tuple[list[str], list[list[str]]]], Any], hyps: list[str], refs: list[list[str]]) -> list[Any]:
    """``job((hyps[a:b], refs[a:b]))`` per chunk, in order, over capeval's text pipeline's
    chunks and forked workers (:mod:`capeval.metrics.workers`: automatic, results identical)."""
    import math

    from capeval.metrics.text import DEFAULT_CHUNK, RECYCLE_ITEMS
    from capeval.metrics.workers import map_tasks, resolve_workers, spans

    n = len(hyps)
    workers = resolve_workers(None, n)
    chunk = DEFAULT_CHUNK if workers <= 1 else min(DEFAULT_CHUNK, max(64, math.ceil(n / (4 * workers))))
    tasks = ((hyps[a:b], refs[a:b]) for a, b in spans(n, chunk))
    return list(map_tasks(job, tasks, workers, max(1, RECYCLE_ITEMS // chunk)))
