"""A dependency-free progress bar on stderr (silent when disabled)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


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

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= 0.2 or self.done >= self.total:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = self.done / self.total if self.total else 1.0
        width = 30
        bar = "#" * int(frac * width)
        rate = self.done / max(now - self._start, 1e-9)
        self.stream.write(f"\r{self.desc:>12} [{bar:<{width}}] {self.done}/{self.total} {rate:,.0f}/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.total:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_progress(total: int, desc: str, progress: bool | None) -> Progress:
    """A :class:`Progress`, enabled when ``progress`` is true (None: only for a terminal)."""
    if progress is None:
        progress = sys.stderr.isatty()
    return Progress(total, desc, enabled=bool(progress))
