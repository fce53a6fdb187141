"""The one Scorer contract: construct once (load resources/models), optionally fit corpus
statistics, score many batches.

A scorer is built from its registry entry (:mod:`capeval.registry`), which declares the
inputs it needs and accepts, its range and direction. Every scorer:

- ``produces``: the canonical metric names it can emit; ``metrics``: those this instance emits;
- ``fit(references)``: fixes the corpus statistics the metric depends on (CIDEr-D document
  frequencies, EMScore's IDF) from a reference corpus and returns the scorer; metrics
  without corpus statistics accept it and ignore it. Unfitted, each ``score`` call uses the
  statistics of its own inputs, exactly as pycocoevalcap and the reference EMScore do;
- ``score(candidates, references=None, *, <declared inputs>, progress=False) -> Report``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Protocol, Sequence, runtime_checkable

from capeval.errors import InputError
from capeval.result import Report
from capeval import truncation


@runtime_checkable
class Scorer(Protocol):
    """Anything that turns candidates (+ references, images, videos) into a :class:`Report`."""

    produces: ClassVar[tuple[str, ...]]
    metrics: tuple[str, ...]

    def fit(self, references: Mapping[Any, Any] | Sequence[Sequence[str]]) -> "Scorer": ...

    def score(
        self,
        candidates: Mapping[Any, Any] | Sequence[str],
        references: Mapping[Any, Any] | None = None,
        **inputs: Any,
    ) -> Report: ...


@dataclass(frozen=True)
class Batch:
    """One batch of inputs: candidates plus whatever the metrics declare (see ``registry.INPUTS``)."""

    candidates: Mapping[Any, Any] | Sequence[str]
    references: Mapping[Any, Any] | None = None
    images: Any = None
    videos: Any = None
    segments: Any = None
    skip_bad_items: bool = False

    def inputs_for(self, accepts: frozenset[str]) -> dict[str, Any]:
        """The keyword inputs a scorer that accepts ``accepts`` receives (only those given)."""
        out: dict[str, Any] = {}
        for name in ("images", "videos", "segments"):
            value = getattr(self, name)
            if value is not None and name in accepts:
                out[name] = value
        if self.skip_bad_items and "skip_bad_items" in accepts:
            out["skip_bad_items"] = True
        return out

    def given(self) -> set[str]:
        """Names of the inputs present in this batch (``references`` included)."""
        names = {n for n in ("references", "images", "videos", "segments") if getattr(self, n) is not None}
        if self.skip_bad_items:
            names.add("skip_bad_items")
        return names


class ScorerBase:
    """Metric selection and the default (no corpus statistics) ``fit``; scorers may subclass it."""

    produces: ClassVar[tuple[str, ...]] = ()
    metrics: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # every scorer's ``score`` says on stderr what its text encoder truncated (once per call,
        # or once per run under capeval.truncation.deferred): one place, not one per scorer
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("score")
        if own is not None and not getattr(own, "_announces", False):
            @functools.wraps(own)
            def score(self: Any, *args: Any, **kw: Any) -> Any:
                with truncation.deferred():
                    report = own(self, *args, **kw)
                truncation.announce(report)
                return report

            score._announces = True  # type: ignore[attr-defined]
            cls.score = score  # type: ignore[method-assign]

    def _select(self, metrics: Sequence[str] | None) -> tuple[str, ...]:
        chosen = tuple(metrics) if metrics else self.produces
        unknown = [m for m in chosen if m not in self.produces]
        if unknown:
            raise InputError(f"{type(self).__name__} cannot produce {unknown}; it produces {list(self.produces)}")
        return chosen

    def fit(self, references: Mapping[Any, Any] | Sequence[Sequence[str]]) -> "ScorerBase":
        """This metric has no corpus statistics: nothing to fit (returns ``self``)."""
        return self
