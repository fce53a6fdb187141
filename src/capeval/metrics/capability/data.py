"""CAPability's released data, read within capeval's bounds.

Annotations, one row per image or video: ``file_id``, ``file_path`` (``data/<dimension>/...``,
the media file), ``annotation``, ``task`` (the dimension), ``data_type`` (``image``/``video``).
They come in two layouts:

- the GitHub repository's ``annotations/<dimension>.jsonl`` (ali-vilab/CAPability @ cebb82a;
  eval.py:65 reads ``<gt_file_root>/<task>.jsonl``);
- the Hugging Face dataset ``lntzm/CAPability``: one config per dimension (lmms-eval's
  ``capability_<dimension>.yaml``: ``dataset_name: <dimension>``, split ``test``), read as a
  Parquet table with the same columns. There a dict annotation is a struct holding every key of
  the config, ``None`` where a row has none: those are dropped, as lmms-eval's
  ``capability_process_results`` does, and the keys come in the table's order.

:func:`load_annotations` takes a file (``.jsonl``, ``.json`` list, ``.parquet``) or a folder
holding, per dimension, ``<dimension>.jsonl``, ``<dimension>.parquet`` or a ``<dimension>/``
folder of ``.parquet`` files (the hub's per-config folders, one or two levels deep).
Captions: ``{file_id: caption}``, or the official inference layout read by :func:`load_captions`
(a folder of ``<dimension>.jsonl`` or lmms-eval's ``samples_capability_<dimension>.jsonl``,
rows ``file_id``, ``caption``; eval.py:53, :64). Media names (``file_path``) are resolved with
:func:`capeval.paths.resolve_under` (:func:`media_path`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from capeval.errors import InputError, shown
from capeval.metrics.capability import prompts as P

#: the most Parquet files read for one dimension from a folder (the hub has one per config)
MAX_PARQUET_FILES = 64


def check_annotation(dimension: str, annotation: Any, where: str) -> Any:
    """``annotation`` when it has the shape ``dimension`` uses (a string, or a non-empty
    ``{object: value}``), else a one-line InputError naming ``where``."""
    if dimension in P.TEXT_DIMENSIONS or dimension in P.CLASS_DIMENSIONS:
        if not isinstance(annotation, str) or not annotation.strip():
            raise InputError(f"{where}: {dimension} annotation must be a non-empty string, got {shown(annotation)}")
        if dimension in P.CLASS_DIMENSIONS and annotation not in P.categories(dimension)[0]:
            raise InputError(f"{where}: {dimension} annotation {shown(annotation)} is not one of "
                             f"{', '.join(P.categories(dimension)[0])}")
        return annotation
    if not isinstance(annotation, dict) or not annotation:
        raise InputError(f"{where}: {dimension} annotation must be a non-empty {{object: value}}, got "
                         f"{shown(annotation)}")
    for key, value in annotation.items():
        ok = isinstance(value, str) if dimension == "object_color" else (
            isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise InputError(f"{where}: {dimension} annotation {shown(key)}: {shown(value)} is not "
                             f"{'a color (string)' if dimension == 'object_color' else 'a count (integer)'}")
    return annotation


def _rows_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    from capeval.io.captions import loads_unique
    from capeval.io.reading import iter_lines, max_json_bytes

    size, limit = (path.stat().st_size if path.is_file() else 0), max_json_bytes()
    if size > limit:  # the rows are kept in memory: the whole file is bounded like a JSON document
        raise InputError(f"{path}: {size:,} bytes, more than the {limit:,} an annotation or caption file may have "
                         "(set CAPEVAL_MAX_JSON_BYTES to raise the limit)")
    for n, line in enumerate(iter_lines(path), 1):
        if line.strip():
            yield f"{path}, line {n}", loads_unique(line, path, line_offset=n)


def _rows_json(path: Path) -> Iterator[tuple[str, Any]]:
    from capeval.io.reading import read_json

    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of annotation rows")
    for n, row in enumerate(data):
        yield f"{path}, row {n}", row


def _rows_parquet(path: Path) -> Iterator[tuple[str, Any]]:
    from capeval.io.parquet import open_parquet, parquet_rows

    table = open_parquet(path, "annotation file")
    names = set(table.schema_arrow.names)
    missing = [c for c in ("file_id", "annotation", "task") if c not in names]
    if missing:
        raise InputError(f"annotation file {path}: no column {', '.join(missing)} (CAPability's columns: file_id, "
                         "file_path, annotation, task, data_type)")
    columns = [c for c in ("file_id", "file_path", "annotation", "task", "data_type") if c in names]
    for n, row in enumerate(parquet_rows(table, path, columns, "annotation file")):
        if isinstance(row.get("annotation"), dict):  # a struct: the config's every key, None where absent
            row["annotation"] = {k: v for k, v in row["annotation"].items() if v is not None}
        yield f"{path}, row {n}", row


def _rows(path: Path) -> Iterator[tuple[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _rows_parquet(path)
    if suffix == ".json":
        return _rows_json(path)
    return _rows_jsonl(path)


def _folder_files(root: Path, dimension: str) -> list[Path]:
    """The files of ``dimension`` in an annotation folder (empty: none there)."""
    for name in (f"{dimension}.jsonl", f"{dimension}.parquet", f"{dimension}.json"):
        if (root / name).is_file():
            return [root / name]
    sub = root / dimension
    if not sub.is_dir():
        return []
    found = sorted(p for p in sub.glob("*.parquet") if p.is_file()) or sorted(
        p for p in sub.glob("*/*.parquet") if p.is_file())
    if len(found) > MAX_PARQUET_FILES:
        raise InputError(f"annotation folder {sub}: {len(found)} Parquet files, more than the {MAX_PARQUET_FILES} read")
    return found


def parse_dimensions(value: Any) -> tuple[str, ...] | None:
    """``dimensions`` option: None / ``"all"`` (every one found), a comma list or a list of names."""
    if value is None or value == "all":
        return None
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    bad = [n for n in names if n not in P.DIMENSIONS]
    if bad or not names:
        raise InputError(f"capability option dimensions: {shown(bad[0] if bad else value)} is not a dimension "
                         f"(one of {', '.join(P.DIMENSIONS)}, or all)")
    if len(set(names)) < len(names):
        raise InputError(f"capability option dimensions: {shown(value)} names a dimension twice")
    return tuple(names)


def load_annotations(path: str | os.PathLike[str], dimensions: Iterable[str] | None = None
                     ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{dimension: {file_id: row}}`` (row: ``annotation``, ``file_path``, ``data_type``) in the
    order of :data:`~capeval.metrics.capability.prompts.DIMENSIONS`; ``dimensions`` None: every
    dimension the file or folder holds. One-line errors for a missing dimension, a row without a
    ``file_id``, an unknown task, a ``file_id`` twice in one dimension, a malformed annotation."""
    root = Path(os.fspath(path)).expanduser()
    wanted = tuple(dimensions) if dimensions is not None else None
    if root.is_dir():
        files = {d: _folder_files(root, d) for d in (wanted or P.DIMENSIONS)}
        if wanted is not None:
            lacking = [d for d in wanted if not files[d]]
            if lacking:
                raise InputError(f"capability annotations {os.fspath(root)!r}: no {lacking[0]}.jsonl, "
                                 f"{lacking[0]}.parquet or {lacking[0]}/*.parquet")
        sources = [(d, f) for d, fs in files.items() for f in fs]
        if not sources:
            raise InputError(f"capability annotations {os.fspath(root)!r}: no <dimension>.jsonl, .parquet or "
                             "<dimension>/ folder of any CAPability dimension")
    elif root.is_file():
        sources = [(None, root)]
    else:
        raise InputError(f"capability annotations: file not found: {os.fspath(root)}")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for expected, file in sources:
        for where, row in _rows(file):
            if not isinstance(row, dict):
                raise InputError(f"{where}: expected an object with file_id, annotation, task")
            fid, task = row.get("file_id"), row.get("task", expected)
            if not isinstance(fid, str) or not fid:
                raise InputError(f"{where}: file_id must be a non-empty string, got {shown(fid)}")
            if task not in P.DIMENSIONS or (expected is not None and task != expected):
                raise InputError(f"{where}: task {shown(task)} is not "
                                 + (repr(expected) if expected else f"a dimension ({', '.join(P.DIMENSIONS)})"))
            if wanted is not None and task not in wanted:
                continue
            rows = out.setdefault(task, {})
            if fid in rows:
                raise InputError(f"{where}: file_id {shown(fid)} appears twice in {task} (only one annotation "
                                 "can be kept)")
            rows[fid] = {"annotation": check_annotation(task, row.get("annotation"), f"{where} ({fid})"),
                         "file_path": row.get("file_path"), "data_type": row.get("data_type")}
    if wanted is not None:
        lacking = [d for d in wanted if d not in out]
        if lacking:
            raise InputError(f"capability annotations {os.fspath(root)!r}: no rows of dimension {lacking[0]}")
    if not out:
        raise InputError(f"capability annotations {os.fspath(root)!r}: no rows")
    return {d: out[d] for d in P.DIMENSIONS if d in out}


