"""The explorer of a comparison (``capeval compare --html``): one row per item with every
system's caption, each system's score per metric and its difference from the baseline.

Sorted first by the size of the first metric's difference, ``|score(B) - score(A)|`` per item,
so the items that move the corpus score most come first. For a metric whose corpus score is the
mean of its item scores (CIDEr-D, ROUGE-L, SPICE, the learned metrics) an item moves the
difference of corpus scores by exactly its difference / n; BLEU and METEOR pool statistics over
the corpus (capeval/significance/statistics.py), so for them the per-item difference ranks items
by their own sentence-level scores, an indication rather than a decomposition (the page says so).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from capeval.explorer.data import item_extras, number, extras_columns

#: metrics whose corpus score pools statistics instead of averaging item scores
POOLED = ("bleu-", "meteor")


def items_page(html: str) -> str:
    """The explorer page written beside a comparison's page ``X.html``: ``X.items.html``."""
    root, _ = os.path.splitext(html)
    return root + ".items.html"


def columns(systems: Sequence[str], metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Per metric: each system's score, then each other system's difference from the baseline."""
    out: list[dict[str, Any]] = []
    for m in metrics:
        out += [{"label": f"{m} · {s}", "metric": m, "system": s} for s in systems]
        out += [{"label": f"{m} Δ {s}", "metric": m, "system": s, "diff": True} for s in systems[1:]]
    return out


def rows(systems: Mapping[str, Mapping[str, str]], refs: Mapping[str, Sequence[str]], reports: Mapping[str, Any],
         metrics: Sequence[str], thumb: Any = None) -> Iterator[list[Any]]:
    """One row per item of the baseline, in its order (see :mod:`capeval.explorer.data`)."""
    names = list(systems)
    base = names[0]
    extras = {s: extras_columns(list(reports[s].values())) for s in names}
    for item in systems[base]:
        scores: list[float | None] = []
        for m in metrics:
            own = [number(reports[s][m].items.get(item)) for s in names]
            scores += own
            scores += [None if own[0] is None or v is None else v - own[0] for v in own[1:]]
        found: dict[str, Any] = {}
        marks = []
        for s in names:
            ex, words = item_extras(item, extras[s])
            marks.append(words)
            found.update({f"{s}: {k}": v for k, v in (ex or {}).items()})
        yield [item, [systems[s].get(item) for s in names], list(refs.get(item, ())),
               thumb(item) if thumb else None, scores, found or None, marks if any(marks) else None]


def meta(result: Mapping[str, Any], names: Sequence[str], metrics: Sequence[str]) -> dict[str, Any]:
    """The page's metadata: the comparison's rows as its summary, the notes on Δ and the order."""
    from capeval.significance.compare import significant

    summary = []
    for s, by_metric in result.get("systems", {}).items():
        for m, row in by_metric.items():
            summary.append({"system": s + (" (baseline)" if s == result.get("baseline") else ""), "metric": m,
                            "score": number(row.get("score")), "difference": number(row.get("diff")),
                            "p-value": number(row.get("p_value")), "significant": significant(row)})
    pooled = [m for m in metrics if m.startswith(POOLED)]
    notes = [f"Baseline {names[0]}; Δ = system − baseline, per item. Sorted by |Δ| of {metrics[0]}: the items that "
             "move the corpus score most come first (click a Δ header: by |Δ|, then by Δ). Shaded rows above: "
             "significant at p < 0.05 (the comparison's own page has the intervals)."]
    if pooled:
        notes.append(f"{', '.join(pooled)} pool statistics over the corpus: an item's Δ is its sentence-level "
                     "difference, an indication of its weight, not an exact share of the corpus difference.")
    first_diff = len(names)  # the first Δ column: after the first metric's per-system scores
    return {"systems": list(names), "columns": columns(names, metrics), "summary": summary,
            "summary_columns": ["system", "metric", "score", "difference", "p-value"], "notes": notes,
            "images": False, "sort": first_diff}


def write_compare_page(path: str, result: Mapping[str, Any], systems: Mapping[str, Mapping[str, str]],
                       refs: Mapping[str, Sequence[str]], reports: Mapping[str, Any]) -> int:
    """Write the comparison's explorer to ``path``; returns the number of items."""
    from capeval.explorer.page import write_page
    from capeval.io.inputs import normalize_candidates, normalize_references

    systems = {str(s): normalize_candidates(c) for s, c in systems.items()}
    refs = normalize_references(refs)
    names = list(systems)
    metrics = list(next(iter(reports.values())))
    return write_page(path, f"capeval compare: {' vs '.join(names)}", meta(result, names, metrics),
                      rows(systems, refs, reports, metrics))
