"""Result objects: per-item scores, the system score and a reproducibility signature."""

from __future__ import annotations

import json
import math
import weakref
from array import array
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

from capeval._version import __version__


def _freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


class ItemScores(Mapping[str, float]):
    """Read-only ``id -> score`` in input order, stored compactly: one float64 array per
    metric over an id index shared by the metrics of a call.

    A dict of 400,000 float scores takes ~45 MB per metric; this takes 3.2 MB plus the
    shared index, so the per-item results of a large job stay small beside its inputs.
    Behaves as a read-only dict (equality with any mapping, ``items()``, ``get``); values
    come back as the same floats, bit for bit.
    """

    __slots__ = ("_index", "_values")

    def __init__(self, index: Mapping[str, int], values: Sequence[float]):
        if len(index) != len(values):
            raise ValueError(f"{len(index)} ids but {len(values)} scores")
        self._index = index
        self._values = values if isinstance(values, array) else array("d", values)

    def __getitem__(self, key: str) -> float:
        return self._values[self._index[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        head = ", ".join(f"{k!r}: {v!r}" for k, v in zip(self._index, self._values) )
        return f"ItemScores({{{head}}})" if len(self) <= 8 else f"ItemScores({len(self)} items)"

    def __reduce__(self) -> tuple:
        return ItemScores, (dict(self._index), self._values)

    def in_order(self, ids: Sequence[str]) -> array:
        """The scores of ``ids`` as an ``array("d")`` (a ``KeyError`` for an unknown id): the
        stored array itself when ``ids`` are the stored ids in their order (one pointer
        comparison per id), else one lookup per id."""
        index = self._index
        if len(ids) == len(index) and all(a is b or a == b for a, b in zip(index, ids)):
            return self._values
        return array("d", [self._values[index[i]] for i in ids])

    def to_dict(self) -> dict[str, float]:
        """A plain dict, in input order (``dict(self)`` looks every id up; this zips)."""
        return dict(zip(self._index, self._values))


class _IdIndex(dict):
    """id -> position; weakly referable, so the cache below does not keep it alive."""

    __slots__ = ("__weakref__",)


# the id index of the last compacted result (the metrics of one call share their ids)
_LAST_INDEX: list[Any] = [None]


def _freeze_items(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """Per-item scores as :class:`ItemScores` when they are all floats, else a read-only dict."""
    if isinstance(mapping, ItemScores):
        return mapping
    mapping = mapping or {}
    values = list(mapping.values())
    if not values or not all(type(v) is float for v in values):
        return _freeze(mapping)
    return ItemScores(_shared_index(mapping), array("d", values))


def _shared_index(ids: Sequence[str] | Mapping[str, Any]) -> Mapping[str, int]:
    """The id index of the last compacted result when ``ids`` are its ids, else a new one."""
    index = _LAST_INDEX[0]() if _LAST_INDEX[0] is not None else None
    # usually the same string objects in the same order: a pointer comparison per id
    if index is None or len(index) != len(ids) or not all(a is b or a == b for a, b in zip(index, ids)):
        index = _IdIndex((k, i) for i, k in enumerate(ids))
        _LAST_INDEX[0] = weakref.ref(index)
    return index


def item_scores(ids: Sequence[str], values: Any) -> Mapping[str, float]:
    """Per-item scores ``{ids[i]: values[i]}`` (``values``: a float64 numpy array, or floats)
    as :class:`ItemScores`, without a dict in between; ids must be distinct strings."""
    if len(ids) != len(values):
        raise ValueError(f"{len(ids)} ids but {len(values)} scores")
    if not hasattr(values, "dtype") or not len(ids):
        return _freeze_items(dict(zip(ids, values)))
    data = array("d")
    data.frombytes(values.astype("=f8").tobytes())  # native float64, the array's own layout: same bits
    return ItemScores(_shared_index(ids), data)


@dataclass(frozen=True)
class Signature:
    """What a score depends on, printed as ``key:value|key:value|...``.

    Two results with equal signatures were computed the same way (cf. sacreBLEU's
    signatures).

    Attributes:
        fields: the settings in insertion order: metric first, versions last.
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
    """Scores of one metric over a set of items (frozen).

    Attributes:
        metric: the metric's canonical name.
        system: the corpus-level score as the metric defines it (BLEU's corpus brevity
            penalty and METEOR's aggregated statistics are *not* means of item scores).
        items: item id -> score, in input order.
        signature: what the score depends on (:class:`Signature`).
        extras: sub-scores (e.g. ``{"precision": {...}, "recall": {...}}``) and counters such
            as the number of truncated captions.
        skipped: ids left out with ``skip_bad_items``.
    """

    metric: str
    system: float
    items: Mapping[str, float]
    signature: Signature
    extras: Mapping[str, Any] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", _freeze_items(self.items))
        object.__setattr__(self, "extras", _freeze(self.extras))
        object.__setattr__(self, "skipped", tuple(self.skipped))

    def __len__(self) -> int:
        return len(self.items)

    def per_item_extras(self) -> dict[str, Mapping[str, Any]]:
        """The extras that hold one value per item (``{name: {id: value}}``, e.g. SPICE's
        precision / recall, HICE-S's explanations, VisCE2's answers)."""
        ids = self.items.keys() | set(self.skipped)
        return {k: v for k, v in self.extras.items()
                if isinstance(v, Mapping) and v and all(i in ids for i in v)}

    def to_dict(self, per_item: bool = True) -> dict[str, Any]:
        """Plain JSON data. Without ``per_item``, per-item scores and per-item extras
        (:meth:`per_item_extras`) are left out and the latter only named, so that the
        summary of a large job stays small."""
        out: dict[str, Any] = {
            "metric": self.metric,
            "system": _clean(self.system),
            "signature": str(self.signature),
            "n": len(self.items),
        }
        if self.extras:
            per_item_extras = set() if per_item else set(self.per_item_extras())
            extras = {k: v for k, v in self.extras.items() if k not in per_item_extras}
            if extras:
                out["extras"] = _clean(extras)
            if per_item_extras:
                out["per_item_extras"] = sorted(per_item_extras)
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
    """The result of one ``capeval.score`` call, in the words of the CLI's JSON.

    ``report.scores["cider-d"]`` is the system score (the JSON's ``scores``),
    ``report.signatures["cider-d"]`` its signature string (``signatures``),
    ``report.results`` the per-metric :class:`MetricResult` objects (``results``), and
    :meth:`to_dict` is exactly that JSON. It is also an ordered mapping metric name ->
    :class:`MetricResult` (``report["cider-d"].items`` for per-item scores), and
    ``report.system`` is kept as another name of ``scores``.

    Examples:
        >>> import capeval
        >>> r = capeval.score({"1": "a dog runs"}, {"1": ["a dog is running"]}, metrics="bleu-1")
        >>> round(r.scores["bleu-1"], 4) == round(r.to_dict()["scores"]["bleu-1"], 4)
        True
    """

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
    def scores(self) -> dict[str, float]:
        """Metric name -> system score (the JSON's ``scores``; NaN stays NaN here, null in JSON)."""
        return {k: r.system for k, r in self._results.items()}

    @property
    def system(self) -> dict[str, float]:
        """Another name of :attr:`scores` (kept for code written before the JSON's names)."""
        return self.scores

    @property
    def signatures(self) -> dict[str, str]:
        """Metric name -> signature string (the JSON's ``signatures``)."""
        return {k: str(r.signature) for k, r in self._results.items()}

    @property
    def results(self) -> list[MetricResult]:
        """The per-metric results in order (the JSON's ``results``, as objects)."""
        return list(self._results.values())

    def per_item(self) -> dict[str, dict[str, float]]:
        """``{metric: {id: score}}``, the layout the CLI's ``--per-item`` writes."""
        return {k: r.items.to_dict() if isinstance(r.items, ItemScores) else dict(r.items)
                for k, r in self._results.items()}

    def per_item_extras(self) -> dict[str, dict[str, Any]]:
        """``{metric: {extra: {id: value}}}`` for the metrics that have per-item extras
        (what the CLI's ``--per-item-extras`` writes)."""
        out = {k: r.per_item_extras() for k, r in self._results.items()}
        return {k: _clean({n: dict(v) for n, v in e.items()}) for k, e in out.items() if e}

    def to_dict(self, per_item: bool = False) -> dict[str, Any]:
        """The JSON ``capeval score`` prints (less its ``inputs``).

        Args:
            per_item: also hold each result's per-item scores and per-item extras.

        Returns:
            ``{"scores": {metric: system score}, "signatures": {metric: signature},
            "results": [MetricResult.to_dict(), ...]}``, NaN written as ``None``.
        """
        return {
            "scores": _clean(self.scores),
            "signatures": self.signatures,
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
