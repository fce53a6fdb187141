"""``capeval score``: score candidates with metrics/presets, print JSON, optionally save files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from capeval.cli.repeats import CommaList
from capeval.errors import InputError
from capeval.io.nesting import json_loads


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score candidate captions",
        description="Score candidates against references (and images/videos for the learned metrics). "
        "Prints JSON with system scores and signatures.",
    )
    p.add_argument("--metrics", "-m", default="coco", action=CommaList,
                   help="metric names/presets, comma separated or repeated (default: coco)")
    p.add_argument("--candidates", "-c", help="candidates file (.json, .jsonl, .csv, .tsv)")
    p.add_argument("--references", "-r", help="references file (.json, .jsonl, .csv, .tsv)")
    p.add_argument("--images", help="folder of images named <id>.<ext> (image metrics)")
    p.add_argument("--videos", help="folder of videos <id>.<ext> or frame folders <id>/ (video metrics)")
    p.add_argument("harness_file", nargs="?", metavar="FILE", help="with --from: the harness's file")
    p.add_argument("--from", dest="from_harness", metavar="HARNESS", help="instead of -c/-r: score FILE, a harness's "
                   "run: lmms-eval's samples_<task>.jsonl (lmms-eval, or lmms-eval:TASK) or VLMEvalKit's predictions "
                   ".xlsx/.tsv/.json (vlmevalkit); docs/harnesses.md")
    p.add_argument("--items", nargs="+", metavar="FILE",
                   help="instead of -c/-r/--images/--videos: item tables, one row per item with columns id, "
                   "candidate, references, image or video (path or URI), start/end; .jsonl, .json, .csv, .tsv "
                   "or .parquet (with --engine ray: files, folders or URIs read as a Ray dataset)")
    p.add_argument("--per-item", metavar="FILE", help="write per-item scores {metric: {id: score}} as JSON")
    p.add_argument("--per-item-extras", metavar="FILE",
                   help="write per-item extras {metric: {name: {id: value}}} as JSON (SPICE's precision/recall and "
                   "categories, HICE-S's explanations, VisCE2's answers); the printed JSON only names them")
    p.add_argument("--out", "-o", metavar="FILE", help="also write the JSON summary to FILE (JSON whatever --format)")
    p.add_argument("--html", metavar="PAGE.html", help="also write the per-item explorer: one offline page")
    p.add_argument("--html-images", choices=("embed", "link", "none"), help="thumbnails on the --html page: embedded "
                   "(default with --images), files linked beside the page, or none")
    p.add_argument("--format", "-f", choices=("json", "text"),
                   help="what is printed: json (the summary with signatures and extras) or text (one aligned line "
                   "per metric: name, score, items, signature); default: text on a terminal, json otherwise")
    p.add_argument(
        "--option",
        "-O",
        action="append",
        default=[],
        metavar="METRIC.KEY=VALUE",
        help="constructor option for a metric or group, e.g. ref-pac-s.w=2.5 or clip-s.device=cpu "
        "(VALUE parsed as JSON when possible); repeatable",
    )
    p.add_argument("--tokenizer", choices=("ptb", "none"), help="tokenizer of the n-gram metrics (default ptb)")
    p.add_argument("--device", help="torch device for model-based metrics (default: cpu)")
    p.add_argument("--backbone", help="backbone/checkpoint name or path for CLIP-based metrics")
    p.add_argument("--explain", metavar="DIR", help="write per-item explanations (<id>.json, <id>.png) into DIR "
                   "(metrics that explain their scores: hice-s, ref-hice-s)")
    p.add_argument("--compare", nargs="+", metavar="[NAME=]FILE",
                   help="other systems' candidate files: print the paired comparison of -c (the baseline) with "
                   "them instead (as capeval compare, paired bootstrap; see capeval compare -h for its options)")
    p.add_argument("--skip-bad-items", action="store_true", help="record unusable items as skipped instead of failing")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--max-json-bytes", metavar="N", help="largest .json input read whole, in bytes (range 1 to 2**40; "
                   "default 268435456 = 256 MiB, or $CAPEVAL_MAX_JSON_BYTES); JSONL/CSV/TSV are streamed")
    p.add_argument("--max-line-bytes", metavar="N", help="longest line of a .jsonl/.csv/.tsv input, in bytes (range "
                   "1024 to 2**31-1; default 16777216 = 16 MiB, or $CAPEVAL_MAX_LINE_BYTES)")
    p.add_argument("--max-image-pixels", metavar="N", help="largest image decoded, width x height (range 1 to 2**40; "
                   "default 178956970, PIL's own limit, or $CAPEVAL_MAX_IMAGE_PIXELS); a larger image is a bad item")
    p.add_argument("--max-references", metavar="N", help="most references one item may have (range 1 to 2**31-1; "
                   "default 10000, or $CAPEVAL_MAX_REFERENCES)")
    from capeval.engines.dispatch import add_engine_arguments

    add_engine_arguments(p)
    p.set_defaults(func=run)


def parse_options(pairs: list[str], what: str = "METRIC") -> dict[str, dict[str, Any]]:
    """``["pac-s.w=2", ...]`` -> ``{"pac-s": {"w": 2}}`` (VALUE parsed as JSON when it is JSON)."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        target, sep, value = pair.partition("=")
        metric, dot, key = target.partition(".")
        metric, key = metric.strip(), key.strip()
        if not sep or not dot or not metric or not key:
            raise InputError(f"-O {pair!r}: expected {what}.KEY=VALUE, e.g. cider-d.sigma=6.0")
        try:
            parsed: Any = json_loads(value, f"-O {target.strip()}", lines=False)
        except json.JSONDecodeError:
            parsed = value
        bucket = out.setdefault(metric.lower(), {})
        if key in bucket and bucket[key] != parsed:
            raise InputError(f"-O {pair!r}: {metric}.{key} is given twice with different values")
        bucket[key] = parsed
    return out


