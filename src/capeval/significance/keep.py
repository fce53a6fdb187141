"""Per-item statistics kept by the scorers for ``capeval compare`` (no second scoring pass).

Within :func:`keeping`, the text metrics whose corpus score is not a mean of item scores
(BLEU's counts, METEOR's statistics, CIDEr-D's n-gram tables) return their per-item
statistics with each chunk's scores and leave them, merged, in the mapping :func:`keeping`
yields (metric name -> statistics); outside it they do nothing extra.

A module global, not a context variable: the scoring pass's forked workers must see it, and
a pool replaces its workers from its own thread, where a context variable is unset (a new
thread starts with an empty context). So one comparison at a time per process.

Within :func:`sharing` (around all the systems of one comparison), the text metrics' passes
share what depends on the references only: the first system's pass leaves its tokenised
references and its corpus index there, and the passes of the next systems on the same
references (same ids, texts, tokenizer, chunks) take them instead of redoing them
(:mod:`capeval.metrics.text_share`). Given the later systems' candidates (:func:`score_ahead`),
the first pass with a corpus scores them beside its own, on joint n-gram tables, and their own
passes take the results. Work that only the resampling needs (CIDEr-D's index of the
references' n-grams by the items holding them: :func:`offer_reference_sets`) is left there
with :func:`defer` and done by the next scoring pass while its forked workers score
(:func:`run_deferred`): the parent waits on them otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_KEPT: dict[str, Any] | None = None
_SHARED: list[Any] | None = None
_DEFERRED: list[Callable[[], None]] | None = None
_AHEAD: list[Any] | None = None
_SETS: dict[str, Any] | None = None  # corpus index token -> its ReferenceSets (None: not built)


@contextmanager
def keeping() -> Iterator[dict[str, Any]]:
    """Within the block, scorers keep their per-item statistics in the mapping yielded."""
    global _KEPT
    before = _KEPT
    kept: dict[str, Any] = {}
    _KEPT = kept
    try:
        yield kept
    finally:
        _KEPT = before


def kept() -> dict[str, Any] | None:
    """The mapping of the innermost :func:`keeping` block, or None outside any."""
    return _KEPT


@contextmanager
def sharing(reference_sets: bool = False) -> Iterator[list[Any]]:
    """Within the block, text scoring passes on the same references share their reference work
    (the list yielded holds it; it is dropped at the end of the block), and work left with
    :func:`defer` waits for the next pass's workers (what is left at the end is dropped).
    ``reference_sets``: the first pass with a corpus keeps the references' (item, n-gram) pairs
    in its corpus pass and builds CIDEr-D's resampling index of them while its scoring pass's
    workers score (:class:`~capeval.significance.reference_sets.ReferenceSets`, found by
    :func:`reference_sets`)."""
    global _SHARED, _DEFERRED, _AHEAD, _SETS
    before = _SHARED, _DEFERRED, _AHEAD, _SETS
    shared: list[Any] = []
    _SHARED, _DEFERRED, _AHEAD, _SETS = shared, [], [], ({} if reference_sets else None)
    try:
        yield shared
    finally:
        _SHARED, _DEFERRED, _AHEAD, _SETS = before


def wants_reference_sets() -> bool:
    """Whether the innermost :func:`sharing` block asked for the references' set index."""
    return _SETS is not None


def offer_reference_sets(sets: Any) -> None:
    """Leave a corpus index's :class:`~capeval.significance.reference_sets.ReferenceSets` for the
    resampling (by the index's token), and its building for the next scoring pass's workers' time."""
    if _SETS is not None:
        _SETS[sets.token] = sets
        defer(sets.get)


def reference_sets(token: str) -> Any | None:
    """The :class:`~capeval.significance.reference_sets.ReferenceSets` of the corpus index named
    ``token``, when a pass of the innermost :func:`sharing` block left one."""
    return _SETS.get(token) if _SETS is not None and token else None


def score_ahead(candidates: list[Any]) -> None:
    """Within :func:`sharing`: the candidates (``{id: caption}``) of the systems to be scored
    after the next one. The next text pass with a corpus scores them beside its own, chunk by
    chunk on joint n-gram tables (:meth:`capeval.metrics.text.TextChunk.joint`), and leaves their
    chunk results with its shared reference work, where their own passes take them instead of
    scoring again; outside a :func:`sharing` block, nothing."""
    if _AHEAD is not None:
        _AHEAD[:] = list(candidates)


def ahead() -> list[Any]:
    """The candidates given to :func:`score_ahead` (empty outside :func:`sharing`)."""
    return list(_AHEAD) if _AHEAD is not None else []


def defer(work: Callable[[], None]) -> None:
    """Run ``work`` (in this process, this thread) while the next scoring pass's forked workers
    score, or at once outside a :func:`sharing` block. ``work`` must be idempotent: its owner may
    also run it when it needs the result first."""
    if _DEFERRED is None:
        work()
    else:
        _DEFERRED.append(work)


def run_deferred() -> None:
    """Run the work left with :func:`defer`, oldest first (a scoring pass calls it once its
    workers are started)."""
    while _DEFERRED:
        _DEFERRED.pop(0)()


def shared_passes() -> list[Any] | None:
    """The list of the innermost :func:`sharing` block, or None outside any."""
    return _SHARED
