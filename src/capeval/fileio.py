"""Reading caption files (JSON, JSONL, CSV) and writing result files atomically."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from capeval.errors import InputError


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    A crash or error never leaves a partial file at ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600; give the file the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"expected a file, got a directory: {path}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{path}: not valid UTF-8 (byte {exc.start}, line {line}); re-encode the file as UTF-8"
        ) from None


_ID_KEYS = ("id", "image_id", "video_id", "image", "video", "seg_id")
_CAND_KEYS = ("caption", "candidate", "hyp", "text")
_REF_KEYS = ("references", "refs", "captions", "reference", "caption")


def _pick(row: dict[str, Any], keys: tuple[str, ...], path: Path, lineno: int, what: str) -> Any:
    for k in keys:
        if k in row:
            return row[k]
    raise InputError(f"{path}, record {lineno}: no {what} field (expected one of {', '.join(keys)})")


def read_captions(path: str | os.PathLike[str], kind: str) -> dict[str, Any]:
    """Read candidates (``kind="candidates"``) or references (``kind="references"``).

    Formats, chosen by extension (``.json``, ``.jsonl``, ``.csv``/``.tsv``):

    - JSON object: ``{id: caption}`` / ``{id: [reference, ...]}``;
    - JSON list of records (the COCO results layout): ``[{"image_id": 1, "caption": "..."}]``;
      several records with one id are collected into a reference list;
      a COCO annotation file ``{"annotations": [...]}`` works for references;
    - JSONL: one record per line, as above;
    - CSV/TSV with a header: an id column (``id``/``image_id``/...) and a caption column
      (``caption``/``reference``/...); references may span several rows per id.
    """
    path = Path(path)
    if kind not in ("candidates", "references"):
        raise ValueError(kind)
    text = _read_text(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        records = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}, line {lineno}: invalid JSON ({exc.msg})") from None
        return _from_records(records, kind, path)
    if suffix in (".csv", ".tsv"):
        dialect = "excel-tab" if suffix == ".tsv" else "excel"
        reader = csv.DictReader(io.StringIO(text), dialect=dialect)
        if reader.fieldnames is None:
            raise InputError(f"{path}: empty CSV file")
        return _from_records(list(reader), kind, path)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})") from None
    if isinstance(obj, dict) and "annotations" in obj and isinstance(obj["annotations"], list):
        obj = obj["annotations"]
    if isinstance(obj, list):
        return _from_records(obj, kind, path)
    if isinstance(obj, dict):
        return obj
    raise InputError(f"{path}: expected a JSON object {{id: ...}} or a list of records, got {type(obj).__name__}")


def _from_records(records: list[Any], kind: str, path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n, row in enumerate(records, 1):
        if not isinstance(row, dict):
            raise InputError(f"{path}, record {n}: expected an object, got {type(row).__name__}")
        item = str(_pick(row, _ID_KEYS, path, n, "id"))
        if kind == "candidates":
            value = _pick(row, _CAND_KEYS, path, n, "caption")
            if item in out:
                raise InputError(f"{path}, record {n}: candidate id {item!r} appears twice", item)
            out[item] = value
        else:
            value = _pick(row, _REF_KEYS, path, n, "reference")
            refs = out.setdefault(item, [])
            if isinstance(value, list):
                refs.extend(value)
            else:
                refs.append(value)
    return out
