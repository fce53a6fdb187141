"""A dependency-free progress display on stderr (silent when disabled).

On a terminal it is a bar redrawn in place; when stderr is not a terminal (CI, ``nohup``,
notebooks) it is a plain line every few seconds (:data:`LINE_INTERVAL`). Whether anything
is shown is decided per call (``progress=True/False``) or, with ``progress=None``, by the
ambient setting of :func:`progress_setting` (``capeval bench`` and ``reproduce`` set True,
``--quiet`` False) and otherwise by whether stderr is a terminal (the library default: bars
on a terminal, nothing elsewhere). Code deep inside a scorer
(tokenisation, resource preparation, embedding) passes ``None`` and so follows the
caller's choice without every signature having to forward it.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, TextIO

_SETTING: ContextVar[bool | None] = ContextVar("capeval_progress", default=None)


def stderr_is_terminal() -> bool:
    """True when ``sys.stderr`` is an interactive terminal (never raises)."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):  # replaced or closed stream
        return False


def resolve(progress: bool | None) -> bool:
    """Whether to draw: ``progress`` when given, else the ambient setting, else stderr is a TTY."""
    if progress is None:
        progress = _SETTING.get()
    if progress is None:
        return stderr_is_terminal()
    return bool(progress)


@contextmanager
def progress_setting(progress: bool | None) -> Iterator[None]:
    """Within the block, ``progress=None`` means ``progress`` (None keeps the TTY rule)."""
    token = _SETTING.set(progress)
    try:
        yield
    finally:
        _SETTING.reset(token)


#: seconds between two progress lines when stderr is not a terminal (all bars together)
LINE_INTERVAL = 5.0
_LINES = {"last": float("-inf"), "open": 0}  # the last line written, bars open in line mode


def _amount(n: float, unit: str) -> str:
    if unit == "bytes":
        return f"{n / 1e6:,.1f} MB"
    return f"{int(n):,}"


class Progress:
    """Progress of one step on stderr: ``with Progress(total, "meteor") as p: p.update(k)``.

    On a terminal a bar redrawn in place (at most every 0.2 s) with the full label. Elsewhere
    (CI logs, ``nohup``, notebooks) plain lines ``[capeval] <label>: done/total (pct), elapsed``,
    at most one every :data:`LINE_INTERVAL` seconds over all bars, plus a last line when the
    outermost step ends. ``unit="bytes"`` shows megabytes.
    """

    def __init__(self, total: int, desc: str = "", enabled: bool = True, stream: TextIO | None = None,
                 unit: str = "items"):
        self.total = max(int(total), 0)
        self.desc = desc
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.unit = unit
        self.done = 0
        self._start = time.monotonic()
        self._last = 0.0
        self._drawn = -1  # count shown by the last draw (no redraw of an unchanged bar)
        self._width = 0  # length of the last bar drawn (a shorter label must not leave its tail)
        try:
            self.lines = not self.stream.isatty()
        except (AttributeError, ValueError, OSError):
            self.lines = True
        if self.enabled and self.lines:
            _LINES["open"] += 1

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if self.lines:
            if now - _LINES["last"] >= LINE_INTERVAL and now - self._start >= LINE_INTERVAL:
                self._line(now)
        elif (now - self._last >= 0.2 or self.done >= self.total) and self.done != self._drawn:
            self._last = now
            self._draw(now)

    def _line(self, now: float) -> None:
        _LINES["last"] = now
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        self.stream.write(f"[capeval] {self.desc}: {_amount(self.done, self.unit)}/{_amount(self.total, self.unit)}"
                          f"{pct}, {now - self._start:.0f} s elapsed\n")
        self.stream.flush()
        self._drawn = self.done

    def _draw(self, now: float) -> None:
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        width = 30
        bar = "#" * int(frac * width)
        rate = self.done / max(now - self._start, 1e-9)
        rate_text = f"{rate / 1e6:,.1f} MB/s" if self.unit == "bytes" else f"{rate:,.0f}/s"
        text = (f"{self.desc} [{bar:<{width}}] {_amount(self.done, self.unit)}/{_amount(self.total, self.unit)} "
                f"{rate_text}")
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)
        self._drawn = self.done

    def close(self, failed: bool = False) -> None:
        """End the bar; ``failed``: the step ended in an error, which says enough (no last line)."""
        if not self.enabled:
            return
        if self.lines:
            _LINES["open"] -= 1
            now = time.monotonic()
            # the outermost step always says it ended; inner ones only within the line budget
            if not failed and self.done != self._drawn and (_LINES["open"] == 0 or now - _LINES["last"] >= LINE_INTERVAL):
                self._line(now)
        elif self.total:
            if self.done != self._drawn:
                self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False  # a second close draws nothing

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(failed=exc_type is not None)


def make_progress(total: int, desc: str, progress: bool | None, unit: str = "items") -> Progress:
    """A :class:`Progress`, enabled when ``progress`` is true (None: see :func:`resolve`): a bar
    on a terminal, lines elsewhere."""
    return Progress(total, desc, enabled=resolve(progress), unit=unit)


def note(message: str, progress: bool | None = None) -> None:
    """One status line on stderr for a long step without a count (silent when bars are off)."""
    if resolve(progress):
        sys.stderr.write(f"[capeval] {message}\n")
        sys.stderr.flush()
