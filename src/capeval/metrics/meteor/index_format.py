"""The METEOR 1.5 index's format, where it lives and how it is checked: one module that both
the builder (:mod:`.index_build`) and the reader (:mod:`.resources`) import.

Holds the format marker and file list (:data:`FORMAT`, :data:`ARRAYS`, :data:`TEXT_FILES`),
the sources' location in the installed ``pycocoevalcap==1.2`` (:func:`source_paths`), the
cache folder (:func:`default_cache_dir`), the manifest and its checks (:func:`problem`,
:func:`index_problem`, :func:`open_arrays`, :func:`opens`) and the builders' lock
(:func:`build_lock`, :func:`try_build_lock`). The check rules are described in
:mod:`.resources`; the lock protocol in :mod:`.index_build`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import mmap
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.hashing import file_digest
from capeval.paths import make_cache_folder

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


def sha256_of(path: Path) -> str:
    """sha256 of a source file (read in full, never cached: the file may change under its path)."""
    return file_digest(path, "sha256", cached=False)


def source_fingerprint(path: Path, with_hash: bool = True) -> dict[str, Any]:
    """How the manifest records a source file: path, size, mtime and (optionally) sha256."""
    st = path.stat()
    out: dict[str, Any] = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if with_hash:
        out["sha256"] = sha256_of(path)
    return out


def read_manifest(index_dir: Path) -> dict[str, Any] | None:
    """The index's ``manifest.json``, or None when it is missing or unreadable."""
    try:
        man = json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return man if isinstance(man, dict) else None


def file_crc32(path: Path) -> int:
    """CRC-32 of a file's bytes (how the manifest records each index file).

    Read through a memory map where possible: no copy, about 0.05 s for the whole index,
    cheap enough to check at every load (the scorer maps these files anyway)."""
    with open(path, "rb") as f:
        try:
            if os.fstat(f.fileno()).st_size:
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
                    return zlib.crc32(view)
        except (OSError, ValueError):  # a file system without mmap: read it
            pass
        crc = 0
        while block := f.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def index_files(man: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The manifest's record of each index file: name -> size, mtime_ns, crc32."""
    files = man.get("files")
    return files if isinstance(files, dict) else {}


def index_problem(index_dir: Path, sources: dict[str, Path], verify: bool = False) -> str | None:
    """Why the index at ``index_dir`` cannot be used, or None when it is current.

    Without ``verify`` (a builder's quick look): a file whose size and mtime are those
    recorded is taken as written; one whose mtime changed is read and its CRC-32 compared.
    ``verify`` compares every file's CRC-32 (what :func:`.resources.load` does at every load).
    """
    return problem(index_dir, read_manifest(index_dir), sources, verify)


def problem(
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
        if rec.get("mtime_ns") != st.st_mtime_ns and rec.get("sha256") != sha256_of(path):
            return f"source {name} changed content ({path})"
    files = index_files(man)
    if set(files) != {f"{a}.npy" for a in ARRAYS} | set(TEXT_FILES) or set(man.get("arrays", {})) != set(ARRAYS):
        return "file list does not match this capeval version"
    to_read: list[tuple[str, bool]] = []  # (file, its mtime changed)
    for fname, rec in files.items():
        try:
            st = (index_dir / fname).stat()
        except OSError:
            return f"array file {fname} missing or truncated"
        if st.st_size != rec.get("size"):
            return f"array file {fname} missing or truncated"
        if verify or st.st_mtime_ns != rec.get("mtime_ns"):
            to_read.append((fname, st.st_mtime_ns != rec.get("mtime_ns")))
    for (fname, changed), crc in zip(to_read, _crcs([index_dir / f for f, _ in to_read])):
        if crc != files[fname].get("crc32"):
            return f"index file {fname} changed content"
        if moved is not None and changed:
            moved.append(fname)
    return None


def _crcs(paths: list[Path]) -> list[int]:
    """:func:`file_crc32` of each file, on two threads (zlib releases the GIL): half the wall
    time of the check at every load on a machine with two cores or more."""
    if len(paths) < 2 or (os.cpu_count() or 1) < 2:
        return [file_crc32(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    # the threads end with the pool, before the caller goes on (and may fork workers)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="capeval-meteor-crc") as pool:
        return list(pool.map(file_crc32, paths))


try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: builders may duplicate work; the rename keeps it safe
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def build_lock(index_dir: Path) -> Iterator[None]:
    """Hold the exclusive lock of the builders of ``index_dir`` (waits for another builder)."""
    make_cache_folder(index_dir.parent)
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(index_dir.parent / f".{index_dir.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def try_build_lock(index_dir: Path) -> Iterator[bool]:
    """The builders' lock if it is free right now (yields True), else yields False at once."""
    if fcntl is None or not index_dir.parent.is_dir():  # pragma: no cover
        yield False
        return
    try:
        fd = os.open(index_dir.parent / f".{index_dir.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def record_mtimes(index_dir: Path, man: dict[str, Any], moved: list[str]) -> None:
    """Record the new mtimes of files found intact (a copied or restored cache), so the
    next load need not read them; only if no builder holds the lock, and best effort."""
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


# (offsets, what their last value counts) and (entries start, entries): checked on opening
_ENDS = (
    ("para_off", "para_blob"), ("syn_off", "syn_blob"), ("exc_off", "exc_blob"),
    ("para_start", "para_entries"), ("syn_start", "syn_sets"), ("exc_start", "exc_sets"),
)  # fmt: skip


def open_arrays(index_dir: Path, man: dict[str, Any]) -> dict[str, np.ndarray]:
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


def read_texts(index_dir: Path) -> tuple[str, str]:
    """The index's function-word list and non-breaking prefixes, as text."""
    words = (index_dir / "function_words.txt").read_text(encoding="utf-8")
    prefixes = (index_dir / "nonbreaking.txt").read_text(encoding="utf-8")
    return words, prefixes


def open_checked(index_dir: Path, man: dict[str, Any] | None) -> tuple[dict[str, np.ndarray], str, str]:
    """(arrays, function words, prefixes) of the index, or :class:`ResourceError` naming the damage."""
    try:
        if man is None:
            raise ValueError("manifest missing or unreadable")
        arrays = open_arrays(index_dir, man)
        words, prefixes = read_texts(index_dir)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResourceError(f"METEOR 1.5 index at {index_dir} is corrupt ({exc})") from exc
    return arrays, words, prefixes


def opens(index_dir: Path, sources: dict[str, Path]) -> str | None:
    """Why the index at ``index_dir`` cannot be used (the checks of a load, every CRC-32
    included, then opening it), or None."""
    man = read_manifest(index_dir)
    why = problem(index_dir, man, sources, True)
    if why is not None:
        return why
    try:
        open_checked(index_dir, man)
    except ResourceError as exc:
        return str(exc)
    return None
