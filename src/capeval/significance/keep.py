"""Per-item statistics kept by the scorers for ``capeval compare`` (no second scoring pass).

Within :func:`keeping`, the text metrics whose corpus score is not a mean of item scores
(BLEU's counts, METEOR's statistics, CIDEr-D's n-gram tables) return their per-item
statistics with each chunk's scores and leave them, merged, in the mapping :func:`keeping`
yields (metric name -> statistics); outside it they do nothing extra. A context variable, so
the forked workers of a scoring pass see it as the pass that forked them does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_KEPT: ContextVar[dict[str, Any] | None] = ContextVar("capeval_kept_item_stats", default=None)


@contextmanager
def keeping() -> Iterator[dict[str, Any]]:
    """Within the block, scorers keep their per-item statistics in the mapping yielded."""
    kept: dict[str, Any] = {}
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)


def kept() -> dict[str, Any] | None:
    """The mapping of the innermost :func:`keeping` block, or None outside any."""
    return _KEPT.get()
