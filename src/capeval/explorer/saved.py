"""``capeval report RESULT.json --html``: the explorer of a saved ``capeval score`` run.

``capeval score --out RESULT.json`` keeps the summary (system scores, signatures, the inputs'
paths); the per-item scores are in the ``--per-item`` file and the explanations in the
``--per-item-extras`` file, which the page needs too. The captions are read again from the
inputs the summary names (``inputs.candidates.path`` ..., as the run saw them: relative to the
folder it ran in) unless ``-c`` / ``-r`` / ``--items`` name them. Everything read is checked
(one line naming the file and field) before the page is written.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capeval.errors import InputError

#: the options that only a saved score result takes
OPTIONS = ("per_item", "per_item_extras", "candidates", "references", "items", "images", "html_images")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``capeval report`` for a saved ``capeval score`` result."""
    g = p.add_argument_group("a saved capeval score result (score --out RESULT.json): the per-item explorer")
    g.add_argument("--per-item", metavar="FILE", help="the run's --per-item scores (needed for a score result)")
    g.add_argument("--per-item-extras", metavar="FILE", help="the run's --per-item-extras (marked words, answers)")
    g.add_argument("--candidates", "-c", help="the candidates (default: the path RESULT.json names)")
    g.add_argument("--references", "-r", help="the references (default: the path RESULT.json names)")
    g.add_argument("--items", action="append", metavar="FILE", help="an item table (default: those RESULT.json names); "
                   "repeat for several")
    g.add_argument("--images", help="folder of images named <id>.<ext>, for thumbnails")
    g.add_argument("--html-images", choices=("embed", "link", "none"), help="thumbnails: embedded (default with "
                   "--images), files linked beside the page, or none")


def is_score_result(data: Any) -> bool:
    """Whether ``data`` is what ``capeval score --out`` wrote (scores, signatures, results)."""
    return isinstance(data, dict) and {"scores", "signatures", "results"} <= set(data)


def refuse_options(args: argparse.Namespace) -> None:
    """The score-result options given for a bench or reproduce result: an error, not ignored."""
    for name in OPTIONS:
        if getattr(args, name, None):
            raise InputError(f"--{name.replace('_', '-')} is for a saved capeval score result; RESULT.json is a "
                             "bench or reproduce result")


@dataclass
class SavedResult:
    """One metric of a saved run, shaped as :class:`capeval.result.MetricResult` for the page."""

    metric: str
    system: Any
    items: Mapping[str, Any]
    signature: str
    extras: Mapping[str, Any] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()
    item_extras: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def per_item_extras(self) -> Mapping[str, Mapping[str, Any]]:
        return self.item_extras


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def results_of(data: dict[str, Any], per_item: Any, extras: Any, where: tuple[str, str, str]) -> list[SavedResult]:
    """The saved results with their per-item scores (``{metric: {id: score}}``, numbers or null)
    and extras (``{metric: {name: {id: value}}}``), checked."""
    result_file, item_file, extras_file = where
    items = _mapping(per_item, item_file)
    more = _mapping(extras, extras_file) if extras is not None else {}
    out = []
    for k, r in enumerate(data["results"] if isinstance(data["results"], list) else []):
        r = _mapping(r, f"{result_file}: results[{k}]")
        metric = r.get("metric")
        if not isinstance(metric, str):
            raise InputError(f"{result_file}: results[{k}].metric: expected a metric name")
        if metric not in items:
            raise InputError(f"{item_file}: no per-item scores of {metric} (is it the --per-item file of this run?)")
        scores = _mapping(items[metric], f"{item_file}: {metric}")
        for i, v in scores.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise InputError(f"{item_file}: {metric}: item {i!r}: expected a number or null")
        named = _mapping(more.get(metric, {}), f"{extras_file}: {metric}")
        for name, v in named.items():
            _mapping(v, f"{extras_file}: {metric}.{name}")
        skipped = r.get("skipped", [])
        system = r.get("system")
        out.append(SavedResult(metric, system if isinstance(system, (int, float)) else math.nan, scores,
                               str(r.get("signature", "")), _mapping(r.get("extras", {}), f"{result_file}: {metric}"),
                               tuple(str(s) for s in skipped) if isinstance(skipped, list) else (), named))
    if not out:
        raise InputError(f"{result_file}: no results")
    return out


def write_saved_page(args: argparse.Namespace, data: dict[str, Any], html: str, check_outputs: Any) -> int:
    """Write the explorer of the saved score result ``data`` to ``html`` (``check_outputs``: the
    CLI's check that an output is writable and no input); print where it went."""
    from capeval.explorer.cli import check_score_args, score_meta, texts
    from capeval.explorer.data import score_rows
    from capeval.explorer.page import write_page
    from capeval.explorer.thumbs import make
    from capeval.io.reading import read_json

    if not args.per_item:
        raise InputError(f"RESULT.json {args.result} is a capeval score result: give its per-item scores with "
                         "--per-item FILE (score --per-item wrote them)")
    inputs = data.get("inputs") if isinstance(data.get("inputs"), dict) else {}

    def saved(kind: str) -> Any:
        entry = inputs.get(kind)
        return entry.get("paths" if kind == "items" else "path") if isinstance(entry, dict) else None

    run = argparse.Namespace(items=args.items or (None if args.candidates else saved("items")),
                             candidates=args.candidates or saved("candidates"),
                             references=args.references or saved("references"), images=args.images,
                             html_images=args.html_images, html=html, quiet=False)
    if not run.items and not run.candidates:
        raise InputError(f"RESULT.json {args.result} names no candidates file; give -c FILE")
    for name in (run.candidates, run.references, *(run.items or [])):
        if name is not None and (not isinstance(name, str) or not Path(name).exists()):
            raise InputError(f"RESULT.json {args.result}: input {name!r} not found (run report where score ran, or "
                             "give -c/-r/--items)")
    check_score_args(run)
    check_outputs({"--html": html}, [args.result, args.per_item, args.per_item_extras, run.candidates, run.references])
    extras = read_json(Path(args.per_item_extras)) if args.per_item_extras else None
    results = results_of(data, read_json(Path(args.per_item)), extras,
                         (str(args.result), str(args.per_item), str(args.per_item_extras)))
    rows, images = texts(run)
    ids = list(dict.fromkeys(i for r in results for i in (*r.items, *r.skipped)))
    thumbs = make(run.html_images, images, ids, html)
    meta = score_meta(results, thumbs is not None, [f"Saved result {Path(args.result).name}, {len(results)} metrics."])
    try:
        n = write_page(html, f"capeval score: {Path(str(run.candidates or run.items[0])).name}", meta,
                       score_rows(rows, results, thumbs))
    except OSError as exc:
        raise InputError(f"cannot write {html}: {exc.strerror or exc}") from None
    print(html)
    return n
