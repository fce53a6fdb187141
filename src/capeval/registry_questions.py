"""Registry entries of the question-based caption metrics (VDCscore, DREAM-1K AutoDQ, CAPability):
plain data, no imports.

An LLM answers questions about the video or image from the candidate caption alone (or extracts
events from it) and judges those answers; the metric is the share judged right. Kept beside
:mod:`capeval.registry` (which turns each dict into a ``MetricSpec``), like
:mod:`capeval.registry_judges`. ``in_all=False`` everywhere: a running judge server is not
something the ``all`` preset should start. Documented in ``docs/question-based.md``.
"""

from __future__ import annotations

from typing import Any

QUESTION_SPECS: list[dict[str, Any]] = []
