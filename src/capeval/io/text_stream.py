"""Candidates and references streamed from files instead of held in memory.

A text-metric job on record-by-record files (``-c cands.jsonl -r refs.jsonl``, or an item
table ``--items items.jsonl`` with only ids, candidates and references) is scored by
:func:`capeval.metrics.text.score_text_stream`, which goes over the items twice, a chunk at
a time; this module makes the :class:`TextStream` it reads. For a candidates and a
references file, one pass reads and checks the files (each once) and keeps the items it
validated: in memory up to :data:`HOLD_CHARS` characters of text, beyond that in two
temporary files (``marshal`` records, read back sequentially), so memory stays bounded and
the files are parsed once. Anything it cannot stream exactly
as the in-memory reader would read it (references not in the candidates' order, one id's
reference records not consecutive, a caption that is not text, an empty reference, an id
twice, ...)
returns None, and the caller reads the files whole as before, with the usual errors.
"""

from __future__ import annotations

import marshal
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from capeval.io.captions import CaptionFile, file_records, record_values
from capeval.io.inputs import check_reference_count, warn_empty_candidates
from capeval.io.reading import max_references


@dataclass
class TextStream:
    """Items to stream: ``ids`` in order, the distinct reference counts, and ``items()``, a
    fresh iterator of ``(id, candidate, [references])`` per call (``items(False)``: the
    candidates may be left empty, for a pass over the references). ``files``: what was read
    (for the CLI's description; their ``data`` is empty)."""

    ids: list[str]
    ref_counts: set[int]
    items: Callable[..., Iterator[tuple[str, str, list[str]]]]
    files: list[CaptionFile] = field(default_factory=list)


#: characters of caption text the first pass keeps in memory (about 40 MB of Python strings
#: at most); past it the items go to temporary files. The Flickr8k leave-one-out set
#: (40,460 x 4) is 14.6 M characters: held.
HOLD_CHARS = 16 << 20


class _Items:
    """A sequence of values (candidates, or reference lists) appended once and read in
    order any number of times: a list while the shared character budget lasts, then a
    temporary file of ``marshal`` records (the values held so far moved there first)."""

    def __init__(self, budget: list[int], folder: Callable[[], str]):
        self._budget = budget  # [characters left], shared by the candidates and the references
        self._folder = folder
        self._held: list[Any] | None = []
        self._path: str | None = None
        self._file: Any = None

    def append(self, value: Any, chars: int) -> None:
        self._budget[0] -= chars
        if self._held is not None:
            self._held.append(value)
            if self._budget[0] >= 0:
                return
            self._path = str(Path(self._folder()) / f"{id(self)}.marshal")
            self._file = open(self._path, "wb")  # noqa: SIM115 - closed by done()
            for x in self._held:
                marshal.dump(x, self._file)
            self._held = None
            return
        marshal.dump(value, self._file)

    def done(self) -> None:
        if self._file is not None:
            self._file.close()

    def __iter__(self) -> Iterator[Any]:
        if self._held is not None:
            yield from self._held
            return
        with open(self._path, "rb") as f:  # type: ignore[arg-type]
            while True:
                try:
                    yield marshal.load(f)
                except EOFError:
                    return


def _candidate(value: Any) -> str | None:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value if isinstance(value, str) else None


def _references(value: Any) -> list[str] | None:
    refs = [value] if isinstance(value, str) else value
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) and r.strip() for r in refs):
        return None
    return refs


def _grouped(pairs: Iterator[tuple[str, Any, str]]) -> Iterator[tuple[str, list[str] | None]]:
    """``(id, references)`` of each run of consecutive records with one id (one row per
    reference, as in CSV); None for references that are not a list of non-empty texts."""
    for item, run in groupby(pairs, key=lambda p: p[0]):
        refs: list[str] = []
        usable = True
        for _, value, _ in run:
            more = _references(value)
            usable = usable and more is not None
            refs.extend(more or ())
        yield item, refs if usable else None


