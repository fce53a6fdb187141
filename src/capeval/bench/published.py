"""The published-values registry: every human-correlation and accuracy number of the five papers
(and, in ``upstream.csv``, the Polaris/Nebula values of four more, read from their authors' kit,
VELA's LongCap-Arena values from the same kit, and the DetailCaps/CapArena values of the CAPTURE
README and the CapArena paper).

Plain data in ``capeval/data/published/`` (package data, reviewable against the papers):

- ``values.csv``: one row per printed number: ``paper`` (``pac-s``, ``pac-s++``, ``hice-s``,
  ``bridge``, ``visce2``), ``table``, ``benchmark``, ``metric`` (capeval's name where capeval
  has the metric, the paper's name lower-cased otherwise), ``variant`` (backbone, ablation),
  ``statistic`` (the names of :mod:`capeval.bench`), ``value`` exactly as printed, ``scale``
  (``value * scale`` is x100, the unit of ``capeval bench``; 100 where the paper prints rho
  as ``.44``), where it is printed (``row``: the label of the paper's row, ``offset``: lines
  from that row, ``col``: the numeric cell, 0-based) and ``main`` (0 for the backbone/ablation
  tables), ``protocol`` (a detail the paper states).
- ``comparability.csv``: cells that are not comparable with capeval's run of that metric
  (``paper``, ``table``, ``metric``: every statistic of that row; ``reason``): numbers a
  paper copied from earlier work made with that work's own implementation or protocol (e.g.
  VisCE2's † rows), where the reason names what made them; ``capeval reproduce`` still runs
  them and reports ``not comparable: <reason>``, never ``differs``.
- ``tables.csv``: where each table is in the paper text (first line containing ``start`` up
  to the first containing ``end``) and its caption.
- ``tolerances.csv``: how far ours may be from the published value per benchmark and metric
  kind (``text`` / ``learned``) and why.
- ``upstream.csv``: the values of papers not in ../shared/papers, read from a repository file:
  the Polaris and Nebula values of Polos, DENEB, Pearl = arXiv 2512.21582 and EXPERT and the
  LongCap-Arena values of VELA (its Table 1: Test A / Test B x three perspectives, loader options
  ``split``/``perspective``) as their authors' reproduction kit transcribes them (written by
  tools/published_upstream.py), the
  CAPTURE README's DetailCaps consistency table and CapArena's Tables 2-3 (arXiv 2503.12329v1
  as an HTML rendering of the paper reproduces them): ``upstream``
  (``github:owner/repo@commit:path`` of the file), ``key`` (the value's place in that file: a
  dotted JSON key; ``md:<first header cell>/<row label>/<column>`` for a Markdown table, the
  column counted from 0 after the label; ``html:<cell id>`` for an HTML table), ``note`` (the
  paper and table the file names), ``options`` (the benchmark loader options of that paper's
  protocol, e.g. Nebula's ``scores=corrected``), ``caption``; the test re-reads each value
  from that file when a mirror of the repository is present. ``comparability.csv`` applies to
  them as to the papers' cells.

- ``systems.csv``: numbers a paper reports for *systems* (models) scored by a metric, not for a
  metric against human judgments: AMBER's results of nine MLLMs (``variant``: the model,
  ``statistic``: ``system``, ``col``: its column, ``source``: ``github:owner/repo@commit:path``
  where it is printed, ``outputs``: what a run needs, the model's responses, which are not
  published; ``capeval reproduce`` lists these cells as ``not run: model outputs``); VDC's README
  table (``vdcscore-acc`` x100 at scale 1, ``vdcscore`` 0-5 at scale 100, benchmark ``vdc-<dimension>``);
  the Tarsier README's DREAM-1K AutoDQ tables (benchmark ``dream-1k``, fractions at scale 100,
  ``statistic`` ``system`` for OVERALL, else the subtask: ``movie_animation``, ...); the CAPability
  README's table (assets/72B.png: precision / recall / F1 x100 per dimension, ``statistic`` the
  dimension, ``system`` for Avg.; benchmark ``capability``).

``tests/test_published_registry.py`` re-reads every stored value from ../shared/papers.
A difference is expected where the protocol differs (reference draws, image versions, region
backend, phrase parser); the table is there to make it visible, not to hide it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

PAPERS = ("pac-s", "pac-s++", "hice-s", "bridge", "visce2", "polos", "deneb", "pearl", "expert", "capture",
          "caparena", "amber", "vela", "vdc", "tarsier", "capability")

CITATIONS = {
    "pac-s": "Sarto et al. 2023 (PAC-S, CVPR poster)",
    "pac-s++": "Sarto et al. (PAC-S++, journal version)",
    "hice-s": "Zeng et al. 2024 (HICEScore)",
    "bridge": "Sarto et al. 2024 (BRIDGE, ECCV)",
    "visce2": "Maeda et al. 2024 (VisCE2)",
    "polos": "Wada et al. 2024 (Polos, CVPR)",
    "deneb": "Matsuda et al. 2024 (DENEB, ACCV)",
    "pearl": "Hirano et al. 2025 (Pearl, arXiv 2512.21582)",
    "expert": "Kim et al. 2025 (EXPERT, ACL Findings)",
    "capture": "Dong et al. 2024 (CAPTURE / DetailCaps, arXiv 2405.19092)",
    "caparena": "Cheng et al. 2025 (CapArena, arXiv 2503.12329v1)",
    "amber": "Wang et al. 2023 (AMBER, arXiv:2311.07397)",
    "vela": "Matsuda et al. 2025 (VELA, EMNLP)",
    "vdc": "Chai et al. 2025 (AuroraCap / VDC, ICLR; arXiv:2410.03051)",
    "tarsier": "Wang et al. 2024 (Tarsier / DREAM-1K, arXiv:2407.00634)",
    "capability": "Liu et al. 2025 (CAPability, arXiv:2502.14914)",
}

# the paper a metric comes from: its own number wins when several papers print one
_OWN = {"pac-s": "pac-s", "ref-pac-s": "pac-s", "pac-s-video": "pac-s", "ref-pac-s-video": "pac-s",
        "pac-s++": "pac-s++", "ref-pac-s++": "pac-s++", "hice-s": "hice-s", "ref-hice-s": "hice-s",
        "bridge": "bridge", "visce2": "visce2", "visce2-vanilla": "visce2", "visce2-ref": "visce2",
        "visce2-desc": "visce2", "polos": "polos", "expert": "expert", "capture": "capture", "vela": "vela"}
# tables whose rows repeat the paper's comparison tables and lose to them: VisCE2's Table 1 (textual
# resources) prints its own row again, THumB w/ human R as .07 where the comparison Table 2 has .06
_SECONDARY = {"visce2": ("1",)}
_ORDER = ("pac-s++", "hice-s", "bridge", "pac-s", "visce2", "polos", "deneb", "pearl", "expert", "capture",
          "caparena", "amber", "vela", "vdc", "tarsier", "capability")


@dataclass(frozen=True)
class Cell:
    """One published number and where it is printed."""

    paper: str
    table: str
    benchmark: str
    metric: str
    variant: str
    statistic: str
    value: float
    scale: float
    row: str
    offset: int
    col: int
    main: bool
    protocol: str
    upstream: str = ""  # github:owner/repo@commit:path where the value was read (papers not in ../shared/papers)
    key: str = ""
    note: str = ""
    options: str = ""  # benchmark loader options of the paper's protocol, "key=value;key=value"
    not_comparable: str = ""  # why capeval's run of this cell is no reproduction of it (comparability.csv)
    outputs: str = ""  # systems.csv: the system outputs a run of this cell needs (not published)

    def bench_options(self) -> dict[str, str]:
        """:attr:`options` as a mapping (``capeval reproduce`` loads the benchmark with them)."""
        return parse_options(self.options)

    @property
    def x100(self) -> float:
        """The value in capeval bench's unit (x100)."""
        return round(self.value * self.scale, 6)

    @property
    def source(self) -> str:
        where = f" (as transcribed in {self.upstream})" if self.upstream else (
            f" (printed in {self.note})" if self.outputs else "")
        table = "README" if self.table == "readme" else f"Table {self.table}"  # a repository's README table
        return f"{CITATIONS[self.paper]}, {table}{where}"


