"""Result objects: per-item scores, the system score and a reproducibility signature."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from capeval._version import __version__


def _freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Signature:
    """What a score depends on, printed as ``key:value|key:value|...``.

    Two results with equal signatures were computed the same way (cf. sacreBLEU's
    signatures). ``fields`` keeps insertion order: metric first, versions last.
    """

    fields: Mapping[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", _freeze(self.fields))

    @classmethod
    def build(cls, metric: str, **params: Any) -> "Signature":
        """Signature with ``metric`` first, the given parameters, then versions."""
        fields: dict[str, Any] = {"metric": metric}
        versions = params.pop("versions", None) or {}
        fields.update({k: v for k, v in params.items() if v is not None})
        fields["version"] = __version__
        for name, ver in versions.items():
            fields[f"{name}"] = ver
        return cls(fields)

    def __str__(self) -> str:
        return "|".join(f"{k}:{_fmt(v)}" for k, v in self.fields.items())

    def to_dict(self) -> dict[str, Any]:
        return dict(self.fields)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_fmt(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class MetricResult:
    """Scores of one metric over a set of items.

    ``system`` is the corpus-level score as the metric defines it (BLEU's corpus
    brevity penalty and METEOR's aggregated statistics are *not* means of item scores).
    ``items`` maps item id -> score in input order. ``extras`` holds sub-scores
    (e.g. ``{"precision": {...}, "recall": {...}}``) and counters such as the number
    of truncated captions; ``skipped`` lists ids left out with ``skip_bad_items``.
    """

    metric: str
    system: float
    items: Mapping[str, float]
    signature: Signature
    extras: Mapping[str, Any] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", _freeze(self.items))
        object.__setattr__(self, "extras", _freeze(self.extras))
        object.__setattr__(self, "skipped", tuple(self.skipped))

    def __len__(self) -> int:
        return len(self.items)

    def to_dict(self, per_item: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.metric,
            "system": _clean(self.system),
            "signature": str(self.signature),
            "n": len(self.items),
        }
        if self.extras:
            out["extras"] = _clean(dict(self.extras))
        if self.skipped:
            out["skipped"] = list(self.skipped)
        if per_item:
            out["items"] = {k: _clean(v) for k, v in self.items.items()}
        return out

    def to_json(self, per_item: bool = True, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(per_item=per_item), **kwargs)

    def __str__(self) -> str:
        return f"{self.metric} = {self.system:.6f} ({len(self.items)} items) [{self.signature}]"


class Report(Mapping[str, MetricResult]):
    """Ordered mapping metric name -> :class:`MetricResult` from one ``capeval.score`` call."""

    def __init__(self, results: Mapping[str, MetricResult] | list[MetricResult]):
        if isinstance(results, Mapping):
            self._results = dict(results)
        else:
            self._results = {r.metric: r for r in results}

    def __getitem__(self, key: str) -> MetricResult:
        return self._results[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    @property
    def system(self) -> dict[str, float]:
        """Metric name -> system score."""
        return {k: r.system for k, r in self._results.items()}

    def per_item(self) -> dict[str, dict[str, float]]:
        """``{metric: {id: score}}``, the layout the CLI's ``--per-item`` writes."""
        return {k: dict(r.items) for k, r in self._results.items()}

    def to_dict(self, per_item: bool = False) -> dict[str, Any]:
        return {
            "scores": {k: _clean(r.system) for k, r in self._results.items()},
            "signatures": {k: str(r.signature) for k, r in self._results.items()},
            "results": [r.to_dict(per_item=per_item) for r in self._results.values()],
        }

    def to_json(self, per_item: bool = False, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(per_item=per_item), **kwargs)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={r.system:.4f}" for k, r in self._results.items())
        return f"Report({inner})"


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars/arrays to Python, NaN to None."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _clean(value.tolist())
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