def stream_caption_files(candidates: str | Path, references: str | Path) -> TextStream | None:
    """A :class:`TextStream` of a candidates and a references file (JSONL/CSV/TSV; the
    references of each candidate in one record or in consecutive records, in the
    candidates' order), or None (read them whole)."""
    cpath, rpath = Path(candidates), Path(references)
    if file_records(cpath) is None or file_records(rpath) is None:
        return None

    def pairs(path: Path, kind: str) -> Iterator[tuple[str, Any, str]]:
        records, _, unit = file_records(path)  # type: ignore[misc]
        return record_values(records, kind, path, unit)

    spill: list[tempfile.TemporaryDirectory] = []  # made on first need, removed with the stream

    def folder() -> str:
        if not spill:
            spill.append(tempfile.TemporaryDirectory(prefix="capeval-items-"))
        return spill[0].name

    budget = [HOLD_CHARS]
    cands, refs_of = _Items(budget, folder), _Items(budget, folder)
    ids: list[str] = []
    seen: set[str] = set()
    blank: list[str] = []  # empty candidates: scored, and named in one warning
    for item, value, _ in pairs(cpath, "candidates"):
        cand = _candidate(value)
        if item in seen or cand is None:
            return None
        seen.add(item)
        ids.append(item)
        if not cand.strip():
            blank.append(item)
        cands.append(cand, len(cand) + len(item))
    del seen
    cands.done()
    if not ids:
        return None
    counts: set[int] = set()
    n_refs = k = 0
    limit = max_references()
    for k, (item, refs) in enumerate(_grouped(pairs(rpath, "references")), 1):
        if refs is None or k > len(ids) or item != ids[k - 1]:
            return None
        check_reference_count(item, len(refs), limit)
        counts.add(len(refs))
        n_refs += len(refs)
        refs_of.append(refs, sum(map(len, refs)))
    refs_of.done()
    if k != len(ids):
        return None

    def items(candidates: bool = True) -> Iterator[tuple[str, str, list[str]]]:
        # the items as read by the pass above (the files are not read again); the
        # temporary folder, if any, lives as long as the _Items (through ``folder``)
        if not candidates:  # the corpus pass: the references alone
            return ((item, "", refs) for item, refs in zip(ids, refs_of, strict=True))
        return zip(ids, cands, refs_of, strict=True)

    files = [CaptionFile(cpath, "candidates", {}, file_records(cpath)[1], len(ids), len(ids)),  # type: ignore[index]
             CaptionFile(rpath, "references", {}, file_records(rpath)[1], len(ids), n_refs)]  # type: ignore[index]
    warn_empty_candidates(blank)
    return TextStream(ids, counts, items, files)


def stream_item_tables(paths: list[str]) -> TextStream | None:
    """A :class:`TextStream` of local JSONL/CSV/TSV item tables with only id, candidate and
    references columns (every row with references), or None (read them whole)."""
    from capeval.errors import InputError
    from capeval.io.items import (
        ID_COLUMNS,
        _files,
        _first,
        _id_text,
        _objects,
        _read_rows,
        _references,
        format_of,
    )

    try:
        files = [Path(str(f)) for p in paths for f in _files(p)]
    except (InputError, OSError):  # the in-memory reader says what is wrong
        return None
    if not files or any(format_of(f) not in ("jsonl", "csv", "tsv") or not f.is_file() for f in files):
        return None
    allowed = {*ID_COLUMNS, "candidate", "caption", "references"}

    def rows() -> Iterator[tuple[Path, Any, Any, dict[str, Any]]]:
        for f in files:
            for row in _objects(_read_rows(f, format_of(f)), f):  # type: ignore[arg-type]
                yield f, _first(row, ID_COLUMNS), _first(row, ("candidate", "caption")), row

    def parsed(raw_refs: Any) -> list[str] | None:
        try:
            return _references(raw_refs, "")
        except InputError:
            return None

    ids: list[str] = []
    seen: set[str] = set()
    counts: set[int] = set()
    blank: list[str] = []
    limit = max_references()
    for _, raw_id, cand, row in rows():
        refs = parsed(_first(row, ("references",)))
        if raw_id is None or not isinstance(cand, str) or set(row) - allowed or refs is None:
            return None
        try:
            item = _id_text(raw_id)
        except InputError:  # a list id: the in-memory reader names its row
            return None
        if item in seen or not refs or not all(r.strip() for r in refs):
            return None
        check_reference_count(item, len(refs), limit)
        seen.add(item)
        ids.append(item)
        counts.add(len(refs))
        if not cand.strip():
            blank.append(item)
    if not ids:
        return None
    del seen
    warn_empty_candidates(blank)

    def items(candidates: bool = True) -> Iterator[tuple[str, str, list[str]]]:
        for _, raw_id, cand, row in rows():
            yield _id_text(raw_id), cand, parsed(_first(row, ("references",)))  # type: ignore[misc]

    return TextStream(ids, counts, items)
