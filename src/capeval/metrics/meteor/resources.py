"""METEOR 1.5 resources: locating them, indexing them once, and memory-mapping the index.

The resources come from the ``pycocoevalcap==1.2`` wheel (the files METEOR 1.5 itself
reads): ``meteor/data/paraphrase-en.gz`` (5.27M paraphrase pairs) and, inside
``meteor/meteor-1.5.jar``, the synonym tables (WordNet synsets and irregular forms), the
English function-word list and the non-breaking prefixes used by ``-norm``.

:func:`prepare` turns them into flat numpy arrays under the cache directory
(``$CAPEVAL_CACHE/meteor-1.5``, by default ``~/.cache/capeval/meteor-1.5``). At run time
the arrays are memory-mapped, so the paraphrase table never becomes Python objects.

String lookup: every distinct phrase (tokens joined by one space) gets the 64-bit key
``blake2b(utf8, digest_size=8)``; keys are stored sorted and found with binary search,
and each hit is confirmed against the stored bytes, so a key collision cannot create a
false match.

``para_pairs`` holds the sorted keys of every adjacent token pair (``"a b"``) that occurs
in some table string: a sentence n-gram whose adjacent pairs are not all in it cannot be
a table string, so the scorer does not look it up (a key collision only lets an n-gram
through to the exact lookup).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import ResourceError
from capeval.hashing import file_digest

FORMAT = "capeval-meteor-1.5-index/2"
_PIP_HINT = "pip install pycocoevalcap==1.2"
_JAR_MEMBERS = {
    "function_words": "function/english.words",
    "synsets": "synonym/english.synsets",
    "exceptions": "synonym/english.exceptions",
    "nonbreaking": "nonbreaking/english.prefixes",
}
_ARRAYS = (
    "para_hash", "para_off", "para_blob", "para_ntok", "para_start", "para_entries", "para_pairs",
    "syn_hash", "syn_off", "syn_blob", "syn_start", "syn_sets",
    "exc_hash", "exc_off", "exc_blob", "exc_start", "exc_sets",
)  # fmt: skip
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # BufferedReader.readLine terminators
_JAVA_DELIMS = re.compile(r"[ \t\n\r\f]+")  # StringTokenizer defaults
_JAVA_DELIMS_B = re.compile(rb"[ \t\n\r\f]+")


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


def _fingerprint(path: Path, with_hash: bool = True) -> dict[str, Any]:
    st = path.stat()
    out: dict[str, Any] = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if with_hash:
        out["sha256"] = _sha256(path)
    return out


def key64(data: bytes) -> int:
    """The 64-bit lookup key of a UTF-8 string (see module docstring)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _keys(strings: Iterable[bytes]) -> np.ndarray:
    blake = hashlib.blake2b
    joined = b"".join(blake(s, digest_size=8).digest() for s in strings)
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64)


