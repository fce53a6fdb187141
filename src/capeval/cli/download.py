"""``capeval download NAME [--dir DIR]``: :func:`capeval.models.download.download` from the
command line, and benchmark data (``capeval download thumb``, ``--all``:
:func:`capeval.bench.data_download.download_benchmark`). ``capeval download --list`` shows the
tables and what is present."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import urlparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("download", help="download benchmark data and model checkpoints (sha256-checked)",
                       description="Download benchmark data (into $CAPEVAL_DATA, default <cache>/data; "
                       "CAPEVAL_DATA_MIRROR=URL fetches URL/<benchmark>/<file> instead) or model files named in "
                       "capeval's checkpoint table (CAPEVAL_CHECKPOINT_MIRROR=URL, else "
                       "CAPEVAL_DATA_MIRROR/checkpoints: URL/<folder>/<file>), verifying them. Each file must "
                       "arrive within CAPEVAL_DOWNLOAD_DEADLINE seconds (1 to 86400, default 3600).")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="benchmark names (capeval bench --list), 'amber' (AMBER's annotation folder for the amber metrics), 'vdc' (VDC's question files for vdcscore), 'dream-1k' (DREAM-1K's annotations for autodq) or checkpoint names (see --list); 'spice': CoreNLP 3.6.0 for spice-java (sha256-checked); "
                        "'factual': hice-s's FACTUAL phrase parser (a Hugging Face hub folder); "
                        "'bertscore': BERTScore's roberta-large; 'bertscore++': BERT-S++'s bert-base-uncased "
                        "and stop-word list; ORG/NAME: a judge's local model from the Hugging Face hub "
                        "(e.g. llava-hf/llava-1.5-13b-hf for fleur and visce2), into the Hugging Face cache")
    p.add_argument("--dir", help="target folder (checkpoints: default $CAPEVAL_CHECKPOINTS or <cache>/clip; "
                   "benchmarks: default $CAPEVAL_DATA or <cache>/data)")
    p.add_argument("--all", action="store_true", help="every registered benchmark's data (and AMBER's annotations)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress")
    p.add_argument("--list", action="store_true", help="show the checkpoint table and which files are present")
    p.add_argument("--json", action="store_true", help="with --list: the table as JSON")
    p.add_argument("--force", action="store_true", help="download again even when a verified file is present")
    p.set_defaults(func=run)


def format_table(info: dict[str, Any]) -> str:
    """The checkpoint table for a terminal: name, architecture, sha256, status, where."""
    rows = [("NAME", "ARCH", "SHA256", "STATUS", "WHERE")]
    for name, e in info["entries"].items():
        sha = e["sha256"][:12] + "..." if e["sha256"] else (
            e["recorded_sha256"][:12] + "... (recorded)" if e.get("recorded_sha256") else "recorded at download")
        if e["present"]:
            where = e["path"]
        elif e["urls"]:
            where = "from " + ", ".join(dict.fromkeys(urlparse(u).netloc for u in e["urls"]))
        else:
            where = "manual download (see note)"
        rows.append((name, e["arch"] or "-", sha, "present" if e["present"] else "missing", where))
    widths = [max(len(r[k]) for r in rows) for k in range(4)]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    notes = [f"  {name}: {e['note']}" for name, e in info["entries"].items() if not e["urls"] and e["note"]]
    lines.append("")
    lines.append(f"folder: {info['dir']} (set CAPEVAL_CHECKPOINTS or --dir to use another)")
    lines.append("(recorded): no sha256 is published; capeval records the sha256 of the first download beside the "
                 "file (.<file>.sha256) and checks the file and any new download against it (--force: a new one)")
    if notes:
        lines.append("manual downloads:")
        lines.extend(notes)
    return "\n".join(lines)


def format_benchmarks(root: str | None) -> str:
    """The benchmark data table: name, present or not, source."""
    from capeval.bench.data_download import present
    from capeval.paths import data_home
    from capeval.bench.sources import METRIC_SOURCES, SOURCES

    rows = [("BENCHMARK", "STATUS", "SOURCE")]
    for name, src in {**SOURCES, **METRIC_SOURCES}.items():
        by_hand = any(not f.urls and not f.optional for f in src.files)
        rows.append((name, "present" if present(name, root) else ("missing (part by hand)" if by_hand else "missing"),
                     src.source))
    widths = [max(len(r[k]) for r in rows) for k in range(2)]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(r[:2], widths)) + "  " + r[2] for r in rows]
    lines.append(f"data folder: {root or data_home()} (set CAPEVAL_DATA or --dir to use another)")
    return "\n".join(lines)


def _download_benchmarks(names: list[str], root: str | None, force: bool, progress: bool | None) -> int:
    from capeval.bench.data_download import download_benchmark

    ready = True
    for name in names:
        out = download_benchmark(name, root, force, progress)
        print(json.dumps(out, ensure_ascii=False))
        sys.stdout.flush()
        for text in out["by_hand"]:
            print(f"capeval: {out['benchmark']}: by hand: {text}", file=sys.stderr)
        for text in out.get("notes", ()):
            print(f"capeval: {out['benchmark']}: note: {text}", file=sys.stderr)
        if out["images"]:
            print(f"capeval: {out['benchmark']}: {out['images']}", file=sys.stderr)
        ready = ready and not out["by_hand"]
    return 0 if ready else 1


def _hub_model(name: str) -> bool:
    """Whether ``name`` is a Hugging Face model name (``org/name``) rather than an entry of the
    checkpoint table (whose names also hold a slash: ``polos/reprod``; a typo of one stays an error)."""
    from capeval.judges.local_model import HUB_NAME
    from capeval.models.clip.checkpoints import CHECKPOINTS

    groups = {n.split("/")[0].lower() for n in CHECKPOINTS}
    return bool(HUB_NAME.match(name)) and name not in CHECKPOINTS and name.split("/")[0].lower() not in groups


def run(args: argparse.Namespace) -> int:
    from capeval.bench.base import CATALOG
    from capeval.bench.sources import METRIC_SOURCES
    from capeval.errors import InputError
    from capeval.models.clip.checkpoints import checkpoint_info
    from capeval.models.download import download

    if args.list:
        info = checkpoint_info(args.dir)
        if args.json:
            from capeval.bench.data_download import present
            from capeval.bench.sources import SOURCES

            info["benchmarks"] = {n: {"present": present(n, args.dir), "source": s.source, "licence": s.licence}
                                  for n, s in {**SOURCES, **METRIC_SOURCES}.items()}
            print(json.dumps(info, indent=2))
        else:
            print(format_table(info) + "\n\n" + format_benchmarks(args.dir))
        return 0
    if args.json:
        raise InputError("--json goes with --list")
    data = [*CATALOG, *METRIC_SOURCES]  # benchmarks and metrics' annotation data (amber)
    benches = [n for n in args.names if n.strip().lower() in data]
    if args.all:
        benches = data
    elif not args.names:
        raise InputError("name a benchmark or a checkpoint to download, or --all for every benchmark's data "
                         "(see `capeval download --list`)")
    code = 0
    if benches:
        code = _download_benchmarks(benches, args.dir, args.force, False if args.quiet else None)
    for name in args.names:
        if name.strip().lower() in data:
            continue
        if name.lower() in ("spice", "corenlp"):  # CoreNLP 3.6.0 jars for spice-java, not a CLIP file
            from capeval.metrics.spice.java import download_corenlp

            paths = download_corenlp(args.dir, args.force)
            print(json.dumps({"name": "spice", "paths": [str(p) for p in paths]}))
            continue
        if name.lower() == "factual":  # short name of the FACTUAL parser's entry
            from capeval.models.clip.checkpoints import FACTUAL_HUB, by_hub

            name = by_hub(FACTUAL_HUB).name  # type: ignore[union-attr]
        if _hub_model(name):  # a judge's local model (LLaVA, a chat LLM) into the Hugging Face cache
            from capeval.judges.local_model import download_hub_model

            print(json.dumps({"name": name, "path": str(download_hub_model(name))}))
            continue
        if name.lower() == "bertscore":  # short name of BERTScore's default model
            name = "bertscore/roberta-large"
        # short name of BERT-S++'s model and stop-word list
        group = ["bertscore++/bert-base-uncased", "bertscore++/stop-words"] if name.lower() == "bertscore++" else [name]
        for one in group:
            path, digest = download(one, args.dir, args.force)
            print(json.dumps({"name": one, "path": str(path), "sha256": digest}))
            sys.stdout.flush()
    return code
