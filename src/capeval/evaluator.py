"""``Evaluator``: build the scorers of a metric list once, score many batches.

>>> import capeval
>>> ev = capeval.Evaluator("bleu-1,rouge-l")
>>> ev.score({"1": "a dog runs"}, {"1": ["a dog is running"]})["bleu-1"].items["1"] > 0
True

Inputs are routed to each scorer from its registry declaration (``accepts``), so one call can
mix text, image and video metrics. Backbones are shared through a
:class:`~capeval.models.cache.ModelCache`: metrics on the same weights load them once, and a
second ``score`` call loads nothing.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

from capeval import registry
from capeval.errors import InputError
from capeval.models.cache import ModelCache
from capeval.options import SHARED, check_options, option_types, split_keyword_options, validate_options
from capeval import truncation
from capeval.progress import progress_setting
from capeval.result import MetricResult, Report
from capeval.scorer import Batch


class Evaluator:
    """Scorers for ``metrics`` (names, presets or a comma list), built once.

    ``device`` and ``workers`` go to every scorer that has the stage (models; worker
    processes/threads); ``options`` maps a metric, alias or group to constructor options
    (``{"cider-d": {"sigma": 6.0}, "clip": {"w": 2.0}}``); keyword arguments add more:
    a mapping value is one metric's options (``cider_d={"sigma": 6.0}``), any other value is
    an option shared by every scorer that takes it (``batch_size=32``). Everything is
    validated before the first scorer is built. ``strict``: refuse options for metrics not
    being computed (the CLI); by default they are ignored so one mapping can serve many
    evaluators. ``cache``: a :class:`ModelCache` to share loaded backbones with other
    evaluators.
    """

    def __init__(
        self,
        metrics: str | Iterable[str] = "coco",
        *,
        device: str | None = None,
        workers: int | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        strict: bool = False,
        cache: ModelCache | None = None,
        progress: bool | None = False,
        **more: Any,
    ):
        from capeval.devices import check_device

        per_target, shared = split_keyword_options(options, more)
        self.names, checked = check_options(metrics, per_target, strict=strict)
        if device is not None:
            shared["device"] = check_device(device)
        if workers is not None:
            if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
                raise InputError(f"workers must be a positive integer, got {workers!r}")
            shared["workers"] = workers
        self.cache = cache if cache is not None else ModelCache()
        self.progress = progress
        self._groups: list[tuple[list[str], registry.MetricSpec, dict[str, Any]]] = []
        unused = set(shared) - set(SHARED)
        for (_factory, group), members in registry.groups(self.names).items():
            spec = registry.get(members[0])
            types_ = option_types(spec)
            opts: dict[str, Any] = {}
            for key, value in shared.items():
                if types_ is None or key in types_:
                    opts[key] = value
                    unused.discard(key)
            opts.update(checked.get(group, {}))
            for m in members:
                opts.update(checked.get(m, {}))
            validate_options([members[0]], {members[0]: {k: v for k, v in opts.items() if k in shared}})
            self._groups.append((members, spec, opts))
        if unused:
            raise InputError(f"option {sorted(unused)[0]!r} is taken by none of the metrics {', '.join(self.names)}")
        with progress_setting(progress):
            self.scorers = {members[0]: self._build(spec, members, opts) for members, spec, opts in self._groups}

    def _build(self, spec: registry.MetricSpec, members: list[str], opts: dict[str, Any]) -> Any:
        cls = spec.factory_class()
        preflight = getattr(cls, "preflight", None)
        if preflight is not None:  # cheap checks (a missing model) before the backbone is loaded
            preflight(opts)
        default = getattr(cls, "default_backbone", None)
        # a SigLIP PAC-S checkpoint= is merged into a backbone of its own (never into the shared one)
        if default is not None and not (opts.get("checkpoint") and getattr(cls, "checkpoint_owns_backbone", False)):
            name = opts.get("backbone") or default
            if isinstance(name, (str, os.PathLike)):
                types_ = option_types(spec) or {}
                extra = {k: opts.get(k) for k in ("lora", "tokenizer", "checkpoint_dir") if k in types_}
                opts = dict(opts, backbone=self.cache.backbone(name, opts.get("device") or "cpu", **extra))
        return spec.build(metrics=members, **opts)

    @property
    def loads(self) -> int:
        """Backbones loaded so far by this evaluator's cache."""
        return self.cache.loads

    def fit(self, references: Mapping[Any, Any] | Sequence[Sequence[str]]) -> "Evaluator":
        """Fix the corpus statistics of every metric that has some (CIDEr-D df, EMScore IDF)."""
        for scorer in self.scorers.values():
            scorer.fit(references)
        return self

    def score(
        self,
        candidates: Mapping[Any, Any] | Sequence[str],
        references: Mapping[Any, Any] | None = None,
        *,
        images: Any = None,
        videos: Any = None,
        segments: Mapping[Any, Any] | None = None,
        skip_bad_items: bool = False,
        progress: bool | None = None,
    ) -> Report:
        """Score one batch with every metric; each scorer gets the inputs its entry accepts."""
        batch = Batch(candidates, references, images, videos, segments, skip_bad_items)
        return self.score_batch(batch, progress=progress)

    def score_batch(self, batch: Batch, progress: bool | None = None) -> Report:
        """:meth:`score` on a :class:`~capeval.scorer.Batch`."""
        progress = self.progress if progress is None else progress
        registry.check_inputs_used(batch.given(), self.names)
        results: dict[str, MetricResult] = {}
        with progress_setting(progress), truncation.deferred():  # one truncation line for the batch
            # the text metrics run together: one tokenisation, one pass over the chunks
            text = self._text_scorers(batch)
            if text:
                from capeval.metrics.text import score_text

                for scorers in text.values():
                    results.update(score_text(scorers, batch.candidates, batch.references, progress=progress))
            done = {id(s) for scorers in text.values() for s in scorers}
            for members, spec, _ in self._groups:
                scorer = self.scorers[members[0]]
                if id(scorer) in done:
                    continue
                refs = batch.references if "references" in spec.accepts else None
                report = scorer.score(batch.candidates, refs, progress=progress, **batch.inputs_for(spec.accepts))
                for m in members:
                    results[m] = report[m]
        report = Report({m: results[m] for m in self.names})
        truncation.announce(report)
        return report

    def streamable(self) -> bool:
        """Whether every metric is a text metric of one tokenizer, so :meth:`score_stream` can run."""
        from capeval.metrics.text import TextScorer

        scorers = [self.scorers[members[0]] for members, _, _ in self._groups]
        return (all(spec.needs == frozenset({"references"}) for _, spec, _ in self._groups)
                and all(isinstance(s, TextScorer) for s in scorers) and len({s.tokenizer for s in scorers}) == 1)

    def score_stream(self, stream: Any, progress: bool | None = None) -> Report:
        """Score a :class:`~capeval.io.text_stream.TextStream`: items read from files twice, a
        chunk at a time, never all held (a million items in about 0.55 GB); the results equal
        :meth:`score`'s on the same items. Needs :meth:`streamable`."""
        from capeval.metrics.text import score_text_stream

        if not self.streamable():
            raise InputError(f"{', '.join(self.names)}: only text metrics of one tokenizer can score a stream")
        progress = self.progress if progress is None else progress
        scorers = [self.scorers[members[0]] for members, _, _ in self._groups]
        with progress_setting(progress), truncation.deferred():
            results = score_text_stream(scorers, stream.ids, sorted(stream.ref_counts), stream.items,
                                        progress=progress)
        report = Report({m: results[m] for m in self.names})
        truncation.announce(report)
        return report

    def _text_scorers(self, batch: Batch) -> dict[str, list[Any]]:
        """Text scorers that can share one pass over ``batch``, by tokenizer (none without references)."""
        out: dict[str, list[Any]] = {}
        if batch.references is None:
            return out
        candidates = [
            self.scorers[members[0]]
            for members, spec, _ in self._groups
            if spec.needs == frozenset({"references"}) and not batch.inputs_for(spec.accepts)
        ]
        if candidates:
            from capeval.metrics.text import TextScorer

            for scorer in candidates:
                if isinstance(scorer, TextScorer):
                    out.setdefault(scorer.tokenizer, []).append(scorer)
        return out

    def __repr__(self) -> str:
        return f"Evaluator({', '.join(self.names)})"
