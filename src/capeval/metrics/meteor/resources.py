"""METEOR 1.5 resources: locating the sources, checking the index, memory-mapping it.

The resources come from the ``pycocoevalcap==1.2`` wheel (the files METEOR 1.5 itself
reads): ``meteor/data/paraphrase-en.gz`` (5.27M paraphrase pairs) and, inside
``meteor/meteor-1.5.jar``, the synonym tables (WordNet synsets and irregular forms), the
English function-word list and the non-breaking prefixes used by ``-norm``.

:func:`~capeval.metrics.meteor.index_build.prepare` turns them into flat numpy arrays
under the cache directory (``$CAPEVAL_CACHE/meteor-1.5``, by default
``~/.cache/capeval/meteor-1.5``). At run time :func:`load` memory-maps the arrays, so the
paraphrase table never becomes Python objects; strings are found by their sorted 64-bit
keys (:mod:`.string_table`).

``para_pairs`` holds the sorted keys of every adjacent token pair (``"a b"``) that occurs
in some table string: a sentence n-gram whose adjacent pairs are not all in it cannot be
a table string, so the scorer does not look it up (a key collision only lets an n-gram
through to the exact lookup).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.hashing import file_digest
from capeval.metrics.meteor.string_table import StringTable

FORMAT = "capeval-meteor-1.5-index/2"
_PIP_HINT = "pip install pycocoevalcap==1.2"
#: the index's arrays, one ``<name>.npy`` file each
ARRAYS = (
    "para_hash", "para_off", "para_blob", "para_ntok", "para_start", "para_entries", "para_pairs",
    "syn_hash", "syn_off", "syn_blob", "syn_start", "syn_sets",
    "exc_hash", "exc_off", "exc_blob", "exc_start", "exc_sets",
)  # fmt: skip
LINE_BREAK = re.compile(r"\r\n|\r|\n")  # BufferedReader.readLine terminators


def default_cache_dir() -> Path:
    """``<capeval cache>/meteor-1.5`` (``$CAPEVAL_CACHE``, else ``~/.cache/capeval``)."""
    from capeval.paths import cache_dir

    return cache_dir() / "meteor-1.5"


def source_paths() -> dict[str, Path]:
    """Paths of ``meteor-1.5.jar`` and ``paraphrase-en.gz`` inside the installed pycocoevalcap.

    Only locates the package (``importlib.util.find_spec``); its Java-launching modules are
    never imported.
    """
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError(
            "METEOR 1.5 needs the resource files shipped with pycocoevalcap 1.2 "
            f"(paraphrase table, WordNet synonyms, function words): {_PIP_HINT}"
        )
    root = Path(list(spec.submodule_search_locations)[0])
    paths = {
        "jar": root / "meteor" / "meteor-1.5.jar",
        "paraphrase": root / "meteor" / "data" / "paraphrase-en.gz",
    }
    for name, p in paths.items():
        if not p.is_file():
            raise ResourceError(
                f"pycocoevalcap is installed at {root} but its METEOR 1.5 {name} file is missing ({p}); "
                f"reinstall it: pip install --force-reinstall pycocoevalcap==1.2"
            )
    return paths


def _sha256(path: Path) -> str:
    return file_digest(path, "sha256", cached=False)


def source_fingerprint(path: Path, with_hash: bool = True) -> dict[str, Any]:
    """How the manifest records a source file: path, size, mtime and (optionally) sha256."""
    st = path.stat()
    out: dict[str, Any] = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if with_hash:
        out["sha256"] = _sha256(path)
    return out


def read_manifest(index_dir: Path) -> dict[str, Any] | None:
    """The index's ``manifest.json``, or None when it is missing or unreadable."""
    try:
        return json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def index_problem(index_dir: Path, sources: dict[str, Path]) -> str | None:
    """Why the index at ``index_dir`` cannot be used, or None when it is current."""
    man = read_manifest(index_dir)
    if man is None:
        return "no index yet" if not index_dir.exists() else "manifest missing or unreadable"
    if man.get("format") != FORMAT:
        return f"index format {man.get('format')!r} is not {FORMAT!r}"
    for name, path in sources.items():
        rec = man.get("sources", {}).get(name, {})
        st = path.stat()
        if rec.get("size") != st.st_size:
            return f"source {name} changed size ({path})"
        if rec.get("mtime_ns") != st.st_mtime_ns and rec.get("sha256") != _sha256(path):
            return f"source {name} changed content ({path})"
    for name, meta in man.get("arrays", {}).items():
        p = index_dir / f"{name}.npy"
        if not p.is_file() or p.stat().st_size != meta.get("file_size"):
            return f"array file {p.name} missing or truncated"
    if set(man.get("arrays", {})) != set(ARRAYS):
        return "array list does not match this capeval version"
    return None


