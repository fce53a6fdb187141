"""Building the METEOR 1.5 index once: :func:`prepare`.

Reads the synonym tables, function words and non-breaking prefixes from
``meteor-1.5.jar`` (:mod:`.synonym_build`) and the paraphrase table
(:mod:`.paraphrase_build`), writes the numpy arrays listed in :data:`.index_format.ARRAYS`
plus ``manifest.json`` into a temporary folder and publishes it with a rename.
:mod:`.resources` checks and loads the result.

Concurrent builders: the build runs under an exclusive ``flock`` on ``.<index>.lock``
beside the index folder (released by the OS if the process dies, so it never goes
stale); a process that waited for it finds the index built and uses it. Readers take no
lock: they only ever see a whole index (the manifest is written last, the folder appears
with one rename) and go through the lock when what they see is missing or broken.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.metrics.meteor.paraphrase_build import build_paraphrase
from capeval.metrics.meteor.index_format import (  # noqa: F401  (the locks stay importable from here)
    ARRAYS,
    FORMAT,
    TEXT_FILES,
    build_lock,
    default_cache_dir,
    file_crc32,
    opens,
    source_fingerprint,
    source_paths,
    try_build_lock,
)
from capeval.metrics.meteor.string_groups import release_freed_memory
from capeval.metrics.meteor.synonym_build import build_synonyms

_JAR_MEMBERS = {
    "function_words": "function/english.words",
    "synsets": "synonym/english.synsets",
    "exceptions": "synonym/english.exceptions",
    "nonbreaking": "nonbreaking/english.prefixes",
}

def prepare(cache_dir: str | os.PathLike[str] | None = None, force: bool = False, verbose: bool = False) -> Path:
    """Build (once) the memory-mappable METEOR 1.5 index and return its directory.

    An index that is missing, of another format, built from other sources, or whose
    files do not match its manifest is rebuilt; ``force`` rebuilds unconditionally. The
    build writes a temporary folder and renames it into place, under the builders' lock
    (see the module docstring), so a crash never leaves a partial index and two
    processes never build at once. It takes a few seconds (about 4.5 s of CPU on three
    threads) and peaks around 0.35 GB of RSS above the interpreter's.
    """
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    sources = source_paths()
    if not force and opens(index_dir, sources) is None:
        return index_dir
    with build_lock(index_dir):
        return prepare_locked(index_dir, force, verbose)


def prepare_locked(index_dir: Path, force: bool = False, verbose: bool = False) -> Path:
    """:func:`prepare`'s work once the builders' lock is held (by this process: an index build
    started beside a job, :mod:`.ahead`, gets the lock from the job that started it)."""
    sources = source_paths()
    log = (lambda msg: print(f"[capeval meteor] {msg}", file=sys.stderr)) if verbose else (lambda msg: None)
    if not force and opens(index_dir, sources) is None:
        log(f"index at {index_dir} built by another process")
        return index_dir
    _remove_leftovers(index_dir)
    t0 = time.perf_counter()
    tmp = None
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.", suffix=".tmp", dir=index_dir.parent))
        _build_into(tmp, sources, log)
        log(f"index built ({time.perf_counter() - t0:.1f}s)")
        _publish(tmp, index_dir)
    except OSError as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if _no_space(exc):
            raise ResourceError(
                f"no space left on the device of {index_dir.parent} to build the METEOR 1.5 index (about "
                f"150 MB); free some space there or point CAPEVAL_CACHE to another folder") from exc
        raise
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        release_freed_memory()
    log(f"index ready at {index_dir} ({time.perf_counter() - t0:.1f}s)")
    return index_dir


def _no_space(exc: OSError) -> bool:
    """Whether ``exc`` says the disk (or the user's quota) is full. numpy's ``tofile`` reports
    a short write as ``"<n> requested and <m> written"`` without an errno."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return exc.errno is None and "requested and" in text and "written" in text


def jar_texts(jar_path: Path) -> dict[str, str]:
    """The texts of ``meteor-1.5.jar`` the index is made of (synsets, exceptions, function
    words, non-breaking prefixes), by the keys of ``_JAR_MEMBERS``."""
    with zipfile.ZipFile(jar_path) as jar:
        return {k: jar.read(m).decode("utf-8", errors="replace") for k, m in _JAR_MEMBERS.items()}


def _build_into(tmp: Path, sources: dict[str, Path], log: Any) -> None:
    """Write every index file and, last, ``manifest.json`` into the folder ``tmp``."""
    t0 = time.perf_counter()
    texts = jar_texts(sources["jar"])
    meta: dict[str, dict[str, Any]] = {}

    def emit(name: str, arr: np.ndarray) -> None:
        # written as soon as it is built, so finished arrays do not add to the peak memory
        arr = np.ascontiguousarray(arr)
        np.save(tmp / f"{name}.npy", arr)
        meta[name] = {"dtype": str(arr.dtype), "shape": list(arr.shape)}

    # the synonym tables (pure Python mostly) are built while the paraphrase table's
    # threads run; the sources are hashed meanwhile too
    synonyms: dict[str, Any] = {}
    fingerprints: dict[str, Any] = {}

    def side_work() -> None:
        try:
            synonyms["arrays"] = build_synonyms(texts["synsets"], texts["exceptions"])
            fingerprints.update({name: source_fingerprint(p) for name, p in sources.items()})
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            synonyms["error"] = exc

    side = threading.Thread(target=side_work, name="capeval-meteor-synonyms")
    side.start()
    try:
        build_paraphrase(sources["paraphrase"], emit, scratch=tmp)
    finally:
        side.join()
    if "error" in synonyms:
        raise synonyms["error"]
    for name, arr in synonyms.pop("arrays").items():
        emit(name, arr)
    log(f"tables indexed ({time.perf_counter() - t0:.1f}s)")
    if set(meta) != set(ARRAYS):
        raise ResourceError(f"METEOR index build produced {sorted(meta)}, expected {sorted(ARRAYS)}")
    for key in ("function_words", "nonbreaking"):
        (tmp / f"{key}.txt").write_text(texts[key], encoding="utf-8")
    files = {}
    for fname in [f"{a}.npy" for a in ARRAYS] + list(TEXT_FILES):
        st = (tmp / fname).stat()
        files[fname] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "crc32": file_crc32(tmp / fname)}
    manifest = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sources": fingerprints,
        "jar_members": _JAR_MEMBERS,
        "arrays": {name: meta[name] for name in ARRAYS},
        "files": files,
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


def _remove_leftovers(index_dir: Path) -> None:
    """Delete temporary and replaced folders of builders that died (called under the lock)."""
    for p in index_dir.parent.glob(f".{index_dir.name}.*"):
        if p.is_dir() and (p.name.endswith(".tmp") or ".old-" in p.name):
            shutil.rmtree(p, ignore_errors=True)


def _publish(tmp: Path, index_dir: Path) -> None:
    """Move the finished folder ``tmp`` to ``index_dir``, replacing an old index (under the lock).

    Between the two renames there is no index folder; a reader that looks then goes
    through the lock and waits for this builder.
    """
    old = None
    if index_dir.exists() or index_dir.is_symlink():
        old = index_dir.with_name(f".{index_dir.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(index_dir, old)
    os.replace(tmp, index_dir)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