def check_outputs(paths: dict[str, str | None], inputs: list[str | None]) -> None:
    """Fail before any scoring when an output file cannot be written or would overwrite an input."""
    from pathlib import Path

    from capeval.io.atomic import check_writable

    seen: dict[Path, str] = {}
    given = {Path(p).resolve(): p for p in inputs if p}
    for flag, path in paths.items():
        if not path:
            continue
        check_writable(path, flag)
        resolved = Path(path).resolve()
        if resolved in given:
            raise InputError(f"{flag} {path} is also an input file; it would be overwritten")
        if resolved in seen:
            raise InputError(f"{flag} and {seen[resolved]} name the same file {path}")
        seen[resolved] = flag


def _route_explain(names: list[str], options: dict[str, dict[str, Any]], folder: str) -> None:
    """``--explain DIR``: the ``explain_dir`` option of every metric that takes it; an error when none does."""
    from capeval import registry
    from capeval.options import option_types

    # text metrics explain nothing: only media metrics' scorers are imported to read their options
    takers = [n for n in names if registry.get(n).media and "explain_dir" in (option_types(registry.get(n)) or {})]
    if not takers:
        raise InputError(f"--explain: none of the metrics {', '.join(names)} writes explanations "
                         "(hice-s and ref-hice-s do)")
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise InputError(f"--explain {folder}: not a folder")
    for n in takers:
        options.setdefault(registry.get(n).group, {}).setdefault("explain_dir", folder)
    others = [n for n in names if n not in takers]
    if others:
        sys.stderr.write(f"capeval: --explain: {', '.join(others)} write no explanations\n")


