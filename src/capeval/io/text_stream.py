"""Candidates and references streamed from files instead of held in memory.

A text-metric job on record-by-record files (``-c cands.jsonl -r refs.jsonl``, or an item
table ``--items items.jsonl`` with only ids, candidates and references) is scored by
:func:`capeval.metrics.text.score_text_stream`, which reads the items twice, a chunk at
a time; this module makes the :class:`TextStream` it reads. A first pass checks the files
and keeps only the ids (and the numbers of references); anything it cannot stream exactly
as the in-memory reader would read it (references not in the candidates' order, one id's
reference records not consecutive, a caption that is not text, an empty reference, an id
twice, ...)
returns None, and the caller reads the files whole as before, with the usual errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from capeval.io.captions import CaptionFile, file_records, record_values
from capeval.io.inputs import check_reference_count
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

    ids: list[str] = []
    seen: set[str] = set()
    for item, value, _ in pairs(cpath, "candidates"):
        if item in seen or _candidate(value) is None:
            return None
        seen.add(item)
        ids.append(item)
    del seen
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
    if k != len(ids):
        return None

    def items(candidates: bool = True) -> Iterator[tuple[str, str, list[str]]]:
        if not candidates:  # the corpus pass: the references file alone
            return ((item, "", refs) for item, refs in _grouped(pairs(rpath, "references")))  # type: ignore[misc]
        return ((item, _candidate(cand), refs)  # type: ignore[misc]
                for (item, cand, _), (_, refs) in zip(pairs(cpath, "candidates"), _grouped(pairs(rpath, "references"))))

    files = [CaptionFile(cpath, "candidates", {}, file_records(cpath)[1], len(ids), len(ids)),  # type: ignore[index]
             CaptionFile(rpath, "references", {}, file_records(rpath)[1], len(ids), n_refs)]  # type: ignore[index]
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
    limit = max_references()
    for _, raw_id, cand, row in rows():
        refs = parsed(_first(row, ("references",)))
        if raw_id is None or not isinstance(cand, str) or set(row) - allowed or refs is None:
            return None
        item = _id_text(raw_id)
        if item in seen or not refs or not all(r.strip() for r in refs):
            return None
        check_reference_count(item, len(refs), limit)
        seen.add(item)
        ids.append(item)
        counts.add(len(refs))
    if not ids:
        return None
    del seen

    def items(candidates: bool = True) -> Iterator[tuple[str, str, list[str]]]:
        for _, raw_id, cand, row in rows():
            yield _id_text(raw_id), cand, parsed(_first(row, ("references",)))  # type: ignore[misc]

    return TextStream(ids, counts, items)
