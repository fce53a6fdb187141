"""The comparison of :func:`capeval.compare` as a standalone HTML page (``capeval compare --html``)."""

from __future__ import annotations

import datetime as _dt
import html
from typing import Any

from capeval._version import __version__

_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
          ".wrap{overflow-x:auto}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}"
          "td:first-child,td:nth-child(2),th{text-align:left}.sig{background:#e6f4ea}"
          ".note{color:#555;font-size:.9em}code{font-size:.85em}")


def signed(x: float) -> str:
    """``x`` as ``+0.1234``; a value that rounds to zero is ``+0.0000``, never ``-0.0000``."""
    return f"{round(x, 4) + 0.0:+.4f}"


def render_html(result: dict[str, Any], alpha: float = 0.05) -> str:
    """One table (system, metric, score, difference, its interval, p-value); p < ``alpha`` shaded."""
    e = html.escape
    how = "paired bootstrap resampling" if result["method"] == "bs" else "approximate randomisation"
    rows = []
    for name, metrics in result["systems"].items():
        for metric, row in metrics.items():
            if name == result["baseline"]:
                rows.append(f"<tr><td>{e(name)} (baseline)</td><td>{e(metric)}</td><td>{row['score']:.4f}</td>"
                            "<td></td><td></td><td></td></tr>")
                continue
            ci = row.get("diff_ci")
            ci_text = f"[{signed(ci[0])}, {signed(ci[1])}]" if ci else ""
            cls = " class='sig'" if row["p_value"] < alpha else ""
            rows.append(f"<tr{cls}><td>{e(name)}</td><td>{e(metric)}</td><td>{row['score']:.4f}</td>"
                        f"<td>{signed(row['diff'])}</td><td>{ci_text}</td><td>{row['p_value']:.4f}</td></tr>")
    sigs = "".join(f"<li><code>{e(s)}</code></li>" for s in result["signatures"].values())
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    conf = f", {int(round(result['confidence'] * 100))}% interval of the difference" if result.get("confidence") else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>capeval compare</title>"
        f"<style>{_STYLE}</style></head><body><h1>Is B better than A?</h1>"
        f"<p>Baseline <b>{e(result['baseline'])}</b>; {how}, {result['samples']} samples, seed {e(str(result['seed']))}"
        f"{conf}. Shaded: p &lt; {alpha}.</p>"
        "<div class='wrap'><table><tr><th>system</th><th>metric</th><th>score</th><th>difference</th>"
        f"<th>interval</th><th>p-value</th></tr>{''.join(rows)}</table></div>"
        f"<p class='note'>capeval {e(__version__)}, {when}. Signatures:</p><ul class='note'>{sigs}</ul>"
        "</body></html>\n")
