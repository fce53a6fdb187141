"""``capeval reproduce``: every published number of the registry beside capeval's own.

For each cell of :mod:`capeval.bench.published` (paper, table, benchmark, metric, statistic)
decide first, without loading anything, whether it can run here: the metric exists in
capeval, the row is the metric's default configuration (backbone/ablation rows are not run),
``capeval bench`` computes that statistic, the media and weights are present (weights from
the checkpoint table, never downloaded). Then each benchmark is run ONCE with the union of
its runnable metrics over all selected papers (one :func:`capeval.bench.run` call: the
benchmark is loaded once and each metric group scored by one Evaluator), and every cell
gets ours, its bootstrap CI, the difference and a status: ``reproduced`` (within the
tolerance of ``data/published/tolerances.csv``), ``differs``, ``not comparable: <reason>`` (a
number made with another implementation or protocol, ``data/published/comparability.csv``:
ours is shown beside it, whatever the difference), or ``not run: <what is missing>`` (for
the scores a paper reports for its systems, AMBER's, ``not run: model outputs``: the
systems' responses are not published; score them with ``capeval score``).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from capeval import registry
from capeval.bench import published as pub
from capeval.errors import CapevalError, InputError

# the statistics ``capeval bench`` reports per benchmark (see the loaders' ``statistics``)
_STATS = {
    "flickr8k-expert": r"kendall_tau_[bc]",
    "flickr8k-cf": r"kendall_tau_[bc]",
    "composite": r"kendall_tau_[bc]",
    "pascal-50s": r"accuracy_(HC|HI|HM|MM|mean)",
    "foil": r"accuracy_[14]ref",
    "thumb": r"pearson_(P|R|total)(_no_human)?",
    "vatex-eval": r"(kendall_tau_b|spearman)_refs[019]",
    "activitynet-foil": r"accuracy_(no)?refs",
    "polaris": r"kendall_tau_[bc]",
    "nebula": r"kendall_tau_[bc]",
    "detailcaps": r"pcc|one_minus_r2|kendall_tau_b|sample_tau",
    "caparena": r"agreement(_level_[1-4])?|spearman_models|kendall_models",
    "longcap-arena": r"kendall_tau_[bc]",
}

# checkpoints of the checkpoint table each learned metric loads by default (registry defaults).
# A hand list: MetricSpec has no field naming the checkpoints a metric loads (the CLIP backbones
# are scorer defaults, Polos's and MID's sit in registry_baselines.BASELINE_DEFAULTS, the judges'
# models are options), and registry.py is at its size limit; tests/test_reproduce.py keeps both
# lists complete against the registry and the checkpoint table.
_WEIGHTS = {
    "clip-s": ("openai/ViT-B-32",), "ref-clip-s": ("openai/ViT-B-32",),
    "emscore": ("openai/ViT-B-32",), "ref-emscore": ("openai/ViT-B-32",),
    "pac-s": ("pac-s/ViT-B-32", "openai/ViT-B-32"), "ref-pac-s": ("pac-s/ViT-B-32", "openai/ViT-B-32"),
    "pac-s-video": ("pac-s/ViT-B-32", "openai/ViT-B-32"), "ref-pac-s-video": ("pac-s/ViT-B-32", "openai/ViT-B-32"),
    "pac-s++": ("pac-s++/ViT-B-32", "openai/ViT-B-32"), "ref-pac-s++": ("pac-s++/ViT-B-32", "openai/ViT-B-32"),
    "hice-s": ("alpha-clip/ViT-L-14-grit20m", "openai/ViT-L-14", "factual/flan-t5-base-VG-factual-sg"),
    "ref-hice-s": ("alpha-clip/ViT-L-14-grit20m", "openai/ViT-L-14", "factual/flan-t5-base-VG-factual-sg"),
    "bertscore": ("bertscore/roberta-large",),
    "bertscore++": ("bertscore++/bert-base-uncased", "bertscore++/stop-words"),
    "mid": ("openai/ViT-B-32",),
    "polos": ("polos/reprod", "polos/sup-simcse-roberta-base", "openai/ViT-B-32"),
}
# learned metrics whose weights are not in the checkpoint table (what the user must provide)
_OTHER_WEIGHTS = {
    "bridge": "bridge checkpoint (checkpoint=PATH; `capeval train bridge`)",
    "visce2": "the LLaVA VLM of visce2", "visce2-vanilla": "the LLaVA VLM of visce2",
    "visce2-ref": "the LLaVA VLM of visce2", "visce2-desc": "the LLaVA VLM of visce2",
    "clair": "an LLM server (clair)", "fleur": "the LLaVA VLM of fleur", "ref-fleur": "the LLaVA VLM of fleur",
    "expert": "EXPERT's LLaVA LoRA, converted (docs/judges.md)",
    **{f"autodq-{m}": "an LLM server (autodq)" for m in ("f1", "recall", "precision")},
    **{f"capability-{m}": "an LLM server (capability)" for m in ("precision", "recall", "f1", "hit")},
    "vdcscore": "an LLM server and VDC's questions (vdcscore)", "vdcscore-acc": "an LLM server and VDC's questions (vdcscore)",
    "capture": "the FACTUAL parser and Sentence-BERT all-mpnet-base-v2 (capture)",
    **{f"amber-{m}": "NLTK's averaged perceptron tagger and spaCy's en_core_web_lg (amber)"
       for m in ("chair", "cover", "hal", "cog")},
    "vela": "the VELA authors' package and checkpoint (docs/metrics/vela.md)",
    "aloha": "an LLM server, Sentence-BERT all-mpnet-base-v2 and spaCy en_core_web_lg (aloha)",
}


@dataclass
class Outcome:
    """One published cell and what capeval made of it (x100 numbers)."""

    paper: str
    table: str
    benchmark: str
    metric: str
    variant: str
    statistic: str
    published: float
    ours: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    difference: float | None = None
    tolerance: float | None = None
    status: str = ""
    source: str = ""
    protocol: str = ""
    not_comparable: str = ""  # the registry's reason, when the published number is no target for ours
    options: str = ""  # the benchmark loader options of the cell's protocol ("key=value;...")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Outcome":
        """A cell saved by :meth:`to_dict` (``capeval reproduce --out``)."""
        return cls(**data)


def to_payload(outcomes: Sequence[Outcome], config: Mapping[str, Any]) -> dict[str, Any]:
    """What ``capeval reproduce --out`` / ``--json`` writes: ``{"config": ..., "cells": [...]}``."""
    return {"config": dict(config), "cells": [o.to_dict() for o in outcomes]}


def from_payload(data: Any) -> tuple[list[Outcome], dict[str, Any]]:
    """``(outcomes, config)`` of a saved reproduce JSON (a bare list of cells: capeval < 0.x, no config)."""
    if isinstance(data, list):
        return [Outcome.from_dict(d) for d in data], {}
    return [Outcome.from_dict(d) for d in data["cells"]], dict(data.get("config", {}))


def kind(metric: str) -> str:
    """``text`` for metrics computed from the strings alone without weights, else ``learned``."""
    spec = registry.get(metric)
    text = spec.extra in (None, "meteor", "spice") and metric not in _WEIGHTS and metric not in _OTHER_WEIGHTS
    return "text" if text and not {"images", "videos"} & set(spec.needs) else "learned"


# metrics that run their authors' package (it loads its own weights): runnable where it imports
_PACKAGES = {"vela": ("vela", "dataloader.vela_collate_fn")}


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_weights(metric: str, directory: str | os.PathLike[str] | None = None) -> str | None:
    """What weights ``metric`` lacks here (checked in the checkpoint cache, nothing downloaded)."""
    if metric in _OTHER_WEIGHTS:
        packages = _PACKAGES.get(metric, ())
        return None if packages and all(_importable(p) for p in packages) else _OTHER_WEIGHTS[metric]
    from capeval.models.clip.checkpoints import CHECKPOINTS

    for name in _WEIGHTS.get(metric, ()):
        ck = CHECKPOINTS.get(name)
        if ck is not None and not ck.present(directory):
            return name
    return None


def _blocker(cell: pub.Cell, known: set[str], images: Any, videos: Any, checkpoints: Any) -> str | None:
    if cell.outputs:  # a system's score (AMBER): its outputs are not published
        return f"not run: model outputs ({cell.outputs})"
    if cell.metric not in known:
        return f"not run: metric capeval does not have ({cell.metric})"
    if not cell.main:
        return f"not run: variant ({cell.variant or 'ablation'}; capeval runs the default configuration)"
    pattern = _STATS.get(cell.benchmark)
    if pattern is None or not re.fullmatch(pattern, cell.statistic):
        return f"not run: statistic {cell.statistic} is not computed by capeval bench on {cell.benchmark}"
    lacking = missing_weights(cell.metric, checkpoints)
    if lacking:  # first: without weights the media would not help
        return f"not run: weights ({lacking})"
    needs = registry.get(cell.metric).needs
    if "images" in needs and images is None:
        return "not run: images (--images DIR)"
    if "videos" in needs and videos is None:
        return "not run: videos (--videos DIR)"
    return None


def reproduce(
    papers: Sequence[str] | None = None,
    table: str | None = None,
    data_root: str | os.PathLike[str] | None = None,
    *,
    images: str | os.PathLike[str] | None = None,
    videos: str | os.PathLike[str] | None = None,
    seed: int = 0,
    bootstrap: int = 1000,
    checkpoints: str | os.PathLike[str] | None = None,
    runner: Callable[..., Any] | None = None,
    progress: bool | None = False,
) -> list[Outcome]:
    """Run every runnable cell of ``papers`` (all of the registry by default), optionally of one ``table``.

    ``runner``: :func:`capeval.bench.run` (replaceable in tests). Benchmarks whose data is
    missing make their cells ``not run: data (...)`` instead of failing the whole command."""
    papers = list(papers or pub.PAPERS)
    for p in papers:
        if p not in pub.PAPERS:
            raise InputError(f"unknown paper {p!r}; choose from {', '.join(pub.PAPERS)}")
    cells = pub.select(papers, table)
    if not cells:
        where = f" table {table}" if table else ""
        raise InputError(f"no published values stored for {', '.join(papers)}{where}; tables: "
                         + ", ".join(sorted({f'{p} {t}' for p, t in pub.tables() if p in papers})))
    if runner is None:
        from capeval.bench import run as runner
    known = set(registry.metrics())
    outcomes = []
    # one run per benchmark and protocol (loader options: e.g. Nebula's original or corrected scores)
    todo: dict[tuple[str, str], set[str]] = {}
    runs: list[tuple[str, str]] = []
    for c in cells:
        o = Outcome(c.paper, c.table, c.benchmark, c.metric, c.variant, c.statistic, c.x100, tolerance=cell_tolerance(c),
                    source=c.source, protocol=c.protocol, not_comparable=c.not_comparable, options=c.options)
        o.status = _blocker(c, known, images, videos, checkpoints) or ""
        runs.append((c.benchmark, c.options))
        if not o.status:
            todo.setdefault((c.benchmark, c.options), set()).add(c.metric)
        outcomes.append(o)
    records: dict[tuple[str, str, str, str], Any] = {}
    failed: dict[tuple[str, str], str] = {}
    from capeval.progress import make_progress

    with make_progress(len(todo), "reproduce", progress) as bar:
        for (bench, opts), metrics in todo.items():
            bar.desc = f"reproduce {bench}{' ' + opts if opts else ''}"
            extra = {"bench_options": {bench: pub.parse_options(opts)}} if opts else {}
            try:
                result = runner([bench], sorted(metrics), data_root, images=images, videos=videos, seed=seed,
                                bootstrap=bootstrap, progress=progress, **extra)
            except CapevalError as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                first = first.split(" (looked ")[0]  # the loader's search paths ("looked for ..."): too long for a cell
                failed[(bench, opts)] = first if len(first) <= 120 else first[:117] + "..."
                continue
            finally:
                bar.update(1)
            for r in result:
                records[(r.benchmark, opts, r.metric, r.statistic)] = r
    for c, o, run_key in zip(cells, outcomes, runs):
        if o.status:
            continue
        if run_key in failed:
            o.status = f"not run: data ({failed[run_key]})"
            continue
        r = records.get((o.benchmark, run_key[1], o.metric, o.statistic))
        # the one rule of the vocabulary, shared with capeval bench's tables, HTML and JSON
        found = verdict(c, None if r is None else r.value)
        o.status, o.difference = found.status, found.difference
        if found.difference is not None and r is not None:
            o.ours, o.ci_low, o.ci_high = float(r.value), r.ci_low, r.ci_high
    return outcomes


#: the status of a cell whose benchmark ran but gave no number for it (NaN)
NO_VALUE = "not run: no value (the benchmark gave none for this metric)"


def cell_tolerance(cell: pub.Cell) -> float | None:
    """How far (x100) capeval's value may be from the cell's: ``tolerances.csv`` for its benchmark
    and the metric's kind; None for a metric capeval does not have."""
    if cell.metric not in registry.metrics():
        return None
    return pub.tolerance(cell.benchmark, kind(cell.metric))[0]


