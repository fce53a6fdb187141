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

The index is checked before every use (:func:`usable`): its format marker, the sources'
size and mtime (sha256 when the mtime changed), each file's size and CRC-32 against
``manifest.json`` (the CRC-32 of the whole index, through a memory map, takes about
0.05 s: damage that keeps a file's size and mtime is found at every load; files whose
mtime changed but whose CRC-32 matches, a copied cache, get their new mtimes recorded),
then the arrays' headers and end offsets when they are mapped. An index that fails any
check is rebuilt (:func:`load`, under the builders' lock, see :mod:`.index_build`).
"""

from __future__ import annotations

import os
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.index_build import prepare

# the format, paths and checks live in index_format (shared with the builder); the names stay
# importable from here, where they were defined before
from capeval.metrics.meteor.index_format import (  # noqa: F401
    ARRAYS,
    FORMAT,
    LINE_BREAK,
    TEXT_FILES,
    default_cache_dir,
    file_crc32,
    index_files,
    index_problem,
    open_checked,
    problem,
    read_manifest,
    record_mtimes,
    sha256_of,
    source_fingerprint,
    source_paths,
)
from capeval.metrics.meteor.string_table import StringTable


#: index builds this process started beside a job (:mod:`capeval.metrics.meteor.ahead` fills
#: it: folder -> (child, pid)); here, so that loading the resources needs nothing of ``ahead``
INDEX_BUILDS: dict[str, tuple[Any, int]] = {}

def resource_info(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Paths, sizes and sha256 of the METEOR 1.5 sources and the state of the index (for ``capeval info``;
    every index file's CRC-32 is checked)."""
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
            "sha256": rec["sha256"] if same and "sha256" in rec else sha256_of(p),
        }
    why = index_problem(index_dir, sources, verify=True)
    info["prepared"] = why is None
    if why is not None:
        info["index_problem"] = why
    if man is not None:
        info["index_size"] = sum(f.stat().st_size for f in index_dir.iterdir() if f.is_file())
        info["counts"] = man.get("counts")
        info["created"] = man.get("created")
    return info


class Resources:
    """Loaded (memory-mapped) METEOR 1.5 index: paraphrase and synonym tables, word lists.

    ``manifest``: the index's ``manifest.json`` when already read. Raises
    :class:`~capeval.errors.ResourceError` when a file is unreadable or does not match
    the manifest.
    """

    #: whether the paraphrase table is the whole one (see :class:`.partial_index.PartialResources`)
    complete = True

    def __init__(self, index_dir: Path, manifest: dict[str, Any] | None = None):
        self.index_dir = index_dir
        from capeval.metrics.meteor.normalize import parse_nonbreaking_prefixes

        man = manifest if manifest is not None else read_manifest(index_dir)
        arr, words, prefixes = open_checked(index_dir, man)
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
        self.function_words = frozenset(LINE_BREAK.split(words))
        self.nonbreaking = parse_nonbreaking_prefixes(prefixes)

    def jar_sha256(self) -> str:
        """sha256 of the ``meteor-1.5.jar`` the index was built from (recorded in its manifest)."""
        rec = (read_manifest(self.index_dir) or {}).get("sources", {}).get("jar", {})
        return rec.get("sha256") or sha256_of(source_paths()["jar"])

    @cached_property
    def max_phrase(self) -> int:
        """Words in the longest paraphrase-table string (0 for an empty table)."""
        return int(np.max(self.para_ntok)) if len(self.para) else 0


def usable(index_dir: Path, sources: dict[str, Path]) -> tuple[Resources | None, str | None]:
    """(the opened index, None) when the index is current and opens, else (None, why not)."""
    man = read_manifest(index_dir)
    moved: list[str] = []
    why = problem(index_dir, man, sources, True, moved)  # every file's CRC-32: damage in place is found
    if why is not None:
        return None, why
    try:
        res = Resources(index_dir, man)
    except ResourceError as exc:
        return None, str(exc)
    if moved and man is not None:
        record_mtimes(index_dir, man, moved)
    return res, None


def load(cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True) -> Resources:
    """Open the index, building it first when missing, stale or corrupt (unless ``auto_prepare`` is False)."""
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    sources = source_paths()
    res, why = usable(index_dir, sources)
    if res is not None:
        return res
    if not auto_prepare:
        raise ResourceError(
            f"METEOR 1.5 index at {index_dir} is not usable ({why}); "
            "run capeval.metrics.meteor.prepare() to build it"
        )
    if str(index_dir) not in INDEX_BUILDS:  # else announced when the build was started beside the job
        print(f"[capeval meteor] preparing METEOR 1.5 resources in {index_dir} ({why}); one-time", file=sys.stderr)
    prepare(index_dir)  # rebuilds unless another process has just done it
    res, why = usable(index_dir, sources)
    if res is None:
        raise ResourceError(f"METEOR 1.5 index at {index_dir} is still not usable after a rebuild ({why})")
    return res
