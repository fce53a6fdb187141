"""Building the METEOR 1.5 index once: :func:`prepare`.

Reads the synonym tables, function words and non-breaking prefixes from
``meteor-1.5.jar`` and the paraphrase table (:mod:`.paraphrase_build`), writes the
numpy arrays listed in :data:`.resources.ARRAYS` plus ``manifest.json`` into a
temporary folder and publishes it atomically. :mod:`.resources` checks and loads the
result.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.paraphrase_build import build_paraphrase
from capeval.metrics.meteor.resources import (
    ARRAYS,
    FORMAT,
    LINE_BREAK,
    default_cache_dir,
    index_problem,
    read_manifest,
    source_fingerprint,
    source_paths,
)
from capeval.metrics.meteor.string_table import keys64

_JAR_MEMBERS = {
    "function_words": "function/english.words",
    "synsets": "synonym/english.synsets",
    "exceptions": "synonym/english.exceptions",
    "nonbreaking": "nonbreaking/english.prefixes",
}
_JAVA_DELIMS = re.compile(r"[ \t\n\r\f]+")  # StringTokenizer defaults


def prepare(cache_dir: str | os.PathLike[str] | None = None, force: bool = False, verbose: bool = False) -> Path:
    """Build (once) the memory-mappable METEOR 1.5 index and return its directory.

    Reads the paraphrase table and the jar's synonym / function-word / prefix files, writes
    numpy arrays and ``manifest.json`` (format marker, sources' sha256) into a temporary
    folder and moves it into place with ``os.replace``, so a crash never leaves a partial
    index. An index whose format or sources do not match is rebuilt. ``force`` rebuilds
    unconditionally. The paraphrase table is streamed and each array is written as soon
    as it is finished, so the build peaks around 0.4 GB of RSS (the whole table as Python
    objects would take several GB).
    """
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    sources = source_paths()
    if not force and index_problem(index_dir, sources) is None:
        return index_dir
    t0 = time.perf_counter()
    log = (lambda msg: print(f"[capeval meteor] {msg}", file=sys.stderr)) if verbose else (lambda msg: None)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.", suffix=".tmp", dir=index_dir.parent))
    try:
        with zipfile.ZipFile(sources["jar"]) as jar:
            texts = {k: jar.read(m).decode("utf-8", errors="replace") for k, m in _JAR_MEMBERS.items()}
        meta: dict[str, dict[str, Any]] = {}

        def emit(name: str, arr: np.ndarray) -> None:
            # written as soon as it is built, so finished arrays do not add to the peak memory
            arr = np.ascontiguousarray(arr)
            path = tmp / f"{name}.npy"
            np.save(path, arr)
            meta[name] = {"dtype": str(arr.dtype), "shape": list(arr.shape), "file_size": path.stat().st_size}

        for name, arr in build_synonyms(texts["synsets"], texts["exceptions"]).items():
            emit(name, arr)
        log(f"synonyms indexed ({time.perf_counter() - t0:.1f}s)")
        build_paraphrase(sources["paraphrase"], emit)
        log(f"paraphrases indexed ({time.perf_counter() - t0:.1f}s)")
        if set(meta) != set(ARRAYS):
            raise ResourceError(f"METEOR index build produced {sorted(meta)}, expected {sorted(ARRAYS)}")
        for key in ("function_words", "nonbreaking"):
            (tmp / f"{key}.txt").write_text(texts[key], encoding="utf-8")
        manifest = {
            "format": FORMAT,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "sources": {name: source_fingerprint(p) for name, p in sources.items()},
            "jar_members": _JAR_MEMBERS,
            "arrays": {name: meta[name] for name in ARRAYS},
            "counts": {
                "paraphrase_entries": meta["para_entries"]["shape"][0],
                "paraphrase_strings": meta["para_hash"]["shape"][0],
                "paraphrase_token_pairs": meta["para_pairs"]["shape"][0],
                "synonym_words": meta["syn_hash"]["shape"][0],
                "irregular_forms": meta["exc_hash"]["shape"][0],
            },
            "build_seconds": round(time.perf_counter() - t0, 2),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _swap_into_place(tmp, index_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"index ready at {index_dir} ({time.perf_counter() - t0:.1f}s)")
    return index_dir


def _swap_into_place(tmp: Path, index_dir: Path) -> None:
    """Atomically publish ``tmp`` as ``index_dir`` (replacing an old index if any)."""
    try:
        os.replace(tmp, index_dir)
        return
    except OSError:
        if not index_dir.exists():
            raise
    old = index_dir.with_name(f".{index_dir.name}.old-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.replace(index_dir, old)
    except FileNotFoundError:
        pass
    try:
        os.replace(tmp, index_dir)
    except OSError:
        # another process published a fresh index meanwhile: keep theirs
        if read_manifest(index_dir) is None:
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def _string_table(strings: list[bytes]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Sorted-key table of distinct ``strings``; returns (arrays, rank of each input)."""
    keys = keys64(strings)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if len(sorted_keys) > 1 and bool(np.any(sorted_keys[1:] == sorted_keys[:-1])):
        raise ResourceError("64-bit key collision while indexing METEOR resources (please report this)")
    lengths = np.fromiter((len(strings[i]) for i in order), dtype=np.int64, count=len(strings))
    off = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    blob = np.frombuffer(b"".join(strings[i] for i in order), dtype=np.uint8)
    rank = np.empty(len(strings), dtype=np.int64)
    rank[order] = np.arange(len(strings))
    return {"hash": sorted_keys, "off": off, "blob": blob}, rank


def _pairs(text: str) -> list[tuple[str, str]]:
    """(key line, value line) pairs, read two lines at a time like SynonymDictionary."""
    lines = LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return [(lines[i], lines[i + 1] if i + 1 < len(lines) else "") for i in range(0, len(lines), 2)]


def _set_table(mapping: dict[str, list[int]], prefix: str) -> dict[str, np.ndarray]:
    words = list(mapping)
    table, rank = _string_table([w.encode("utf-8") for w in words])
    sets_in_order: list[list[int]] = [[] for _ in words]
    for w, r in zip(words, rank):
        sets_in_order[r] = sorted(set(mapping[w]))
    counts = np.fromiter((len(s) for s in sets_in_order), dtype=np.int64, count=len(words))
    start = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    flat = np.fromiter((x for s in sets_in_order for x in s), dtype=np.int32, count=int(start[-1]))
    return {
        f"{prefix}_hash": table["hash"],
        f"{prefix}_off": table["off"],
        f"{prefix}_blob": table["blob"],
        f"{prefix}_start": start.astype(np.int32),
        f"{prefix}_sets": flat,
    }


def build_synonyms(synsets_text: str, exceptions_text: str) -> dict[str, np.ndarray]:
    """The ``syn_*`` and ``exc_*`` arrays from the jar's synsets and exceptions files."""
    # word -> synset ids; a repeated word replaces the earlier line (Hashtable.put)
    synsets: dict[str, list[int]] = {}
    for word, ids in _pairs(synsets_text):
        synsets[word] = [int(t) for t in _JAVA_DELIMS.split(ids) if t]
    # irregular form -> base forms; stored resolved to the union of the bases' synsets,
    # which is all SynonymDictionary.getStemSynSets ever reads from it.
    bases: dict[str, list[str]] = {}
    for base, forms in _pairs(exceptions_text):
        for form in _JAVA_DELIMS.split(forms):
            if form:
                bases.setdefault(form, []).append(base)
    resolved = {form: [i for b in bs for i in synsets.get(b, [])] for form, bs in bases.items()}
    return {**_set_table(synsets, "syn"), **_set_table(resolved, "exc")}
