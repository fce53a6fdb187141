"""``capeval scene-graph``: what SPICE's parser reads from captions (objects, attributes, relations)."""

from __future__ import annotations

import argparse
import json
import sys

from capeval.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scene-graph",
        help="parse captions into scene graphs (SPICE's parser, no Java)",
        description="Print each caption's objects, (object, attribute) pairs and (subject, predicate, object) "
        "triples as the spice metric reads them. Needs the spice extra.",
    )
    p.add_argument("captions", nargs="*", help="captions to parse (raw text)")
    p.add_argument("--candidates", "-c", metavar="FILE", help="also parse every caption of a candidates file")
    p.add_argument("--json", action="store_true", help="one JSON object per caption (JSON lines)")
    p.add_argument("--explain", action="store_true",
                   help="also print the dependency edges the SPICE rules read (collapsed, enhanced UD v1)")
    p.add_argument("--spacy-model", default="en_core_web_sm", help="spaCy pipeline (default en_core_web_sm)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from capeval.api import scene_graph_parser

    captions = list(args.captions)
    if args.candidates:
        from capeval.io.captions import read_captions

        captions += [str(c) for c in read_captions(args.candidates, "candidates").values()]
    if not captions:
        raise InputError("scene-graph: give captions as arguments or --candidates FILE")
    for i, caption in enumerate(captions):
        if not caption.strip():
            raise InputError(f"scene-graph: caption {i + 1} is empty")
    parser = scene_graph_parser(args.spacy_model)
    for graph in parser.scene_graphs(captions):
        if args.json:
            record = graph.to_dict()
            if args.explain:
                record["dependencies"] = parser.explain(graph.caption)
            sys.stdout.write(json.dumps(record) + "\n")
        else:
            sys.stdout.write(graph.describe() + "\n")
            if args.explain:
                sys.stdout.write("".join(f"    {line}\n" for line in parser.explain(graph.caption)))
    return 0
