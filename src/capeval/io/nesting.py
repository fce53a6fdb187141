"""Deeply nested documents: one line naming the file and line, never a ``RecursionError``.

Python's ``json`` parser recurses once per ``[`` / ``{``, so a document nested some
thousand levels deep (``[[[[...]]]]``, a few kilobytes) ends in a ``RecursionError``
traceback. No caption file, item table or option value needs more than a handful of levels,
so :func:`json_loads` turns that error into an :class:`~capeval.errors.InputError` naming the
source and the line where the nesting passes :data:`MAX_DEPTH`; the line is found by a scan
that runs only on that error path. YAML configs are bounded the same way in
:mod:`capeval.train.config`.

An integer of more than 4,300 digits (Python's ``int`` refuses to convert it: quadratic
time) is an error naming the source and line too; a float of any length is read as Python
reads it (correctly rounded, in linear time). Files streamed by a parser that builds one
entry at a time (``ijson``, for COCO annotations of hundreds of megabytes) are checked ahead
of it, chunk by chunk, by :class:`StreamShape`: the same depth bound, a bound on the length
of a string, and the keys of the top-level object.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from capeval.errors import InputError
from capeval.gc_pause import gc_paused

#: the nesting depth an error message reports as too deep (any real input stays far below)
MAX_DEPTH = 100

# a JSON string (escapes included), a bracket, or a newline
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}\n]')


def deep_line(text: str, limit: int = MAX_DEPTH) -> int | None:
    """The 1-based line where ``text`` first nests deeper than ``limit`` brackets, else None."""
    depth, line = 0, 1
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c == "\n":
            line += 1
        elif c in "[{":
            depth += 1
            if depth > limit:
                return line
        elif c in "]}":
            depth -= 1
    return None


def too_deep(where: str, text: str, line: int | None = None, lines: bool = True) -> InputError:
    """The error for ``text`` (from ``where``) that is nested too deeply to parse; ``line``:
    the line ``text`` starts on in its file (JSONL), None when ``text`` is the whole document;
    ``lines=False``: ``where`` says it all (an option value, a CSV field)."""
    found = deep_line(text) if lines else None
    if line is None and found is not None:
        line = found
    elif line is not None and found is not None:
        line += found - 1
    at = f", line {line}" if line is not None else ""
    return InputError(f"{where}{at}: nested more than {MAX_DEPTH} levels deep (lists/objects inside each other); "
                      "refused")


_LONG_INT = re.compile(r"(?<![\d.eE+-])-?\d{4301,}(?![\d.eE])")


def json_loads(text: str, where: str, line: int | None = None, lines: bool = True, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``; a document too deep for the parser, or with an integer
    of more than 4,300 digits, is an InputError naming ``where`` and the line
    (:func:`too_deep`). ``JSONDecodeError`` passes through."""
    try:
        # a document's many lists and dicts form no cycles: the collector would scan the objects
        # already alive again and again (the third of 40,000-item files read took a tenth of its
        # time in two full collections)
        with gc_paused():
            return json.loads(text, **kwargs)
    except RecursionError:
        raise too_deep(where, text, line, lines) from None
    except ValueError as exc:
        if type(exc) is not ValueError or "integer string conversion" not in str(exc):
            raise  # JSONDecodeError, or what a hook of the caller raised
        raise long_number(where, text, line, lines) from None


def long_number(where: str, text: str, line: int | None = None, lines: bool = True) -> InputError:
    """The error for an integer of ``text`` longer than Python converts (4,300 digits)."""
    found = _LONG_INT.search(text) if lines else None
    if found is not None:
        at = text.count("\n", 0, found.start()) + 1
        line = at if line is None else line + at - 1
    where_line = f", line {line}" if line is not None else ""
    return InputError(f"{where}{where_line}: an integer with more than 4,300 digits; refused (no data needs one, "
                      "and converting it takes quadratic time)")


# -- streamed documents ------------------------------------------------------------------------

_ESCAPE = re.compile(rb"\\[\s\S]")
_SPACE = re.compile(rb"[ \t\r\n]*")
#: 1 for an opening bracket, 2 for a closing one, 0 for any other byte
_MARKS = bytes(1 if c in b"[{" else 2 if c in b"]}" else 0 for c in range(256))
#: a top-level key longer than this (raw bytes) is not one of interest
_KEY_BYTES = 256


