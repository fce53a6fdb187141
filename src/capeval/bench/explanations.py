"""Explanations of a benchmark's worst-scored items, for metrics that explain their scores
(HICE-S: per-phrase correctness, per-region completeness, an overlay picture)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from capeval.bench.base import read_release_json


def _folder_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name) or "_"


def explain_worst(evaluator: Any, members: Sequence[str], report: Any, specs: Mapping[str, Any],
                  cands: Mapping[str, str], refs: Mapping[str, list[str]] | None, inputs: Mapping[str, Any],
                  folder: Path, k: int) -> dict[str, list[dict[str, Any]]]:
    """For each metric of ``members`` whose scorer has ``explain``: its ``k`` worst-scored items
    (lowest, or highest where lower is better) explained into ``folder/<metric>/``.

    Returns ``{metric: [{"id", "score", "json", "png"}, ...]}`` worst first.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for m in members:
        scorer = next((s for s in evaluator.scorers.values() if m in getattr(s, "metrics", ())), None)
        if scorer is None or not callable(getattr(scorer, "explain", None)):
            continue
        items = report[m].items
        sign = 1.0 if specs[m].higher_is_better else -1.0
        worst = sorted((i for i in items if items[i] == items[i]), key=lambda i: (sign * items[i], i))[:k]
        if not worst:
            continue
        target = folder / _folder_name(m)
        sub = {key: {i: value[i] for i in worst} for key, value in inputs.items() if isinstance(value, Mapping)}
        scorer.explain({i: cands[i] for i in worst}, {i: refs[i] for i in worst} if refs is not None else None,
                       out_dir=target, **sub)
        files: dict[str, Path] = {}
        for path in target.glob("*.json"):
            try:
                files[str(read_release_json(path).get("id"))] = path
            except (OSError, ValueError):
                continue
        out[m] = [{"id": i, "score": float(items[i]), "json": str(files[i]), "png": str(files[i].with_suffix(".png"))}
                  for i in worst if i in files]
    return out
