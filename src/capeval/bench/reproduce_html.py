"""The HTML page of ``capeval reproduce`` (``--html``, or ``capeval report`` from its saved JSON)."""

from __future__ import annotations

from html import escape
from typing import Any, Mapping, Sequence

from capeval.bench.report import provenance
from capeval.bench.reproduce import HEAD, Outcome, cells, summary

_CSS = ("body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222}"
        ".scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;white-space:nowrap}th{background:#eee;position:sticky;top:0}"
        "td:last-child{white-space:normal;min-width:16em}td:nth-child(n+6):nth-child(-n+10)"
        "{text-align:right;font-variant-numeric:tabular-nums}.note{color:#555;font-size:.9em}")
_COLOUR = {"reproduced": "#e6f4ea", "differs": "#fce8e6"}


def html_report(outcomes: Sequence[Outcome], config: Mapping[str, Any] | None = None) -> str:
    """A self-contained HTML page with the table of :func:`capeval.bench.reproduce.text_table`
    (rows coloured by status), the run's provenance (capeval version, seed, date) first."""
    config = dict(config or {})
    body = []
    for o in outcomes:
        bg = _COLOUR.get(o.status, "#f1f3f4")
        tds = "".join(f"<td>{escape(c)}</td>" for c in cells(o))
        body.append(f"<tr style='background:{bg}' title='{escape(o.source)}; {escape(o.protocol)}'>{tds}</tr>")
    head = "".join(f"<th>{escape(h)}</th>" for h in HEAD)
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>capeval reproduce</title>"
            f"<style>{_CSS}</style></head><body>"
            f"<h1>capeval reproduce</h1><p class='note'>{provenance(config)}; bootstrap resamples "
            f"{escape(str(config.get('bootstrap', 'not recorded')))}.</p><p>{escape(summary(outcomes))}. Numbers "
            "x100; tolerances per benchmark and metric kind (capeval/data/published/tolerances.csv); hover a row "
            "for the published value's source.</p>"
            f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div></body></html>\n")
