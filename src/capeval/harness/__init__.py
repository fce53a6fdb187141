"""capeval inside evaluation harnesses: lmms-eval task files (``capeval harness lmms-eval --print-path``)
and the functions they name (:mod:`capeval.harness.lmms_tasks`); docs/harnesses.md."""

from __future__ import annotations

from pathlib import Path


def lmms_eval_tasks() -> Path:
    """The folder of capeval's lmms-eval task files, for ``lmms-eval --include_path``."""
    return Path(__file__).resolve().parent / "lmms_eval"
