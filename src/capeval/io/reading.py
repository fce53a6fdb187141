"""Bounded reading of input files: whole JSON documents up to a size limit, JSONL/CSV/TSV
line by line with a line-length limit.

A hostile or mistaken input (a 2 GB file of zero bytes, ``/dev/zero``, a FIFO) must end
in a one-line error naming the file, not in gigabytes of memory or the kernel's OOM killer:

- a JSON document is parsed whole, so it is refused before reading when it is larger than
  :func:`max_json_bytes` (default 256 MiB: COCO's largest caption file, captions_train2017,
  is ~92 MB); a file that is not a regular file is read up to that many bytes at most;
- JSONL, CSV and TSV are streamed, one line at a time, each line at most
  :func:`max_line_bytes` (default 16 MiB; a caption of any sensible length fits, and
  CSV fields may be that long, far beyond the ``csv`` module's 131,072 characters).

Both limits come from environment variables (``CAPEVAL_MAX_JSON_BYTES``,
``CAPEVAL_MAX_LINE_BYTES``; ``capeval score --max-json-bytes / --max-line-bytes`` set them),
each with a declared range (:data:`LIMITS`).

Two more kinds of file are bounded here:

- annotation files streamed entry by entry (COCO's instance files for CHAIR: 160-330 MB each,
  too big to parse whole): :class:`JsonStream`, at most :func:`max_annotation_bytes` (default
  1 GiB, three times COCO 2014's largest, ``instances_train2014.json``, so that a real file
  always fits while a hostile one is refused unread), each chunk checked for depth, string
  length and top-level keys before the parser sees it (:class:`~capeval.io.nesting.StreamShape`);
- Parquet tables (``--items``, benchmarks): :func:`capeval.io.parquet.parquet_rows` reads only the columns
  asked for, and refuses, before reading, a column whose uncompressed size (from the file's
  metadata) passes :func:`max_json_bytes`: a Parquet column is read whole like a JSON
  document, and compression lets a 4 MB file hold gigabytes.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from capeval.errors import InputError

#: name -> (environment variable, default, smallest, largest), bytes
LIMITS = {
    "max_json_bytes": ("CAPEVAL_MAX_JSON_BYTES", 256 * 2**20, 1, 2**40),
    "max_line_bytes": ("CAPEVAL_MAX_LINE_BYTES", 16 * 2**20, 1024, 2**31 - 1),
    # PIL's own refusal threshold (2 x Image.MAX_IMAGE_PIXELS): every image the official code decodes
    "max_image_pixels": ("CAPEVAL_MAX_IMAGE_PIXELS", 2 * 89_478_485, 1, 2**40),
    # 200 x the largest reference set of a shipped benchmark (Pascal-50S: ~50 per image)
    "max_references": ("CAPEVAL_MAX_REFERENCES", 10_000, 1, 2**31 - 1),
    # a streamed annotation file: 3 x COCO 2014's largest (instances_train2014.json, ~330 MB)
    "max_annotation_bytes": ("CAPEVAL_MAX_ANNOTATION_BYTES", 2**30, 1, 2**40),
}
#: the unit of a limit in its messages (bytes unless named here)
UNITS = {"max_image_pixels": "pixels", "max_references": "references"}


def check_limit(name: str, value: object, source: str) -> int:
    """``value`` as an integer within ``name``'s declared range, or an error naming ``source``."""
    _, _, low, high = LIMITS[name]
    unit = UNITS.get(name, "bytes")
    try:
        number = int(str(value).strip().replace("_", ""))
    except ValueError:
        raise InputError(f"{source}: expected a whole number of {unit}, got {value!r}") from None
    if not low <= number <= high:
        raise InputError(f"{source}: {number:,} is out of range [{low:,}, {high:,}] {unit}")
    return number


def _limit(name: str) -> int:
    env, default, _, _ = LIMITS[name]
    raw = os.environ.get(env)
    return default if raw in (None, "") else check_limit(name, raw, env)


def max_json_bytes() -> int:
    """Largest JSON document read whole (``CAPEVAL_MAX_JSON_BYTES``; default 256 MiB, range 1 B-1 TiB)."""
    return _limit("max_json_bytes")


def max_line_bytes() -> int:
    """Longest JSONL/CSV/TSV line (``CAPEVAL_MAX_LINE_BYTES``; default 16 MiB, range 1 KiB-2 GiB)."""
    return _limit("max_line_bytes")


def max_image_pixels() -> int:
    """Largest image decoded, width x height (``CAPEVAL_MAX_IMAGE_PIXELS``; default 178,956,970)."""
    return _limit("max_image_pixels")


def max_references() -> int:
    """Most references one item may have (``CAPEVAL_MAX_REFERENCES``; default 10,000)."""
    return _limit("max_references")


def max_annotation_bytes() -> int:
    """Largest annotation file streamed entry by entry (``CAPEVAL_MAX_ANNOTATION_BYTES``; default 1 GiB)."""
    return _limit("max_annotation_bytes")


