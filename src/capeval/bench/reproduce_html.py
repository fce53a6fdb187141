"""The HTML page of ``capeval reproduce`` (``--html``, or ``capeval report`` from its saved JSON).

A saved JSON may come from anyone: :func:`check_payload` checks its fields' types first, every
value is escaped, a status this version does not know is shown as it is (escaped, uncoloured),
and the page's Content-Security-Policy forbids script."""

from __future__ import annotations

from dataclasses import fields
from html import escape
from typing import Any, Mapping, Sequence

from capeval.bench.report import _field, _obj, _where_bad, provenance
from capeval.bench.reproduce import HEAD, Outcome, cells, summary
from capeval.errors import InputError, shown
from capeval.significance.html import CSP_META

_CSS = ("body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222}"
        ".scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;white-space:nowrap}th{background:#eee;position:sticky;top:0}"
        "td:last-child{white-space:normal;min-width:16em}td:nth-child(n+6):nth-child(-n+10)"
        "{text-align:right;font-variant-numeric:tabular-nums}.note{color:#555;font-size:.9em}")
_COLOUR = {"reproduced": "#e6f4ea", "differs": "#fce8e6"}


_NUMBERS = ("published", "ours", "ci_low", "ci_high", "difference", "tolerance")


def check_payload(data: Any) -> None:
    """A saved reproduce JSON (``{"config", "cells"}``, or the bare list of cells older versions
    wrote) has cells :meth:`Outcome.from_dict` can take, with the types the page shows, or a
    one-line :class:`~capeval.errors.InputError` naming the cell and field (``cells[4].ours:
    expected a number or null, got '<b>'``); a field this version does not know is refused too.
    ``config`` is shown as escaped text whatever its values."""
    if isinstance(data, dict):
        _obj(data.get("config", {}), "config")
        cells_ = data.get("cells")
        if not isinstance(cells_, list):
            raise _where_bad("cells", "a list", cells_)
    elif isinstance(data, list):
        cells_ = data
    else:
        raise _where_bad("the run", "an object with cells or a list of cells", data)
    known = {f.name for f in fields(Outcome)}
    for i, cell in enumerate(cells_):
        where = f"cells[{i}]"
        cell = _obj(cell, where)
        unknown = [k for k in cell if k not in known]
        if unknown:
            raise InputError(f"{where}: field {shown(unknown[0], 40)} is not one of a reproduce cell's "
                             "(written by another capeval version?)")
        for f in fields(Outcome):
            required = f.name in ("paper", "table", "benchmark", "metric", "variant", "statistic", "published")
            if f.name in _NUMBERS:
                _field(cell, f.name, where, "number", optional=not required, null=not required)
            else:
                _field(cell, f.name, where, "str", optional=not required)


def html_report(outcomes: Sequence[Outcome], config: Mapping[str, Any] | None = None) -> str:
    """A self-contained HTML page with the table of :func:`capeval.bench.reproduce.text_table`
    (rows coloured by status), the run's provenance (capeval version, seed, date) first."""
    config = dict(config or {})
    body = []
    # a status of another version's (or an edited file's) is shown as it is, uncoloured
    for o in outcomes:
        bg = _COLOUR.get(o.status, "#f1f3f4")
        tds = "".join(f"<td>{escape(c)}</td>" for c in cells(o))
        body.append(f"<tr style='background:{bg}' title='{escape(o.source)}; {escape(o.protocol)}'>{tds}</tr>")
    head = "".join(f"<th>{escape(h)}</th>" for h in HEAD)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'>{CSP_META}<title>capeval reproduce</title>"
            f"<style>{_CSS}</style></head><body>"
            f"<h1>capeval reproduce</h1><p class='note'>{provenance(config)}; bootstrap resamples "
            f"{escape(str(config.get('bootstrap', 'not recorded')))}.</p><p>{escape(summary(outcomes))}. Numbers "
            "x100; tolerances per benchmark and metric kind (capeval/data/published/tolerances.csv); hover a row "
            "for the published value's source.</p>"
            f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div></body></html>\n")
