"""A dependency-free progress bar on stderr (silent when disabled).

Whether bars are drawn is decided per call (``progress=True/False``) or, with
``progress=None``, by the ambient setting of :func:`progress_setting` (the CLI sets it from
``--quiet``) and otherwise by whether stderr is a terminal. Code deep inside a scorer
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


class Progress:
    """Minimal progress bar: ``with Progress(total, "meteor") as p: p.update(k)``.

    Redraws at most every 0.2 s so it costs nothing measurable on fast loops.
    """

    def __init__(self, total: int, desc: str = "", enabled: bool = True, stream: TextIO | None = None):
        self.total = max(int(total), 0)
        self.desc = desc
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.done = 0
        self._start = time.monotonic()
        self._last = 0.0
        self._drawn = -1  # count shown by the last draw (no redraw of an unchanged bar)

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if (now - self._last >= 0.2 or self.done >= self.total) and self.done != self._drawn:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        width = 30
        bar = "#" * int(frac * width)
        rate = self.done / max(now - self._start, 1e-9)
        self.stream.write(f"\r{self.desc:>12} [{bar:<{width}}] {self.done}/{self.total} {rate:,.0f}/s")
        self.stream.flush()
        self._drawn = self.done

    def close(self) -> None:
        if self.enabled and self.total:
            if self.done != self._drawn:
                self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False  # a second close draws nothing

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_progress(total: int, desc: str, progress: bool | None) -> Progress:
    """A :class:`Progress`, enabled when ``progress`` is true (None: see :func:`resolve`)."""
    return Progress(total, desc, enabled=resolve(progress))


def note(message: str, progress: bool | None = None) -> None:
    """One status line on stderr for a long step without a count (silent when bars are off)."""
    if resolve(progress):
        sys.stderr.write(f"[capeval] {message}\n")
        sys.stderr.flush()
