"""Deeply nested documents: one line naming the file and line, never a ``RecursionError``.

Python's ``json`` parser recurses once per ``[`` / ``{``, so a document nested some
thousand levels deep (``[[[[...]]]]``, a few kilobytes) ends in a ``RecursionError``
traceback. No caption file, item table or option value needs more than a handful of levels,
so :func:`json_loads` turns that error into an :class:`~capeval.errors.InputError` naming the
source and the line where the nesting passes :data:`MAX_DEPTH`; the line is found by a scan
that runs only on that error path. YAML configs are bounded the same way in
:mod:`capeval.train.config`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from capeval.errors import InputError

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


def json_loads(text: str, where: str, line: int | None = None, lines: bool = True, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``; a document too deep for the parser is an InputError
    naming ``where`` and the line (:func:`too_deep`). ``JSONDecodeError`` passes through."""
    try:
        return json.loads(text, **kwargs)
    except RecursionError:
        raise too_deep(where, text, line, lines) from None
