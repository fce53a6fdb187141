"""The comparison of :func:`capeval.compare` as a standalone HTML page (``capeval compare --html``)."""

from __future__ import annotations

import datetime as _dt
import html
from typing import Any

from capeval._version import __version__

_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
          ".wrap{overflow-x:auto}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}"
          "td:first-child,td:nth-child(2),th{text-align:left}.sig{background:#e6f4ea}.few{color:#555}"
          ".warn{background:#fef7e0;border-left:4px solid #f9ab00;padding:.5em .8em}"
          ".note{color:#555;font-size:.9em}code{font-size:.85em}")

#: The Content-Security-Policy of every page capeval writes (compare, bench, reproduce): no script
#: at all, no fetch, no form, no <base>; inline CSS only (the pages' own <style> and style
#: attributes), pictures only from the page's folder or data: URLs. Whatever a result file holds
#: is escaped anyway; this is the second wall should an escape ever be missed.
CSP = ("default-src 'none'; script-src 'none'; object-src 'none'; style-src 'unsafe-inline'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'")
#: The ``<meta>`` element that carries :data:`CSP`; first in ``<head>`` after the charset.
CSP_META = f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"


def signed(x: float) -> str:
    """``x`` as ``+0.1234``; a value that rounds to zero is ``+0.0000``, never ``-0.0000``."""
    return f"{round(x, 4) + 0.0:+.4f}"


def _real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _number(x: Any, fmt: str = ".4f") -> str:
    """``x`` formatted when it is a number (NaN and infinities as Python writes them), else its text
    escaped: the page never fails and never carries markup on a value of an unexpected type."""
    if _real(x):
        try:
            return format(float(x), fmt)
        except OverflowError:  # an int beyond float range
            pass
    return html.escape(str(x))


def _signed(x: Any) -> str:
    if _real(x):
        try:
            return signed(float(x))
        except OverflowError:
            pass
    return html.escape(str(x))


def _mean_ci(row: dict[str, Any]) -> str:
    mean, ci = row.get("mean"), row.get("ci")
    if mean is None and ci is None:
        return ""
    return f"{_number(mean)} &plusmn; {_number(ci)}"


def render_html(result: dict[str, Any], alpha: float = 0.05, items: str | None = None) -> str:
    """One table (system, metric, score, bootstrap mean ± ci, difference, its interval, p-value);
    significant rows shaded: p < ``alpha`` with a difference at all, and never with too few items
    (``too_few_items``: a warning above the table says so). ``items``: the file name of the
    per-item explorer beside the page (``capeval compare --html``), linked under the table.

    Every value of ``result`` is escaped (system names come from file names and ``NAME=``)."""
    from capeval.significance.compare import significant

    e = html.escape
    how = "paired bootstrap resampling" if result.get("method") == "bs" else "approximate randomisation"
    rows = []
    for name, metrics in result["systems"].items():
        for metric, row in metrics.items():
            if not isinstance(row, dict):
                row = {"score": row}
            if name == result["baseline"]:
                rows.append(f"<tr><td>{e(str(name))} (baseline)</td><td>{e(str(metric))}</td>"
                            f"<td>{_number(row.get('score'))}</td><td>{_mean_ci(row)}</td><td></td><td></td>"
                            "<td></td></tr>")
                continue
            ci = row.get("diff_ci")
            ci_text = (f"[{_signed(ci[0])}, {_signed(ci[1])}]" if isinstance(ci, (list, tuple)) and len(ci) == 2
                       else "" if not ci else e(str(ci)))
            p = row.get("p_value")
            few = row.get("too_few_items") is True
            cls = " class='sig'" if significant(row, alpha) else " class='few'" if few else ""  # NaN is not < alpha
            mark = " <span class='note'>(too few items)</span>" if few else ""
            rows.append(f"<tr{cls}><td>{e(str(name))}</td><td>{e(str(metric))}</td><td>{_number(row.get('score'))}</td>"
                        f"<td>{_mean_ci(row)}</td><td>{_signed(row.get('diff'))}</td><td>{ci_text}</td>"
                        f"<td>{_number(p)}{mark}</td></tr>")
    sigs = "".join(f"<li><code>{e(str(s))}</code></li>" for s in result.get("signatures", {}).values())
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    confidence = result.get("confidence")
    conf = ""
    if confidence:
        share = _number(confidence * 100, ".0f") if _real(confidence) else e(str(confidence))
        conf = f", {share}% interval of the difference"
    note = few_items_note(result)
    from urllib.parse import quote

    link = (f"<p>Per item: <a href='{e(quote(items, safe=''))}'>{e(items)}</a> (each item's captions, scores and "
            "differences; the items that move the corpus score most first).</p>" if items else "")
    warning = f"<p class='warn'><b>Warning:</b> {e(note)}.</p>" if note else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{CSP_META}<title>capeval compare</title>"
        f"<style>{_STYLE}</style></head><body><h1>Is B better than A?</h1>"
        f"<p>Baseline <b>{e(str(result['baseline']))}</b>; {how}, {e(str(result.get('samples')))} samples, "
        f"seed {e(str(result.get('seed')))}{conf}. Shaded: p &lt; {alpha} (a difference at all, enough items).</p>"
        f"{warning}"
        "<div class='wrap'><table><tr><th>system</th><th>metric</th><th>score</th><th>mean &plusmn; ci</th>"
        f"<th>difference</th><th>interval</th><th>p-value</th></tr>{''.join(rows)}</table></div>{link}"
        f"<p class='note'>capeval {e(__version__)}, {when}. Signatures:</p><ul class='note'>{sigs}</ul>"
        "</body></html>\n")


def few_items_note(result: dict[str, Any]) -> str:
    """One sentence when the comparison has too few items for its p-values to mean much, else ''."""
    from capeval.significance.compare import MIN_ITEMS

    systems = result.get("systems")
    rows = [r for m in (systems.values() if isinstance(systems, dict) else ()) if isinstance(m, dict)
            for r in m.values() if isinstance(r, dict)]
    if not any(r.get("too_few_items") is True for r in rows):
        return ""
    items = result.get("items")
    many = f"{items} items" if isinstance(items, int) and not isinstance(items, bool) else "too few items"
    return (f"{many}: fewer than {MIN_ITEMS}, too few for a paired test to mean much; no row is marked "
            "significant (see docs/compare.md)")
