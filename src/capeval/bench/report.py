"""Self-contained HTML report of a :class:`~capeval.bench.runner.BenchRun` (inline SVG, no JS).

The report is also rendered from a saved JSON (``capeval report``), a file that may come from
anyone: every value is escaped, numbers are formatted only after :func:`check_saved` found them
numbers, links go only to files under the report's folder, and the page's Content-Security-Policy
forbids script (:data:`capeval.significance.html.CSP`)."""

from __future__ import annotations

import html
import math
import os
import re
from typing import Any

from capeval.bench.base import DEFAULT_SCALE
from capeval.bench.published import fixed
from capeval.bench.report_check import _field as _field, _is_number, _obj as _obj, _where_bad as _where_bad
from capeval.bench.report_check import check_saved as check_saved
from capeval.errors import InputError
from capeval.significance.html import CSP_META

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1200px}
.scroll{overflow-x:auto;max-width:100%}.differs{background:#fce8e6}.reproduced{background:#e6f4ea}
.not-comparable{background:#f1f3f4}
h3{font-size:1.05em;margin:1.2em 0 .3em}
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}
.paper{color:#666;font-style:italic;border-left:1px dashed #ccc}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}
.sig{font-family:monospace;font-size:.8em;color:#555;word-break:break-all}
.plots{display:flex;flex-wrap:wrap;gap:1em}.note{color:#555;font-size:.9em}
figure{margin:0}figcaption{font-size:.85em;text-align:center}
"""


def _e(x: Any) -> str:
    """``x`` as text for an element or a quoted attribute (``&<>"'`` escaped)."""
    return html.escape(str(x), quote=True)


def _edge(v: float) -> str:
    # smoothed BLEU leaves values like 2e-17 where the score is 0 in any practical sense
    return f"{0.0 if abs(v) < 1e-9 else v:.3g}"


def _p_text(p: float, n_resamples: int | None) -> str:
    """A bootstrap p-value of 0 only says p < 1/n_resamples."""
    if not _is_number(p):
        return _fmt(p)
    if p == 0 and _is_number(n_resamples) and n_resamples > 0:
        return f"&lt; {1 / n_resamples:.2g}"
    return f"{p:.3g}"


def _fmt(v: Any, stat: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if not _is_number(v):  # check_saved refuses it in a file; a run in memory is shown as it is
        return _e(v)
    return fixed(v, 0) if stat.startswith("ties") else fixed(v)


# the shade of each status of capeval reproduce's vocabulary (a "not run" cell has none) and the
# mark after the value where it is no reproduction
_SHADE = {"reproduced": ("reproduced", ""), "differs": ("differs", " ≠"), "not comparable": ("not-comparable", " †")}


def _paper_cell(r: Any, cell: Any) -> tuple[str, str]:
    """The published value of ``cell`` (:class:`capeval.bench.published.Cell`) as a ``<td>``,
    marked with the status ``capeval reproduce`` gives it (:func:`capeval.bench.reproduce.verdict`,
    the same function): ``reproduced``, ``differs``, ``not comparable: <reason>`` or ``not run: no
    value (...)``; and that status (the title carries it whole, the table's notes too)."""
    from capeval.bench.reproduce import verdict

    found = verdict(cell, float(r.value) if _is_number(r.value) else None)
    shade, mark = _SHADE.get(found.word, ("", ""))
    diff = "" if found.difference is None else f"ours - published = {fixed(found.difference, signed=True)}, "
    tol = "–" if found.tolerance is None else f"{found.tolerance:g}"
    title = f"{cell.source}; {diff}tolerance {tol}: {found.status}"
    return (f"<td class='paper{' ' + shade if shade else ''}' title='{_e(title)}'>{cell.x100:.1f}{_e(mark)}</td>",
            found.status)


def _stat_table(records: list[Any]) -> str:
    """Metrics x statistics, each statistic followed by a "paper" column where the
    published-values registry has a value for one of its metrics (capeval.bench.published)."""
    from capeval.bench.published import published_cell

    stats_order: list[str] = []
    metrics: list[str] = []
    cell: dict[tuple[str, str], Any] = {}
    for r in records:
        if r.statistic not in stats_order:
            stats_order.append(r.statistic)
        if r.metric not in metrics:
            metrics.append(r.metric)
        cell[(r.metric, r.statistic)] = r
    paper = {(m, s): published_cell(r.benchmark, m, s, getattr(r, "benchmark_signature", ""))
             for (m, s), r in cell.items()}
    with_paper = {s for (m, s), v in paper.items() if v is not None}
    head = "".join(f"<th>{_e(s)}</th>" + ("<th class='paper'>paper</th>" if s in with_paper else "")
                   for s in stats_order)
    rows = []
    reasons: dict[str, list[str]] = {}  # a status with a reason -> the cells that have it
    for m in metrics:
        tds = []
        for s in stats_order:
            r = cell.get((m, s))
            if r is None:
                tds.append("<td>–</td>")
            else:
                ci = "" if r.ci_low is None else f"<br><small>[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]</small>"
                tds.append(f"<td title='n={_e(r.n)}'>{_fmt(r.value, s)}{ci}</td>")
            if s in with_paper:
                found = paper.get((m, s))
                if found is None or r is None:
                    tds.append("<td class='paper'>–</td>")
                    continue
                td, status = _paper_cell(r, found)
                tds.append(td)
                if ": " in status:
                    reasons.setdefault(status, []).append(f"{m} {s}")
        rows.append(f"<tr><td>{_e(m)}</td>{''.join(tds)}</tr>")
    # each reason once, visible without hovering, with the cells it applies to
    notes = "".join(f"<p class='note'>{_e(', '.join(where))}: {_e(status)}</p>" for status, where in reasons.items())
    return f"<div class='scroll'><table><tr><th>metric</th>{head}</tr>{''.join(rows)}</table></div>{notes}"


def _heatmap_svg(plot: dict[str, Any]) -> str:
    counts = plot["counts"]
    levels = plot["human_levels"]
    edges = plot["metric_edges"]
    nrow, ncol = len(counts), len(edges) - 1
    cw, ch, left, top = 28, 20, 70, 10
    w, h = left + ncol * cw + 10, top + nrow * ch + 40
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-size='10'>"]
    for i, row in enumerate(counts):
        total = sum(row) or 1
        y = top + (nrow - 1 - i) * ch
        parts.append(f"<text x='{left - 4}' y='{y + ch * 0.65}' text-anchor='end'>{_e(levels[i])}</text>")
        for j, c in enumerate(row):
            frac = c / total
            shade = int(255 - 200 * frac)
            parts.append(
                f"<rect x='{left + j * cw}' y='{y}' width='{cw - 1}' height='{ch - 1}' "
                f"fill='rgb({shade},{shade},255)'><title>{_e(c)} rows ({frac:.0%} of this rating)</title></rect>"
            )
    yb = top + nrow * ch + 12
    parts.append(f"<text x='{left}' y='{yb}'>{_edge(edges[0])}</text>")
    parts.append(f"<text x='{left + ncol * cw}' y='{yb}' text-anchor='end'>{_edge(edges[-1])}</text>")
    parts.append(f"<text x='{left + ncol * cw / 2}' y='{yb + 14}' text-anchor='middle'>metric score</text>")
    parts.append("</svg>")
    return "".join(parts)


def _bars_svg(records: list[Any], suffix: str) -> str:
    cats = ["HC", "HI", "HM", "MM", "mean"]
    metrics: list[str] = []
    vals: dict[tuple[str, str], float] = {}
    for r in records:
        for c in cats:
            if r.statistic == f"accuracy_{c}{suffix}":
                vals[(r.metric, c)] = r.value
                if r.metric not in metrics:
                    metrics.append(r.metric)
    if not metrics:
        return ""
    palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]
    bw, gap, left, top, height = 12, 14, 40, 10, 160
    group_w = len(metrics) * bw + gap
    w = left + len(cats) * group_w + 160
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{top + height + 30}' font-size='10'>"]
    for t in (0, 25, 50, 75, 100):
        y = top + height - height * t / 100
        parts.append(f"<line x1='{left}' x2='{left + len(cats) * group_w}' y1='{y}' y2='{y}' stroke='#ddd'/>")
        parts.append(f"<text x='{left - 4}' y='{y + 3}' text-anchor='end'>{t}</text>")
    for ci, c in enumerate(cats):
        x0 = left + ci * group_w
        for mi, m in enumerate(metrics):
            v = vals.get((m, c))
            if v is None or math.isnan(v):
                continue
            bh = height * v / 100
            parts.append(
                f"<rect x='{x0 + mi * bw}' y='{top + height - bh}' width='{bw - 1}' height='{bh}' "
                f"fill='{palette[mi % len(palette)]}'><title>{_e(m)} {c}: {v:.2f}</title></rect>"
            )
        parts.append(f"<text x='{x0 + len(metrics) * bw / 2}' y='{top + height + 14}' text-anchor='middle'>{c}</text>")
    lx = left + len(cats) * group_w + 10
    for mi, m in enumerate(metrics):
        parts.append(f"<rect x='{lx}' y='{top + mi * 14}' width='10' height='10' fill='{palette[mi % len(palette)]}'/>")
        parts.append(f"<text x='{lx + 14}' y='{top + mi * 14 + 9}'>{_e(m)}</text>")
    parts.append("</svg>")
    return "".join(parts)


# a URL scheme ("javascript:", "data:", "file:", "C:" too): such a path is never a link
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def link(path: Any, base: str | None) -> str | None:
    """The relative URL of the file ``path`` for a page in the folder ``base``, or None when it
    is no file under ``base``: not a string, a scheme (``javascript:``...), a path that leaves
    ``base`` (``..``) or that :func:`capeval.paths.resolve_under` refuses (control characters,
    over-long names). Each component is percent-encoded, so no character of it is markup or a
    scheme. A relative ``path`` is taken from the working folder, as the run wrote it."""
    from urllib.parse import quote

    from capeval.paths import resolve_under

    if base is None or not isinstance(path, str) or not path or _SCHEME.match(path):
        return None
    try:
        rel = os.path.relpath(path, base)
        resolve_under(base, rel, what="explanation file")
    except (InputError, ValueError):  # ValueError: another drive (Windows), NUL
        return None
    return "/".join(quote(part, safe="") for part in rel.split(os.sep))


def _file_link(path: Any, base: str | None, text: str) -> str:
    """``<a href>`` to ``path`` with the (escaped) ``text``, or the path as plain text where it may
    not be a link (outside the report's folder, a scheme, ...)."""
    url = link(path, base)
    if url is None:
        return f"{text} <code>{_e(path)}</code>"
    return f"<a href='{_e(url)}'>{text}</a>"


def _explanations(meta: dict[str, Any], link_base: str | None) -> str:
    """Links to the explanations of the worst-scored items (``capeval bench --explain DIR``); only
    to files under ``link_base`` (the report's folder), other paths are shown as text."""
    parts = []
    for metric, by_setting in meta.get("explanations", {}).items():
        for setting, rows in by_setting.items():
            links = ", ".join(f"{_file_link(r['png'], link_base, _e(r['id']))} {_fmt(r['score'])} "
                              f"({_file_link(r['json'], link_base, 'json')})" for r in rows)
            parts.append(f"<p class='note'>{_e(metric)} ({_e(setting)}), worst-scored items: {links}</p>")
    if not parts:
        return ""
    return "<h3>Explanations</h3>" + "".join(parts)


def provenance(config: dict[str, Any]) -> str:
    """capeval's version, the seed and the date of a run, as a report's first note."""
    version, date = config.get("version", "not recorded"), config.get("date", "not recorded")
    return (f"capeval {_e(version)}, seed {_e(config.get('seed', 'not recorded'))}, run {_e(date)}")


_PAPER_NOTE = ("<p class='note'>paper: the published value (capeval/data/published), with the status <code>capeval "
               "reproduce</code> gives it: <span class='reproduced'>reproduced</span> (within the tolerance of the "
               "benchmark and metric kind), <span class='differs'>differs (≠)</span> (outside it) or "
               "<span class='not-comparable'>not comparable (†)</span> (the paper's number was made with another "
               "implementation or protocol, capeval/data/published/comparability.csv); hover for the source, "
               "the difference, the tolerance and the reason.</p>")


def render_html(run: Any, link_base: str | None = None) -> str:
    """The report: per benchmark a table, protocol notes, signatures, heatmaps / bars, and links
    to the worst items' explanations (paths relative to ``link_base``, the report's folder)."""
    out = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'>{CSP_META}<title>capeval bench report</title>",
        f"<style>{_CSS}</style></head><body><h1>capeval bench</h1>",
        f"<p class='note'>{provenance(run.config)}; bootstrap resamples "
        f"{_e(run.config.get('bootstrap'))}, confidence {_e(run.config.get('confidence'))}. "
        "Brackets: bootstrap percentile intervals; each benchmark's scale is stated under its table.</p>",
    ]
    for name, meta in run.benchmarks.items():
        recs = [r for r in run if r.benchmark == name]
        out.append(f"<h2>{_e(meta['title'])} <small>({_e(name)})</small></h2>")
        out.append(f"<p class='note'>{_e(meta['protocol'])}</p><p class='note'>Cite: {_e(meta['citation'])}</p>")
        table = _stat_table(recs)
        out.append(table)
        out.append(f"<p class='note scale'>Scale: {_e(meta.get('scale') or DEFAULT_SCALE)}.</p>")
        if "class='paper" in table:
            out.append(_PAPER_NOTE)
        if name == "pascal-50s":
            for suffix, label in (("", "random reference draws"), ("_fixed", "fixed references")):
                svg = _bars_svg(recs, suffix)
                if svg:
                    out.append(f"<figure>{svg}<figcaption>accuracy per category ({label})</figcaption></figure>")
        plots = [p for p in run.plots if p["benchmark"] == name]
        if plots:
            out.append("<div class='plots'>")
            for p in plots:
                out.append(
                    f"<figure>{_heatmap_svg(p)}<figcaption>{_e(p['metric'])}: distribution of metric scores "
                    f"per {_e(p['human_label'])} (row-normalised)</figcaption></figure>"
                )
            out.append("</div>")
        comps = [c for c in run.comparisons if c["benchmark"] == name]
        if comps:
            out.append("<h3>Paired bootstrap tests between metrics</h3><p class='note'>A - B on each headline "
                       "statistic, its bootstrap interval and p-value (same resamples for both metrics).</p>")
            out.append("<div class='scroll'><table><tr><th>statistic</th><th>A</th><th>B</th><th>A - B</th>"
                       "<th>95% CI</th><th>p</th></tr>")
            for c in comps:
                out.append(
                    f"<tr><td>{_e(c['statistic'])}</td><td>{_e(c['metric_a'])}</td><td>{_e(c['metric_b'])}</td>"
                    f"<td>{_fmt(c['delta'])}</td><td>[{_fmt(c['ci_low'])}, {_fmt(c['ci_high'])}]</td>"
                    f"<td>{_p_text(c['p_value'], c.get('n_resamples'))}</td></tr>"
                )
            out.append("</table></div>")
        out.append(_explanations(meta, link_base))
        out.append(f"<p class='sig'>benchmark signature: {_e(meta['signature'])}</p>")
        sigs = sorted({(r.metric, r.metric_signature) for r in recs})
        out.append("<p class='sig'>" + "<br>".join(f"{_e(m)}: {_e(s)}" for m, s in sigs) + "</p>")
        info = meta.get("info", {})
        if info:
            out.append("<details><summary>loader notes</summary><pre>" + _e(_pretty(info)) + "</pre></details>")
    out.append("</body></html>")
    return "\n".join(out)


def _pretty(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=2, ensure_ascii=False, default=str)