def _string_table(strings: list[bytes]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Sorted-key table of distinct ``strings``; returns (arrays, rank of each input)."""
    keys = _keys(strings)
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


def _canonical(line: bytes) -> bytes:
    """Tokens as Java's StringTokenizer splits them, joined by one space."""
    return b" ".join(t for t in _JAVA_DELIMS_B.split(line) if t)


_READ_BLOCK = 8 << 20  # decompressed bytes read from the paraphrase file at a time
_GATHER_BLOCK = 1 << 17  # strings copied into the sorted blob at a time


def _java_text(part: bytes) -> bytes:
    """What Java's readers see of ``part`` (whole lines): UTF-8, line breaks as ``\\n``.

    Java decodes with a replacing decoder; when ``part`` is not valid UTF-8, re-encode what
    Java would see. ``part`` always ends at a line break (ASCII), so decoding block by block
    gives the same text as decoding the whole file. BufferedReader.readLine also ends lines
    at CR and CRLF.
    """
    try:
        part.decode("utf-8")
    except UnicodeDecodeError:
        part = part.decode("utf-8", errors="replace").encode("utf-8")
    if b"\r" in part:
        part = part.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return part


def _is_messy(part: bytes) -> bool:
    """Whether some line of ``part`` is not in canonical form (single spaces, no edges)."""
    return (
        b"\t" in part or b"\f" in part or b"  " in part or b" \n" in part or b"\n " in part
        or part.startswith(b" ") or part.endswith(b" ")
    )  # fmt: skip


def _paraphrase_batches(gz_path: Path) -> Iterator[tuple[list[bytes], bool]]:
    """The paraphrase file's lines in batches of whole (probability, phrase, paraphrase) triples.

    Streams the gzip file in blocks, so only one block of lines exists at a time. Lines are
    split like ``text.split("\\n")`` on the whole file after :func:`_java_text`: the piece
    after the last line break counts as a line, and a trailing incomplete triple is
    dropped (ParaphraseTransducer reads three lines per entry). Each batch comes with
    whether some of its lines may need :func:`_canonical`.
    """
    pending: list[bytes] = []  # up to two lines of an incomplete triple
    pending_messy = False
    carry = b""  # bytes after the last line break read so far
    with gzip.open(gz_path, "rb") as f:
        while True:
            block = f.read(_READ_BLOCK)
            eof = not block
            buf = carry + block
            del block
            if eof:
                part, carry = buf, b""
            else:
                # cut after the last line break whose end is known (a CR could be a CRLF's first half)
                cut = max(buf.rfind(b"\n"), buf.rfind(b"\r", 0, len(buf) - 1)) + 1
                part, carry = buf[:cut], buf[cut:]
            del buf
            part = _java_text(part)
            messy = _is_messy(part)
            lines = part.split(b"\n")
            del part
            if not eof:
                lines.pop()  # the empty piece after the final line break: the next line starts in carry
            if pending:
                lines[:0] = pending
                messy = messy or pending_messy
            n = len(lines) // 3 * 3
            pending = lines[n:]
            pending_messy = messy
            del lines[n:]
            if lines:
                yield lines, messy
            del lines
            if eof:
                return


class _DistinctStrings:
    """Distinct byte strings in first-seen order, kept as one byte buffer plus numpy arrays.

    Strings are identified by their 64-bit keys (kept sorted for binary search); a string
    whose key was seen before is compared byte for byte with the stored one, so a key
    collision is detected exactly, as when the strings were all held in a dict.
    """

    def __init__(self) -> None:
        self.blob = bytearray()
        self.off = np.zeros(1, dtype=np.int64)  # string i is blob[off[i]:off[i + 1]]
        self.sorted_keys = np.zeros(0, dtype=np.uint64)
        self.sorted_ids = np.zeros(0, dtype=np.int64)  # first-seen id of each sorted key
        self.ntok: list[np.ndarray] = []
        self.pair_keys: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.off) - 1

    def add(self, uniq: list[bytes]) -> np.ndarray:
        """Ids (int64) of the distinct strings ``uniq``, registering the new ones."""
        keys = _keys(uniq)
        by_key = np.argsort(keys)
        sk = keys[by_key]
        if len(sk) > 1 and bool(np.any(sk[1:] == sk[:-1])):
            raise ResourceError("64-bit key collision while indexing METEOR resources (please report this)")
        n_known = len(self.sorted_keys)
        pos = np.empty(len(keys), dtype=np.int64)
        pos[by_key] = np.searchsorted(self.sorted_keys, sk)  # sorted needles: far fewer cache misses
        del by_key, sk
        if n_known:
            found = self.sorted_keys[np.minimum(pos, n_known - 1)] == keys
        else:
            found = np.zeros(len(keys), dtype=bool)
        ids = np.empty(len(uniq), dtype=np.int64)
        old = np.flatnonzero(found)
        if old.size:
            gid = self.sorted_ids[pos[old]]
            ids[old] = gid
            lo = self.off[gid].tolist()
            hi = self.off[gid + 1].tolist()
            blob = self.blob
            for i, a, b in zip(old.tolist(), lo, hi):
                if blob[a:b] != uniq[i]:
                    raise ResourceError("64-bit key collision while indexing METEOR resources (please report this)")
        new = np.flatnonzero(~found)
        if new.size:
            first = len(self)
            new_ids = np.arange(first, first + new.size, dtype=np.int64)
            ids[new] = new_ids
            strings = [uniq[i] for i in new.tolist()]
            lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
            off = np.empty(len(self.off) + len(strings), dtype=np.int64)
            off[: len(self.off)] = self.off
            np.cumsum(lengths, out=off[len(self.off) :])
            off[len(self.off) :] += self.off[-1]
            self.off = off
            self.blob += b"".join(strings)
            ntok = np.fromiter((x.count(b" ") + 1 if x else 0 for x in strings), dtype=np.int64, count=len(strings))
            if ntok.max(initial=0) > 255:
                raise ResourceError("paraphrase phrase longer than 255 tokens")
            self.ntok.append(ntok.astype(np.uint8))
            del ntok
            self.pair_keys.append(_pair_keys(strings))
            del strings
            nk = keys[new]
            o = np.argsort(nk, kind="stable")
            at = pos[new][o]
            self.sorted_keys = np.insert(self.sorted_keys, at, nk[o])
            self.sorted_ids = np.insert(self.sorted_ids, at, new_ids[o])
        return ids


