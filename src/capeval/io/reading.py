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
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from capeval.errors import InputError

#: name -> (environment variable, default, smallest, largest), bytes
LIMITS = {
    "max_json_bytes": ("CAPEVAL_MAX_JSON_BYTES", 256 * 2**20, 1, 2**40),
    "max_line_bytes": ("CAPEVAL_MAX_LINE_BYTES", 16 * 2**20, 1024, 2**31 - 1),
    # PIL's own refusal threshold (2 x Image.MAX_IMAGE_PIXELS): every image the official code decodes
    "max_image_pixels": ("CAPEVAL_MAX_IMAGE_PIXELS", 2 * 89_478_485, 1, 2**40),
    # 200 x the largest reference set of a shipped benchmark (Pascal-50S: ~50 per image)
    "max_references": ("CAPEVAL_MAX_REFERENCES", 10_000, 1, 2**31 - 1),
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