def _report_error_items(report: Any, limit: int = 10) -> None:
    """One stderr line per error item (e.g. a VLM answer without a number): never a silent gap."""
    for r in report.values():
        errors = r.extras.get("errors")
        if not isinstance(errors, dict) and not hasattr(errors, "items"):
            continue
        for i, (item, e) in enumerate(errors.items()):
            if i == limit:
                sys.stderr.write(f"capeval: {r.metric}: {len(errors)} error items in all (--per-item-extras lists "
                                 "them with the raw answers)\n")
                break
            msg, answer = (e.get("error"), e.get("answer")) if hasattr(e, "get") else (str(e), None)
            shown = f": {answer[:80]!r}" if isinstance(answer, str) else ""
            sys.stderr.write(f"capeval: {r.metric}: item {item!r}: {msg}{shown}\n")


def _set_read_limits(args: argparse.Namespace) -> None:
    """``--max-json-bytes`` / ``--max-line-bytes`` / ``--max-image-pixels`` / ``--max-references``:
    checked against their ranges, then set as the environment variables :mod:`capeval.io.reading` reads (so every reader of the job sees them)."""
    import os

    from capeval.io import reading
    from capeval.io.reading import LIMITS, check_limit

    for name in LIMITS:
        value = getattr(args, name, None)
        if value is not None:
            os.environ[LIMITS[name][0]] = str(check_limit(name, value, "--" + name.replace("_", "-")))
    for name in LIMITS:
        getattr(reading, name)()  # a bad environment variable is refused before any work too


def _takes_device(spec: Any) -> bool:
    """Whether the scorer of a text metric runs a model on a device (its constructor takes ``device``)."""
    import inspect

    return "device" in inspect.signature(spec.factory_class()).parameters


def run(args: argparse.Namespace) -> int:
    """``capeval score``: one run, so one truncation line per text encoder (:func:`_finish` says it)."""
    from capeval import truncation

    with truncation.deferred():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from capeval import registry
    from capeval.api import score
    from capeval.options import check_options
    from capeval.devices import check_device
    from capeval.io.captions import read_caption_file
    from capeval.progress import progress_setting

    # everything cheap is checked first: limits, names, options, device, output paths, then inputs
    _set_read_limits(args)
    if args.from_harness or args.harness_file:  # --from HARNESS FILE: docs/harnesses.md
        from capeval.io.harness import check_from
        check_from(args)
    if args.compare:
        return _compare(args)
    names = registry.expand(args.metrics)
    options = parse_options(args.option)
    if args.device:
        check_device(args.device)
    for name in names:
        spec = registry.get(name)
        opts = options.setdefault(spec.group, {})
        if args.tokenizer and spec.needs == frozenset({"references"}):
            opts.setdefault("tokenizer", args.tokenizer)
        if spec.needs & {"images", "videos"}:
            if args.device:
                opts.setdefault("device", args.device)
            if args.backbone:
                opts.setdefault("backbone", args.backbone)
        elif args.device and _takes_device(spec):  # text metrics on a model (bertscore, bertscore++)
            opts.setdefault("device", args.device)
    media = [n for n in names if registry.get(n).needs & {"images", "videos"}]
    on_model = media + [n for n in names if n not in media and args.device and _takes_device(registry.get(n))]
    for flag, value, users in (("--backbone", args.backbone, media), ("--device", args.device, on_model)):
        if value and not users:  # as an unused --images: a flag no metric reads is a mistake
            raise InputError(f"{flag} given, but none of the metrics {', '.join(names)} uses a model")
    if args.explain:
        _route_explain(names, options, args.explain)
    options = {k: v for k, v in options.items() if v}
    names, options = check_options(names, options, strict=True)
    check_outputs({"--per-item": args.per_item, "--per-item-extras": args.per_item_extras, "--out": args.out,
                   "--html": args.html}, [args.candidates, args.references, *(args.items or [])])
    if args.html or args.html_images:  # the page's options, before any scoring
        from capeval.explorer.cli import check_score_args
        check_score_args(args)
    from capeval.engines.dispatch import engine_options_from_args

    engine_options = engine_options_from_args(args)
    progress = False if args.quiet else None
    if args.items:
        return _run_items(args, names, options, engine_options, progress)
    from capeval import registry

    from capeval.io.harness import harness_files

    files = harness_files(args) if args.from_harness else []  # --from HARNESS FILE
    registry.check_references(names, bool(args.references) or len(files) > 1)  # before any metric's resources
    if not args.candidates and not files:
        raise InputError("give the candidates (-c FILE), an items table (--items FILE) or a harness's run (--from)")
    if args.engine == "local" and args.references and not (args.images or args.videos or args.skip_bad_items):
        streamed = _run_stream(args, names, options, progress)
        if streamed is not None:
            return streamed
    files = files or [read_caption_file(args.candidates, "candidates")]
    if args.references:
        files.append(read_caption_file(args.references, "references"))
    if not args.quiet:
        for f in files:
            sys.stderr.write(f"capeval: {f.kind}: {f.describe()} from {f.path}\n")
    for flag, folder in (("--images", args.images), ("--videos", args.videos)):
        if folder and not Path(folder).exists():  # before any model is loaded
            raise InputError(f"{flag} {folder}: no such folder")
    inputs: dict[str, Any] = {}
    if args.images:
        inputs["images"] = args.images
    if args.videos:
        inputs["videos"] = args.videos
    if args.skip_bad_items:
        inputs["skip_bad_items"] = True
    with progress_setting(progress):
        report = score(
            files[0].data,
            files[1].data if len(files) > 1 else None,
            metrics=names,
            options=options,
            progress=progress,
            engine=args.engine,
            engine_options=engine_options,
            **inputs,
        )
    return _finish(args, report, {f.kind: f.to_dict() for f in files})


