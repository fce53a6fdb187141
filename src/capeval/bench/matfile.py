"""A small reader for MATLAB level-5 MAT-files (numpy + zlib, no scipy).

Enough for ``pascal50S.mat``: compressed elements, struct arrays, cell arrays, char
arrays and numeric arrays. Values come back as plain Python/numpy objects:

- char array -> ``str`` (rows joined with newlines when there are several);
- numeric array -> ``numpy.ndarray`` in MATLAB's shape (column-major data reordered);
- cell array -> ``numpy.ndarray`` of objects in MATLAB's shape;
- struct array -> ``numpy.ndarray`` of ``dict`` (field -> value) in MATLAB's shape.

Format reference: "MAT-File Format", The MathWorks, Level 5 (documented since R14).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import InputError

# data types
_MI_INT8, _MI_UINT8, _MI_INT16, _MI_UINT16, _MI_INT32, _MI_UINT32 = 1, 2, 3, 4, 5, 6
_MI_SINGLE, _MI_DOUBLE, _MI_INT64, _MI_UINT64 = 7, 9, 12, 13
_MI_MATRIX, _MI_COMPRESSED, _MI_UTF8, _MI_UTF16, _MI_UTF32 = 14, 15, 16, 17, 18

_NUMPY = {
    _MI_INT8: "i1",
    _MI_UINT8: "u1",
    _MI_INT16: "i2",
    _MI_UINT16: "u2",
    _MI_INT32: "i4",
    _MI_UINT32: "u4",
    _MI_SINGLE: "f4",
    _MI_DOUBLE: "f8",
    _MI_INT64: "i8",
    _MI_UINT64: "u8",
}

# array classes
_MX_CELL, _MX_STRUCT, _MX_OBJECT, _MX_CHAR, _MX_SPARSE = 1, 2, 3, 4, 5


class MatFormatError(InputError):
    """The file is not a MAT-file this reader understands."""


class _Reader:
    def __init__(self, data: bytes, endian: str, path: Path):
        self.data = data
        self.pos = 0
        self.e = endian
        self.path = path

    def fail(self, what: str) -> MatFormatError:
        return MatFormatError(f"{self.path}: malformed MAT-file ({what} at byte {self.pos})")

    def tag(self) -> tuple[int, int, bytes | None]:
        """(type, nbytes, inline payload or None) of the next data element."""
        if self.pos + 8 > len(self.data):
            raise self.fail("truncated tag")
        first, second = struct.unpack_from(self.e + "II", self.data, self.pos)
        if first >> 16:  # small data element: size in the upper 16 bits, payload inline
            dtype, nbytes = first & 0xFFFF, first >> 16
            payload = self.data[self.pos + 4 : self.pos + 4 + nbytes]
            self.pos += 8
            return dtype, nbytes, payload
        self.pos += 8
        return first, second, None

    def element(self) -> tuple[int, bytes]:
        dtype, nbytes, inline = self.tag()
        if inline is not None:
            return dtype, inline
        if self.pos + nbytes > len(self.data):
            raise self.fail("truncated element")
        payload = self.data[self.pos : self.pos + nbytes]
        self.pos += nbytes
        if dtype != _MI_COMPRESSED:
            self.pos += (-nbytes) % 8  # elements are padded to 8 bytes
        return dtype, payload

    def numbers(self) -> np.ndarray:
        dtype, payload = self.element()
        if dtype not in _NUMPY:
            raise self.fail(f"unexpected numeric data type {dtype}")
        return np.frombuffer(payload, dtype=self.e + _NUMPY[dtype])


def _decode_chars(dtype: int, payload: bytes, endian: str) -> str:
    if dtype == _MI_UTF8 or dtype in (_MI_UINT8, _MI_INT8):
        return payload.decode("utf-8", errors="replace")
    if dtype in (_MI_UTF16, _MI_UINT16, _MI_INT16):
        return payload.decode("utf-16-le" if endian == "<" else "utf-16-be", errors="replace")
    if dtype in (_MI_UTF32, _MI_UINT32, _MI_INT32):
        return payload.decode("utf-32-le" if endian == "<" else "utf-32-be", errors="replace")
    raise ValueError(dtype)


def _matrix(payload: bytes, endian: str, path: Path) -> tuple[str, Any]:
    """Parse the body of a miMATRIX element -> (name, value)."""
    r = _Reader(payload, endian, path)
    if not payload:  # empty matrix
        return "", np.zeros((0, 0))
    flags = r.numbers()
    cls = int(flags[0]) & 0xFF
    dims = tuple(int(d) for d in r.numbers())
    _, name_bytes = r.element()
    name = name_bytes.decode("ascii", errors="replace")
    count = int(np.prod(dims)) if dims else 0

    def shaped(flat: list[Any] | np.ndarray) -> np.ndarray:
        arr = np.empty(count, dtype=object)
        for i, v in enumerate(flat):
            arr[i] = v
        return arr.reshape(dims, order="F")

    if cls == _MX_CHAR:
        dtype, chars = r.element()
        text = _decode_chars(dtype, chars, endian)
        rows = dims[0] if dims else 0
        if rows <= 1:
            return name, text
        cols = len(text) // rows
        return name, "\n".join(text[i::rows][:cols] for i in range(rows))
    if cls == _MX_CELL:
        cells = []
        for _ in range(count):
            dtype, sub = r.element()
            if dtype != _MI_MATRIX:
                raise r.fail("cell entry is not a matrix")
            cells.append(_matrix(sub, endian, path)[1])
        return name, shaped(cells)
    if cls in (_MX_STRUCT, _MX_OBJECT):
        if cls == _MX_OBJECT:
            r.element()  # class name
        field_len = int(r.numbers()[0])
        _, names_blob = r.element()
        nfields = len(names_blob) // field_len if field_len else 0
        fields = [
            names_blob[i * field_len : (i + 1) * field_len].split(b"\0", 1)[0].decode("ascii")
            for i in range(nfields)
        ]
        structs = []
        for _ in range(count):
            entry = {}
            for f in fields:
                dtype, sub = r.element()
                if dtype != _MI_MATRIX:
                    raise r.fail("struct field is not a matrix")
                entry[f] = _matrix(sub, endian, path)[1]
            structs.append(entry)
        return name, shaped(structs)
    if cls == _MX_SPARSE:
        raise r.fail("sparse arrays are not supported")
    real = r.numbers()
    if int(flags[0]) & 0x0800:  # complex
        real = real + 1j * r.numbers()
    return name, real.astype(real.dtype.newbyteorder("=")).reshape(dims, order="F")


def loadmat(path: str | Path) -> dict[str, Any]:
    """Read the variables of a level-5 MAT-file: ``{name: value}`` (see module docs)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    if len(data) < 128:
        raise MatFormatError(f"{path}: too short to be a MAT-file ({len(data)} bytes)")
    if data[:4] == b"\x89HDF" or data[:19].startswith(b"MATLAB 7.3"):
        raise MatFormatError(f"{path}: MATLAB v7.3 (HDF5) files are not supported; save with -v7")
    marker = data[126:128]
    if marker == b"IM":
        endian = "<"
    elif marker == b"MI":
        endian = ">"
    else:
        raise MatFormatError(f"{path}: not a MATLAB level-5 MAT-file (no endian marker)")
    out: dict[str, Any] = {}
    r = _Reader(data, endian, path)
    r.pos = 128
    while r.pos < len(data):
        dtype, payload = r.element()
        if dtype == _MI_COMPRESSED:
            try:
                payload = zlib.decompress(payload)
            except zlib.error as exc:
                raise MatFormatError(f"{path}: corrupt compressed element ({exc})") from None
            inner = _Reader(payload, endian, path)
            dtype, payload = inner.element()
        if dtype != _MI_MATRIX:
            continue
        name, value = _matrix(payload, endian, path)
        out[name] = value
    return out
