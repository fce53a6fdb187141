"""Reading the systems' files and writing a comparison (shared by ``capeval compare`` and ``score --compare``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from capeval.errors import InputError
from capeval.significance.html import few_items_note, render_html, signed


def named_files(values: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or Path(value).exists():
            name, path = Path(value).stem, value
        if name in dict(out):
            raise InputError(f"--candidates: two systems are named {name!r}; name them with NAME=FILE")
        out.append((name, path))
    if len(out) < 2:
        raise InputError("--candidates: give at least two files, the baseline first")
    return out


def table(result: dict[str, Any]) -> str:
    """The comparison as an aligned text table (one row per system and metric).

    ``*`` after a p-value: significant (p < 0.05, a difference at all, enough items: see
    :func:`capeval.significance.compare.significant`); the bootstrap's ``mean ± ci`` per system,
    the baseline's too, as sacreBLEU prints them."""
    from capeval.significance.compare import significant

    bs = result["method"] == "bs"
    rows = [("system", "metric", "score", "mean ± ci" if bs else "", "diff", "p-value", "diff CI" if bs else "")]
    for name, metrics in result["systems"].items():
        for metric, row in metrics.items():
            mean = (f"{row['mean']:.4f} ± {row['ci']:.4f}" if bs and isinstance(row.get("mean"), (int, float))
                    and isinstance(row.get("ci"), (int, float)) else "")
            if name == result["baseline"]:
                rows.append((f"{name} (baseline)", metric, f"{row['score']:.4f}", mean, "", "", ""))
                continue
            ci = row.get("diff_ci")
            star = "*" if significant(row) else ""
            rows.append((name, metric, f"{row['score']:.4f}", mean, signed(row['diff']), f"{row['p_value']:.4f}{star}",
                         f"[{signed(ci[0])}, {signed(ci[1])}]" if ci else ""))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    how = "paired bootstrap" if bs else "approximate randomisation"
    lines.append(f"{how}, {result['samples']} samples, seed {result['seed']}; * p < 0.05")
    note = few_items_note(result)
    if note:
        lines.append(note)
    return "\n".join(lines)


def compare_files(candidates: list[str], references: str, metrics: str, options: dict[str, Any],
                  check_outputs: Callable[..., None], *, method: str = "bs", samples: int | None = None,
                  seed: int | None = 12345, confidence: float = 0.95, out: str | None = None, html: str | None = None,
                  as_table: bool = False, progress: bool | None = None) -> int:
    """Compare the systems of ``[NAME=]FILE`` candidates (the first is the baseline); print JSON or a table.

    Options are checked as ``capeval score`` checks them (an option for a metric not compared is
    refused); ``progress``: progress lines on stderr (None: a bar when stderr is a terminal)."""
    from capeval.io.atomic import atomic_write_text
    from capeval.io.captions import read_caption_file
    from capeval.options import check_options
    from capeval.significance.compare import compare

    names, options = check_options(metrics, options, strict=True)
    named = named_files(candidates)
    items, reports = None, {}
    if html:  # the per-item explorer beside the comparison's page (capeval/explorer/compare.py)
        from capeval.explorer.compare import items_page, write_compare_page
        items = items_page(html)
    check_outputs({"--out": out, "--html": html, "--html (items)": items}, [p for _, p in named] + [references])
    systems = {name: read_caption_file(path, "candidates").data for name, path in named}
    refs = read_caption_file(references, "references").data
    result = compare(systems, refs, names, method=method, samples=samples, seed=seed, confidence=confidence,
                     options=options or None, progress=progress, reports=reports if html else None)
    text = json.dumps(result, indent=2)
    if out:
        atomic_write_text(out, text + "\n")
    if html and items:
        write_compare_page(items, result, systems, refs, reports)
        atomic_write_text(html, render_html(result, items=os.path.basename(items)))
    print(table(result) if as_table or sys.stdout.isatty() else text)
    return 0