def _build_paraphrase(gz_path: Path, emit: Callable[[str, np.ndarray], None]) -> None:
    """Index the paraphrase table, handing each finished array to ``emit(name, array)``.

    The file is streamed (see :func:`_paraphrase_batches`); what is kept between batches
    is numpy arrays and one byte buffer of the distinct strings, so the peak memory is a
    few times the index size rather than the whole table as Python objects.
    """
    strings = _DistinctStrings()
    ph_ids: list[np.ndarray] = []
    pa_ids: list[np.ndarray] = []
    for lines, messy in _paraphrase_batches(gz_path):
        # groups of three lines: probability, phrase, paraphrase (ParaphraseTransducer)
        phrases = lines[1::3]
        paras = lines[2::3]
        del lines
        if messy:
            phrases = [_canonical(x) for x in phrases]
            paras = [_canonical(x) for x in paras]
        local: dict[bytes, int] = {}
        setdefault = local.setdefault
        ph_local = np.fromiter((setdefault(x, len(local)) for x in phrases), dtype=np.int64, count=len(phrases))
        pa_local = np.fromiter((setdefault(x, len(local)) for x in paras), dtype=np.int64, count=len(paras))
        del phrases, paras
        uniq = list(local)
        del local
        ids = strings.add(uniq).astype(np.int32)
        del uniq
        ph_ids.append(ids[ph_local])
        pa_ids.append(ids[pa_local])
        del ids, ph_local, pa_local

    n = len(strings)
    emit("para_pairs", np.unique(np.concatenate(strings.pair_keys)) if strings.pair_keys else np.zeros(0, np.uint64))
    strings.pair_keys.clear()
    order = strings.sorted_ids  # first-seen id of the i-th string in key order
    emit("para_hash", strings.sorted_keys)
    strings.sorted_keys = np.zeros(0, dtype=np.uint64)
    ntok = np.concatenate(strings.ntok) if strings.ntok else np.zeros(0, np.uint8)
    strings.ntok.clear()
    emit("para_ntok", ntok[order])
    del ntok
    # the strings' bytes in key order, copied a block of strings at a time
    src_off = strings.off
    lengths = src_off[1:] - src_off[:-1]
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths[order], out=off[1:])
    del lengths
    src = np.frombuffer(strings.blob, dtype=np.uint8)
    blob = np.empty(int(off[-1]), dtype=np.uint8)
    for b0 in range(0, n, _GATHER_BLOCK):
        o = order[b0 : b0 + _GATHER_BLOCK]
        b1 = b0 + len(o)
        blob[off[b0] : off[b1]] = gather_ranges(src, src_off[o], src_off[o + 1])
        del o
    del src
    strings.blob = bytearray()
    strings.off = src_off = np.zeros(1, dtype=np.int64)
    emit("para_off", off)
    emit("para_blob", blob)
    del off, blob
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    del order
    strings.sorted_ids = np.zeros(0, dtype=np.int64)
    ph_rank = rank[np.concatenate(ph_ids)] if ph_ids else np.zeros(0, np.int64)
    ph_ids.clear()
    # Entries grouped by phrase, file order kept within a phrase (the order in which
    # Java's transducer emits them).
    by_phrase = np.argsort(ph_rank, kind="stable")
    counts = np.bincount(ph_rank, minlength=n)
    del ph_rank
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    del counts
    emit("para_start", start.astype(np.int32 if start[-1] < 2**31 else np.int64))
    del start
    pa_rank = rank[np.concatenate(pa_ids)] if pa_ids else np.zeros(0, np.int64)
    pa_ids.clear()
    del rank
    emit("para_entries", pa_rank[by_phrase].astype(np.int32))


