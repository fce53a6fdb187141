"""VLMEvalKit's prediction file of a caption dataset read as candidates, references and item ids.

VLMEvalKit (open-compass/VLMEvalKit at commit :data:`VLMEVALKIT_COMMIT`) writes, once a model has
answered every item (``vlmeval/inference.py``, ``infer_data_job``), the dataset's table less its
``image`` column plus a ``prediction`` column to ``<model>_<dataset>.xlsx`` (the default),
``.tsv`` or ``.json`` (``PRED_FORMAT``), with ``vlmeval/smp/file.py``'s ``dump``: pandas'
``to_excel`` through xlsxwriter, ``to_csv(sep='\\t', quoting=QUOTE_ALL)``, or a JSON list of
records. Its caption scorer (``vlmeval/dataset/image_caption.py``,
``ImageCaptionDataset.evaluate``) reads ``prediction`` as the candidate and
``eval(answer)`` as the list of references. Here ``answer`` is read with
:func:`ast.literal_eval` (a Python literal, never code), and the item id is the ``index``
column, the id VLMEvalKit keys its predictions and dumped images (``<index>.png``) by.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Iterator

from capeval.errors import InputError, shown
from capeval.io.inputs import id_text

#: the VLMEvalKit commit whose layout this module follows
VLMEVALKIT_COMMIT = "e8e78f05f3080fe28154f2130321f17951c3be94"

FORMATS = (".xlsx", ".tsv", ".json")


def _rows_tsv(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    from capeval.io.captions import csv_records

    header: list[str] | None = None
    for line, fields in csv_records(path, "excel-tab"):
        if header is None:
            header = fields
            continue
        if len(fields) != len(header):
            raise InputError(f"{path}, line {line}: {len(fields)} fields, the header has {len(header)}")
        yield f"{path}, line {line}", dict(zip(header, fields))


def _check_zip(path: Path) -> None:
    """An .xlsx is a zip of XML: refused unread when its members would unpack to more than
    :func:`~capeval.io.reading.max_json_bytes` (a zip bomb), or when it is not a zip."""
    import zipfile

    from capeval.io.reading import max_json_bytes

    limit = max_json_bytes()
    try:
        if path.stat().st_size > limit:  # its central directory alone would be read whole
            raise InputError(f"{path}: {path.stat().st_size:,} bytes, more than {limit:,} (CAPEVAL_MAX_JSON_BYTES or "
                             "--max-json-bytes raise the limit)")
        with zipfile.ZipFile(path) as z:
            total = sum(info.file_size for info in z.infolist())  # reads stop at these declared sizes
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{path}: not an .xlsx file ({exc})") from None
    if total > limit:
        raise InputError(f"{path}: unpacks to {total:,} bytes, more than {limit:,} (CAPEVAL_MAX_JSON_BYTES or "
                         "--max-json-bytes raise the limit)")


def _rows_xlsx(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    from capeval._optional import require

    _check_zip(path)
    openpyxl = require("openpyxl", "harness", "reading VLMEvalKit's .xlsx prediction files")
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds on a broken file; each is this file's problem
        raise InputError(f"{path}: cannot read as .xlsx ({type(exc).__name__}: {shown(str(exc))})") from None
    try:
        sheet = book.worksheets[0]  # pandas' read_excel, which VLMEvalKit's load calls, reads the first sheet
        header: list[str] | None = None
        for n, values in enumerate(sheet.iter_rows(values_only=True), 1):
            if header is None:
                header = [str(v) for v in values]
                continue
            if all(v is None for v in values):
                continue
            yield f"{path}, row {n}", dict(zip(header, values))
    finally:
        book.close()


def _rows_json(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    from capeval.io.reading import read_json

    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a list of records (VLMEvalKit's PRED_FORMAT=json), got "
                         f"{type(data).__name__}")
    for n, record in enumerate(data, 1):
        if not isinstance(record, dict):
            raise InputError(f"{path}, record {n}: expected an object, got {type(record).__name__}")
        yield f"{path}, record {n}", record


def _text(value: Any) -> str:
    """A cell as text: an empty cell is the empty caption (pandas would read NaN, and VLMEvalKit
    score the word ``nan``); a number written as a caption is its text."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else str(value)


def _references(value: Any, where: str) -> list[str]:
    if isinstance(value, list):
        refs = value
    else:
        text = _text(value)
        try:
            refs = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise InputError(f"{where}: answer {shown(text)} is not a Python list of reference strings, the layout "
                             "VLMEvalKit's caption scorer reads") from None
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
        raise InputError(f"{where}: answer must be a non-empty list of reference strings, got {shown(refs)}")
    return refs


def read_predictions(path: Path) -> tuple[dict[str, str], dict[str, list[str]] | None]:
    """``({index: prediction}, {index: references} or None)`` of a VLMEvalKit prediction file
    (``.xlsx``, ``.tsv`` or ``.json``). No ``answer`` column: no references (reference-free
    metrics still score it). A missing column, an index seen twice or a malformed answer is an
    error naming the row."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"{path}: a VLMEvalKit prediction file ends in {', '.join(FORMATS)}")
    rows = {".xlsx": _rows_xlsx, ".tsv": _rows_tsv, ".json": _rows_json}[suffix](path)
    candidates: dict[str, str] = {}
    references: dict[str, list[str]] = {}
    has_answer: bool | None = None
    for where, row in rows:
        for column in ("index", "prediction"):
            if column not in row:
                raise InputError(f"{where}: no {column!r} column (VLMEvalKit writes index, ..., prediction; "
                                 f"found {shown(list(row))})")
        if has_answer is None:
            has_answer = "answer" in row
        item = id_text(int(row["index"]) if isinstance(row["index"], float) and row["index"].is_integer()
                       else row["index"], f"{where}: index")
        if item in candidates:
            raise InputError(f"{where}: index {item!r} appears twice", item)
        candidates[item] = _text(row["prediction"])
        if has_answer:
            references[item] = _references(row.get("answer"), where)
    if not candidates:
        raise InputError(f"{path}: no predictions")
    return candidates, references if has_answer else None