def parse_options(text: str) -> dict[str, str]:
    """``"key=value;key=value"`` as a mapping (empty text: none)."""
    return dict(kv.split("=", 1) for kv in text.split(";") if kv)


def _read(name: str) -> list[dict[str, str]]:
    text = (resources.files("capeval") / "data" / "published" / name).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


@lru_cache(maxsize=1)
def not_comparable() -> dict[tuple[str, str, str], str]:
    """``{(paper, table, metric): reason}`` from ``comparability.csv``."""
    return {(r["paper"], r["table"], r["metric"]): r["reason"] for r in _read("comparability.csv")}


@lru_cache(maxsize=1)
def cells() -> tuple[Cell, ...]:
    """Every stored published number: the papers' text first, in their order, then upstream.csv and systems.csv."""
    why = not_comparable()
    text = tuple(
        Cell(r["paper"], r["table"], r["benchmark"], r["metric"], r["variant"], r["statistic"], float(r["value"]),
             float(r["scale"]), r["row"], int(r["offset"]), int(r["col"]), r["main"] == "1", r["protocol"],
             not_comparable=why.get((r["paper"], r["table"], r["metric"]), ""))
        for r in _read("values.csv")
    )
    return text + tuple(
        Cell(r["paper"], r["table"], r["benchmark"], r["metric"], r["variant"], r["statistic"], float(r["value"]),
             float(r["scale"]), "", 0, -1, r["main"] == "1", r["protocol"], r["upstream"], r["key"], r["note"], r["options"],
             not_comparable=why.get((r["paper"], r["table"], r["metric"]), ""))
        for r in _read("upstream.csv")
    ) + tuple(
        # one score per system: main=False keeps them out of published()'s metric-vs-humans lookups
        Cell(r["paper"], r["table"], r["benchmark"], r["metric"], r["variant"], r["statistic"], float(r["value"]),
             float(r["scale"]), r["variant"], 0, int(r["col"]), False, "", note=r["source"], outputs=r["outputs"])
        for r in _read("systems.csv")
    )


