"""Scoring on Ray: shards scored by an actor pool, Parquet shards on disk, an exact merge.

>>> report = score_ray(cands, refs, "coco-ngram", num_workers=2, out_dir="run/")  # doctest: +SKIP
>>> report = score_ray(items="s3://bucket/items/", metrics="clip-s", out_dir="s3://bucket/run/")  # doctest: +SKIP

Steps (:func:`score_ray`):

1. the items come in input order from in-memory mappings, or from item tables read as a Ray
   dataset (:mod:`capeval.engines.sources`), cut into shards of ``batch_size`` items
   (default by metric family: :func:`default_shard_size`);
2. corpus statistics first, when a metric depends on the whole evaluated set: CIDEr-D's
   document frequencies (``GramIndex.part`` of each shard's references) and EMScore's IDF
   table (document counts of each shard's sentences) are counted by the actors, added by
   the driver in shard order and broadcast once to every actor, so every shard is scored
   with the statistics of the whole job — as one in-process call computes them;
3. an actor pool (``ray.util.ActorPool``; one actor per CPU slot, or per GPU with
   ``num_gpus_per_worker``; each builds its Evaluator once) scores the shards, at most two
   per actor in flight; each shard becomes one Parquet file written through a temporary
   file and a rename, so a file that exists is complete;
4. the driver reads the shards back in order, checks every item was scored exactly once,
   and merges (:mod:`capeval.engines.merge`).

``resume=True`` keeps the complete shard files of an earlier run of the same job
(``manifest.json`` records the job; each shard file the sha256 of its inputs) and scores
only the missing ones. Ray is imported inside the functions: it is the ``capeval[ray]`` extra.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from capeval import registry
from capeval.engines.merge import merge_shards, nrefs_text
from capeval.engines.shards import check_manifest, shard_complete
from capeval.engines.storage import ShardDir
from capeval.engines.sources import DatasetSource, MemorySource, Shard, shard_digest, with_context
from capeval.engines.worker import ShardWorker, text_groups
from capeval.errors import CapevalError, InputError, ResourceError
from capeval.options import check_options
from capeval.result import Report

#: items per shard by metric family (the smallest of the job's families wins): text metrics
#: are cheap per item, an image shard must fit its decoded images, a video shard its frames
SHARD_SIZES = {"text": 2048, "images": 512, "videos": 64}


def default_shard_size(metrics: Sequence[str]) -> int:
    """Items per shard for ``metrics``: :data:`SHARD_SIZES` of their most expensive family."""
    return min(SHARD_SIZES[registry.get(m).media or "text"] for m in metrics)


def is_streamable_text(metric: str) -> bool:
    """Whether ``metric`` is a reference-only text metric with ``score_chunk``/``merge``."""
    from capeval.metrics.text import TextScorer

    spec = registry.get(metric)
    return spec.needs == frozenset({"references"}) and issubclass(spec.factory_class(), TextScorer)


def score_ray(
    candidates: Mapping[Any, Any] | Sequence[str] | None = None,
    references: Mapping[Any, Any] | None = None,
    metrics: str | Iterable[str] = "coco",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    items: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    images: Any = None,
    videos: Any = None,
    segments: Mapping[Any, Any] | None = None,
    skip_bad_items: bool = False,
    num_workers: int = 2,
    num_gpus_per_worker: float = 0.0,
    batch_size: int | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    address: str | None = None,
    progress: bool | None = False,
    _fault: tuple[int, str] | None = None,
) -> Report:
    """:func:`capeval.score` on Ray: same inputs, same :class:`Report`, same numbers.

    Inputs: ``candidates``/``references``/``images``/``videos``/``segments`` as
    :func:`capeval.score`, or ``items``: item tables (:mod:`capeval.io.items`; files, folders
    or URIs) read as a Ray dataset. ``num_workers``: actors (a local Ray instance is started
    when ``address`` is None and Ray is not running yet; ``address``: an existing cluster,
    e.g. ``"auto"`` or ``"ray://host:10001"``). ``num_gpus_per_worker``: GPUs each actor
    reserves (set ``options={"clip-s": {"device": "cuda"}}`` too). ``batch_size``: items per
    shard (default :func:`default_shard_size`). ``out_dir``: where the shard files go (a
    temporary folder, removed after, when None; on a cluster, storage every node can write:
    a shared path or a URI such as ``s3://bucket/run/``, :mod:`capeval.engines.storage`).
    ``resume``: keep the complete shards of an earlier run of the same job in ``out_dir``.
    ``overwrite``: replace the shards of a different job found in ``out_dir`` (refused otherwise).
    """
    from capeval._optional import require
    from capeval.io.inputs import prepare_text_inputs

    require("ray", "ray", "the Ray engine")
    names, _ = check_options(metrics, options)
    if batch_size is None:
        batch_size = default_shard_size(names)
    for name, value in (("num_workers", num_workers), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    text_names = [m for m in names if is_streamable_text(m)]
    other_names = [m for m in names if m not in text_names]
    source: MemorySource | DatasetSource
    if items is not None:
        if candidates is not None or references is not None or images is not None or videos is not None:
            raise InputError("give either items (tables with every column) or candidates/references/images/videos")
        source = DatasetSource(items, batch_size)
        digest = None
    else:
        if candidates is None:
            raise InputError("no candidates to score (give candidates or items)")
        registry.check_references(names, references is not None)
        cands, refs = prepare_text_inputs(candidates, references, needs_references=False)
        if not cands:
            raise InputError("no candidates to score")
        # as the in-process Evaluator (text-only jobs build none on the actors)
        registry.check_inputs_used([k for k, v in (("images", images), ("videos", videos), ("segments", segments))
                                    if v is not None], names)
        keyed = [{str(k): v for k, v in x.items()} if isinstance(x, Mapping) else x for x in (images, videos, segments)]
        source = MemorySource(cands, refs, *keyed, batch_size)
        digest = source.job_digest()
    plan = {
        "format": 2, "metrics": names, "batch_size": batch_size, "inputs": source.describe(), "inputs_sha": digest,
        "options": json.dumps(options or {}, sort_keys=True, default=lambda o: type(o).__name__),
    }
    temp = None
    if out_dir is None:
        if resume:
            raise InputError("resume=True needs out_dir (the folder of the earlier run)")
        temp = tempfile.TemporaryDirectory(prefix="capeval-ray-")
        out_dir = temp.name
    out = ShardDir(out_dir)
    try:
        check_manifest(out, plan, resume, overwrite)
        driver_text = None
        if text_names:
            from capeval.evaluator import Evaluator

            driver_text = Evaluator(text_names, options=options)  # no models: text metrics only
        job = _Job(source, out, text_names, other_names, options, driver_text, skip_bad_items, resume, _fault)
        with _ray_session(num_workers, address):
            job.run(num_workers, num_gpus_per_worker, progress)
        if not job.ids:
            raise InputError(f"{source.source if isinstance(source, DatasetSource) else 'the input'}: no items to score")
        return merge_shards(out, job.work, job.ids, nrefs_text(job.ref_counts), names, driver_text)
    finally:
        if temp is not None:
            temp.cleanup()


@contextlib.contextmanager
def _ray_session(num_workers: int, address: str | None) -> Iterator[None]:
    """Ray running for the job (started here, and stopped after, unless it already ran)."""
    import ray
    import ray.data  # before the logger below: importing it configures Ray Data's logging

    started = False
    helper = None
    if not ray.is_initialized():
        if address is None:
            # one CPU slot beyond the actors' for Ray Data's own tasks (listing and reading files)
            ray.init(num_cpus=num_workers + 1, include_dashboard=False, log_to_driver=False, configure_logging=False)
            from capeval.engines import reaper

            # the node's agents would outlive a driver killed with -9: a helper ends them then
            helper = reaper.start(ray.get_runtime_context().get_node_id())
        else:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        started = True
    data_log = logging.getLogger("ray.data")
    level = data_log.level
    data_log.setLevel(logging.ERROR)  # no "Starting execution of Dataset" lines per pass
    with warnings.catch_warnings():  # the first access to Ray Data's context warns of its own renamed fields
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = ray.data.DataContext.get_current()
    saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars)
    ctx.execution_options.preserve_order = True  # shard k = the same rows in every run
    ctx.enable_progress_bars = False
    try:
        yield
    finally:
        ctx.execution_options.preserve_order, ctx.enable_progress_bars = saved
        data_log.setLevel(level)
        if started:
            ray.shutdown()
        if helper is not None:
            from capeval.engines import reaper

            reaper.release(helper)


def actor_cpus(num_workers: int) -> float:
    """CPU slots each actor reserves: 1, or less when the cluster has fewer than
    ``num_workers + 1`` slots, so that the actors always leave one slot to Ray Data's tasks
    (listing and reading the item files: with every slot held by an actor they would wait forever)."""
    import ray

    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    if cpus >= num_workers + 1:
        return 1.0
    return max(cpus - 1.0, cpus / 2) / num_workers


class _Job:
    """One run of a job: the corpus pass, the scoring pass, and what the merge needs."""

    def __init__(self, source: Any, out: ShardDir, text_names: list[str], other_names: list[str], options: Any,
                 driver_text: Any, skip_bad_items: bool, resume: bool, fault: tuple[int, str] | None):
        self.source, self.out = source, out
        self.text_names, self.other_names, self.options = text_names, other_names, options
        self.groups = text_groups(driver_text.scorers) if driver_text is not None else {}
        self.skip_bad_items, self.resume, self.fault = skip_bad_items, resume, fault
        self.ids: list[str] = []
        self.work: list[tuple[int, int]] = []
        self.ref_counts: set[int] = set()
        self.scored = 0
        self.total = 0
        # what the non-text metrics read: an item table may carry columns no metric uses
        self.used = registry.accepted_inputs(other_names)
        # corpus statistics: n-gram order of CIDEr-D's df per tokenizer; EMScore-family IDF
        self.orders = {tok: max(o) for tok, g in self.groups.items()
                       if (o := [s.corpus_order() for _, s in g if s.corpus_order()])}
        self.want_idf = any(getattr(registry.get(m).factory_class(), "use_idf", None) for m in other_names)

    def run(self, num_workers: int, num_gpus: float, progress: bool | None) -> None:
        import ray
        from ray.util import ActorPool

        from capeval.progress import resolve

        if (self.orders or self.want_idf) and hasattr(self.source, "cache"):
            self.source.cache()  # two passes (corpus, scoring): read the files once
        self.total = self.source.count() if resolve(progress) else 0
        actor_cls = ray.remote(num_cpus=actor_cpus(num_workers), num_gpus=num_gpus, max_restarts=0)(ShardWorker)
        actors = [actor_cls.remote(self.text_names, self.other_names, self.options, self.fault)
                  for _ in range(num_workers)]
        pool = ActorPool(actors)  # before any wait: the error path below drains it
        try:
            ray.get([a.ready.remote() for a in actors])
            corpus = self._corpus(pool)
            if corpus:
                shared = ray.put(corpus)
                ray.get([a.set_corpus.remote(shared) for a in actors])
            self._score(pool, len(actors), progress)
        except ray.exceptions.RayActorError as exc:
            self._drain(pool)  # the live actors finish (and keep) the shards they hold
            raise ResourceError(
                f"a Ray worker died ({type(exc).__name__}); the {self.scored} shards finished in this run "
                f"are kept in {self.out}: run again with --resume (resume=True in Python) to score the rest"
            ) from exc
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(getattr(exc, "cause", None), CapevalError) else None
            if cause is None:
                raise
            raise cause from None  # a bad item found on an actor: its one-line message
        finally:
            for a in actors:
                ray.kill(a)

    def _drain(self, pool: Any, timeout: float = 120.0) -> None:
        """Wait (up to ``timeout`` s in all) for the shards still in flight on live actors."""
        import time

        import ray

        end = time.monotonic() + timeout
        while pool.has_next() and time.monotonic() < end:
            try:
                pool.get_next_unordered(timeout=max(end - time.monotonic(), 0.1))
                self.scored += 1
            except (ray.exceptions.RayError, TimeoutError):
                continue

    def _needs_references(self, shard: Shard) -> None:
        if self.text_names and shard.items.references is None:
            first = next(iter(shard.items.candidates), "?")
            raise InputError(f"{self.text_names[0]} needs references; item {first!r} has none", first)

    def _corpus(self, pool: Any) -> dict[str, Any]:
        """CIDEr-D df per tokenizer and EMScore IDF per scorer over every shard, in shard order."""
        from capeval.metrics.ngrams import GramIndex
        from capeval.tokenize import CONTEXT_CAPTIONS

        orders, want_idf = self.orders, self.want_idf
        if not orders and not want_idf:
            return {}
        indexes = {tok: GramIndex(n) for tok, n in orders.items()}
        idf: dict[str, Any] = {}
        from capeval.metrics.emscore.idf import add_counts, table_from_counts

        def task(actor: Any, value: tuple[Shard, list[str], list[str]]) -> Any:
            shard, _, next_refs = value
            refs = shard.items.references
            texts = (None, [refs[i] for i in shard.ids], [], next_refs) if refs is not None else None
            return actor.count_shard.remote(orders, texts, shard.items.candidates if want_idf else None, refs)

        for text_parts, idf_parts in _ordered(pool, task, with_context(self._checked(), CONTEXT_CAPTIONS)):
            for tok, part in text_parts.items():
                indexes[tok].add_part(part)
            for key, part in idf_parts.items():
                if part is not None:
                    idf[key] = add_counts(idf.get(key), part)
                else:
                    idf.setdefault(key, None)
        out: dict[str, Any] = {"text": indexes}
        if want_idf:
            out["idf"] = {k: table_from_counts(v) if v is not None else None for k, v in idf.items()}
        return out

    def _checked(self) -> Iterator[Shard]:
        for shard in self.source.shards():
            self._needs_references(shard)
            yield shard

    def _score(self, pool: Any, n_actors: int, progress: bool | None) -> None:
        """Score every shard not kept from an earlier run (``self.scored`` counts them)."""
        from capeval.progress import make_progress
        from capeval.tokenize import CONTEXT_CAPTIONS

        in_flight = 0
        with make_progress(self.total, "ray items", progress) as bar:
            for shard, next_hyps, next_refs in with_context(self._checked(), CONTEXT_CAPTIONS):
                ids = shard.ids
                self.work.append((len(self.ids), len(self.ids) + len(ids)))
                self.ids.extend(ids)
                refs = shard.items.references
                if refs is not None:
                    self.ref_counts.update(len(r) for r in refs.values())
                if self._kept(shard):
                    bar.update(len(ids))
                    continue
                if in_flight >= 2 * n_actors:
                    bar.update(pool.get_next_unordered()[1])
                    in_flight -= 1
                    self.scored += 1
                text = (list(shard.items.candidates.values()), [refs[i] for i in ids], next_hyps, next_refs) \
                    if self.text_names else None
                inputs = {k: v for k, v in self.source.shard_inputs(shard).items() if k in self.used}
                pool.submit(lambda a, v: a.score.remote(*v), (
                    shard.k, str(self.out), ids, text, shard.items.candidates, refs, inputs,
                    self.skip_bad_items, shard.digest))
                in_flight += 1
            while pool.has_next():
                bar.update(pool.get_next_unordered()[1])
                self.scored += 1

    def _kept(self, shard: Shard) -> bool:
        """On resume: whether shard ``k``'s file is complete and holds these very inputs."""
        meta = shard_complete(self.out, shard.k, shard.ids) if self.resume else None
        if meta is None:
            return False
        if meta.get("inputs_sha") != shard.digest:
            raise InputError(f"{self.out}: cannot resume, shard {shard.k} was scored on other inputs than the "
                             "items now (the input changed since the first run); use a new folder")
        return True


def _ordered(pool: Any, fn: Any, values: Iterable[Any]) -> Iterator[Any]:
    """``pool.map`` that reads ``values`` lazily (at most one task per actor ahead)."""
    pending = 0
    for v in values:
        if not pool.has_free():
            yield pool.get_next()
            pending -= 1
        pool.submit(fn, v)
        pending += 1
    while pending:
        yield pool.get_next()
        pending -= 1


__all__ = ["SHARD_SIZES", "default_shard_size", "score_ray", "merge_shards", "shard_digest"]