class StreamShape:
    """The shape of a JSON document fed chunk by chunk, checked ahead of a streaming parser.

    A streaming parser (``ijson``) builds one entry at a time, so a file of any size costs
    little memory, but nothing else bounds it: a list nested 200,000 deep costs it memory
    quadratic in the depth (the path of every level is kept; 21 GB before the OOM killer),
    and a string of 100 MB time quadratic in its length (each chunk re-scans the part read).
    :meth:`feed` sees every chunk before the parser does and refuses, naming ``where``:

    - nesting deeper than ``limit`` (:data:`MAX_DEPTH`);
    - a string longer than ``max_string`` bytes;
    - with ``keys`` given: a document that is not an object ``{...}``, more than
      ``max_top_keys`` top-level keys, one of ``keys`` twice (a parser of the whole document
      keeps the last value, a streaming one would read both); :attr:`values` keeps the first
      character of the value of each of ``keys`` (``[`` for a list).

    Each chunk is scanned with a few vectorised passes (escapes, quotes, brackets), not
    character by character. Only what a valid document's prefix can hold is modelled exactly
    (a backslash outside a string, invalid there, is the parser's to refuse).
    """

    def __init__(self, where: str, *, max_string: int, keys: tuple[str, ...] = (), max_top_keys: int = 1000,
                 limit: int = MAX_DEPTH) -> None:
        self.where, self.limit, self.max_string = where, limit, max_string
        self.keys, self.max_top_keys = frozenset(keys), max_top_keys
        #: the document's first character (after white space), None before it is seen
        self.top: str | None = None
        #: key of interest -> the first character of its value
        self.values: dict[str, str] = {}
        self._offset = 0  # stream offset of the next byte fed
        self._carry = b""  # a backslash whose escaped byte is in the next chunk
        self._depth = 0
        self._in_string = False
        self._string_start = 0  # stream offset of the open string's quote
        self._top_string: bytearray | None = None  # an open string at depth 1, so far (at most _KEY_BYTES + 1)
        self._last_string: bytes | None = None  # the last string closed at depth 1 (a key when a ':' follows)
        self._await: str | None = None  # a key of interest whose value starts in a later chunk
        self._top_keys = 0
        self._events = 0

    def feed(self, data: bytes) -> None:
        """Check the next chunk of the document; an InputError when it breaks a bound."""
        buf = self._carry + data
        start = self._offset - len(self._carry)
        self._carry = b""
        self._offset += len(data)
        # every escape pair becomes two neutral bytes (same length), so each '"' left delimits a string
        flat = _ESCAPE.sub(b"__", buf) if b"\\" in buf else buf
        if flat.endswith(b"\\"):
            self._carry, buf, flat = buf[-1:], buf[:-1], flat[:-1]
        if not flat:
            return
        if self.top is None:
            m = _SPACE.match(flat)
            if m.end() == len(flat):
                return
            self.top = chr(flat[m.end()])
            if self.keys and self.top != "{":
                raise InputError(f"{self.where}: expected a JSON object {{...}} at the top, found "
                                 f"{_start_shown(flat[m.end():])}")
        a = np.frombuffer(flat, np.uint8)
        quotes = np.flatnonzero(a == 34)
        in0 = int(self._in_string)
        opening = ((np.arange(quotes.size) + in0) & 1) == 0  # quote k opens a string when k + in0 is even
        marks = np.frombuffer(flat.translate(_MARKS), np.uint8)
        brackets = np.flatnonzero(marks)
        if brackets.size:  # those outside strings: an even number of quotes before them (counting in0)
            brackets = brackets[((np.searchsorted(quotes, brackets) + in0) & 1) == 0]
        depth = np.cumsum(np.where(marks[brackets] == 1, 1, -1), dtype=np.int64) + self._depth
        if depth.size and int(depth.max()) > self.limit:
            at = start + int(brackets[np.argmax(depth > self.limit)])
            raise InputError(f"{self.where}: nested more than {self.limit} levels deep (lists/objects inside each "
                             f"other; byte {at:,}); refused")
        opens, closes = quotes[opening] + start, quotes[~opening] + start
        if in0:
            opens = np.concatenate(([self._string_start], opens))
        end_inside = (quotes.size + in0) & 1 == 1
        if end_inside:
            closes = np.concatenate((closes, [start + len(flat)]))
        if opens.size:
            lengths = closes - opens - 1
            if int(lengths.max()) > self.max_string:
                at = int(opens[np.argmax(lengths > self.max_string)])
                raise InputError(f"{self.where}: a string longer than {self.max_string:,} bytes (byte {at:,}); "
                                 "refused (set CAPEVAL_MAX_LINE_BYTES to raise the limit)")
        if self.keys and min(self._depth, int(depth.min()) if depth.size else self._depth) <= 1:
            self._top_level(buf, flat, a, quotes, opening, brackets, depth)
        if end_inside:
            self._string_start = int(opens[-1])
        self._in_string = end_inside
        if depth.size:
            self._depth = int(depth[-1])

    def _top_level(self, buf: bytes, flat: bytes, a: np.ndarray, quotes: np.ndarray, opening: np.ndarray,
                   brackets: np.ndarray, depth: np.ndarray) -> None:
        """The keys of the top-level object in a chunk that reaches depth 1 (a few chunks of a file)."""
        def depth_at(pos: np.ndarray) -> np.ndarray:
            k = np.searchsorted(brackets, pos)
            if not depth.size:
                return np.full(pos.shape, self._depth)
            return np.where(k == 0, self._depth, depth[np.maximum(k - 1, 0)])

        if self._await is not None:
            m = _SPACE.match(flat)
            if m.end() < len(flat):
                self.values[self._await] = chr(flat[m.end()])
                self._await = None
        colons = np.flatnonzero(a == 58)
        colons = colons[((np.searchsorted(quotes, colons) + int(self._in_string)) & 1) == 0]
        colons = colons[depth_at(colons) == 1]
        at1 = depth_at(quotes) == 1
        opened, closed = quotes[at1 & opening], quotes[at1 & ~opening]
        self._events += colons.size + opened.size + closed.size
        if self._events > 4 * self.max_top_keys:  # each key: its string, its colon, a string value
            raise InputError(f"{self.where}: more than {self.max_top_keys:,} entries in the top-level object; refused")
        events = sorted([(int(p), 1) for p in opened] + [(int(p), 2) for p in closed] + [(int(p), 3) for p in colons])
        string_from = 0
        for pos, kind in events:
            if kind == 1:  # a string opens at depth 1
                self._top_string, string_from = bytearray(), pos + 1
            elif kind == 2:  # ... and closes
                if self._top_string is not None:
                    self._top_string += buf[string_from:pos][:_KEY_BYTES + 1]
                    raw = bytes(self._top_string)
                    self._last_string = raw if len(raw) <= _KEY_BYTES else None
                self._top_string = None
            else:  # a colon at depth 1: the last string was a key
                self._top_keys += 1
                if self._top_keys > self.max_top_keys:
                    raise InputError(f"{self.where}: more than {self.max_top_keys:,} keys in the top-level object; "
                                     "refused")
                key, self._last_string = _key(self._last_string), None
                if key in self.keys:
                    if key in self.values or self._await == key:
                        raise InputError(f"{self.where}: key {key!r} appears twice in the top-level object (only "
                                         "one value can be kept; remove or rename the duplicate)")
                    m = _SPACE.match(flat, pos + 1)
                    if m.end() < len(flat):
                        self.values[key] = chr(flat[m.end()])
                    else:
                        self._await = key
        if self._top_string is not None:  # it goes on in the next chunk
            self._top_string += buf[string_from:][:_KEY_BYTES + 1]


def _key(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        key = json.loads(b'"' + raw + b'"')
    except (ValueError, RecursionError):
        return None  # not a valid string: the parser says so
    return key if isinstance(key, str) else None


def _start_shown(data: bytes) -> str:
    first = data[:1]
    if first == b"[":
        return "a list [...]"
    if first == b'"':
        return "a string"
    return repr(data[:16].decode("utf-8", "replace"))
