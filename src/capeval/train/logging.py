"""Metrics logs of training runs: a CSV file (always) and TensorBoard (optional).

``metrics.csv`` has one row per logged step: ``step``, ``epoch``, ``phase`` (train / val),
``time`` (seconds since the run started, resumed runs continue) and the values. The header
is fixed by the first row; a resumed run appends to the same file when its header matches
and otherwise starts ``metrics-<n>.csv``. TensorBoard (``tensorboard=True``) needs the
``tensorboard`` package; its absence is an error naming it.
"""

from __future__ import annotations

import csv
import math
import os
import time
from pathlib import Path
from typing import Any, Sequence

from capeval.errors import MissingDependencyError

BASE_FIELDS = ("step", "epoch", "phase", "time")


class MetricsLog:
    """``log(step, epoch, phase, **values)`` appends a CSV row (and TensorBoard scalars)."""

    def __init__(self, folder: str | os.PathLike[str], fields: Sequence[str], tensorboard: bool = False,
                 enabled: bool = True, time_offset: float = 0.0):
        self.folder = Path(folder)
        self.fields = list(BASE_FIELDS) + [f for f in fields if f not in BASE_FIELDS]
        self.enabled = enabled  # False on non-main processes of a multi-GPU run
        self.start = time.monotonic() - time_offset
        self.path = self._choose_path()
        self.writer: Any = None
        if tensorboard and enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise MissingDependencyError(f"tensorboard logging needs the tensorboard package: pip install "
                                             f"tensorboard  [{exc}]") from None
            self.writer = SummaryWriter(str(self.folder / "tensorboard"))

    def _choose_path(self) -> Path:
        n = 0
        while True:
            path = self.folder / ("metrics.csv" if n == 0 else f"metrics-{n}.csv")
            if not path.exists():
                return path
            with open(path, newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), [])
            if header == self.fields:
                return path
            n += 1

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def log(self, step: int, epoch: int, phase: str, **values: Any) -> None:
        if not self.enabled:
            return
        unknown = sorted(set(values) - set(self.fields))
        if unknown:
            raise ValueError(f"metrics log: fields {unknown} were not declared")
        self.folder.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        row = {"step": step, "epoch": epoch, "phase": phase, "time": round(self.elapsed(), 3)}
        row.update({k: _fmt(v) for k, v in values.items()})
        with open(self.path, "a", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=self.fields)
            if new:
                writer.writeheader()
            writer.writerow(row)
        if self.writer is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)) and math.isfinite(float(value)):
                    self.writer.add_scalar(f"{phase}/{key}", float(value), step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _fmt(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return f"{value:.6g}" if isinstance(value, float) else value


def read_log(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The rows of a metrics CSV (strings, as written)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