def open_input(path: Path) -> tuple[BinaryIO, os.stat_result]:
    """``path`` opened for binary reading, and its status; one-line errors for the usual failures."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"expected a file, got a directory: {path}") from None
    except OSError as exc:  # permissions, a broken mount, ...
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    info = os.fstat(f.fileno())
    if stat.S_ISDIR(info.st_mode):
        f.close()
        raise InputError(f"expected a file, got a directory: {path}")
    return f, info


def _decode(data: bytes, path: Path, line: int | None = None) -> str:
    try:
        return data.decode("utf-8-sig" if line in (None, 1) else "utf-8")
    except UnicodeDecodeError as exc:
        lines = line if line is not None else data.count(b"\n", 0, exc.start) + 1
        where = f"line {lines}" if line is not None else f"byte {exc.start}, line {lines}"
        raise InputError(f"{path}: not valid UTF-8 ({where}); re-encode the file as UTF-8") from None


def read_json_text(path: Path) -> str:
    """The text of a JSON document, refused unread when larger than :func:`max_json_bytes`.

    A regular file is judged by its size; anything else (a device, a FIFO) is read up to
    the limit and refused beyond it. A document starting with a control character (e.g.
    zero bytes) is refused after its first block.
    """
    limit = max_json_bytes()
    f, info = open_input(path)
    with f:
        hint = "(set CAPEVAL_MAX_JSON_BYTES or --max-json-bytes to raise the limit, or use JSONL, read line by line)"
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise InputError(f"{path}: {info.st_size:,} bytes, more than the {limit:,} a JSON document may have {hint}")
        try:
            head = f.read(min(limit + 1, 65536))
            start = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1]
            if start and start[0] < 0x20:  # binary (zero bytes, /dev/zero): not worth reading further
                raise InputError(f"{path}: invalid JSON at line 1 (expected an object {{...}} or a list [...], "
                                 f"found byte {start!r})")
            if len(head) > limit:
                data = head
            elif stat.S_ISREG(info.st_mode):  # read again from the start: no second copy of a large file
                f.seek(0)
                data = f.read(limit + 1)
            else:
                data = head + f.read(limit + 1 - len(head))
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        if len(data) > limit:
            raise InputError(f"{path}: more than the {limit:,} bytes a JSON document may have {hint}")
    return _decode(data, path)


def iter_lines(path: Path) -> Iterator[str]:
    """The lines of a text file, decoded, line endings kept, each at most :func:`max_line_bytes`.

    A longer line (e.g. 2 GB of zero bytes without a newline) is an error naming the file
    and line, raised after reading one limit's worth of it.
    """
    limit = max_line_bytes()
    f, _ = open_input(path)
    with f:
        n = 0
        while True:
            try:
                raw = f.readline(limit + 1)
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
            if not raw:
                return
            n += 1
            if len(raw) > limit and not raw.endswith(b"\n"):  # the line ending is not counted
                raise InputError(f"{path}, line {n}: longer than {limit:,} bytes (set CAPEVAL_MAX_LINE_BYTES or "
                                 "--max-line-bytes to raise the limit)")
            yield _decode(raw, path, n)


def read_json(path: Path, duplicates: bool = False) -> Any:
    """A whole JSON document from a file, bounded: :func:`read_json_text`'s size limit, the
    nesting limit and the 4,300-digit integer limit of :func:`~capeval.io.nesting.json_loads`;
    a key twice in one object is refused unless ``duplicates`` (a parser keeps the last one
    silently). Anything wrong is an InputError naming the file."""
    from capeval.io.nesting import json_loads

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) < len(pairs):
            seen: set[str] = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise InputError(f"{path}: key {key!r} appears twice in one object (only one value can be kept; remove "
                             "or rename the duplicate)")
        return out

    text = read_json_text(path)
    try:
        return json_loads(text, str(path), **({} if duplicates else {"object_pairs_hook": unique}))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})") from None


class JsonStream:
    """A JSON file opened for a streaming parser (``ijson``), bounded while it is read.

    Refused with an InputError naming the file: a path that is not a regular file (a FIFO
    would block, ``/dev/zero`` never ends), a file larger than ``max_bytes`` (before reading),
    and whatever :class:`~capeval.io.nesting.StreamShape` refuses (depth, string length,
    top-level ``keys``) in a chunk, before the parser sees that chunk. A UTF-8 byte order mark
    is dropped, as :func:`read_json_text` does. Give the parser ``buf_size=`` :data:`CHUNK`:
    a string split over many small reads costs it time quadratic in the string's length.
    """

    #: bytes handed to the parser per read
    CHUNK = 2**20

    def __init__(self, path: Path, *, max_bytes: int, keys: tuple[str, ...] = (), limit_hint: str = "") -> None:
        from capeval.io.nesting import StreamShape

        self.path = path
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise InputError(f"file not found: {path}") from None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise InputError(f"{path}: {kind}; expected a JSON file")
        self.max_bytes = max_bytes
        self._hint = limit_hint
        if info.st_size > max_bytes:
            raise self._too_big(f"{info.st_size:,} bytes")
        self._file, _ = open_input(path)
        self._read = 0
        self.shape = StreamShape(str(path), max_string=max_line_bytes(), keys=keys)

    def _too_big(self, size: str) -> InputError:
        hint = f" ({self._hint})" if self._hint else ""
        return InputError(f"{self.path}: {size}, more than the {self.max_bytes:,} an annotation file may have{hint}")

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (the parser's read), checked first."""
        try:
            data = self._file.read(self.CHUNK if size is None or size < 0 else size)
        except OSError as exc:
            raise InputError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if self._read == 0 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a byte order mark: not JSON, but harmless
            self._read = 3
        self._read += len(data)
        if self._read > self.max_bytes:  # the file grew after its size was checked
            raise self._too_big(f"more than {self.max_bytes:,} bytes")
        self.shape.feed(data)
        return data

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __enter__(self) -> "JsonStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
