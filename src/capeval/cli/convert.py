"""``capeval convert expert``: :func:`capeval.models.expert_convert.convert` from the command line."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="build a llava-hf folder from a LoRA release in LLaVA's own format (expert)",
                       description="Merge the EXPERT LoRA (hjkim811/EXPERT-llava-13b-lora) into LLaVA-1.5-13B "
                                   "(liuhaotian/llava-v1.5-13b) with the CLIP vision tower "
                                   "(openai/clip-vit-large-patch14-336) and write a llava-hf folder for "
                                   "-O expert.model=FOLDER or `vllm serve FOLDER`. Inputs not given are "
                                   "downloaded from the Hugging Face hub.")
    p.add_argument("name", choices=["expert"], help="what to convert")
    p.add_argument("--out", required=True, help="the folder to write (built under a temporary name, then renamed)")
    p.add_argument("--base", help="folder of liuhaotian/llava-v1.5-13b (LLaVA's own format)")
    p.add_argument("--lora", help="folder of hjkim811/EXPERT-llava-13b-lora")
    p.add_argument("--vision", help="folder of openai/clip-vit-large-patch14-336")
    p.add_argument("--force", action="store_true", help="replace --out when it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from capeval.models.expert_convert import MANIFEST, convert

    manifest = convert(args.base, args.lora, args.vision, args.out, force=args.force,
                       log=lambda msg: print(f"capeval: {msg}", file=sys.stderr))
    print(json.dumps({"name": args.name, "path": args.out, "manifest": MANIFEST,
                      "merged_weights": manifest["lora"]["merged_weights"]}))
    return 0
