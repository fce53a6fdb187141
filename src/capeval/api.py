"""One-call functions on top of :class:`~capeval.evaluator.Evaluator` and the registry."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from capeval import registry
from capeval.evaluator import Evaluator
from capeval.options import check_options, split_keyword_options
from capeval.result import Report

__all__ = ["check_options", "load", "score", "scene_graph_parser", "scene_graphs"]

#: the inputs ``score`` routes to the metrics; every other keyword is an Evaluator option
_INPUTS = ("images", "videos", "segments", "skip_bad_items")


def load(name: str, **options: Any) -> Any:
    """Build the scorer of metric ``name`` once (loads models/resources); call ``.score`` many times.

    ``capeval.load("cider-d").score(candidates, references)`` returns a :class:`Report`.
    For several metrics, use :class:`~capeval.evaluator.Evaluator`.

    Args:
        name: a registered metric name or alias (``capeval list``), e.g. ``"cider-d"``.
        **options: the scorer's constructor options (e.g. ``backbone=``, ``device=``, ``w=``),
            checked against the metric's declared options and ranges before anything is loaded.

    Returns:
        The metric's scorer, a :class:`~capeval.scorer.Scorer`; its
        ``.score(candidates, references, images=...)`` returns a :class:`Report`.

    Raises:
        UnknownNameError: ``name`` is not a registered metric (the message lists the known ones).
        InputError: an unknown option or a value outside its range.
        MissingDependencyError: the metric needs an extra that is not installed (named in the message).
    """
    spec = registry.get(name)
    _, checked = check_options([spec.name], {spec.name: options} if options else None)
    return spec.build(**checked.get(spec.name, {}))


def score(
    candidates: Mapping[Any, Any] | Sequence[str] | None = None,
    references: Mapping[Any, Any] | None = None,
    metrics: str | Iterable[str] = "coco",
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool | None = False,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
    items: Any = None,
    **inputs: Any,
) -> Report:
    """Score candidates with the named metrics/presets and return one :class:`Report`.

    A thin wrapper: ``Evaluator(metrics, options=options).score(...)``. Image and video
    metrics mix in one call: each input goes to the metrics that declare it.

    Args:
        candidates: ``{id: caption}`` (or a list of captions, ids ``"0"``, ``"1"``, ...).
        references: ``{id: [caption, ...]}``; required by reference-based metrics.
        metrics: names, presets (``"coco"``) or a comma list; ``None``: the default preset (``coco``).
        options: ``{metric or group: {option: value}}`` constructor options, all validated
            before the first scorer is built.
        progress: progress on stderr (a bar on a terminal); ``None``: when stderr is a terminal.
        engine: ``"local"`` (in-process) or ``"ray"`` (:func:`capeval.engines.ray_engine.score_ray`,
            the same numbers).
        engine_options: for ``engine="ray"``: num_workers, num_gpus_per_worker, batch_size,
            out_dir, resume, address.
        items: item tables instead of candidates/references/images/videos (one row per item:
            id, candidate, references, image or video path/URI; JSONL, JSON, CSV/TSV or Parquet,
            see :mod:`capeval.io.items`); the ray engine reads them as a Ray dataset.
        **inputs: ``images=``, ``videos=``, ``segments=``, ``skip_bad_items=``; any other keyword
            is an :class:`~capeval.evaluator.Evaluator` option (``cider_d={"sigma": 6.0}``,
            ``device="cuda"``, ``batch_size=32``).

    Returns:
        A :class:`Report`: ``report.scores["cider-d"]`` (system scores), ``report.signatures``,
        ``report["cider-d"].items`` (per-item scores), ``report.to_dict()`` (the CLI's JSON).

    Raises:
        InputError: bad input or option (one line naming the item or option).
        UnknownNameError: an unknown metric or preset.
        ResourceError: a model file or resource is missing or wrong (says what to download).
    """
    from capeval.errors import InputError

    more = {k: v for k, v in inputs.items() if k not in _INPUTS}
    inputs = {k: v for k, v in inputs.items() if k in _INPUTS}
    if engine != "local" or engine_options or items is not None:
        from capeval.engines.dispatch import score_with_engine

        options, shared = split_keyword_options(options, more)
        if shared:  # the engines build their evaluators from per-metric options only
            raise InputError(f"{sorted(shared)[0]}= is an option of the local engine's Evaluator; with "
                             f"engine={engine!r}/items= give it per metric in options=")
        from capeval import truncation

        report = score_with_engine(engine, candidates, references, metrics, options=options, progress=progress,
                                   engine_options=engine_options, items=items, **inputs)
        truncation.announce(report)  # once for the merged shards (the workers hold theirs back)
        return report
    if candidates is None:
        raise InputError("no candidates to score (give candidates, or items=<table file>)")
    from capeval.io.inputs import check_reference_counts

    check_reference_counts(references)  # before any scorer prepares resources
    evaluator = Evaluator(metrics, options=options, progress=progress, **more)
    return evaluator.score(candidates, references, progress=progress, **inputs)


def scene_graph_parser(spacy_model: str = "en_core_web_sm", *, tokenize: bool = True) -> Any:
    """SPICE's scene-graph parser (spaCy, no Java), loaded once: ``.scene_graphs(captions)``.

    Results are cached per caption text.

    Args:
        spacy_model: the spaCy pipeline to parse with (SPICE's rules are written for ``en_core_web_sm``).
        tokenize: PTB-tokenise raw captions first (lower-case, punctuation removed), as the
            ``spice`` metric does.

    Returns:
        The parser; ``parser.scene_graphs(captions)`` gives what :func:`scene_graphs` gives.

    Raises:
        MissingDependencyError: the ``spice`` extra (spaCy and its model) is not installed.
    """
    from capeval.metrics.spice.parser import SceneGraphParser

    return SceneGraphParser(spacy_model, tokenize=tokenize)


def scene_graphs(captions: str | Iterable[str], *, spacy_model: str = "en_core_web_sm",
                 tokenize: bool = True) -> list[Any]:
    """Objects, ``(object, attribute)`` pairs and ``(subject, predicate, object)`` triples of
    each caption, as SPICE's parser reads them (lemmas).

    For many calls, build :func:`scene_graph_parser` once.

    Args:
        captions: one caption or several.
        spacy_model: as :func:`scene_graph_parser`.
        tokenize: as :func:`scene_graph_parser`.

    Returns:
        One :class:`~capeval.metrics.spice.caption_graph.CaptionGraph` per caption (a single
        string gives a one-element list).

    Raises:
        MissingDependencyError: the ``spice`` extra is not installed.
    """
    if isinstance(captions, str):
        captions = [captions]
    return scene_graph_parser(spacy_model, tokenize=tokenize).scene_graphs(captions)
