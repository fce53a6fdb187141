"""Choosing the engine: ``capeval.score(..., engine="ray")`` and ``capeval score --engine ray``.

``local`` is the in-process Evaluator (the default); ``ray`` is
:func:`capeval.engines.ray_engine.score_ray`. Ray is imported only when it is chosen.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from capeval.errors import InputError
from capeval.result import Report

ENGINES = ("local", "ray")
#: the keyword arguments of score_ray that engine_options may set
RAY_OPTIONS = ("num_workers", "num_gpus_per_worker", "batch_size", "out_dir", "resume", "overwrite", "address")


def check_engine(engine: str, engine_options: Mapping[str, Any] | None = None) -> None:
    """Refuse an unknown engine, or engine options it does not take, before any work."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    extra = sorted(set(engine_options or {}) - (set(RAY_OPTIONS) if engine == "ray" else set()))
    if extra:
        raise InputError(f"engine {engine!r} takes no option {extra[0]!r}")


def score_with_engine(
    engine: str,
    candidates: Mapping[Any, Any] | Sequence[str] | None,
    references: Mapping[Any, Any] | None = None,
    metrics: str | Iterable[str] = "coco",
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool | None = False,
    engine_options: Mapping[str, Any] | None = None,
    items: Any = None,
    **inputs: Any,
) -> Report:
    """Score on ``engine`` ("local" or "ray"); ``engine_options`` go to the engine
    (for ray: ``num_workers``, ``num_gpus_per_worker``, ``batch_size``, ``out_dir``,
    ``resume``, ``address``). ``inputs``: as :func:`capeval.score`; ``items``: item tables
    (:mod:`capeval.io.items`) instead of ``candidates``/``references``/``images``/``videos``."""
    check_engine(engine, engine_options)
    if items is not None and (candidates is not None or references is not None
                              or any(inputs.get(k) is not None for k in ("images", "videos", "segments"))):
        raise InputError("give either items (tables with every column) or candidates/references/images/videos")
    if engine == "local":
        return _score_local(candidates, references, metrics, options, progress, items, inputs)
    from capeval.engines.ray_engine import score_ray

    return score_ray(candidates, references, metrics, options, progress=progress, items=items,
                     images=inputs.get("images"), videos=inputs.get("videos"), segments=inputs.get("segments"),
                     skip_bad_items=bool(inputs.get("skip_bad_items")), **dict(engine_options or {}))


def _score_local(candidates: Any, references: Any, metrics: Any, options: Any, progress: bool | None,
                 items: Any, inputs: dict[str, Any]) -> Report:
    """The in-process Evaluator; item tables are read here and URIs fetched to a temporary folder."""
    from capeval.evaluator import Evaluator

    evaluator = Evaluator(metrics, options=options, progress=progress)
    if items is None:
        return evaluator.score(candidates, references, progress=progress, **inputs)
    import tempfile
    from pathlib import Path

    from capeval.io.items import read_items
    from capeval.io.uris import fetch_media

    if not inputs.get("skip_bad_items") and evaluator.streamable():
        from capeval.io.text_stream import stream_item_tables

        # tables of ids, candidates and references: streamed, never all in memory
        stream = stream_item_tables([items] if isinstance(items, (str, os.PathLike)) else list(items))
        if stream is not None:
            return evaluator.score_stream(stream, progress=progress)
    table = read_items(items)
    if not table.candidates:
        raise InputError(f"{_names(items)}: no items")
    skip = bool(inputs.get("skip_bad_items"))
    # a table may carry columns the metrics do not read (images while scoring n-gram metrics)
    from capeval import registry

    used = registry.accepted_inputs(evaluator.names)
    references = table.references if "references" in used else None
    with tempfile.TemporaryDirectory(prefix="capeval-fetch-") as tmp:
        media = fetch_media({k: v for k, v in table.inputs().items() if k in used}, Path(tmp), skip)
        return evaluator.score(table.candidates, references, progress=progress, skip_bad_items=skip, **media)


def _names(paths: Any) -> str:
    """Item-table paths as a user wrote them, for a message."""
    return ", ".join(map(str, paths)) if isinstance(paths, (list, tuple)) else str(paths)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--address``, ``--num-workers``, ``--shard-size``, ``--shard-dir``, ``--resume``."""
    g = parser.add_argument_group("engine (distributed scoring)")
    g.add_argument("--engine", choices=ENGINES, default="local",
                   help="local: in this process (default); ray: shards on a Ray actor pool (capeval[ray])")
    g.add_argument("--address", help="Ray cluster address (e.g. auto, ray://host:10001); default: a local Ray instance")
    g.add_argument("--num-workers", type=int, default=2, help="Ray actors (default 2)")
    g.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs each Ray actor reserves (default 0)")
    g.add_argument("--shard-size", type=int, default=None,
                   help="items per shard (default by metric family: 2048 text, 512 image, 64 video)")
    g.add_argument("--shard-dir", help="folder of the per-shard Parquet files (kept; needed by --resume)")
    g.add_argument("--resume", action="store_true", help="keep the complete shards already in --shard-dir")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the shards of another job in --shard-dir (refused without it)")


def engine_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``engine_options`` for :func:`score_with_engine` from the parsed flags (checked)."""
    if args.engine == "local":
        given = [f for f, v in (("--address", args.address), ("--shard-dir", args.shard_dir),
                                ("--resume", args.resume), ("--overwrite", args.overwrite)) if v]
        if given:
            raise InputError(f"{given[0]} needs --engine ray")
        return {}
    if args.resume and not args.shard_dir:
        raise InputError("--resume needs --shard-dir (the folder of the earlier run)")
    return {"num_workers": args.num_workers, "num_gpus_per_worker": args.gpus_per_worker,
            "batch_size": args.shard_size, "out_dir": args.shard_dir, "resume": args.resume,
            "overwrite": args.overwrite,
            "address": args.address}
