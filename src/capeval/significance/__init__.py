"""Paired significance between caption systems (``capeval compare``, :func:`capeval.compare`).

Light to import; the tests and metric statistics load when :func:`compare` runs.
"""

from __future__ import annotations

from typing import Any


def compare(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Paired significance of systems against a baseline; see :func:`capeval.significance.compare.compare`."""
    from capeval.significance.compare import compare as run

    return run(*args, **kwargs)


__all__ = ["compare"]
