"""Published values of metrics on the benchmarks, printed beside capeval's own numbers.

Plain data: ``{(benchmark, metric, statistic): value}`` with the statistic names of
:mod:`capeval.bench` (x100, as the papers print them), and where each number comes from.
A difference is expected where the protocol differs (reference draws, image versions,
region backend, phrase parser); the table is there to make it visible, not to hide it.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

_HICE = "Zeng et al. 2024 (HICEScore), Table {}"

# Zeng et al. 2024, HICEScore (ACM MM 2024): Table 1 (Kendall tau-b / tau-c), Table 2
# (Pascal-50S accuracy, 5 reference draws), Table 3 (FOIL accuracy, 1 and 4 references)
PUBLISHED: dict[tuple[str, str, str], tuple[float, str]] = {
    ("flickr8k-expert", "hice-s", "kendall_tau_b"): (55.9, _HICE.format(1)),
    ("flickr8k-expert", "hice-s", "kendall_tau_c"): (56.4, _HICE.format(1)),
    ("flickr8k-cf", "hice-s", "kendall_tau_b"): (37.2, _HICE.format(1)),
    ("flickr8k-cf", "hice-s", "kendall_tau_c"): (19.2, _HICE.format(1)),
    ("composite", "hice-s", "kendall_tau_b"): (53.1, _HICE.format(1)),
    ("composite", "hice-s", "kendall_tau_c"): (57.9, _HICE.format(1)),
    ("flickr8k-expert", "ref-hice-s", "kendall_tau_b"): (57.2, _HICE.format(1)),
    ("flickr8k-expert", "ref-hice-s", "kendall_tau_c"): (57.7, _HICE.format(1)),
    ("flickr8k-cf", "ref-hice-s", "kendall_tau_b"): (38.2, _HICE.format(1)),
    ("flickr8k-cf", "ref-hice-s", "kendall_tau_c"): (19.8, _HICE.format(1)),
    ("composite", "ref-hice-s", "kendall_tau_b"): (53.9, _HICE.format(1)),
    ("composite", "ref-hice-s", "kendall_tau_c"): (58.7, _HICE.format(1)),
    ("pascal-50s", "hice-s", "accuracy_HC"): (68.6, _HICE.format(2)),
    ("pascal-50s", "hice-s", "accuracy_HI"): (99.7, _HICE.format(2)),
    ("pascal-50s", "hice-s", "accuracy_HM"): (96.5, _HICE.format(2)),
    ("pascal-50s", "hice-s", "accuracy_MM"): (79.5, _HICE.format(2)),
    ("pascal-50s", "hice-s", "accuracy_mean"): (86.1, _HICE.format(2)),
    ("pascal-50s", "ref-hice-s", "accuracy_HC"): (71.4, _HICE.format(2)),
    ("pascal-50s", "ref-hice-s", "accuracy_HI"): (99.7, _HICE.format(2)),
    ("pascal-50s", "ref-hice-s", "accuracy_HM"): (97.7, _HICE.format(2)),
    ("pascal-50s", "ref-hice-s", "accuracy_MM"): (79.7, _HICE.format(2)),
    ("pascal-50s", "ref-hice-s", "accuracy_mean"): (87.3, _HICE.format(2)),
    ("foil", "hice-s", "accuracy_1ref"): (93.1, _HICE.format(3)),
    ("foil", "hice-s", "accuracy_4ref"): (93.1, _HICE.format(3)),
    ("foil", "ref-hice-s", "accuracy_1ref"): (96.4, _HICE.format(3)),
    ("foil", "ref-hice-s", "accuracy_4ref"): (97.0, _HICE.format(3)),
}


def published(benchmark: str, metric: str, statistic: str) -> tuple[float, str] | None:
    """``(value, source)`` published for this benchmark, metric and statistic, or None."""
    return PUBLISHED.get((benchmark, metric, statistic))


def beside(records: Iterable[Any]) -> list[dict[str, Any]]:
    """Bench records (``benchmark``, ``metric``, ``statistic``, ``value``) that have a published
    value, as ``{benchmark, metric, statistic, capeval, published, delta, source}`` rows."""
    rows = []
    for r in records:
        found = published(r.benchmark, r.metric, r.statistic)
        if found is None:
            continue
        value = None if r.value is None or math.isnan(r.value) else float(r.value)
        rows.append({"benchmark": r.benchmark, "metric": r.metric, "statistic": r.statistic, "capeval": value,
                     "published": found[0], "delta": None if value is None else value - found[0], "source": found[1]})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`beside` as plain text (``capeval bench`` prints it under its table)."""
    if not rows:
        return ""
    head = ("benchmark", "metric", "statistic", "capeval", "published", "delta", "source")
    cells = [head] + [(r["benchmark"], r["metric"], r["statistic"],
                       "nan" if r["capeval"] is None else f"{r['capeval']:.2f}", f"{r['published']:.1f}",
                       "" if r["delta"] is None else f"{r['delta']:+.2f}", r["source"]) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["published values beside capeval's (x100):"]
    for k, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i in (0, 1, 2, 6) else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