@lru_cache(maxsize=1)
def tables() -> dict[tuple[str, str], dict[str, str]]:
    """``{(paper, table): {file, start, end, caption}}`` (``file`` empty for upstream.csv's tables)."""
    out = {(r["paper"], r["table"]): r for r in _read("tables.csv")}
    for r in _read("upstream.csv") + _read("systems.csv"):
        out.setdefault((r["paper"], r["table"]), {"paper": r["paper"], "table": r["table"], "file": "",
                                                  "start": "", "end": "", "caption": r["caption"]})
    return out


@lru_cache(maxsize=1)
def _tolerances() -> dict[tuple[str, str], tuple[float, str]]:
    return {(r["benchmark"], r["kind"]): (float(r["tolerance"]), r["why"]) for r in _read("tolerances.csv")}


def tolerance(benchmark: str, kind: str) -> tuple[float, str]:
    """``(tolerance x100, why)`` for a benchmark and metric kind (``text`` / ``learned``)."""
    t = _tolerances()
    return t.get((benchmark, kind)) or t.get(("*", kind)) or (0.5, "default")


def select(papers: Iterable[str] | None = None, table: str | None = None) -> list[Cell]:
    """The cells of some papers (all by default), optionally of one table."""
    wanted = set(papers or PAPERS)
    return [c for c in cells() if c.paper in wanted and (table is None or c.table == table)]


@cache
def _best(benchmark: str, metric: str, statistic: str, run_options: tuple[tuple[str, str], ...] = ()) -> Cell | None:
    found = [c for c in cells() if c.main and (c.benchmark, c.metric, c.statistic) == (benchmark, metric, statistic)
             and _same_protocol(c, dict(run_options))]
    if not found:
        return None
    own = _OWN.get(metric)
    found.sort(key=lambda c: (c.paper != own, _ORDER.index(c.paper), c.table in _SECONDARY.get(c.paper, ())))
    return found[0]


def _same_protocol(cell: Cell, run_options: dict[str, str]) -> bool:
    """Whether a run with these loader options computed what the cell printed (no options known: any)."""
    return not run_options or all(run_options.get(k) == v for k, v in cell.bench_options().items())


def signature_options(signature: str) -> tuple[tuple[str, str], ...]:
    """The ``key:value`` fields of a benchmark signature (the run's loader options among them)."""
    return tuple((k, v) for k, _, v in (kv.partition(":") for kv in signature.split("|") if ":" in kv))


def published_cell(benchmark: str, metric: str, statistic: str, signature: str = "") -> Cell | None:
    """The :class:`Cell` whose value :func:`published` gives (its comparability reason with it), or None."""
    return _best(benchmark, metric, statistic, signature_options(signature))


def published(benchmark: str, metric: str, statistic: str, signature: str = "") -> tuple[float, str] | None:
    """``(value x100, source)`` published for this benchmark, metric and statistic, or None.

    The metric's own paper wins; otherwise the first of PAC-S++, HICE-S, BRIDGE, PAC-S, VisCE2,
    Polos, DENEB, Pearl, EXPERT, CAPTURE, CapArena, VELA (they copy each other's baseline rows); within a paper its
    comparison tables win over a table that repeats them. Backbone and ablation tables are not used.
    ``signature``: the run's benchmark signature; a cell whose loader options (LongCap-Arena's
    split and perspective, Nebula's scores) differ from the run's is not its published value."""
    c = published_cell(benchmark, metric, statistic, signature)
    return None if c is None else (c.x100, c.source)


# the former hand table's view: {(benchmark, metric, statistic): (value, source)}
class _View(dict):
    def __missing__(self, key: tuple[str, str, str]) -> tuple[float, str]:
        found = published(*key)
        if found is None:
            raise KeyError(key)
        return found


PUBLISHED: dict[tuple[str, str, str], tuple[float, str]] = _View()


def fixed(value: float, digits: int = 2, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals, never ``-0.00`` (a value that rounds to zero has no sign)."""
    text = f"{value:{'+' if signed else ''}.{digits}f}"
    return f"{0.0:.{digits}f}" if float(text) == 0 else text