def _pair_keys(strings: list[bytes]) -> np.ndarray:
    """Sorted distinct keys of the adjacent token pairs of canonical ``strings``."""
    pairs: set[bytes] = set()
    add = pairs.add
    update = pairs.update
    join = b" ".join
    for x in strings:
        n = x.count(b" ")
        if n == 1:
            add(x)
        elif n > 1:
            w = x.split(b" ")
            update(map(join, zip(w, w[1:])))
    keys = _keys(list(pairs))
    del pairs
    return np.unique(keys)  # sorted


def _pairs(text: str) -> list[tuple[str, str]]:
    """(key line, value line) pairs, read two lines at a time like SynonymDictionary."""
    lines = _LINE_BREAK.split(text)
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


def _build_synonyms(synsets_text: str, exceptions_text: str) -> dict[str, np.ndarray]:
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


def _read_manifest(index_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _index_problem(index_dir: Path, sources: dict[str, Path]) -> str | None:
    """Why the index at ``index_dir`` cannot be used, or None when it is current."""
    man = _read_manifest(index_dir)
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
    if set(man.get("arrays", {})) != set(_ARRAYS):
        return "array list does not match this capeval version"
    return None


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
    if not force and _index_problem(index_dir, sources) is None:
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

        for name, arr in _build_synonyms(texts["synsets"], texts["exceptions"]).items():
            emit(name, arr)
        log(f"synonyms indexed ({time.perf_counter() - t0:.1f}s)")
        _build_paraphrase(sources["paraphrase"], emit)
        log(f"paraphrases indexed ({time.perf_counter() - t0:.1f}s)")
        if set(meta) != set(_ARRAYS):
            raise ResourceError(f"METEOR index build produced {sorted(meta)}, expected {sorted(_ARRAYS)}")
        for key in ("function_words", "nonbreaking"):
            (tmp / f"{key}.txt").write_text(texts[key], encoding="utf-8")
        manifest = {
            "format": FORMAT,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "sources": {name: _fingerprint(p) for name, p in sources.items()},
            "jar_members": _JAR_MEMBERS,
            "arrays": {name: meta[name] for name in _ARRAYS},
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
        if _read_manifest(index_dir) is None:
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def resource_info(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Paths, sizes and sha256 of the METEOR 1.5 sources and the state of the index (for ``capeval info``)."""
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    info: dict[str, Any] = {"index_dir": str(index_dir), "format": FORMAT}
    try:
        sources = source_paths()
    except ResourceError as exc:
        info["error"] = str(exc)
        return info
    man = _read_manifest(index_dir)
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
    problem = _index_problem(index_dir, sources)
    info["prepared"] = problem is None
    if problem is not None:
        info["index_problem"] = problem
    if man is not None:
        info["index_size"] = sum(f.stat().st_size for f in index_dir.iterdir() if f.is_file())
        info["counts"] = man.get("counts")
        info["created"] = man.get("created")
    return info


class StringTable:
    """Memory-mapped set of UTF-8 strings: sorted 64-bit keys, offsets and bytes."""

    def __init__(self, keys: np.ndarray, off: np.ndarray, blob: np.ndarray):
        self.keys = keys
        self.off = off
        self.blob = blob
        self._n = int(keys.shape[0])

    def __len__(self) -> int:
        return self._n

    def string(self, i: int) -> str:
        return self.blob[int(self.off[i]) : int(self.off[i + 1])].tobytes().decode("utf-8")

    def lookup(self, s: str) -> int:
        """Index of ``s`` or -1."""
        data = s.encode("utf-8")
        k = np.uint64(key64(data))
        i = int(np.searchsorted(self.keys, k))
        if i < self._n and self.keys[i] == k and self.blob[int(self.off[i]) : int(self.off[i + 1])].tobytes() == data:
            return i
        return -1

    def lookup_many(self, strings: list[str]) -> list[int]:
        """Indices of ``strings`` (-1 where absent), one vectorised search."""
        if not strings:
            return []
        return self.lookup_encoded([s.encode("utf-8") for s in strings]).tolist()

    def lookup_encoded(self, encoded: list[bytes], keys: np.ndarray | None = None) -> np.ndarray:
        """Indices (int64 array, -1 where absent) of UTF-8 strings whose keys may be given.

        The keys are searched in sorted order (much faster on the big mapped table) and
        the hits are confirmed against the stored bytes all at once.
        """
        n = len(encoded)
        out = np.full(n, -1, dtype=np.int64)
        if n == 0 or self._n == 0:
            return out
        if keys is None:
            keys = _keys(encoded)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        pos = np.searchsorted(self.keys, sorted_keys)
        inside = pos < self._n
        hit = inside & (self.keys[np.where(inside, pos, 0)] == sorted_keys)
        sel = np.flatnonzero(hit)
        if sel.size == 0:
            return out
        cand = pos[sel]
        which = order[sel]
        lo = self.off[cand].astype(np.int64)
        hi = self.off[cand + 1].astype(np.int64)
        want = [encoded[j] for j in which.tolist()]
        lens = np.fromiter(map(len, want), dtype=np.int64, count=len(want))
        if np.array_equal(hi - lo, lens) and gather_ranges(self.blob, lo, hi).tobytes() == b"".join(want):
            out[which] = cand
        else:  # some key matched a different string: check one by one
            for j, i, a, b, data in zip(which.tolist(), cand.tolist(), lo.tolist(), hi.tolist(), want):
                if self.blob[a:b].tobytes() == data:
                    out[j] = i
        return out


def contains_sorted(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Boolean array: which ``keys`` occur in the sorted array ``sorted_keys``."""
    if len(sorted_keys) == 0 or len(keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    pos = np.searchsorted(sorted_keys, sk)
    pos[pos >= len(sorted_keys)] = 0
    out = np.empty(len(keys), dtype=bool)
    out[order] = sorted_keys[pos] == sk
    return out


def gather_ranges(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``np.concatenate([values[a:b] for a, b in zip(lo, hi)])`` without a Python loop."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return values[:0]
    ends = np.cumsum(counts)
    idx = np.arange(total, dtype=np.int64) + np.repeat(lo - (ends - counts), counts)
    return values[idx]


class Resources:
    """Loaded (memory-mapped) METEOR 1.5 index: paraphrase and synonym tables, word lists."""

    def __init__(self, index_dir: Path):
        self.index_dir = index_dir
        # Memory-mapped, viewed as plain ndarrays: np.memmap's Python-level indexing
        # overhead dominates the many tiny lookups the scorer makes.
        arr = {name: np.load(index_dir / f"{name}.npy", mmap_mode="r").view(np.ndarray) for name in _ARRAYS}
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
        self.function_words = frozenset(_LINE_BREAK.split(words))
        self.nonbreaking = parse_nonbreaking_prefixes((index_dir / "nonbreaking.txt").read_text(encoding="utf-8"))


def load(cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True) -> Resources:
    """Open the index, preparing it first when missing or stale (unless ``auto_prepare`` is False)."""
    index_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    problem = _index_problem(index_dir, source_paths())
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
        prepare(index_dir, force=True)
    try:
        return Resources(index_dir)
    except (OSError, ValueError) as exc:
        raise ResourceError(
            f"METEOR 1.5 index at {index_dir} is corrupt ({exc}); rebuild it with prepare(force=True)"
        ) from exc
