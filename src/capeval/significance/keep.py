"""Per-item statistics kept by the scorers for ``capeval compare`` (no second scoring pass).

Within :func:`keeping`, the text metrics whose corpus score is not a mean of item scores
(BLEU's counts, METEOR's statistics, CIDEr-D's n-gram tables) return their per-item
statistics with each chunk's scores and leave them, merged, in the mapping :func:`keeping`
yields (metric name -> statistics); outside it they do nothing extra.

A module global, not a context variable: the scoring pass's forked workers must see it, and
a pool replaces its workers from its own thread, where a context variable is unset (a new
thread starts with an empty context). So one comparison at a time per process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_KEPT: dict[str, Any] | None = None


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
