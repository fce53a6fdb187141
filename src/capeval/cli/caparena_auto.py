"""``capeval caparena-auto``: a captioning model's CapArena-Auto score through any OpenAI-compatible
judge server (:func:`capeval.judges.caparena_auto.evaluate`), printed as the official
``caparena_auto_scores.py`` prints its leaderboard row."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from capeval.errors import InputError, ResourceError

AUTO600 = "caparena_auto_600.json"
IMAGES = "all_images"
#: caparena_auto_scores.py's column names of the three baselines
_COLUMNS = {"GPT-4o-0806": "Score_gpt", "CogVLM2-llama3-chat-19B": "Score_cog", "MiniCPM-V2.6-8B": "Score_cpm"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "caparena-auto",
        help="score a captioning model on CapArena-Auto (600 pairwise battles judged by a VLM server)",
        description="CapArena-Auto (Cheng et al. 2025; njucckevin/CapArena): each caption of the tested model battles "
        "one baseline model's caption (GPT-4o-0806, CogVLM2-llama3-chat-19B, MiniCPM-V2.6-8B) before a VLM judge "
        "that sees the image and the human reference, with the repository's prompt and decoding; score per "
        "baseline = (wins - losses) / 2, Score_avg their mean. Answers are cached as they arrive: an interrupted "
        "run resumes, a rerun sends nothing. The judge server's key comes from $CAPEVAL_CAPARENA_AUTO_API_KEY (else $OPENAI_API_KEY).",
    )
    p.add_argument("--name", required=True, metavar="MODEL", help="the tested model's name (as in the leaderboard "
                   "and the --out file name the official caparena_auto_scores.py reads)")
    p.add_argument("--captions", required=True, metavar="FILE", help="the tested model's captions, a JSON object "
                   '{"test_01258.jpg": "caption", ...} (the release\'s result template)')
    p.add_argument("--data", metavar="DIR", help=f"the downloaded CapArena-Auto folder: DIR/{AUTO600} and "
                   f"DIR/{IMAGES}/ (the release's layout)")
    p.add_argument("--auto600", metavar="FILE", help=f"{AUTO600} (default: DIR/{AUTO600} of --data)")
    p.add_argument("--images", metavar="DIR", help=f"the 600 images (default: DIR/{IMAGES} of --data)")
    p.add_argument("--server", metavar="URL", help="base URL of the OpenAI-compatible judge server, e.g. "
                   "https://api.openai.com/v1 (default: $CAPEVAL_CAPARENA_AUTO_BASE_URL, else http://localhost:8000/v1)")
    p.add_argument("--judge", metavar="NAME", help="the judge model served there (the paper's: gpt-4o-2024-08-06; "
                   "default: $CAPEVAL_CAPARENA_AUTO_MODEL, else the server's only model)")
    p.add_argument("--orders", choices=("random", "both"), default="random", help="caption order per battle: "
                   "random, drawn per image as the official script (default), or both orders at half weight each")
    p.add_argument("--order-seed", type=int, default=0, help="seed of the random caption orders (default 0)")
    p.add_argument("--tries", type=int, default=5, help="asks per battle until the answer parses, 1 to 100 (default 5)")
    p.add_argument("--temperature", type=float, default=0.1, help="judge temperature (default 0.1, the official)")
    p.add_argument("--top-p", type=float, default=0.9, help="judge top_p, (0, 1] (default 0.9, the official)")
    p.add_argument("--max-new-tokens", type=int, default=1500, help="judge max_tokens (default 1500, the official)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed sent to the server (default: none, as the official request)")
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    p.add_argument("--max-retries", type=int, default=5, help="retries of a failed request (default 5)")
    p.add_argument("--cache", metavar="DIR", help="answer cache folder (default: <capeval cache>/caparena-auto)")
    p.add_argument("--no-cache", action="store_true", help="keep no answers (a rerun asks again)")
    p.add_argument("--refresh", action="store_true", help="read nothing from the cache: ask every battle again and "
                   "replace its cached answers (a fixed server, another model behind the same name)")
    p.add_argument("--out", "-o", metavar="FILE", help="write the judged battles (atomically) in the layout "
                   "caparena_auto_scores.py reads, e.g. data/caparena_auto/MODEL.json")
    p.add_argument("--json", action="store_true", help="print the scores as JSON instead of the leaderboard row")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def _inputs(args: argparse.Namespace) -> tuple[str, str]:
    """The caparena_auto_600 file and the image folder, from --data or given one by one."""
    if args.data is None and (args.auto600 is None or args.images is None):
        raise InputError(f"caparena-auto needs --data DIR (with {AUTO600} and {IMAGES}/) or both --auto600 FILE "
                         "and --images DIR")
    if args.data is not None and not os.path.isdir(args.data):
        raise InputError(f"--data {args.data}: not a folder")
    auto600 = args.auto600 or os.path.join(args.data, AUTO600)
    images = args.images or os.path.join(args.data, IMAGES)
    for flag, path, ok in (("--auto600", auto600, os.path.isfile), ("--images", images, os.path.isdir),
                           ("--captions", args.captions, os.path.isfile)):
        if not ok(path):
            what = "file" if ok is os.path.isfile else "folder"
            raise InputError(f"{flag} {path}: no such {what}" + (f" (from --data {args.data})" if
                                                                  flag != "--captions" and args.data else ""))
    return auto600, images


def row(name: str, result: dict[str, Any]) -> str:
    """The leaderboard line of ``caparena_auto_scores.py`` for one model (its header above it)."""
    head = (f"{'Model':<30} | {'Score_avg':<8} | " + " | ".join(f"{c:<10}" for c in _COLUMNS.values())
            + f" | {'Length_Avg':<10} |")
    cells = " | ".join(f"{result['scores'][b]:<10.2f}" for b in _COLUMNS)
    line = f"{name:<30} | {result['score_avg']:<8.2f} | {cells} | {result['length_avg']:<10.2f} |"
    return "\n".join([head, "-" * len(head), line])


def run(args: argparse.Namespace) -> int:
    from capeval.judges.caparena_auto import evaluate
    from capeval.progress import progress_setting

    if args.no_cache and args.cache:
        raise InputError("--cache and --no-cache: choose one")
    if args.no_cache and args.refresh:
        raise InputError("--refresh and --no-cache: --refresh replaces cached answers, --no-cache keeps none (every "
                         "battle is asked anyway); choose one")
    auto600, images = _inputs(args)
    if args.out:
        from capeval.cli.score import check_outputs

        check_outputs({"--out": args.out}, [args.captions, auto600])
    progress = not (args.quiet or args.json)
    try:
        with progress_setting(progress):
            result = evaluate(args.name, args.captions, auto600, images, model=args.judge, base_url=args.server,
                              temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                              seed=args.seed, tries=args.tries, orders=args.orders, order_seed=args.order_seed,
                              concurrency=args.concurrency, timeout=args.timeout, max_retries=args.max_retries,
                              cache=None if args.no_cache else (args.cache or True), refresh=args.refresh,
                              out=args.out,
                              progress=progress)
    except ResourceError as exc:  # the judge layer names its -O option; here the flag is --server
        raise ResourceError(str(exc).replace("-O caparena-auto.base_url=URL", "--server URL")
                            .replace("-O caparena-auto.base_url", "--server")) from None
    summary = {"model": args.name, "score_avg": result["score_avg"], "scores": result["scores"],
               "judged": result["judged"], "length_avg": result["length_avg"], "battles": len(result["battles"]),
               "unjudged": result["unjudged"], "generated": result["generated"], "cached": result["cached"],
               "orders": args.orders}
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        return 0
    sys.stdout.write(row(args.name, result) + "\n")
    counted = sum(result["judged"].values())
    note = (f"{counted} of {len(result['battles'])} battles counted (a verdict the official scoring reads)"
            + (f"; {len(result['unjudged'])} never parsed after {args.tries} tries: "
               + ", ".join(result["unjudged"][:5]) + ("..." if len(result["unjudged"]) > 5 else "")
               if result["unjudged"] else "")
            + f"; {result['generated']} requests sent, {result['cached']} answers from the cache")
    sys.stderr.write(note + "\n")
    return 0
