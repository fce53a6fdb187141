"""Bounded reading of Parquet tables (``--items``, benchmarks): :func:`parquet_rows` reads only
the columns asked for, and refuses, before reading, a column whose uncompressed size (from the
file's metadata) passes :func:`~capeval.io.reading.max_json_bytes`: a Parquet column is read whole
like a JSON document, and compression lets a 4 MB file hold gigabytes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from capeval.errors import InputError
from capeval.io.reading import max_json_bytes


def _leaves(arrow_type: Any) -> int:
    """How many Parquet leaf columns an Arrow field of this type is stored as."""
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return sum(_leaves(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_map(arrow_type):
        return _leaves(arrow_type.key_type) + _leaves(arrow_type.item_type)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return _leaves(arrow_type.value_type)
    return 1


def _leaf_ranges(parquet_file: Any) -> dict[str, range]:
    """Top-level column -> the indices of its Parquet leaf columns (in schema order)."""
    out, start = {}, 0
    for field in parquet_file.schema_arrow:
        n = _leaves(field.type)
        out[field.name] = range(start, start + n)
        start += n
    return out


def column_sizes(parquet_file: Any) -> dict[str, int]:
    """Top-level column -> the bytes it takes once read, as far as the file's metadata tells
    (nothing is decompressed): per leaf and row group, its uncompressed size, or 8 bytes per
    value when that is more (a run-length encoded page of a billion zeros is a few bytes)."""
    meta = parquet_file.metadata
    ranges = _leaf_ranges(parquet_file)
    sizes = dict.fromkeys(ranges, 0)
    for r in range(meta.num_row_groups):
        group = meta.row_group(r)
        for name, leaves in ranges.items():
            for c in leaves:
                if c < group.num_columns:
                    chunk = group.column(c)
                    sizes[name] += max(0, int(chunk.total_uncompressed_size), 8 * max(0, int(chunk.num_values)))
    return sizes


def open_parquet(path: Path, what: str, error: type[Exception] = InputError) -> Any:
    """``pyarrow.parquet.ParquetFile`` of a regular file, or an ``error`` (InputError; a
    benchmark's data file: ResourceError) whose message starts with ``what`` (the file's role:
    "items file", "malformed data file") and the path."""
    import pyarrow.parquet as pq

    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(f"file not found: {path}") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block pyarrow's seek to the footer
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise error(f"{what} {path}: {kind}; expected a Parquet file")
    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise error(f"{what} {path}: not a readable Parquet file ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


class _DenseSize:
    """The bytes a column takes once its dictionaries are expanded (what ``to_pylist`` makes
    of it), computed without expanding them; the value lengths of a dictionary shared by
    several batches are computed once."""

    def __init__(self) -> None:
        self._lengths: dict[tuple[int, int], Any] = {}

    def __call__(self, array: Any) -> int:
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = array.type
        if pa.types.is_dictionary(kind):
            values = array.dictionary
            if not (pa.types.is_string(values.type) or pa.types.is_binary(values.type)
                    or pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type)):
                return array.indices.nbytes + 8 * len(array)
            key = (values.buffers()[-1].address if values.buffers()[-1] is not None else 0, len(values))
            lengths = self._lengths.get(key)
            if lengths is None:
                if len(self._lengths) > 64:
                    self._lengths.clear()
                lengths = self._lengths[key] = pc.binary_length(values)
            total = pc.sum(pc.take(lengths, array.indices)).as_py()
            return int(total or 0) + array.indices.nbytes
        if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
            return self(array.flatten()) + 8 * len(array)
        if pa.types.is_struct(kind):
            return sum(self(array.field(i)) for i in range(kind.num_fields)) + len(array)
        return array.nbytes


def parquet_rows(parquet_file: Any, path: Path, columns: list[str], what: str, batch_size: int = 8192,
                 error: type[Exception] = InputError) -> Iterator[dict[str, Any]]:
    """The rows of ``columns`` (all present in the file: the caller checks) of a Parquet file,
    batch by batch; nothing of the other columns is read.

    Each column is bounded by :func:`max_json_bytes` (it is read whole, like a JSON document),
    refused with an ``error`` naming the file and column: before reading, by its size from the
    file's metadata (:func:`column_sizes`); while reading, by the bytes its rows expand to.
    The second check matters because of dictionary encoding: a 3 KB file can repeat one 64 MB
    value 40 times, which its metadata counts once. Text columns are therefore read as
    dictionaries and measured before they are expanded into Python rows. pyarrow's own
    failures (a truncated or corrupt file, memory) are errors naming the file; ``what`` and
    ``error`` as in :func:`open_parquet`.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    limit = max_json_bytes()
    hint = "set CAPEVAL_MAX_JSON_BYTES or --max-json-bytes to raise the limit"
    sizes = column_sizes(parquet_file)
    for name in columns:
        if sizes.get(name, 0) > limit:
            raise error(f"{what} {path}: column {name!r} holds {sizes[name]:,} bytes uncompressed, more than "
                        f"the {limit:,} a column may have ({hint})")
    ranges = _leaf_ranges(parquet_file)
    schema = parquet_file.schema
    plain = pa.schema([parquet_file.schema_arrow.field(name) for name in columns])
    text_leaves = [schema.column(c).path for name in columns for c in ranges[name]
                   if schema.column(c).physical_type == "BYTE_ARRAY"]
    dense = _DenseSize()
    read = dict.fromkeys(columns, 0)
    try:
        reader = pq.ParquetFile(path, read_dictionary=text_leaves) if text_leaves else parquet_file
        for batch in reader.iter_batches(columns=columns, batch_size=batch_size, use_threads=False):
            for name in columns:
                read[name] += dense(batch.column(name))
                if read[name] > limit:
                    raise _Refused(f"{what} {path}: column {name!r} holds more than the {limit:,} bytes a column "
                                   f"may have once read ({hint})")
            # within the limit: expanded back to the file's own types (plain strings), then to Python
            rows = pa.Table.from_batches([batch]).cast(plain).to_pylist()
            del batch
            yield from rows
    except _Refused as exc:
        raise error(str(exc)) from None
    except Exception as exc:
        if type(exc).__module__.startswith("pyarrow") or isinstance(exc, (OSError, MemoryError)):
            raise error(f"{what} {path}: not a readable Parquet file ({_first_line(exc)})") from None
        raise


class _Refused(Exception):
    """A limit passed while a Parquet file is read (raised as the caller's error type)."""
