"""``capeval bench``: meta-evaluate metrics against human judgments on registered benchmarks."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from capeval.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="correlate metrics with human judgments on benchmarks",
        description="Score benchmark captions with metrics and report the literature's statistics "
        "(Kendall tau, accuracy, Pearson; x100) with bootstrap confidence intervals and paired tests.",
    )
    p.add_argument("benchmarks", nargs="*", metavar="BENCH", help="benchmark names (see --list)")
    p.add_argument("--metrics", "-m", nargs="+", default=None, help="metric names/presets (space or comma separated, or repeated)")
    p.add_argument("--data-root", help="folder with the benchmark files (default: $CAPEVAL_DATA)")
    p.add_argument("--images", help="folder with the benchmark images (image-conditioned metrics)")
    p.add_argument("--videos", help="folder with the benchmark videos (video metrics)")
    p.add_argument("--out", "-o", metavar="OUT.json", help="write the results as JSON (atomically)")
    p.add_argument("--html", metavar="OUT.html", nargs="?", const="", help="write a self-contained HTML report "
                   "(--html alone: beside --out, OUT.html, else bench.html); `capeval report OUT.json --html` "
                   "renders it again from the JSON")
    p.add_argument("--json", action="store_true", help="print the results as JSON (what --out writes) instead of "
                   "the tables, so that stdout can be redirected to a .json file")
    p.add_argument("--seed", type=int, default=0, help="seed of reference draws and bootstrap (default 0)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for CIs and paired tests (0: none)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument(
        "--bench-option",
        "-B",
        action="append",
        default=[],
        metavar="BENCH.KEY=VALUE",
        help="loader option, e.g. pascal-50s.refs=fixed or pascal-50s.draws=5; repeatable",
    )
    p.add_argument("--option", "-O", action="append", default=[], metavar="METRIC.KEY=VALUE", help="metric option (as in score)")
    p.add_argument("--no-verify-media", action="store_true", help="do not check image MD5 sums")
    p.add_argument("--explain", metavar="DIR", help="metrics that explain their scores (hice-s, ref-hice-s) write "
                   "their worst-scored items' explanations into DIR; the HTML report links them")
    p.add_argument("--explain-worst", type=int, default=10, metavar="N", help="items explained per metric and "
                   "setting with --explain (default 10)")
    p.add_argument("--list", action="store_true", help="list the registered benchmarks, whether their files are in the data folder, and exit")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress (neither the bar on a terminal nor the lines elsewhere)")
    p.set_defaults(func=run)


def default_html(html: str | None, out: str | None, name: str) -> str | None:
    """``--html`` given alone (``""``): ``OUT.html`` beside ``--out OUT.json``, else ``name`` here."""
    if html != "":
        return html
    if out:
        import os

        return os.path.splitext(out)[0] + ".html"
    return name


def html_folder(html: str) -> str:
    """The report's folder: links in it (explanations) are relative to it."""
    import os

    return os.path.dirname(os.path.abspath(html))


def _list(data_root: str | None) -> int:
    from capeval.bench import benchmarks
    from capeval.bench.data_download import present
    from capeval.paths import data_home
    from capeval.bench.sources import SOURCES

    root = data_root or str(data_home())
    for name, b in benchmarks().items():
        if name in SOURCES:
            state = "present" if present(name, root) else f"missing: capeval download {name}"
        else:
            state = "no download source"
        sys.stdout.write(f"{name:18} {b.title} [{b.modality}] ({state})\n    {b.citation}\n")
    sys.stdout.write(f"data folder: {root} (--data-root, or CAPEVAL_DATA; default <capeval cache>/data)\n")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args.data_root)
    if not args.benchmarks:
        raise InputError("name at least one benchmark (capeval bench --list shows them)")
    if not args.metrics:
        raise InputError("--metrics is required, e.g. --metrics coco")
    from capeval.options import check_options
    from capeval.bench import run as bench_run
    from capeval.bench.report import render_html
    from capeval.cli.score import check_outputs, parse_options
    from capeval.io.atomic import atomic_write_many
    from capeval.progress import progress_setting

    from capeval.bench.base import check_loader_options
    from capeval.bench.runner import check_bench_settings, expand_benchmarks

    # every setting before any loading or scoring, in the flags' words
    for flag, key, value in (("--confidence", "confidence", args.confidence), ("--bootstrap", "bootstrap", args.bootstrap),
                             ("--seed", "seed", args.seed), ("--explain-worst", "explain_worst", args.explain_worst)):
        try:
            check_bench_settings(**{key: value})
        except InputError as exc:
            raise InputError(f"{flag} {value} {str(exc).split(' ', 1)[1]}") from None
    bench_options = parse_options(args.bench_option, "BENCH") if args.bench_option else {}
    check_loader_options(expand_benchmarks(args.benchmarks), bench_options)
    names, options = check_options(args.metrics, parse_options(args.option), strict=True)
    args.html = default_html(args.html, args.out, "bench.html")
    check_outputs({"--out": args.out, "--html": args.html}, [])
    if args.explain:
        from capeval import registry
        from capeval.options import option_types

        if not any(registry.get(n).media and "explain_dir" in (option_types(registry.get(n)) or {}) for n in names):
            raise InputError(f"--explain: none of the metrics {', '.join(names)} explains its scores "
                             "(hice-s and ref-hice-s do)")
    # progress on stderr: a bar on a terminal, a line every few seconds elsewhere; --quiet: none
    progress = False if args.quiet else True
    with progress_setting(progress):
        result = bench_run(
            args.benchmarks,
            names,
            data_root=args.data_root,
            images=args.images,
            videos=args.videos,
            seed=args.seed,
            bootstrap=args.bootstrap,
            confidence=args.confidence,
            options=options,
            bench_options=bench_options,
            verify_media=not args.no_verify_media,
            progress=progress,
            explain=args.explain,
            explain_worst=args.explain_worst,
        )
    from capeval.bench.beside import beside, table

    payload: dict[str, Any] = result.to_dict()
    published = beside(result)
    if published:
        payload["published"] = published
    outputs = []
    text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    if args.out:
        outputs.append((args.out, text))
    if args.html:
        from capeval.bench.runner import BenchRun

        # rendered from the JSON written beside it: `capeval report` gives the same bytes from the file
        outputs.append((args.html, render_html(BenchRun.from_dict(json.loads(text)), html_folder(args.html))))
    if outputs:
        try:
            atomic_write_many(outputs)
        except OSError as exc:
            raise InputError(f"cannot write {exc.filename or 'the output files'}: {exc.strerror or exc}") from None
    # stdout holds one thing, so that `capeval bench ... > file` is either the tables or JSON
    if args.json:
        sys.stdout.write(text)
        return 0
    sys.stdout.write(result.table() + "\n")
    if published:
        sys.stdout.write("\n" + table(published) + "\n")
    return 0

