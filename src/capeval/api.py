"""One-call convenience functions on top of the registry and the Scorer protocol."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from capeval import registry
from capeval.result import MetricResult, Report


_MEDIA = frozenset({"images", "videos"})
_MEDIA_ONLY = _MEDIA | {"skip_bad_items", "segments"}


def load(name: str, **options: Any) -> Any:
    """Build the scorer of metric ``name`` once (loads models/resources); call ``.score`` many times.

    ``capeval.load("cider-d").score(candidates, references)`` returns a :class:`Report`.
    Options go to the scorer's constructor (e.g. ``backbone=``, ``device=``, ``w=``).
    """
    spec = registry.get(name)
    return spec.build(**options)


def score(
    candidates: Mapping[Any, Any] | Sequence[str],
    references: Mapping[Any, Any] | None = None,
    metrics: str | Iterable[str] = "coco",
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool | None = False,
    **inputs: Any,
) -> Report:
    """Score candidates with the named metrics/presets and return one :class:`Report`.

    ``candidates``: ``{id: caption}``; ``references``: ``{id: [caption, ...]}``;
    ``metrics``: names, presets (``"coco"``) or a comma list. ``options`` maps a metric
    name (or its group) to constructor options. ``inputs`` are passed to scorers that
    take them (``images=``, ``videos=``). Scorers sharing a group run once.
    """
    names = registry.expand(metrics)
    options = dict(options or {})
    results: dict[str, MetricResult] = {}
    for (_factory, group), members in registry.groups(names).items():
        opts: dict[str, Any] = {}
        opts.update(options.get(group, {}))
        for m in members:
            opts.update(options.get(m, {}))
        spec = registry.get(members[0])
        scorer = spec.build(metrics=members, **opts)
        # text-only scorers must not receive images/videos meant for the others
        media_scorer = bool(spec.needs & _MEDIA)
        kwargs: dict[str, Any] = {k: v for k, v in inputs.items() if media_scorer or k not in _MEDIA_ONLY}
        if progress is not None:
            kwargs["progress"] = progress
        report = scorer.score(candidates, references, **kwargs)
        for m in members:
            results[m] = report[m]
    return Report({m: results[m] for m in names})
