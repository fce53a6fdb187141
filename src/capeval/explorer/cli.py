"""The explorer on the command line: ``capeval score --html`` and ``--html-images``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from capeval.errors import InputError

#: the notes every page carries
MARK_NOTE = ("Marked words (<mark>): the item's `hallucinated` extra (CHAIR's words, AMBER's and ALOHa's objects), "
             "found in the caption as the word, its plural (s, es) or a two-word phrase; the item's record lists them "
             "as the metric gave them.")


def check_score_args(args: argparse.Namespace) -> None:
    """``--html`` / ``--html-images`` of ``capeval score``, checked before any scoring: the image
    option needs the page and pictures; ``link`` needs a folder it may write beside the page."""
    mode = getattr(args, "html_images", None)
    if mode and not args.html:
        raise InputError(f"--html-images {mode} given without --html PAGE.html")
    if mode in ("embed", "link") and not (getattr(args, "images", None) or getattr(args, "items", None)):
        raise InputError(f"--html-images {mode}: no pictures to show; give --images DIR (or an items table with an "
                         "image column)")
    if mode == "link":  # the page's folder is checked with --html; the thumbnails' folder in it is made
        from pathlib import Path

        page = Path(args.html)
        folder = page.parent / f"{page.stem}_files"
        if folder.exists() and not folder.is_dir():
            raise InputError(f"--html-images link: {folder} (where the thumbnails go) is not a folder")


def texts(args: argparse.Namespace) -> tuple[Iterator[tuple[str, str, Sequence[str]]], Any]:
    """(``(id, candidate, references)`` of the run's inputs in order, read again item by item
    where the files allow it (:mod:`capeval.io.text_stream`), the run's images or None)."""
    from capeval.io.inputs import normalize_candidates, normalize_references

    if getattr(args, "items", None):
        from capeval.io.items import read_items
        from capeval.io.text_stream import stream_item_tables

        stream = stream_item_tables(list(args.items))
        if stream is not None:
            return stream.items(), None
        table = read_items(list(args.items))
        refs = table.references or {}
        return ((i, c, refs.get(i, ())) for i, c in table.candidates.items()), table.images
    from capeval.io.captions import read_caption_file
    from capeval.io.text_stream import stream_caption_files

    if getattr(args, "from_harness", None):  # --from HARNESS FILE: its file read again, as score read it
        from capeval.io.harness import harness_files

        files = harness_files(args)
        cands = normalize_candidates(files[0].data)
        refs = normalize_references(files[1].data) if len(files) > 1 else {}
        return ((i, c, refs.get(i, ())) for i, c in cands.items()), args.images
    if args.references:
        stream = stream_caption_files(args.candidates, args.references)
        if stream is not None:
            return stream.items(), args.images
    cands = normalize_candidates(read_caption_file(args.candidates, "candidates").data)
    refs = normalize_references(read_caption_file(args.references, "references").data) if args.references else {}
    return ((i, c, refs.get(i, ())) for i, c in cands.items()), args.images


def score_meta(results: Sequence[Any], pictures: bool, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The page's metadata for one system's results (one column per metric)."""
    from capeval.explorer.data import summary

    marked = any(name == "hallucinated" for r in results for name in r.per_item_extras())
    return {"systems": ["candidate"], "columns": [{"label": r.metric, "metric": r.metric} for r in results],
            "summary": summary(results), "summary_columns": ["metric", "system", "n", "skipped", "signature", "counters"],
            "images": pictures, "notes": [*notes, *([MARK_NOTE] if marked else [])]}


def write_score_page(args: argparse.Namespace, report: Any) -> None:
    """``capeval score --html PAGE``: the explorer of ``report`` (the texts read again from the
    run's inputs, one item at a time); prints where it went on stderr."""
    from capeval.explorer.data import score_rows
    from capeval.explorer.page import write_page
    from capeval.explorer.thumbs import explanations, make

    results = list(report.values())
    items, images = texts(args)
    ids = list(dict.fromkeys([i for r in results for i in (*r.items, *r.skipped)]))
    thumbs = make(getattr(args, "html_images", None), images, ids, args.html)
    explained = explanations(getattr(args, "html_images", None), getattr(args, "explain", None), ids, args.html)
    source = args.candidates or getattr(args, "harness_file", None) or ", ".join(args.items or ())
    notes = [f"{len(results)} metrics on the items of {source}."]
    meta = score_meta(results, thumbs is not None, notes)
    try:
        n = write_page(args.html, f"capeval score: {os.path.basename(str(source))}", meta,
                       score_rows(items, results, thumbs, explained))
    except OSError as exc:
        raise InputError(f"cannot write {args.html}: {exc.strerror or exc}") from None
    failed = getattr(thumbs, "failed", {})
    for item, why in list(failed.items())[:3]:
        sys.stderr.write(f"capeval: --html: item {item!r}: no thumbnail ({why})\n")
    if not args.quiet:
        sys.stderr.write(f"capeval: --html: {n} items in {args.html}\n")