@dataclass(frozen=True)
class Verdict:
    """What a published cell says beside capeval's value: the status text of :func:`reproduce`,
    the difference (ours - published, x100; None without a value) and the tolerance."""

    status: str
    difference: float | None
    tolerance: float | None

    @property
    def word(self) -> str:
        """The status without its reason: ``reproduced``, ``differs``, ``not comparable``, ``not run``."""
        return self.status.split(": ", 1)[0]

    @property
    def reason(self) -> str:
        """What follows ``not comparable: `` / ``not run: `` (empty for the two-word statuses)."""
        return self.status.split(": ", 1)[1] if ": " in self.status else ""


def verdict(cell: pub.Cell, ours: float | None) -> Verdict:
    """The status of one published ``cell`` beside capeval's value ``ours`` (x100; None or NaN:
    the run gave none): ``not comparable: <reason>`` for a cell of ``comparability.csv`` whatever
    the difference, else ``reproduced`` within the tolerance (:func:`cell_tolerance`, none: 0) and
    ``differs`` outside it; ``not run: no value (...)`` without a value. The one place where the
    vocabulary is decided: :func:`reproduce` and ``capeval bench`` (its terminal table, HTML and
    JSON, :func:`capeval.bench.beside.beside`) both call it, so they say the same of a cell."""
    tol = cell_tolerance(cell)
    if ours is None or math.isnan(ours):
        return Verdict(NO_VALUE, None, tol)
    difference = round(float(ours) - cell.x100, 6)
    if cell.not_comparable:
        status = f"not comparable: {cell.not_comparable}"
    else:
        status = "reproduced" if abs(difference) <= (tol or 0.0) + 1e-9 else "differs"
    return Verdict(status, difference, tol)


