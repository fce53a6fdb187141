"""``capeval report RESULT.json --html OUT.html``: the HTML report of a saved ``bench`` or
``reproduce`` run, rendered from its JSON without recomputing anything (the same bytes as the
run's own ``--html``)."""

from __future__ import annotations

import argparse
from typing import Any

from capeval.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="render the HTML report of a saved bench, reproduce or score JSON (no recomputing)",
                       description="Render the HTML report of a `capeval bench --out` or `capeval reproduce --out` "
                       "JSON file, byte for byte what the run's --html wrote, without scoring anything again; of a "
                       "`capeval score --out` JSON (with --per-item), the per-item explorer.")
    p.add_argument("result", metavar="RESULT.json", help="the JSON written by bench/reproduce --out (or --json)")
    p.add_argument("--html", metavar="OUT.html", nargs="?", const="",
                   help="the HTML file to write (default, or --html alone: RESULT.html beside the JSON)")
    from capeval.explorer.saved import add_arguments

    add_arguments(p)  # a saved `capeval score` result: the per-item explorer (docs/explorer.md)
    p.set_defaults(func=run)


def _read(path: str) -> Any:
    """The saved JSON, bounded as every input is (size, nesting depth, integer length; a key
    twice in one object refused): a one-line error when it is not such JSON."""
    from pathlib import Path

    from capeval.io.reading import read_json

    return read_json(Path(path))


def render(data: Any, html_path: str) -> str:
    """The report of a saved run: ``bench`` (an object with ``results``) or ``reproduce``
    (an object with ``cells``, or the bare list of cells older versions printed)."""
    from capeval.cli.bench import html_folder

    # the file may come from anyone: its fields' types are checked (one line naming the field)
    # before anything is rendered, and the renderers escape every value
    if isinstance(data, dict) and "results" in data and "benchmarks" in data:
        from capeval.bench.report import check_saved, render_html
        from capeval.bench.runner import BenchRun

        check_saved(data)
        return render_html(BenchRun.from_dict(data), html_folder(html_path))
    if (isinstance(data, dict) and "cells" in data) or isinstance(data, list):
        from capeval.bench.reproduce import from_payload
        from capeval.bench.reproduce_html import check_payload, html_report

        check_payload(data)
        return html_report(*from_payload(data))
    raise InputError("RESULT.json is neither a `capeval bench` result (results, benchmarks) nor a `capeval "
                     "reproduce` one (cells)")


def run(args: argparse.Namespace) -> int:
    import os

    from capeval.cli.score import check_outputs
    from capeval.io.atomic import atomic_write_text

    html = args.html or os.path.splitext(args.result)[0] + ".html"
    check_outputs({"--html": html}, [args.result])
    data = _read(args.result)
    from capeval.explorer.saved import is_score_result, refuse_options, write_saved_page

    if is_score_result(data):
        write_saved_page(args, data, html, check_outputs)
        return 0
    refuse_options(args)
    try:
        text = render(data, html)
    except InputError as exc:
        raise InputError(f"RESULT.json {args.result}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"RESULT.json {args.result}: not a saved bench/reproduce run ({type(exc).__name__}: "
                         f"{exc})") from None
    try:
        atomic_write_text(html, text)
    except OSError as exc:
        raise InputError(f"cannot write {html}: {exc.strerror or exc}") from None
    print(html)
    return 0
