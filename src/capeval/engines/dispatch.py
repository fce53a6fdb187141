"""Choosing the engine: ``capeval.score(..., engine="ray")`` and ``capeval score --engine ray``.

``local`` is the in-process Evaluator (the default); ``ray`` is
:func:`capeval.engines.ray_engine.score_ray`. Ray is imported only when it is chosen.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from capeval.errors import InputError
from capeval.result import Report

ENGINES = ("local", "ray")
#: the keyword arguments of score_ray that engine_options may set
RAY_OPTIONS = ("num_workers", "num_gpus_per_worker", "batch_size", "out_dir", "resume", "address")


def check_engine(engine: str, engine_options: Mapping[str, Any] | None = None) -> None:
    """Refuse an unknown engine, or engine options it does not take, before any work."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    extra = sorted(set(engine_options or {}) - (set(RAY_OPTIONS) if engine == "ray" else set()))
    if extra:
        raise InputError(f"engine {engine!r} takes no option {extra[0]!r}")


def score_with_engine(
    engine: str,
    candidates: Mapping[Any, Any] | Sequence[str],
    references: Mapping[Any, Any] | None = None,
    metrics: str | Iterable[str] = "coco",
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool | None = False,
    engine_options: Mapping[str, Any] | None = None,
    **inputs: Any,
) -> Report:
    """Score on ``engine`` ("local" or "ray"); ``engine_options`` go to the engine
    (for ray: ``num_workers``, ``num_gpus_per_worker``, ``batch_size``, ``out_dir``,
    ``resume``, ``address``). ``inputs``: as :func:`capeval.score`; the ray engine takes
    ``images=`` and ``skip_bad_items=`` (not yet videos/segments)."""
    check_engine(engine, engine_options)
    if engine == "local":
        from capeval.evaluator import Evaluator

        return Evaluator(metrics, options=options, progress=progress).score(
            candidates, references, progress=progress, **inputs)
    unsupported = sorted(k for k in inputs if k not in ("images", "skip_bad_items") and inputs[k] is not None)
    if unsupported:
        raise InputError(f"the ray engine does not take {', '.join(unsupported)} yet; use engine='local'")
    from capeval.engines.ray_engine import score_ray

    return score_ray(candidates, references, metrics, options, progress=progress,
                     images=inputs.get("images"), skip_bad_items=bool(inputs.get("skip_bad_items")),
                     **dict(engine_options or {}))


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--address``, ``--num-workers``, ``--shard-size``, ``--shard-dir``, ``--resume``."""
    g = parser.add_argument_group("engine (distributed scoring)")
    g.add_argument("--engine", choices=ENGINES, default="local",
                   help="local: in this process (default); ray: shards on a Ray actor pool (capeval[ray])")
    g.add_argument("--address", help="Ray cluster address (e.g. auto, ray://host:10001); default: a local Ray instance")
    g.add_argument("--num-workers", type=int, default=2, help="Ray actors (default 2)")
    g.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs each Ray actor reserves (default 0)")
    g.add_argument("--shard-size", type=int, default=1024, help="items per shard (default 1024)")
    g.add_argument("--shard-dir", help="folder of the per-shard Parquet files (kept; needed by --resume)")
    g.add_argument("--resume", action="store_true", help="keep the complete shards already in --shard-dir")


def engine_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``engine_options`` for :func:`score_with_engine` from the parsed flags (checked)."""
    if args.engine == "local":
        given = [f for f, v in (("--address", args.address), ("--shard-dir", args.shard_dir),
                                ("--resume", args.resume)) if v]
        if given:
            raise InputError(f"{given[0]} needs --engine ray")
        return {}
    if args.resume and not args.shard_dir:
        raise InputError("--resume needs --shard-dir (the folder of the earlier run)")
    return {"num_workers": args.num_workers, "num_gpus_per_worker": args.gpus_per_worker,
            "batch_size": args.shard_size, "out_dir": args.shard_dir, "resume": args.resume,
            "address": args.address}
