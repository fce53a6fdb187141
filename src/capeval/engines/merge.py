"""The last step of a distributed job: shard files read back, coverage checked, one Report.

Text metrics are merged by their own ``merge`` over the chunk outputs the shards hold
(BLEU's summed counts, METEOR's statistics: the code and order of the in-process path, so
per-item and system scores are identical bit for bit); other metrics (CLIP-S family, video
metrics, SPICE) from their per-item scores, system = the mean of the items as they define it
(checked per shard, so a metric whose system score is not a mean is refused, not mis-merged).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from capeval.engines.shards import decode, read_shard, shard_name
from capeval.engines.storage import ShardDir
from capeval.engines.worker import text_groups
from capeval.errors import ResourceError
from capeval.result import MetricResult, Report, Signature


def nrefs_text(counts: set[int]) -> str | None:
    """``"5"`` or ``"4-6"`` from the set of reference counts per item (None when empty)."""
    if not counts:
        return None
    low, high = min(counts), max(counts)
    return str(low) if low == high else f"{low}-{high}"


def merge_shards(out: ShardDir | str | Path, work: list[tuple[int, int]], ids: list[str], nrefs: str | None,
                 names: list[str], driver_text: Any) -> Report:
    """Read every shard of the job back, check coverage, merge into one :class:`Report`.

    ``work``: each shard's ``[a, b)`` range of ``ids``; ``nrefs``: the references per item
    as the signatures write it (``"5"``, ``"4-6"``; None without references)."""
    out = out if isinstance(out, ShardDir) else ShardDir(out)
    found = out.names("shard-", ".parquet")
    expected = [shard_name(k) for k in range(len(work))]
    if found != expected:
        missing = sorted(set(expected) - set(found))
        extra = sorted(set(found) - set(expected))
        raise ResourceError(f"{out}: shard files do not match the job (missing {missing[:3]}, unexpected {extra[:3]})")
    groups = text_groups(driver_text.scorers) if driver_text is not None else {}
    parts: dict[str, list[Any]] = {key: [] for g in groups.values() for key, _ in g}
    other: dict[str, list[tuple[dict[str, Any], np.ndarray]]] = {}
    seen: list[str] = []
    for k, (a, b) in enumerate(work):
        got, cols, meta = read_shard(out, k)
        if meta.get("shard") != k or got != ids[a:b]:
            raise ResourceError(f"{out.where(shard_name(k))}: holds other items than shard {k} of this job")
        seen.extend(got)
        for key, chunks in parts.items():
            chunks.append(decode(meta["parts"][key]))
        for name, info in meta["other"].items():
            other.setdefault(name, []).append((info, cols[name]))
    if seen != ids or len(set(seen)) != len(ids):
        raise ResourceError(f"{out}: items not scored exactly once ({len(seen)} rows for {len(ids)} items)")
    results: dict[str, MetricResult] = {}
    if groups:
        assert nrefs is not None
        for g in groups.values():
            for key, s in g:
                for r in s.merge(ids, parts[key], nrefs):
                    results[r.metric] = r
    for name, shards in other.items():
        results[name] = _merge_other(name, ids, shards)
    return Report({m: results[m] for m in names})


def _merge_other(name: str, ids: list[str], shards: list[tuple[dict[str, Any], np.ndarray]]) -> MetricResult:
    """A non-text metric over all shards: items in order, system = mean of the items."""
    skipped = [i for info, _ in shards for i in info["skipped"]]
    skip = set(skipped)
    values = np.concatenate([col for _, col in shards])
    items = {i: float(v) for i, v in zip(ids, values.tolist()) if i not in skip}
    for info, col in shards:
        kept = col[~np.isnan(col)]
        system = decode(info["system"])
        if len(kept) and not math.isclose(system, float(np.mean(kept.tolist())), rel_tol=1e-12, abs_tol=1e-12):
            raise ResourceError(f"{name}: its system score is not the mean of its items; the Ray engine cannot merge it")
    signature = _merged_signature(name, [decode(info["signature"]) for info, _ in shards])
    extras: dict[str, Any] = {}
    for info, _ in shards:
        for key, value in decode(info["extras"]).items():
            if isinstance(value, dict):
                extras.setdefault(key, {}).update(value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                extras[key] = extras.get(key, 0) + value  # counters add up (distinct counts are per shard)
            else:
                extras.setdefault(key, value)
    # the same expression as the in-process scorers: np.mean over the items in input order
    system = float(np.mean(list(items.values()))) if items else float("nan")
    return MetricResult(name, system, items, Signature(signature), extras, tuple(skipped))


def _merged_signature(name: str, signatures: list[dict[str, Any]]) -> dict[str, Any]:
    """The shards' common signature. A field some shards lack and others record, e.g.
    EMScore's ``segments`` rule when only some shards hold items with a time window, is kept
    (as one call over all items records it); a field with two values is an error."""
    merged = max(signatures, key=len)
    for sig in signatures:
        for key, value in sig.items():
            if key not in merged or merged[key] != value:
                shown = f"{key}: {merged.get(key)!r} vs {value!r}"
                raise ResourceError(f"{name}: shards were scored with different settings ({shown})")
    return dict(merged)
