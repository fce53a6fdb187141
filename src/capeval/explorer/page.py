"""The explorer page: one self-contained HTML file, streamed to disk.

Layout: a static skeleton (no data in it but the escaped title), the metadata and the items as
two ``<script type="application/json">`` blocks (:func:`capeval.explorer.data.script_json`: no
``<``, ``>``, ``&``, U+2028/2029 left, so no value can end the block), then our own script
(``capeval/data/explorer/explorer.js``), which reads the blocks with ``JSON.parse`` and writes
every value as text. The Content-Security-Policy allows that one script and that one style by
their sha256 hashes and nothing else: no other script, no network (``default-src 'none'``),
pictures only from the page's folder or ``data:``. The items are written one at a time, so
memory stays bounded whatever their number (the page is written atomically:
:func:`capeval.io.atomic.atomic_open`).
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Any

from capeval.explorer.data import encode, script_json


@lru_cache(maxsize=None)
def asset(name: str) -> str:
    """``explorer.js`` / ``explorer.css`` from the package data; neither may hold ``</``, which
    would end its element early."""
    text = resources.files("capeval").joinpath("data", "explorer", name).read_text(encoding="utf-8")
    if "</" in text or "<!--" in text:
        raise RuntimeError(f"capeval/data/explorer/{name} holds '</' or '<!--'")
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def csp() -> str:
    """The page's Content-Security-Policy: our script and style by hash, pictures from the page's
    folder or ``data:``, nothing else (no fetch, no frame, no form, no ``<base>``)."""
    return (f"default-src 'none'; script-src {_sha256(asset('explorer.js'))}; style-src {_sha256(asset('explorer.css'))}; "
            "img-src 'self' data:; base-uri 'none'; form-action 'none'; object-src 'none'")


def head(title: str) -> str:
    """Everything before the data: the policy first in ``<head>``, then the skeleton."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp()}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title, quote=True)}</title><style>{asset('explorer.css')}</style></head><body>"
        "<h1 id='ce-title'></h1><div id='ce-notes'></div><table class='sum' id='ce-summary'></table>"
        "<div class='plots' id='ce-plots'><div><h2>Per metric</h2><div id='ce-hists'></div></div>"
        "<div class='scatter'><h2>Two metrics <span class='note'>(click a point: its item)</span></h2>"
        "<div class='bar'><label>x <select id='ce-x'></select></label><label>y <select id='ce-y'></select></label></div>"
        "<div id='ce-scatterbox'></div></div></div>"
        "<div class='bar'><input type='search' id='ce-q' placeholder='search ids and texts' aria-label='search'>"
        "<span id='ce-status'></span><span class='note'>click a header to sort, a row for the whole item</span></div>"
        "<div id='ce-view'><div class='ce-head' id='ce-head'></div><div id='ce-body'></div></div>"
        "<div id='ce-detail' hidden></div>"
        "<noscript><p>This page needs JavaScript (its own, inline) to show the items.</p></noscript>"
    )


def write_page(path: str, title: str, meta: dict[str, Any], rows: Iterable[list[Any]]) -> int:
    """Write the page to ``path`` atomically, the rows streamed; returns the number of rows.

    ``meta``: ``{"title", "systems": [names], "columns": [{"label", "metric", "system", "diff"}],
    "summary": [...], "summary_columns": [...], "notes": [text], "images": bool, "sort": column}``;
    ``rows``: see :mod:`capeval.explorer.data`."""
    from capeval.io.atomic import atomic_open

    n = 0
    with atomic_open(path) as f:
        f.write(head(title).encode("utf-8"))
        f.write(b"<script type='application/json' id='ce-meta'>" + encode(script_json({**meta, "title": title}))
                + b"</script>\n<script type='application/json' id='ce-items'>[")
        for row in rows:
            f.write((b",\n" if n else b"\n") + encode(script_json(row)))
            n += 1
        f.write(b"]</script>\n<script>" + asset("explorer.js").encode("utf-8") + b"</script></body></html>\n")
    return n
