"""Item tables: one row per item (id, candidate, references, image or video), in JSONL, JSON,
CSV/TSV or Parquet files: the input of ``capeval score --items`` on either engine.

Columns (``id`` and ``candidate`` required; the rest as the metrics need):

=============  ==========================================================================
``id``         the item's id (also accepted: ``image_id``, ``video_id``); compared as text
``candidate``  the caption to score (also accepted: ``caption``)
``references`` a list of reference captions (Parquet/JSON list; in CSV/TSV a JSON array
               such as ``["a dog", "a puppy"]``, or one plain reference)
``image``      the image: a path (as given: relative to the working directory) or a URI
               (``file://``, ``http(s)://``, ``s3://``, ``gs://``, ...: :mod:`capeval.io.uris`)
``video``      the video file or frame folder, path or URI
``start``,     optional time window of the video in seconds (both or neither), as
``end``        ``segments=`` of the video metrics
=============  ==========================================================================

The same row rules serve both engines (:func:`items_from_rows`): the in-process reader
(:func:`read_items`) and the Ray engine, which reads the files as a Ray dataset and applies
them shard by shard, so one table gives the same items on a laptop and on a cluster.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capeval.errors import InputError
from capeval.io.nesting import json_loads

ID_COLUMNS = ("id", "image_id", "video_id")
CANDIDATE_COLUMNS = ("candidate", "caption")
#: columns read as text (CSV readers must not turn ``007`` into 7)
TEXT_COLUMNS = (*ID_COLUMNS, *CANDIDATE_COLUMNS, "references", "image", "video")
#: every column a row is read from (the rest of a Parquet table is never read)
USED_COLUMNS = frozenset((*ID_COLUMNS, *CANDIDATE_COLUMNS, "references", "image", "video", "start", "end"))
FORMATS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}


@dataclass
class Items:
    """Items of a table, in row order: the keyword inputs of :func:`capeval.score`."""

    candidates: dict[str, str] = field(default_factory=dict)
    references: dict[str, list[str]] | None = None
    images: dict[str, str] | None = None
    videos: dict[str, str] | None = None
    segments: dict[str, tuple[float, float]] | None = None

    def __len__(self) -> int:
        return len(self.candidates)

    def inputs(self) -> dict[str, Any]:
        """``images=`` / ``videos=`` / ``segments=`` for the columns the table has."""
        return {k: v for k, v in (("images", self.images), ("videos", self.videos),
                                  ("segments", self.segments)) if v}

    def extend(self, other: "Items") -> None:
        """Append the rows of ``other`` (ids must be new: checked by the caller)."""
        self.candidates.update(other.candidates)
        for name in ("references", "images", "videos", "segments"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs:
                if mine is None:
                    mine = {}
                    setattr(self, name, mine)
                mine.update(theirs)


def format_of(path: str | os.PathLike[str]) -> str | None:
    """``jsonl``/``json``/``csv``/``tsv``/``parquet`` from the file name; None for another name
    (e.g. a folder or an object-store prefix)."""
    return FORMATS.get(Path(str(path).rstrip("/")).suffix.lower())


def table_format(path: str | os.PathLike[str]) -> str:
    """:func:`format_of`, or an error naming the file when its name has no known format."""
    fmt = format_of(path)
    if fmt is None:
        suffix = Path(str(path).rstrip("/")).suffix.lower()
        raise InputError(f"items file {path}: unknown format {suffix or '(no extension)'!r}; use "
                         ".jsonl, .json, .csv, .tsv or .parquet")
    return fmt


def _first(row: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for k in keys:
        v = row.get(k)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            return v
    return None


def _id_text(value: Any, where: str = "an item table") -> str:
    from capeval.io.inputs import id_text

    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a CSV/JSON reader's 7.0 for the id 7
    return id_text(value, where)  # a list or an object is refused, never made the text "[1, 2]"


def _references(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):  # CSV/TSV: a JSON array in one field
            try:
                value = json_loads(text, where, lines=False)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: references is not a valid JSON array ({exc.msg})") from None
        else:
            return [value]
    if hasattr(value, "tolist"):  # numpy arrays from pandas/pyarrow conversions
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, str) for r in value):
        raise InputError(f"{where}: references must be a list of strings, got {type(value).__name__}")
    return list(value)


def _seconds(value: Any, name: str, where: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(out):
        raise InputError(f"{where}: {name} must be a finite number of seconds, got {value!r}")
    return out


def items_from_rows(rows: Iterable[Mapping[str, Any]], source: str, first_row: int = 1,
                    seen: dict[str, int] | None = None) -> Items:
    """The items of ``rows`` (dicts of one table's columns); ``source`` and ``first_row``
    (1-based number of the first row) name the row in errors; ``seen`` (id -> row, shared
    over the calls of one table) catches an id that appears twice across calls."""
    out = Items()
    seen = {} if seen is None else seen
    refs: dict[str, list[str]] = {}
    images: dict[str, str] = {}
    videos: dict[str, str] = {}
    segments: dict[str, tuple[float, float]] = {}
    without_refs: list[str] = []
    for n, row in enumerate(rows, first_row):
        where = f"{source}, row {n}"
        raw_id = _first(row, ID_COLUMNS)
        if raw_id is None:
            raise InputError(f"{where}: no id (columns {', '.join(ID_COLUMNS)})")
        item = _id_text(raw_id, where)
        where = f"{where} (item {item!r})"
        if item in seen:
            raise InputError(f"{where}: the id appears twice (first in row {seen[item]})", item)
        seen[item] = n
        cand = _first(row, CANDIDATE_COLUMNS)
        if cand is None:
            raise InputError(f"{where}: no candidate (columns {', '.join(CANDIDATE_COLUMNS)})", item)
        if not isinstance(cand, str):
            raise InputError(f"{where}: the candidate must be text, got {type(cand).__name__}", item)
        out.candidates[item] = cand
        value = _first(row, ("references",))
        if value is None:
            without_refs.append(item)
        else:
            refs[item] = _references(value, where)
        for key, table in (("image", images), ("video", videos)):
            media = _first(row, (key,))
            if media is not None:
                table[item] = os.fspath(media) if isinstance(media, os.PathLike) else str(media)
        start, end = _first(row, ("start",)), _first(row, ("end",))
        if (start is None) != (end is None):
            raise InputError(f"{where}: give both start and end (seconds) or neither", item)
        if start is not None:
            segments[item] = (_seconds(start, "start", where), _seconds(end, "end", where))
    if refs and without_refs:
        raise InputError(f"{source}: item {without_refs[0]!r} has no references while other rows have some",
                         without_refs[0])
    out.references = refs or None
    out.images = images or None
    out.videos = videos or None
    out.segments = segments or None
    return out


def _read_rows(path: Path, fmt: str) -> Iterable[Any]:
    if fmt == "parquet":
        from capeval._optional import require

        require("pyarrow", "ray", "reading Parquet item tables")
        from capeval.io.parquet import open_parquet, parquet_rows

        # only the columns a row can use: an unused column (embedded images, say) is never
        # decompressed, and each used one is bounded like a JSON table (parquet_rows)
        table = open_parquet(path, "items file")
        used = [name for name in table.schema_arrow.names if name in USED_COLUMNS]
        if len(set(used)) < len(used):
            dup = next(n for n in used if used.count(n) > 1)
            raise InputError(f"items file {path}: column {dup!r} appears twice")
        return parquet_rows(table, path, used, "items file")
    if fmt in ("csv", "tsv"):
        return _csv_rows(path, fmt)
    if fmt == "jsonl":
        return _jsonl_rows(path)
    from capeval.io.reading import read_json_text

    text = read_json_text(path)
    try:
        obj = json_loads(text, str(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(obj, list):
        raise InputError(f"{path}: an items table in JSON is a list of rows [{{\"id\": ..., \"candidate\": ...}}]")
    return obj


def _csv_rows(path: Path, fmt: str) -> Iterator[dict[str, Any]]:
    """The rows of a CSV/TSV table, streamed (quoting strict, see :func:`capeval.io.captions.csv_records`)."""
    from capeval.io.captions import csv_records

    records = csv_records(path, "excel-tab" if fmt == "tsv" else "excel")
    first = next(records, None)
    header = [h.strip() for h in first[1]] if first is not None else []
    for line, row in records:
        if not row:  # a blank line
            continue
        if len(row) != len(header):
            raise InputError(f"{path}, line {line}: the number of fields differs from the header's; "
                             "a caption containing the separator must be quoted")
        yield dict(zip(header, row))


def _jsonl_rows(path: Path) -> Iterator[Any]:
    from capeval.io.reading import iter_lines

    for lineno, line in enumerate(iter_lines(path), 1):
        if line.strip():
            try:
                yield json_loads(line, str(path), lineno)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}, line {lineno}: not valid JSON ({exc.msg})") from None


def _objects(rows: Iterable[Any], path: Path) -> Iterator[dict[str, Any]]:
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise InputError(f"{path}, row {n}: expected an object, got {type(row).__name__}")
        yield row


def table_files(names: Iterable[str]) -> list[str]:
    """The item-table files among a folder's file ``names``, sorted as Ray lists them (hidden
    and ``_``-prefixed files such as ``_SUCCESS`` left out)."""
    return sorted(n for n in names if not n.startswith((".", "_")) and format_of(n) is not None)


def _files(path: str | os.PathLike[str]) -> list[Path | str]:
    """A folder's table files, or ``[path]``."""
    if not os.path.isdir(path):
        return [path]
    found = table_files(os.listdir(path))
    if not found:
        raise InputError(f"items folder {path}: no .jsonl, .json, .csv, .tsv or .parquet files")
    return [Path(path, n) for n in found]


def read_items(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> Items:
    """Read item tables (one or several files, rows in file order) in this process.

    Rows are numbered from 1 per file (JSONL: non-empty lines; CSV: data rows). A row that
    is not an object, an id twice, a missing candidate, references in some rows only or a
    half-given time window are errors naming the file, row and item.
    """
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not paths:
        raise InputError("no items file given")
    paths = [f for p in paths for f in _files(p)]
    items = Items()
    seen: dict[str, int] = {}
    for p in paths:
        from capeval.io.uris import is_uri

        if is_uri(str(p)) and not str(p).startswith("file://"):
            raise InputError(f"{p}: remote item tables are read by the Ray engine (--engine ray); "
                             "download the file for the local engine")
        path = Path(str(p)[len("file://"):] if str(p).startswith("file://") else p)
        part = items_from_rows(_objects(_read_rows(path, table_format(path)), path), str(path), 1,
                               seen if len(paths) == 1 else None)
        dup = next((i for i in part.candidates if i in items.candidates), None)
        if dup is not None:
            raise InputError(f"{path}: item {dup!r} appears in an earlier items file too", dup)
        if items.candidates and (items.references is None) != (part.references is None):
            raise InputError(f"{path}: references given in some items files only")
        items.extend(part)
    return items
