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

The index is checked before every use (:func:`index_problem`, a few ``stat`` calls): its
format marker, the sources' size and mtime (sha256 when the mtime changed), and each
file's size and mtime against ``manifest.json`` (CRC-32 of the file when the mtime
changed; their new mtimes are then recorded), then the arrays' headers and end offsets
when they are mapped. An index that fails any check is rebuilt (:func:`load`, under the
builders' lock, see :mod:`.index_build`). Damage that keeps a file's size and mtime is
found by :func:`resource_info` (``capeval info``), which reads every file's CRC-32.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import zlib
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.hashing import file_digest
from capeval.metrics.meteor.string_table import StringTable

FORMAT = "capeval-meteor-1.5-index/3"  # /3: numpy-computed string keys
_PIP_HINT = "pip install pycocoevalcap==1.2"
#: the index's arrays, one ``<name>.npy`` file each
ARRAYS = (
    "para_hash", "para_off", "para_blob", "para_ntok", "para_start", "para_entries", "para_pairs",
    "syn_hash", "syn_off", "syn_blob", "syn_start", "syn_sets",
    "exc_hash", "exc_off", "exc_blob", "exc_start", "exc_sets",
)  # fmt: skip
LINE_BREAK = re.compile(r"\r\n|\r|\n")  # BufferedReader.readLine terminators
#: the index's word lists, copied from the jar
TEXT_FILES = ("function_words.txt", "nonbreaking.txt")


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
        man = json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return man if isinstance(man, dict) else None


def file_crc32(path: Path) -> int:
    """CRC-32 of a file's bytes (how the manifest records each index file)."""
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def index_files(man: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The manifest's record of each index file: name -> size, mtime_ns, crc32."""
    files = man.get("files")
    return files if isinstance(files, dict) else {}


def index_problem(index_dir: Path, sources: dict[str, Path], verify: bool = False) -> str | None:
    """Why the index at ``index_dir`` cannot be used, or None when it is current.

    Cheap: a file whose size and mtime are those recorded is taken as written; one whose
    mtime changed is read and its CRC-32 compared. ``verify`` compares every file's CRC-32.
    """
    return _problem(index_dir, read_manifest(index_dir), sources, verify)


def _problem(
    index_dir: Path, man: dict[str, Any] | None, sources: dict[str, Path], verify: bool, moved: list[str] | None = None
) -> str | None:
    """:func:`index_problem` on the manifest ``man``; ``moved`` collects the files whose
    mtime changed but whose CRC-32 is the recorded one."""
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
    files = index_files(man)
    if set(files) != {f"{a}.npy" for a in ARRAYS} | set(TEXT_FILES) or set(man.get("arrays", {})) != set(ARRAYS):
        return "file list does not match this capeval version"
    for fname, rec in files.items():
        p = index_dir / fname
        try:
            st = p.stat()
        except OSError:
            return f"array file {fname} missing or truncated"
        if st.st_size != rec.get("size"):
            return f"array file {fname} missing or truncated"
        if verify or st.st_mtime_ns != rec.get("mtime_ns"):
            if file_crc32(p) != rec.get("crc32"):
                return f"index file {fname} changed content"
            if moved is not None and st.st_mtime_ns != rec.get("mtime_ns"):
                moved.append(fname)
    return None


def _record_mtimes(index_dir: Path, man: dict[str, Any], moved: list[str]) -> None:
    """Record the new mtimes of files found intact (a copied or restored cache), so the
    next load need not read them; only if no builder holds the lock, and best effort."""
    # imported here: index_build imports this module
    from capeval.metrics.meteor.index_build import try_build_lock

    with try_build_lock(index_dir) as locked:
        if not locked or read_manifest(index_dir) != man:
            return
        files = index_files(man)
        try:
            for fname in moved:
                files[fname]["mtime_ns"] = (index_dir / fname).stat().st_mtime_ns
            tmp = index_dir / f".manifest.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(man, indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, index_dir / "manifest.json")
        except OSError:  # a read-only cache is fine: the CRCs are checked again next time
            pass


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
            "sha256": rec["sha256"] if same and "sha256" in rec else _sha256(p),
        }
    problem = index_problem(index_dir, sources, verify=True)
    info["prepared"] = problem is None
    if problem is not None:
        info["index_problem"] = problem
    if man is not None:
        info["index_size"] = sum(f.stat().st_size for f in index_dir.iterdir() if f.is_file())
        info["counts"] = man.get("counts")
        info["created"] = man.get("created")
    return info


# (offsets, what their last value counts) and (entries start, entries): checked on opening
_ENDS = (
    ("para_off", "para_blob"), ("syn_off", "syn_blob"), ("exc_off", "exc_blob"),
    ("para_start", "para_entries"), ("syn_start", "syn_sets"), ("exc_start", "exc_sets"),
)  # fmt: skip


def _open_arrays(index_dir: Path, man: dict[str, Any]) -> dict[str, np.ndarray]:
    """The index's arrays, memory-mapped, checked against the manifest (dtype, shape, ends)."""
    out = {}
    for name in ARRAYS:
        meta = man["arrays"][name]
        # viewed as plain ndarrays: np.memmap's Python-level indexing overhead dominates
        # the many tiny lookups the scorer makes
        arr = np.load(index_dir / f"{name}.npy", mmap_mode="r").view(np.ndarray)
        if str(arr.dtype) != meta.get("dtype") or list(arr.shape) != meta.get("shape"):
            raise ValueError(f"{name}.npy holds {arr.dtype}{list(arr.shape)}, the manifest says {meta}")
        out[name] = arr
    for off, data in _ENDS:
        if len(out[off]) < 1 or int(out[off][-1]) != len(out[data]) or int(out[off][0]) != 0:
            raise ValueError(f"{off}.npy does not end at the length of {data}.npy")
    for prefix in ("para", "syn", "exc"):
        n = len(out[f"{prefix}_hash"])
        if len(out[f"{prefix}_off"]) != n + 1 or len(out[f"{prefix}_start"]) != n + 1:
            raise ValueError(f"{prefix} arrays disagree on the number of strings")
    if len(out["para_ntok"]) != len(out["para_hash"]):
        raise ValueError("para_ntok.npy does not match para_hash.npy")
    return out


class Resources:
    """Loaded (memory-mapped) METEOR 1.5 index: paraphrase and synonym tables, word lists.

    ``manifest``: the index's ``manifest.json`` when already read. Raises
    :class:`~capeval.errors.ResourceError` when a file is unreadable or does not match
    the manifest.
    """

    def __init__(self, index_dir: Path, manifest: dict[str, Any] | None = None):
        self.index_dir = index_dir
        from capeval.metrics.meteor.normalize import parse_nonbreaking_prefixes

        try:
            man = manifest if manifest is not None else read_manifest(index_dir)
            if man is None:
                raise ValueError("manifest missing or unreadable")
            arr = _open_arrays(index_dir, man)
            words = (index_dir / "function_words.txt").read_text(encoding="utf-8")
            prefixes = (index_dir / "nonbreaking.txt").read_text(encoding="utf-8")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ResourceError(f"METEOR 1.5 index at {index_dir} is corrupt ({exc})") from exc
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

    @cached_property
    def max_phrase(self) -> int:
        """Words in the longest paraphrase-table string (0 for an empty table)."""
        return int(np.max(self.para_ntok)) if len(self.para) else 0


def usable(index_dir: Path, sources: dict[str, Path]) -> tuple[Resources | None, str | None]:
    """(the opened index, None) when the index is current and opens, else (None, why not)."""
    man = read_manifest(index_dir)
    moved: list[str] = []
    problem = _problem(index_dir, man, sources, False, moved)
    if problem is not None:
        return None, problem
    try:
        res = Resources(index_dir, man)
    except ResourceError as exc:
        return None, str(exc)
    if moved and man is not None:
        _record_mtimes(index_dir, man, moved)
    return res, None


def load(cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True) -> Resources:
    """Open the index, building it first when missing, stale or corrupt (unless ``auto_prepare`` is False)."""
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    sources = source_paths()
    res, problem = usable(index_dir, sources)
    if res is not None:
        return res
    if not auto_prepare:
        raise ResourceError(
            f"METEOR 1.5 index at {index_dir} is not usable ({problem}); "
            "run capeval.metrics.meteor.prepare() to build it"
        )
    print(f"[capeval meteor] preparing METEOR 1.5 resources in {index_dir} ({problem}); one-time", file=sys.stderr)
    # imported here: index_build imports this module
    from capeval.metrics.meteor.index_build import prepare

    prepare(index_dir)  # rebuilds unless another process has just done it
    res, problem = usable(index_dir, sources)
    if res is None:
        raise ResourceError(f"METEOR 1.5 index at {index_dir} is still not usable after a rebuild ({problem})")
    return res
