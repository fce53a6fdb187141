"""Reading caption files (JSON, JSONL, CSV, COCO layouts) into ``{id: caption}`` / ``{id: [references]}``."""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capeval.errors import InputError
from capeval.io.inputs import id_text
from capeval.io.nesting import json_loads
from capeval.io.reading import iter_lines, max_line_bytes, read_json_text

# ``image_id``/``video_id`` come before ``id``: in COCO files ``id`` numbers the annotation
# (the caption), not the image it describes. ``file_id``: CAPability's caption files.
_ID_KEYS = ("image_id", "video_id", "id", "image", "video", "seg_id", "file_id")
_CAND_KEYS = ("caption", "candidate", "hyp", "text", "response")
_REF_KEYS = ("references", "refs", "captions", "reference", "caption")


@dataclass(frozen=True)
class CaptionFile:
    """What :func:`read_caption_file` found: the data and a description of the layout."""

    path: Path
    kind: str
    data: dict[str, Any]
    format: str  # e.g. "COCO annotations file", "JSON object", "CSV"
    n_items: int
    n_captions: int

    def describe(self) -> str:
        """``COCO annotations file (1,000 images, 5,000 captions)``."""
        noun = "items"
        if self.format.startswith("COCO"):
            noun = "images"
        items = f"{self.n_items:,} {noun if self.n_items != 1 else noun[:-1]}"
        caps = f"{self.n_captions:,} caption{'s' if self.n_captions != 1 else ''}"
        return f"{self.format} ({items}, {caps})"

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "format": self.format, "items": self.n_items, "captions": self.n_captions}


def _pick(row: dict[str, Any], keys: tuple[str, ...], path: Path, where: str, what: str) -> Any:
    for k in keys:
        if k in row:
            return row[k]
    raise InputError(f"{path}, {where}: no {what} field (expected one of {', '.join(keys)}); "
                     f"the record has {', '.join(map(str, row)) or 'no fields'}")


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def _duplicate_key_line(text: str) -> tuple[str, int]:
    """Key and line of the first duplicated object key (``text`` is valid JSON).

    Only run after the fast parse found a duplicate, to say where it is.
    """
    stack: list[set[str] | None] = []  # a key set per open object, None per open array
    prev: str | None = None
    pending: tuple[str, int] | None = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "{":
            stack.append(set())
        elif tok == "[":
            stack.append(None)
        elif tok in "}]":
            stack.pop()
        elif tok == ":" and pending is not None and stack and stack[-1] is not None:
            key, pos = pending
            if key in stack[-1]:
                return key, text.count("\n", 0, pos) + 1
            stack[-1].add(key)
        pending = (json.loads(tok), m.start()) if tok.startswith('"') and prev in ("{", ",") else None
        prev = tok
    return "", 0


def loads_unique(text: str, path: Path, line_offset: int | None = None) -> Any:
    """``json.loads`` that refuses duplicate object keys (plain json keeps the last one), with
    the nesting and digit bounds of :func:`capeval.io.nesting.json_loads`; errors name ``path``."""
    try:
        return json_loads(text, str(path), line_offset, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        if line_offset is not None:
            raise InputError(f"{path}, line {line_offset}: invalid JSON ({exc.msg})") from None
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})") from None
    except _DuplicateKey as dup:
        key, line = _duplicate_key_line(text)
        key = key or str(dup.args[0])
        line = (line_offset if line_offset is not None else line) or "?"
        raise InputError(
            f"{path}, line {line}: key {key!r} appears twice in one JSON object (only one value can be kept; "
            "remove or rename the duplicate)"
        ) from None


