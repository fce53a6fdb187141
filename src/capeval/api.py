"""One-call convenience functions on top of the registry and the Scorer protocol."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from capeval import registry
from capeval.progress import progress_setting
from capeval.result import MetricResult, Report


_MEDIA = frozenset({"images", "videos"})
_MEDIA_ONLY = _MEDIA | {"skip_bad_items", "segments"}


def check_options(
    metrics: str | Iterable[str], options: Mapping[str, Mapping[str, Any]] | None = None, *, strict: bool = False
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Expand ``metrics`` and validate ``options`` before any heavy work.

    Returns ``(canonical metric names, options keyed by canonical metric/group)``. Unknown
    metrics, unknown or ill-typed options and unusable ``device`` values raise
    :class:`~capeval.errors.CapevalError` subclasses with a one-line message. ``strict``:
    also refuse options for registered metrics that are not computed (the CLI does; the
    library ignores them, so one options mapping can serve several calls).
    """
    from capeval.devices import check_device

    names = registry.expand(metrics)
    checked = registry.check_options(names, options, others="error" if strict else "ignore")
    for opts in checked.values():
        if "device" in opts:
            opts["device"] = check_device(opts["device"])
    return names, checked


def load(name: str, **options: Any) -> Any:
    """Build the scorer of metric ``name`` once (loads models/resources); call ``.score`` many times.

    ``capeval.load("cider-d").score(candidates, references)`` returns a :class:`Report`.
    Options go to the scorer's constructor (e.g. ``backbone=``, ``device=``, ``w=``); unknown
    options are refused before anything is loaded.
    """
    spec = registry.get(name)
    _, checked = check_options([spec.name], {spec.name: options} if options else None)
    return spec.build(**checked.get(spec.name, {}))


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
    name (or its group) to constructor options; they are all validated before the first
    scorer is built. ``inputs`` are passed to scorers that take them (``images=``,
    ``videos=``). Scorers sharing a group run once. ``progress``: draw progress bars on
    stderr (``None``: when stderr is a terminal), for every step including resource
    preparation and tokenisation.
    """
    names, checked = check_options(metrics, options)
    results: dict[str, MetricResult] = {}
    with progress_setting(progress):
        for (_factory, group), members in registry.groups(names).items():
            opts: dict[str, Any] = {}
            opts.update(checked.get(group, {}))
            for m in members:
                opts.update(checked.get(m, {}))
            spec = registry.get(members[0])
            scorer = spec.build(metrics=members, **opts)
            # text-only scorers must not receive images/videos meant for the others
            media_scorer = bool(spec.needs & _MEDIA)
            kwargs: dict[str, Any] = {k: v for k, v in inputs.items() if media_scorer or k not in _MEDIA_ONLY}
            report = scorer.score(candidates, references, progress=progress, **kwargs)
            for m in members:
                results[m] = report[m]
    return Report({m: results[m] for m in names})