def _compare(args: argparse.Namespace) -> int:
    from capeval.significance.output import compare_files

    for flag, value in (("--images", args.images), ("--videos", args.videos), ("--items", args.items),
                        ("--per-item", args.per_item), ("--per-item-extras", args.per_item_extras),
                        ("--explain", args.explain), ("--format", args.format), ("--html-images", args.html_images)):
        if value:
            raise InputError(f"--compare takes text metrics on -c/-r files; {flag} is not used with it")
    if not args.candidates or not args.references:
        raise InputError("--compare needs the baseline's candidates (-c FILE) and the references (-r FILE)")
    return compare_files([args.candidates, *args.compare], args.references, args.metrics, parse_options(args.option),
                         check_outputs, out=args.out, html=args.html, progress=False if args.quiet else None)


def _run_stream(args: argparse.Namespace, names: list[str], options: dict[str, dict[str, Any]],
                progress: bool | None) -> int | None:
    """Text metrics on JSONL/CSV/TSV files: items streamed (:mod:`capeval.io.text_stream`), not
    held in memory; None when the metrics or the files need the in-memory path."""
    from capeval import registry
    from capeval.metrics.text import TextScorer

    if not all(registry.get(n).needs == frozenset({"references"}) for n in names) or not all(
        issubclass(registry.get(n).factory_class(), TextScorer) for n in names
    ):
        return None
    from capeval.evaluator import Evaluator
    from capeval.io.text_stream import stream_caption_files
    from capeval.progress import progress_setting

    stream = stream_caption_files(args.candidates, args.references)
    if stream is None:
        return None
    with progress_setting(progress):
        evaluator = Evaluator(names, options=options, progress=progress)
        if not evaluator.streamable():
            return None
        if not args.quiet:
            for f in stream.files:
                sys.stderr.write(f"capeval: {f.kind}: {f.describe()} from {f.path}\n")
        report = evaluator.score_stream(stream, progress=progress)
    return _finish(args, report, {f.kind: f.to_dict() for f in stream.files})