def csv_records(path: Path, dialect: str) -> Iterator[tuple[int, list[str]]]:
    """``(line where the record starts, fields)`` of a CSV/TSV file, streamed (header included).

    Quoting is strict: a quote left open until the end of the file (which would swallow
    every following row into one field) or text after a closing quote is an error naming
    the line where the record, and so the quote, began. A field may be as long as a line
    (:func:`~capeval.io.reading.max_line_bytes`).
    """
    limit = max_line_bytes()
    if csv.field_size_limit() < limit:  # the csv module's 131,072 characters would refuse long captions
        csv.field_size_limit(limit)
    reader = csv.reader(iter_lines(path), dialect=dialect, strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            msg = str(exc)
            if "end of data" in msg:
                msg = "a quoted field opened in this row is never closed (the file ends inside it)"
            elif "field limit" in msg:
                msg = f"a field is longer than {csv.field_size_limit():,} characters (CAPEVAL_MAX_LINE_BYTES)"
            else:
                msg = f"bad quoting ({msg}); a field with a quote must be quoted whole, its quotes doubled"
            raise InputError(f"{path}, line {start}: {msg}") from None
        yield start, row
        start = reader.line_num + 1


def _read_csv(path: Path, dialect: str) -> Iterator[dict[str, str]]:
    records = csv_records(path, dialect)
    first = next(records, None)
    if first is None:
        raise InputError(f"{path}: empty {path.suffix[1:].upper()} file")
    header = [h.strip() for h in first[1]]
    sep = "tab" if dialect == "excel-tab" else "comma"
    for line, row in records:
        if not row:  # blank line
            continue
        if len(row) != len(header):
            raise InputError(
                f"{path}, line {line}: {len(row)} field(s), but the header has {len(header)} "
                f"({', '.join(header)}); a caption containing a {sep} must be quoted"
            )
        yield dict(zip(header, row))


def _jsonl_records(path: Path) -> Iterator[tuple[int, Any]]:
    for lineno, line in enumerate(iter_lines(path), 1):
        if line.strip():
            yield lineno, loads_unique(line, path, lineno)


def read_captions(path: str | os.PathLike[str], kind: str) -> dict[str, Any]:
    """Read candidates (``kind="candidates"``) or references (``kind="references"``).

    Formats, chosen by extension (``.json``, ``.jsonl``, ``.csv``/``.tsv``):

    - JSON object: ``{id: caption}`` / ``{id: [reference, ...]}``;
    - JSON list of records (the COCO results layout): ``[{"image_id": 1, "caption": "..."}]``;
      several records with one id are collected into a reference list;
    - a COCO annotations file ``{"images": [...], "annotations": [{"id": 7, "image_id": 1,
      "caption": "..."}]}`` (references): items are keyed by ``image_id``;
    - the evaluation output of ruotianluo/self-critical.pytorch ``{"overall": {...}, "imgToEval":
      {id: {"image_id": 1, "caption": "...", ...}}}`` (candidates), the layout of the generated
      sentences the CHAIR paper's ``setup.sh`` downloads: items keyed by ``image_id``;
    - JSONL: one record per line, as above;
    - CSV/TSV with a header: an id column (``image_id``/``id``/...) and a caption column
      (``caption``/``reference``/...); references may span several rows per id.

    A JSON object with a key twice and a CSV row with the wrong number of fields are
    errors naming the file and line. See :func:`read_caption_file` for the detected layout.
    """
    return read_caption_file(path, kind).data


def read_caption_file(path: str | os.PathLike[str], kind: str) -> CaptionFile:
    """As :func:`read_captions`, also saying which layout was detected (for the user)."""
    path = Path(path)
    if kind not in ("candidates", "references"):
        raise ValueError(kind)
    streamed = file_records(path)
    if streamed is not None:
        return _from_records(streamed[0], kind, path, *streamed[1:])
    obj = loads_unique(read_json_text(path), path)
    if isinstance(obj, dict) and isinstance(obj.get("annotations"), list):
        return _from_records(list(enumerate(obj["annotations"], 1)), kind, path, "COCO annotations file",
                             "annotation")
    if kind == "candidates" and isinstance(obj, dict) and isinstance(obj.get("imgToEval"), dict):
        return _from_records(list(enumerate(obj["imgToEval"].values(), 1)), kind, path,
                             "self-critical.pytorch results (imgToEval)", "imgToEval entry")
    if isinstance(obj, list):
        coco = bool(obj) and all(isinstance(r, dict) and "image_id" in r and "caption" in r for r in obj)
        layout = "COCO results list" if coco else "JSON list of records"
        return _from_records(list(enumerate(obj, 1)), kind, path, layout, "record")
    if isinstance(obj, dict):
        n_caps = sum(len(v) if isinstance(v, list) else 1 for v in obj.values())
        layout = "JSON object {id: caption}" if kind == "candidates" else "JSON object {id: [references]}"
        return CaptionFile(path, kind, obj, layout, len(obj), n_caps)
    raise InputError(f"{path}: expected a JSON object {{id: ...}} or a list of records, got {type(obj).__name__}")


def record_values(records: Iterable[tuple[int, Any]], kind: str, path: Path, unit: str) -> Iterator[tuple[str, Any, str]]:
    """``(id, caption or references as given, where)`` of each record (``(number, row)``), in order."""
    keys = _CAND_KEYS if kind == "candidates" else _REF_KEYS
    what = "caption" if kind == "candidates" else "reference"
    for n, row in records:
        where = f"{unit} {n}"
        if not isinstance(row, dict):
            raise InputError(f"{path}, {where}: expected an object, got {type(row).__name__}")
        # an id that is a list or an object is refused (str() would make [1, 2] the id "[1, 2]")
        item = id_text(_pick(row, _ID_KEYS, path, where, "id"), f"{path}, {where}")
        yield item, _pick(row, keys, path, where, what), where


def file_records(path: Path) -> tuple[Iterator[tuple[int, Any]], str, str] | None:
    """``(records, layout, unit)`` of a file read record by record (JSONL, CSV, TSV), else None."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_records(path), "JSONL records", "line"
    if suffix in (".csv", ".tsv"):
        return enumerate(_read_csv(path, "excel-tab" if suffix == ".tsv" else "excel"), 2), suffix[1:].upper(), "row"
    return None


def _from_records(records: Iterable[tuple[int, Any]], kind: str, path: Path, layout: str, unit: str) -> CaptionFile:
    out: dict[str, Any] = {}
    n_caps = 0
    for item, value, where in record_values(records, kind, path, unit):
        if kind == "candidates":
            if item in out:
                hint = (" (this is a COCO annotations file, i.e. references; pass it with --references)"
                        if layout.startswith("COCO annotations") else "")
                raise InputError(f"{path}, {where}: candidate id {item!r} appears twice{hint}", item)
            out[item] = value
            n_caps += 1
        else:
            refs = out.setdefault(item, [])
            if isinstance(value, list):
                refs.extend(value)
                n_caps += len(value)
            else:
                refs.append(value)
                n_caps += 1
    return CaptionFile(path, kind, out, layout, len(out), n_caps)
