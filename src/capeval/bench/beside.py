"""Published values beside a ``capeval bench`` run's (issue 47 item 5): each record's published
cell with the status ``capeval reproduce`` gives it (:func:`capeval.bench.reproduce.verdict`),
as JSON rows and as the terminal table. Here, not in :mod:`capeval.bench.published`, so that the
registry of published values imports nothing of ``reproduce`` (no import circle)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from capeval.bench.published import fixed, published_cell

def beside(records: Iterable[Any]) -> list[dict[str, Any]]:
    """Bench records (``benchmark``, ``metric``, ``statistic``, ``value``) that have a published
    value, as ``{benchmark, metric, statistic, capeval, published, delta, source, tolerance, status,
    not_comparable}`` rows; ``status`` (and ``tolerance``, ``not_comparable``: the registry's reason)
    are ``capeval reproduce``'s for the same cell and value (:func:`capeval.bench.reproduce.verdict`)."""
    from capeval.bench import reproduce

    rows = []
    for r in records:
        cell = published_cell(r.benchmark, r.metric, r.statistic, getattr(r, "benchmark_signature", ""))
        if cell is None:
            continue
        value = None if r.value is None or math.isnan(r.value) else float(r.value)
        found = reproduce.verdict(cell, value)
        rows.append({"benchmark": r.benchmark, "metric": r.metric, "statistic": r.statistic, "capeval": value,
                     "published": cell.x100, "delta": None if value is None else value - cell.x100,
                     "source": cell.source, "tolerance": found.tolerance, "status": found.status,
                     "not_comparable": cell.not_comparable})
    return rows


def status_notes(statuses: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Short forms of statuses for a table column, and the notes below it: a status with a reason
    (``not comparable: <reason>``, ``not run: ...``) is its first words and a mark (``not
    comparable [1]``), the note ``[1] not comparable: <reason>`` gives it whole, once per status."""
    short: dict[str, str] = {}
    notes: list[str] = []
    for status in statuses:
        if status in short:
            continue
        word, sep, _ = status.partition(": ")
        if not sep:
            short[status] = status
            continue
        notes.append(f"[{len(notes) + 1}] {status}")
        short[status] = f"{word} [{len(notes)}]"
    return short, notes


def table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`beside` as plain text (``capeval bench`` prints it under its table):
    ``tol`` and ``status`` are ``capeval reproduce``'s, a status's reason given below the table."""
    if not rows:
        return ""
    short, notes = status_notes(r.get("status", "") for r in rows)
    head = ("benchmark", "metric", "statistic", "capeval", "published", "delta", "tol", "status", "source")
    cells_ = [head] + [(r["benchmark"], r["metric"], r["statistic"],
                        "nan" if r["capeval"] is None else f"{r['capeval']:.2f}", f"{r['published']:.1f}",
                        "" if r["delta"] is None else fixed(r["delta"], signed=True),
                        "" if r.get("tolerance") is None else f"{r['tolerance']:g}", short[r.get("status", "")],
                        r["source"]) for r in rows]
    widths = [max(len(c[i]) for c in cells_) for i in range(len(head))]
    lines = ["published values beside capeval's (x100; status as capeval reproduce gives it):"]
    for k, row in enumerate(cells_):
        lines.append("  ".join(c.ljust(w) if i in (0, 1, 2, 7, 8) else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines + ([""] + notes if notes else []))