def resource_info(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Paths, sizes and sha256 of the METEOR 1.5 sources and the state of the index (for ``capeval info``)."""
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    info: dict[str, Any] = {"index_dir": str(index_dir), "format": FORMAT}
    try:
        sources = source_paths()
    except ResourceError as exc:
        info["error"] = str(exc)
        return info
    man = read_manifest(index_dir)
    recorded = (man or {}).get("sources", {})
    info["sources"] = {}
    for name, p in sources.items():
        st = p.stat()
        rec = recorded.get(name, {})
        same = rec.get("size") == st.st_size and rec.get("mtime_ns") == st.st_mtime_ns
        info["sources"][name] = {
            "path": str(p),
            "size": st.st_size,
            "sha256": rec["sha256"] if same and "sha256" in rec else _sha256(p),
        }
    problem = index_problem(index_dir, sources)
    info["prepared"] = problem is None
    if problem is not None:
        info["index_problem"] = problem
    if man is not None:
        info["index_size"] = sum(f.stat().st_size for f in index_dir.iterdir() if f.is_file())
        info["counts"] = man.get("counts")
        info["created"] = man.get("created")
    return info


class Resources:
    """Loaded (memory-mapped) METEOR 1.5 index: paraphrase and synonym tables, word lists."""

    def __init__(self, index_dir: Path):
        self.index_dir = index_dir
        # Memory-mapped, viewed as plain ndarrays: np.memmap's Python-level indexing
        # overhead dominates the many tiny lookups the scorer makes.
        arr = {name: np.load(index_dir / f"{name}.npy", mmap_mode="r").view(np.ndarray) for name in ARRAYS}
        self.para = StringTable(arr["para_hash"], arr["para_off"], arr["para_blob"])
        self.para_ntok = arr["para_ntok"]
        self.para_start = arr["para_start"]
        self.para_entries = arr["para_entries"]
        self.para_pairs = arr["para_pairs"]
        self.syn = StringTable(arr["syn_hash"], arr["syn_off"], arr["syn_blob"])
        self.syn_start = arr["syn_start"]
        self.syn_sets = arr["syn_sets"]
        self.exc = StringTable(arr["exc_hash"], arr["exc_off"], arr["exc_blob"])
        self.exc_start = arr["exc_start"]
        self.exc_sets = arr["exc_sets"]
        from capeval.metrics.meteor.normalize import parse_nonbreaking_prefixes

        words = (index_dir / "function_words.txt").read_text(encoding="utf-8")
        self.function_words = frozenset(LINE_BREAK.split(words))
        self.nonbreaking = parse_nonbreaking_prefixes((index_dir / "nonbreaking.txt").read_text(encoding="utf-8"))

    @cached_property
    def max_phrase(self) -> int:
        """Words in the longest paraphrase-table string (0 for an empty table)."""
        return int(np.max(self.para_ntok)) if len(self.para) else 0


def load(cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True) -> Resources:
    """Open the index, preparing it first when missing or stale (unless ``auto_prepare`` is False)."""
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    problem = index_problem(index_dir, source_paths())
    if problem is not None:
        if not auto_prepare:
            raise ResourceError(
                f"METEOR 1.5 index at {index_dir} is not usable ({problem}); "
                "run capeval.metrics.meteor.prepare() to build it"
            )
        print(
            f"[capeval meteor] preparing METEOR 1.5 resources in {index_dir} ({problem}); one-time, under a minute",
            file=sys.stderr,
        )
        # imported here: index_build imports this module
        from capeval.metrics.meteor.index_build import prepare

        prepare(index_dir, force=True)
    try:
        return Resources(index_dir)
    except (OSError, ValueError) as exc:
        raise ResourceError(
            f"METEOR 1.5 index at {index_dir} is corrupt ({exc}); rebuild it with prepare(force=True)"
        ) from exc
