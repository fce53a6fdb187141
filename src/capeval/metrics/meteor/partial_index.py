"""METEOR 1.5 resources without the full index: what a first small run uses.

Building the full index (:func:`.index_build.prepare`) takes about 5 s of CPU, most of a
first ``capeval score -m coco-ngram`` on a few captions. When there is no index yet,
:func:`load` (what :class:`.engine.Meteor15` calls) returns a :class:`PartialResources`
instead of building it: the synonym tables and word lists are read
from ``meteor-1.5.jar`` (small), and the paraphrase table is answered for the sentences
at hand by one scan of ``paraphrase-en.gz`` (:mod:`.paraphrase_scan`, about 1 s), done
when the scorer first says which sentences it will look up (:meth:`PartialResources.cover`).

The full index is still built, once, the first time it pays: when the sentences of one
call have more than :data:`SCAN_LIMIT` distinct n-grams, when a later call in the same
process brings sentences the scan did not cover, in the forked workers of a large input,
or once the scans of earlier runs have cost as much as one build: a marker file
``.meteor-1.5.scanned`` beside the index counts them, and the run after
:data:`SCANS_BEFORE_BUILD` scans builds (the ski-rental rule: never more than twice the
CPU of knowing the future; a run of small jobs pays ~1.2 s each for three runs, then ~5 s
once, then ~0.05 s). A marker that cannot be read as a count means "build". Nothing is
written by a scan but that marker (best effort: an unwritable cache still scores small
inputs); the build keeps its lock, checks and one-line errors.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from capeval.metrics.meteor.index_build import jar_texts
from capeval.metrics.meteor.index_format import LINE_BREAK, sha256_of, source_paths
from capeval.metrics.meteor.normalize import java_tokens
from capeval.metrics.meteor import ahead, resources
from capeval.metrics.meteor.resources import Resources
from capeval.metrics.meteor.string_table import StringTable

#: distinct n-grams (of every length up to :data:`MAX_TOKENS`) one scan answers at most;
#: more and the full index is built. Set by measurement (Flickr8k-Expert captions, 2 cores):
#: the scan takes 1.2-1.3 s of CPU from 800 to 85,000 n-grams (4 to 1,000 items of 5
#: references) and listing the n-grams 0.05 s at 85,000; the bound keeps that list (and the
#: n-grams of a very long caption, quadratic in its length) small.
SCAN_LIMIT = 100_000
#: longest table string the index format allows (``para_ntok`` is uint8)
MAX_TOKENS = 255
#: scans (~1.2 s of CPU each, measured with :data:`SCAN_LIMIT`) before a run builds the full
#: index (~4.7 s): the build is paid once the scans have cost about as much (ski rental)
SCANS_BEFORE_BUILD = 3


def marker(index_dir: Path) -> Path:
    """The file saying that a run scanned the table for lack of an index (see module docstring)."""
    return index_dir.parent / f".{index_dir.name}.scanned"


def scan_count(index_dir: Path) -> int:
    """How many runs scanned the table for lack of an index: the marker's count, 0 without a
    readable marker (an unusable cache scans), :data:`SCANS_BEFORE_BUILD` for a marker whose
    text is not a count (build)."""
    try:
        text = marker(index_dir).read_text(encoding="ascii")
    except OSError:
        return 0
    except UnicodeDecodeError:
        return SCANS_BEFORE_BUILD
    text = text.strip()
    return int(text) if text.isdigit() and len(text) < 6 else SCANS_BEFORE_BUILD


def scans(index_dir: Path) -> bool:
    """Whether :func:`load` scans rather than builds: no index there yet, and fewer than
    :data:`SCANS_BEFORE_BUILD` runs scanned before."""
    return not index_dir.exists() and scan_count(index_dir) < SCANS_BEFORE_BUILD


def load(cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True) -> Resources:
    """:func:`.resources.load`, except that when :func:`scans` (and ``auto_prepare``) it
    returns a :class:`PartialResources`: nothing is built until :meth:`~PartialResources.cover`
    finds that the full index pays."""
    index_dir = Path(cache_dir) if cache_dir is not None else resources.default_cache_dir()
    if auto_prepare and scans(index_dir):
        return PartialResources(index_dir)
    return resources.load(index_dir, auto_prepare=auto_prepare)


def ngrams(texts: Iterable[str], limit: int) -> tuple[list[bytes], set[str]] | None:
    """(the distinct n-grams of the normalised texts, up to :data:`MAX_TOKENS` tokens,
    each as its tokens joined by one space in UTF-8; the distinct texts), or None as soon
    as there are more than ``limit`` n-grams (the rest of ``texts`` is not read)."""
    seen: dict[str, None] = {}
    done: set[str] = set()
    for t in texts:
        if t in done:
            continue
        done.add(t)
        words = java_tokens(t)
        n = len(words)
        for k in range(n):
            g = words[k]
            seen[g] = None
            for j in range(k + 1, min(n, k + MAX_TOKENS)):
                g = g + " " + words[j]
                seen[g] = None
            if len(seen) > limit:
                return None
    return [g.encode("utf-8") for g in seen], done


class PartialResources(Resources):
    """:class:`.resources.Resources` whose paraphrase table covers only the sentences given
    to :meth:`cover` (until it becomes the full index); ``complete`` says which."""

    complete = False

    def __init__(self, index_dir: Path):
        from capeval.metrics.meteor.normalize import parse_nonbreaking_prefixes

        self.index_dir = index_dir
        self._sources = source_paths()
        texts = jar_texts(self._sources["jar"])
        self.function_words = frozenset(LINE_BREAK.split(texts["function_words"]))
        self.nonbreaking = parse_nonbreaking_prefixes(texts["nonbreaking"])
        self._install_para(None)
        self._covered: set[str] | None = None
        self._jar_texts: dict[str, str] | None = texts  # until the synonym tables are built

    def __getattr__(self, name: str) -> Any:
        # the syn_* / exc_* tables are built on first use (only missing attributes get here)
        if name.startswith(("syn", "exc")) and self.__dict__.get("_jar_texts") is not None:
            self._install_synonyms(self._build_synonyms())
            return getattr(self, name)
        raise AttributeError(name)

    def _build_synonyms(self) -> dict[str, np.ndarray]:
        from capeval.metrics.meteor.synonym_build import build_synonyms

        texts = self._jar_texts
        assert texts is not None
        return build_synonyms(texts["synsets"], texts["exceptions"])

    def _install_synonyms(self, arr: dict[str, np.ndarray]) -> None:
        self.syn = StringTable(arr["syn_hash"], arr["syn_off"], arr["syn_blob"])
        self.syn_start, self.syn_sets = arr["syn_start"], arr["syn_sets"]
        self.exc = StringTable(arr["exc_hash"], arr["exc_off"], arr["exc_blob"])
        self.exc_start, self.exc_sets = arr["exc_start"], arr["exc_sets"]
        self._jar_texts = None

    def jar_sha256(self) -> str:
        """sha256 of the ``meteor-1.5.jar`` the tables come from (what the index's manifest records)."""
        return sha256_of(self._sources["jar"])

    def _install_para(self, arr: dict[str, np.ndarray] | None) -> None:
        if arr is None:  # nothing covered yet: an empty table
            z64 = np.zeros(0, np.uint64)
            arr = {"para_hash": z64, "para_off": np.zeros(1, np.int64), "para_blob": np.zeros(0, np.uint8),
                   "para_ntok": np.zeros(0, np.uint8), "para_start": np.zeros(1, np.int32),
                   "para_entries": np.zeros(0, np.int32), "para_pairs": z64}  # fmt: skip
        self.para = StringTable(arr["para_hash"], arr["para_off"], arr["para_blob"])
        self.para_ntok, self.para_start = arr["para_ntok"], arr["para_start"]
        self.para_entries, self.para_pairs = arr["para_entries"], arr["para_pairs"]
        self.__dict__.pop("max_phrase", None)  # a cached_property of the old table

    def cover(self, texts: Iterable[str], scan: bool = True) -> bool:
        """Make the paraphrase table answer every n-gram of the normalised ``texts``.

        The first call scans the table for them (unless ``scan`` is False, they are too many,
        or a run before this one scanned already); any other call that needs more builds and
        loads the full index in place, and returns True: string ids changed, so sentence data
        made before must be made again. Returns False when the ids did not change.
        """
        if self.complete:
            return False
        if self._covered is not None:
            covered = self._covered
            if all(t in covered for t in texts):
                return False
            got = None
        elif (not scan or scan_count(self.index_dir) >= SCANS_BEFORE_BUILD or _in_pool_worker()
              or ahead.started(self.index_dir)):
            # earlier scans cost a build already, a pool's share of a large input, or a large
            # job whose build is under way beside it (:mod:`.ahead`): the full index
            got = None
        else:
            got = ngrams(texts, SCAN_LIMIT)
        if got is None:
            self._become_full()
            return True
        from capeval.metrics.meteor.paraphrase_scan import scan_paraphrases

        grams, self._covered = got
        syn: dict[str, Any] = {}
        side = None
        if self._jar_texts is not None:  # the synonym tables (~0.3 s, Python) while the scan runs
            def build() -> None:
                try:
                    syn["arrays"] = self._build_synonyms()
                except BaseException as exc:  # noqa: BLE001 - raised below
                    syn["error"] = exc

            side = threading.Thread(target=build, name="capeval-meteor-synonyms")
            side.start()
        try:
            self._install_para(scan_paraphrases(self._sources["paraphrase"], grams))
        finally:
            if side is not None:
                side.join()  # no thread outlives the call: workers may be forked next
        if "error" in syn:
            raise syn["error"]
        if "arrays" in syn:
            self._install_synonyms(syn["arrays"])
        _count_scan(self.index_dir)
        return False

    def _become_full(self) -> None:
        full = resources.load(self.index_dir)  # builds the index (announced on stderr), under its lock
        self.__dict__.pop("max_phrase", None)
        self.__dict__.update(full.__dict__)
        self.complete = True
        self._covered = None
        self._jar_texts = None


def _in_pool_worker() -> bool:
    """Whether this is a forked pool worker (:func:`capeval.metrics.workers.map_tasks`): its
    input, over the pool's threshold, is large, and each worker would scan for its own share."""
    import multiprocessing

    return multiprocessing.current_process().daemon


def _count_scan(index_dir: Path) -> None:
    """Add one to the marker's count, atomically (a read-only or missing cache is fine: the
    next run scans again; two runs at once may count one scan: the build comes a run later)."""
    path = marker(index_dir)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(f"{scan_count(index_dir) + 1}\n", encoding="ascii")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
