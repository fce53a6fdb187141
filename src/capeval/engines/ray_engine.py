"""Scoring on Ray: shards scored by an actor pool, Parquet shards on disk, an exact merge.

>>> report = score_ray(cands, refs, "coco-ngram", num_workers=2, out_dir="run/")  # doctest: +SKIP

Steps (:func:`score_ray`):

1. the items (candidate order) are cut into shards of ``batch_size``;
2. corpus statistics first: when a metric needs the document frequencies of the whole
   evaluated set (CIDEr-D), the actors count each shard's references
   (``GramIndex.part``), the driver adds the parts in shard order and broadcasts the index
   to every actor once, so every shard is scored with the same ``df`` and ``N``;
3. an actor pool (``ray.util.ActorPool``, one actor per CPU slot or GPU; each builds its
   Evaluator once) scores the shards; each shard becomes one Parquet file, written through
   a temporary file and a rename, so a file that exists is complete;
4. the driver reads the shards back in order, checks every item was scored exactly once,
   and merges: the text metrics through their own ``merge`` over the chunk outputs (BLEU's
   summed counts, METEOR's statistics: the same code and order as the in-process path, so
   per-item and system scores are identical bit for bit); other metrics (CLIP-S family)
   from their per-item scores, system = mean of the items as they define it.

``resume=True`` keeps the complete shard files of an earlier run of the same job
(``manifest.json`` records the job) and scores only the missing ones. Ray is imported
inside the functions: it is the optional ``capeval[ray]`` extra.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capeval import registry
from capeval.engines.shards import (
    check_manifest,
    decode,
    read_shard,
    shard_complete,
    shard_path,
    spans,
)
from capeval.engines.worker import ShardWorker, text_groups
from capeval.errors import InputError, ResourceError
from capeval.result import MetricResult, Report, Signature

#: items per shard unless ``batch_size`` says otherwise
DEFAULT_SHARD = 1024


def is_streamable_text(metric: str) -> bool:
    """Whether ``metric`` is a reference-only text metric with ``score_chunk``/``merge``."""
    from capeval.metrics.text import TextScorer

    spec = registry.get(metric)
    return spec.needs == frozenset({"references"}) and issubclass(spec.factory_class(), TextScorer)


def score_ray(
    candidates: Mapping[Any, Any] | Sequence[str],
    references: Mapping[Any, Any] | None = None,
    metrics: str | Iterable[str] = "coco",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    images: Any = None,
    skip_bad_items: bool = False,
    num_workers: int = 2,
    num_gpus_per_worker: float = 0.0,
    batch_size: int = DEFAULT_SHARD,
    out_dir: str | Path | None = None,
    resume: bool = False,
    address: str | None = None,
    progress: bool | None = False,
    _fault: tuple[int, str] | None = None,
) -> Report:
    """:func:`capeval.score` on Ray: same inputs, same :class:`Report`, same numbers.

    ``num_workers``: actors (a local Ray instance with that many CPUs is started when
    ``address`` is None and Ray is not running yet; ``address``: an existing cluster, e.g.
    ``"auto"`` or ``"ray://host:10001"``). ``num_gpus_per_worker``: GPUs each actor
    reserves (set ``options={"clip-s": {"device": "cuda"}}`` too). ``batch_size``: items
    per shard. ``out_dir``: where the shard files go (a temporary folder, removed after, when
    None; on a cluster it must be storage every node can write). ``resume``: keep the
    complete shards of an earlier run of the same job in ``out_dir``.
    """
    from capeval._optional import require
    from capeval.api import check_options
    from capeval.io.inputs import prepare_text_inputs

    require("ray", "ray", "the Ray engine")
    for name, value in (("num_workers", num_workers), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    names, _ = check_options(metrics, options)
    text_names = [m for m in names if is_streamable_text(m)]
    other_names = [m for m in names if m not in text_names]
    if text_names and references is None:
        raise InputError(f"{text_names[0]} needs references; none were given")
    cands, refs = prepare_text_inputs(candidates, references, needs_references=False)
    if isinstance(images, Mapping):
        images = {str(k): v for k, v in images.items()}
    ids = list(cands)
    if not ids:
        raise InputError("no candidates to score")
    work = spans(len(ids), batch_size)
    plan = {
        "format": 1, "metrics": names, "n_items": len(ids), "batch_size": batch_size,
        "inputs_sha": _inputs_digest(ids, cands, refs, images),
        "options": json.dumps(options or {}, sort_keys=True, default=lambda o: type(o).__name__),
    }
    temp = None
    if out_dir is None:
        if resume:
            raise InputError("resume=True needs out_dir (the folder of the earlier run)")
        temp = tempfile.TemporaryDirectory(prefix="capeval-ray-")
        out_dir = temp.name
    out = Path(out_dir)
    try:
        check_manifest(out, plan, resume)
        todo = [k for k, (a, b) in enumerate(work) if not (resume and shard_complete(shard_path(out, k), k, ids[a:b]))]
        driver_text = None
        if text_names:
            from capeval.evaluator import Evaluator

            driver_text = Evaluator(text_names, options=options)  # no models: text metrics only
        if todo:
            _run(todo, work, out, ids, cands, refs, images, skip_bad_items, text_names, other_names, options,
                 driver_text, num_workers, num_gpus_per_worker, address, progress, _fault)
        return merge_shards(out, work, ids, refs, names, driver_text)
    finally:
        if temp is not None:
            temp.cleanup()


def _run(todo: list[int], work: list[tuple[int, int]], out: Path, ids: list[str], cands: dict[str, str],
         refs: dict[str, list[str]] | None, images: Any, skip_bad_items: bool, text_names: list[str],
         other_names: list[str], options: Any, driver_text: Any, num_workers: int, num_gpus: float,
         address: str | None, progress: bool | None, fault: tuple[int, str] | None) -> None:
    import ray
    from ray.util import ActorPool

    from capeval.metrics.text import span_texts
    from capeval.progress import make_progress

    started = False
    if not ray.is_initialized():
        if address is None:
            ray.init(num_cpus=num_workers, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        started = True
    actor_cls = ray.remote(num_cpus=1, num_gpus=num_gpus, max_restarts=0)(ShardWorker)
    actors = [actor_cls.remote(text_names, other_names, options, fault) for _ in range(min(num_workers, len(todo)))]
    done = 0
    current: list[int] = []
    try:
        ray.get([a.ready.remote() for a in actors])
        pool = ActorPool(actors)
        groups = text_groups(driver_text.scorers) if driver_text is not None else {}
        corpus: dict[str, Any] = {}
        for tokenizer, scorers in groups.items():
            orders = [o for o in (s.corpus_order() for _, s in scorers) if o]
            if not orders:
                continue
            from capeval.metrics.ngrams import GramIndex

            # df over ALL references (every shard, even those a resume keeps), in shard order
            index = GramIndex(max(orders))
            tasks = [span_texts(ids, None, refs, a, b) for a, b in work]
            for part in pool.map(lambda actor, t, tok=tokenizer, n=index.n: actor.count.remote(tok, n, t), tasks):
                index.add_part(part)
            corpus[tokenizer] = index
        if corpus:
            shared = ray.put(corpus)
            ray.get([a.set_corpus.remote(shared) for a in actors])

        def submit(actor: Any, k: int) -> Any:
            a, b = work[k]
            span = ids[a:b]
            task = span_texts(ids, cands, refs, a, b) if text_names else None
            sub_refs = {i: refs[i] for i in span} if refs is not None else None
            sub_images = {i: images[i] for i in span if i in images} if isinstance(images, Mapping) else images
            current.append(k)
            return actor.score.remote(k, str(out), span, task, {i: cands[i] for i in span}, sub_refs,
                                      sub_images, skip_bad_items)

        with make_progress(sum(work[k][1] - work[k][0] for k in todo), "ray shards", progress) as bar:
            for k, n in pool.map_unordered(submit, todo):
                done += 1
                bar.update(n)
    except ray.exceptions.RayActorError as exc:
        raise ResourceError(
            f"a Ray worker died ({type(exc).__name__}); {done} of {len(todo)} shards finished and are kept "
            f"in {out}: run again with resume=True to score the rest"
        ) from exc
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()


def merge_shards(out: Path, work: list[tuple[int, int]], ids: list[str], refs: dict[str, list[str]] | None,
                 names: list[str], driver_text: Any) -> Report:
    """Read every shard of the job back, check coverage, merge into one :class:`Report`."""
    found = sorted(p.name for p in out.glob("shard-*.parquet"))
    expected = [shard_path(out, k).name for k in range(len(work))]
    if found != expected:
        missing = sorted(set(expected) - set(found))
        extra = sorted(set(found) - set(expected))
        raise ResourceError(f"{out}: shard files do not match the job (missing {missing[:3]}, unexpected {extra[:3]})")
    groups = text_groups(driver_text.scorers) if driver_text is not None else {}
    parts: dict[str, list[Any]] = {key: [] for g in groups.values() for key, _ in g}
    other: dict[str, list[tuple[dict[str, Any], np.ndarray]]] = {}
    seen: list[str] = []
    for k, (a, b) in enumerate(work):
        got, cols, meta = read_shard(shard_path(out, k))
        if meta.get("shard") != k or got != ids[a:b]:
            raise ResourceError(f"{shard_path(out, k)}: holds other items than shard {k} of this job")
        seen.extend(got)
        for key, chunks in parts.items():
            chunks.append(decode(meta["parts"][key]))
        for name, info in meta["other"].items():
            other.setdefault(name, []).append((info, cols[name]))
    if seen != ids or len(set(seen)) != len(ids):
        raise ResourceError(f"{out}: items not scored exactly once ({len(seen)} rows for {len(ids)} items)")
    results: dict[str, MetricResult] = {}
    if groups:
        assert refs is not None
        counts = sorted({len(refs[i]) for i in ids})
        nrefs = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
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
    signatures = [decode(info["signature"]) for info, _ in shards]
    if any(s != signatures[0] for s in signatures):
        raise ResourceError(f"{name}: shards were scored with different settings (signatures differ)")
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
    return MetricResult(name, system, items, Signature(signatures[0]), extras, tuple(skipped))


def _inputs_digest(ids: list[str], cands: dict[str, str], refs: dict[str, list[str]] | None, images: Any) -> str:
    """What a resumed run must share with the first: ids, texts and the image sources."""
    h = hashlib.sha256()
    for i in ids:
        h.update(json.dumps([i, cands[i], refs[i] if refs is not None else None]).encode())
    if isinstance(images, Mapping):
        h.update(json.dumps({i: str(images.get(i)) for i in ids}).encode())
    elif images is not None:
        h.update(str(images).encode())
    return h.hexdigest()
