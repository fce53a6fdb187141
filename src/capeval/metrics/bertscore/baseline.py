"""BERTScore's rescaling baselines: read from the installed ``bert_score`` package, never copied.

bert_score 0.3.13 ships ``rescale_baseline/{lang}/{model}.tsv`` (comma-separated despite the
name: ``LAYER,P,R,F``, one row per layer from 0); ``score(rescale_with_baseline=True)`` takes
the row at position ``num_layers`` and casts it to float32. capeval reads the same file from
the installed package (the ``bertscore`` extra installs it) or from ``baseline_path``.
"""

from __future__ import annotations

import csv
import importlib.util
import os
from pathlib import Path

import numpy as np

from capeval.errors import InputError, ResourceError


def package_baseline(lang: str, model: str) -> Path:
    """The baseline file of ``model`` for ``lang`` inside the installed bert_score package."""
    spec = importlib.util.find_spec("bert_score")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError("bertscore rescale_with_baseline: the baselines come from the bert-score package, "
                            "which is not installed: pip install \".[bertscore]\" (bert-score==0.3.13), or give "
                            "-O bertscore.baseline_path=FILE")
    path = Path(list(spec.submodule_search_locations)[0]) / "rescale_baseline" / lang / f"{model}.tsv"
    if not path.is_file():
        raise ResourceError(f"bertscore rescale_with_baseline: bert_score ships no baseline for model {model!r} "
                            f"and lang {lang!r} ({path} is absent); give -O bertscore.baseline_path=FILE")
    return path


def read_baseline(path: str | os.PathLike[str], num_layers: int) -> np.ndarray:
    """``[P, R, F]`` baselines (float32) of layer ``num_layers`` from a baseline file."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise ResourceError(f"bertscore baseline_path: cannot read {path} ({type(exc).__name__})") from None
    body = rows[1:]  # header LAYER,P,R,F
    if num_layers >= len(body):
        raise InputError(f"bertscore baseline file {path} has {len(body)} layer rows; no row for num_layers={num_layers}")
    try:
        values = np.array([float(v) for v in body[num_layers][1:4]], dtype=np.float32)
    except (ValueError, IndexError):
        raise InputError(f"bertscore baseline file {path}: row {num_layers + 1} is not LAYER,P,R,F numbers") from None
    if values.shape != (3,) or not np.all(values < 1):
        raise InputError(f"bertscore baseline file {path}: row {num_layers + 1} needs three baselines below 1")
    return values