def load_captions(folder: str | os.PathLike[str]) -> dict[str, str]:
    """``{file_id: caption}`` from the official inference layout (a folder of ``<dimension>.jsonl``
    or ``samples_capability_<dimension>.jsonl``; rows ``file_id``, ``caption``, other fields
    ignored as eval.py:68-71 deletes them). ``action`` and ``event`` share their videos'
    ``file_id`` (eval.py copies the event captions when ``action`` has none): one caption per id,
    a second, different one for the same id is refused."""
    root = Path(os.fspath(folder)).expanduser()
    if not root.is_dir():
        raise InputError(f"capability captions: not a folder: {os.fspath(root)}")
    out: dict[str, str] = {}
    files = sorted(p for p in root.iterdir() if p.suffix == ".jsonl" and p.is_file()
                   and p.stem.removeprefix("samples_capability_") in P.DIMENSIONS)
    if not files:
        raise InputError(f"capability captions {os.fspath(root)!r}: no <dimension>.jsonl file")
    for file in files:
        for where, row in _rows_jsonl(file):
            fid = row.get("file_id") if isinstance(row, dict) else None
            cap = row.get("caption") if isinstance(row, dict) else None
            if not isinstance(fid, str) or not fid or not isinstance(cap, str):
                raise InputError(f"{where}: expected {{\"file_id\": ..., \"caption\": ...}} strings")
            if out.setdefault(fid, cap) != cap:
                raise InputError(f"{where}: file_id {shown(fid)} has another caption in an earlier file")
    return out


def media_path(root: str | os.PathLike[str], row: dict[str, Any], file_id: str) -> Path:
    """The media file of an annotation row under ``root`` (``file_path`` as released,
    ``data/<dimension>/<name>``; lmms-eval joins it without its ``data/``: both are tried,
    the first that exists wins, else the released one). Hostile names are refused."""
    from capeval.paths import resolve_under

    name = row.get("file_path")
    full = resolve_under(root, name, what="CAPability file_path", item=file_id)
    if isinstance(name, str) and name.startswith("data/") and not full.exists():
        short = resolve_under(root, name[5:], what="CAPability file_path", item=file_id)
        if short.exists():
            return short
    return full