#: the statuses :func:`reproduce` gives: two words, or a prefix followed by the reason
STATUSES = ("reproduced", "differs")
STATUS_PREFIXES = ("not comparable: ", "not run: ")


def known_status(status: str) -> bool:
    """Whether ``status`` is one this version gives (a saved JSON from another version, or an
    edited one, may hold others: they are shown as they are and counted apart)."""
    return status in STATUSES or any(status.startswith(p) and status[len(p):].strip() for p in STATUS_PREFIXES)


def summary(outcomes: Iterable[Outcome]) -> str:
    """``N reproduced, M differ, C not comparable, K not run`` with the reasons of the not-run
    cells counted (``not comparable`` only when there are such cells; cells of a status this
    version does not know, from a saved JSON, are counted as ``U of another status``)."""
    outcomes = list(outcomes)
    rep = sum(o.status == "reproduced" for o in outcomes)
    dif = sum(o.status == "differs" for o in outcomes)
    nc = sum(known_status(o.status) and o.status.startswith("not comparable") for o in outcomes)
    other = sum(not known_status(o.status) for o in outcomes)
    why: dict[str, int] = {}
    for o in outcomes:
        if known_status(o.status) and o.status.startswith("not run"):
            reason = o.status.split(": ", 1)[1].split(" (")[0]
            if reason.startswith("statistic "):  # one count for every statistic bench lacks
                reason = "statistic"
            why[reason] = why.get(reason, 0) + 1
    tail = ", ".join(f"{n} {k}" for k, n in sorted(why.items(), key=lambda kv: -kv[1]))
    return (f"{len(outcomes)} published cells: {rep} reproduced, {dif} differ, "
            + (f"{nc} not comparable, " if nc else "")
            + f"{len(outcomes) - rep - dif - nc - other} not run" + (f" ({tail})" if tail else "")
            + (f", {other} of another status" if other else ""))


HEAD = ("paper", "table", "benchmark", "metric", "statistic", "published", "ours", "95% CI", "diff", "tol",
         "status")


def cells(o: Outcome) -> tuple[str, ...]:
    ci = "" if o.ci_low is None or o.ci_high is None else f"[{pub.fixed(o.ci_low)}, {pub.fixed(o.ci_high)}]"
    # the loader options tell apart cells of one benchmark (LongCap-Arena's test sets and perspectives)
    bench = f"{o.benchmark} ({o.options.replace(';', ' ')})" if o.options else o.benchmark
    return (o.paper, o.table, bench, o.metric, o.statistic, f"{o.published:.1f}",
            "" if o.ours is None else pub.fixed(o.ours), ci,
            "" if o.difference is None else pub.fixed(o.difference, signed=True),
            "" if o.tolerance is None else f"{o.tolerance:g}", o.status)


def text_table(outcomes: Sequence[Outcome]) -> str:
    """The outcomes as an aligned plain-text table plus the summary line."""
    rows = [HEAD] + [cells(o) for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
    lines = []
    for k, row in enumerate(rows):
        lines.append("  ".join(c.rjust(w) if 5 <= i <= 9 else c.ljust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines + ["", summary(outcomes)])