def _run_items(args: argparse.Namespace, names: list[str], options: dict[str, dict[str, Any]],
               engine_options: dict[str, Any], progress: bool | None) -> int:
    """``--items``: the tables carry every input; the engine reads them (Ray: as a dataset)."""
    from capeval.api import score
    from capeval.io.items import format_of
    from capeval.progress import progress_setting

    given = [f for f, v in (("-c", args.candidates), ("-r", args.references), ("--images", args.images),
                            ("--videos", args.videos)) if v]
    if given:
        raise InputError(f"--items carries every input; {given[0]} cannot be given with it")
    # a folder or an object-store prefix has no format of its own: the engine finds its files'
    formats = sorted({format_of(p) or "folder" for p in args.items})
    if not args.quiet:
        sys.stderr.write(f"capeval: items: {', '.join(args.items)}\n")
    with progress_setting(progress):
        report = score(metrics=names, options=options, progress=progress, engine=args.engine,
                       engine_options=engine_options, items=list(args.items),
                       **({"skip_bad_items": True} if args.skip_bad_items else {}))
    first = next(iter(report.values()))
    n_items = len(first.items) + len(first.skipped)
    return _finish(args, report, {"items": {"paths": list(args.items), "format": ",".join(formats),
                                            "n_items": n_items}})


def _finish(args: argparse.Namespace, report: Any, inputs: dict[str, Any]) -> int:
    """Print the JSON summary; write --per-item / --per-item-extras / --out atomically."""
    from capeval import truncation
    from capeval.io.atomic import atomic_write_many
    from capeval.io.json_text import dumps_indented

    _report_error_items(report)
    truncation.announce(report, force=True)
    payload = report.to_dict(per_item=False)
    payload["inputs"] = inputs
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    outputs: list[tuple[str, str]] = []
    if args.per_item:
        outputs.append((args.per_item, dumps_indented(report.per_item()) + "\n"))
    if args.per_item_extras:
        outputs.append((args.per_item_extras,
                        dumps_indented(report.per_item_extras()) + "\n"))
    if args.out:
        outputs.append((args.out, text + "\n"))
    if outputs:
        try:
            atomic_write_many(outputs)
        except OSError as exc:
            raise InputError(f"cannot write {exc.filename or 'the output files'}: {exc.strerror or exc}") from None
    if args.html:  # after the result files: the page re-reads the inputs' texts, item by item
        from capeval.explorer.cli import write_score_page
        write_score_page(args, report)
    fmt = args.format or ("text" if sys.stdout.isatty() else "json")
    if fmt == "text":  # one line per metric: on a terminal, signatures cut to its width (JSON keeps them whole)
        import shutil

        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        sys.stdout.write(text_table(payload, width) + "\n")
    else:
        sys.stdout.write(text + "\n")
    return 0


def text_table(payload: dict[str, Any], width: int | None = None) -> str:
    """``--format text``: one aligned line per metric (name, system score to 4 decimals, items,
    signature without the metric's name and capeval's version, which the header carries); with
    ``width``, a signature longer than the line allows is cut and ends in ``...``."""
    from capeval._version import __version__

    rows = [("metric", "score", "n", f"signature (capeval {__version__})")]
    for result in payload.get("results", []):
        system = result.get("system")
        score = "n/a" if system is None else f"{system:.4f}" if isinstance(system, (int, float)) else str(system)
        fields = [f for f in str(result.get("signature", "")).split("|")
                  if f != f"metric:{result.get('metric')}" and f != f"version:{__version__}"]
        rows.append((str(result.get("metric")), score, str(result.get("n", "")), "|".join(fields)))
    widths = [max(len(row[k]) for row in rows) for k in range(3)]
    room = None if width is None else max(width - sum(widths) - 6, 12)

    def cut(sig: str) -> str:
        return sig if room is None or len(sig) <= room else sig[: room - 3] + "..."

    return "\n".join(f"{m:<{widths[0]}}  {s:>{widths[1]}}  {n:>{widths[2]}}  {cut(sig)}".rstrip()
                     for m, s, n, sig in rows)
