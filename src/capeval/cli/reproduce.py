"""``capeval reproduce``: the papers' published numbers beside capeval's own, cell by cell."""

from __future__ import annotations

import argparse
import json
import sys

from capeval.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce",
        help="run every published number of the registry's papers that the local data allow",
        description="For every human-correlation and accuracy value the papers print (the registry "
        "capeval/data/published/), run the benchmark with the metric where data, media and weights are "
        "here, and print published, ours (95% bootstrap CI), difference, tolerance and status "
        "(reproduced, differs, not comparable: <why the printed number was made otherwise>, "
        "not run: <what is missing>).",
    )
    p.add_argument("papers", nargs="*", metavar="PAPER", help="pac-s, pac-s++, hice-s, bridge, visce2, polos, deneb, pearl, expert, capture, caparena, "
                   "amber, vela, vdc, tarsier, capability (default: all)")
    p.add_argument("--table", "-t", help="only this table of the paper(s), e.g. 1 or poster-3")
    p.add_argument("--data-root", help="folder with the benchmark files (default: $CAPEVAL_DATA)")
    p.add_argument("--images", help="folder with the benchmark images (image-conditioned metrics)")
    p.add_argument("--videos", help="folder with the benchmark videos (video metrics)")
    p.add_argument("--checkpoints", help="checkpoint folder (default: $CAPEVAL_CHECKPOINTS or the cache)")
    p.add_argument("--seed", type=int, default=0, help="seed of reference draws and bootstrap, 0 to 2**32-1 (default 0)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the CIs, 0 to 100000 "
                   "(0: none; default 1000)")
    p.add_argument("--json", action="store_true", help="print the JSON that --out writes ({config, cells}: one "
                   "record per cell) instead of the table")
    p.add_argument("--out", "-o", metavar="OUT.json", help="write the results as JSON (atomically)")
    p.add_argument("--html", metavar="FILE", nargs="?", const="", help="write the table as a self-contained HTML "
                   "report (atomically; --html alone: beside --out, else reproduce.html); `capeval report OUT.json "
                   "--html` renders it again from the JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress (neither the bar on a terminal nor the lines elsewhere)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from capeval.bench import published as pub
    from capeval.bench.reproduce import from_payload, reproduce, text_table, to_payload
    from capeval.progress import progress_setting

    if not 0 <= args.seed < 2**32:
        raise InputError(f"--seed must be in [0, 2**32), got {args.seed}")
    if not 0 <= args.bootstrap <= 100_000:
        raise InputError(f"--bootstrap must be in [0, 100000], got {args.bootstrap}")
    for p in args.papers:
        if p not in pub.PAPERS:
            raise InputError(f"unknown paper {p!r}; choose from {', '.join(pub.PAPERS)}")
    from capeval.cli.bench import default_html

    args.html = default_html(args.html, args.out, "reproduce.html")
    if args.html or args.out:
        from capeval.cli.score import check_outputs

        check_outputs({"--out": args.out, "--html": args.html}, [])
    # progress on stderr: a bar on a terminal, a line every few seconds elsewhere; --quiet: none
    progress = False if args.quiet or args.json else True
    with progress_setting(progress):
        outcomes = reproduce(args.papers or None, args.table, args.data_root, images=args.images,
                             videos=args.videos, seed=args.seed, bootstrap=args.bootstrap,
                             checkpoints=args.checkpoints, progress=progress)
    from capeval.bench.runner import provenance

    config = {"papers": args.papers or list(pub.PAPERS), "table": args.table, "seed": args.seed,
              "bootstrap": args.bootstrap, **provenance()}
    text = json.dumps(to_payload(outcomes, config), indent=2, ensure_ascii=False) + "\n"
    outputs = [(args.out, text)] if args.out else []
    if args.html:
        from capeval.bench.reproduce_html import html_report

        # rendered from the JSON written beside it: `capeval report` gives the same bytes from the file
        outputs.append((args.html, html_report(*from_payload(json.loads(text)))))
    if outputs:
        from capeval.io.atomic import atomic_write_many

        try:
            atomic_write_many(outputs)
        except OSError as exc:
            raise InputError(f"cannot write {exc.filename or 'the output files'}: {exc.strerror or exc}") from None
    if args.json:
        sys.stdout.write(text)
    else:
        sys.stdout.write(text_table(outcomes) + "\n")
    return 0
