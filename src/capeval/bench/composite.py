"""Composite (Aditya et al. 2015) correctness ratings, read from the public release files.

Release layout expected under ``<data-root>/composite/`` (as the CLIPScore-era scripts use):

- ``8k_correctness.csv``, ``30k_correctness.csv``, ``coco_correctness.csv`` — AMT result CSVs with
  a header; column 4 (index 3) holds ``...http<url of the image>;<cand 1>;...;<cand k>;<rating 1>;...;<rating k>``
  (k = 3 for Flickr8k, 4 for Flickr30k and COCO), ratings 1-5;
- references: ``Flickr8k.token.txt`` (also found at ``flickr8k/Flickr8k.token.txt``),
  ``results_20130124.token`` (Flickr30k: ``<image>.jpg#k<TAB>caption``) and
  ``captions_val2014.json`` (COCO; also found at ``coco/captions_val2014.json``).

Rows that do not parse (the release CSVs end with two summary rows) are skipped and counted.
Flickr8k candidates that are one of the image's references are dropped, as in the reference
preprocessing; NaN ratings are skipped.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench._common import kendall_specs
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, collapse, judgment, malformed, read_release_json
from capeval.bench.flickr8k import read_flickr8k_tokens
from capeval.errors import ResourceError

PARTS = {  # part -> (csv, candidates per row, checksum-list prefix)
    "flickr8k": ("composite/8k_correctness.csv", 3),
    "flickr30k": ("composite/30k_correctness.csv", 4),
    "coco": ("composite/coco_correctness.csv", 4),
}
_REFS = {
    "flickr8k": ("composite/Flickr8k.token.txt", ("flickr8k/Flickr8k.token.txt",)),
    "flickr30k": ("composite/results_20130124.token", ("flickr30k/results_20130124.token",)),
    "coco": ("composite/captions_val2014.json", ("coco/captions_val2014.json", "coco/annotations/captions_val2014.json")),
}


def _token_refs(path: Path) -> dict[str, list[str]]:
    """Flickr8k references keyed by image name without extension (the Composite files' ids)."""
    _, by_image = read_flickr8k_tokens(path)
    return {image.rsplit(".", 1)[0]: texts for image, texts in by_image.items()}


def _coco_refs(path: Path) -> dict[str, list[str]]:
    try:
        data = read_release_json(path)
        anns = data["annotations"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise malformed(path, "JSON", f"expected a COCO captions file with 'annotations' ({exc})") from None
    out: dict[str, list[str]] = {}
    for a in anns:
        out.setdefault("COCO_val2014_%012d" % int(a["image_id"]), []).append(str(a["caption"]))
    return out


class Composite(Benchmark):
    name = "composite"
    title = "Composite (correctness)"
    citation = (
        "Aditya et al. 2015, From Images to Sentences through Scene Description Graphs using Commonsense "
        "Reasoning and Knowledge (arXiv:1511.03292); protocol of Hessel et al. 2021 (CLIPScore)"
    )
    protocol = (
        "AMT correctness ratings (1-5) of captions for Flickr8k, Flickr30k and COCO images; references = "
        "the image's captions in its dataset; Flickr8k candidates equal to a reference are dropped. Kendall "
        "tau-b and tau-c x100 over all rows, and tau-c per part; bootstrap resamples rows."
    )
    protocol_id = "clipscore-v1"
    image_checksums = ("composite_flickr8k_checksum.txt", "composite_flickr30k_checksum.txt", "composite_mscoco_checksum.txt")
    files = {p: None for p, _ in PARTS.values()}
    human_label = "correctness rating (1-5)"

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        paths: dict[str, Path] = {}
        missing = []
        for part, (rel, _k) in PARTS.items():
            for r, alts in ((rel, ()), _REFS[part]):
                try:
                    paths[r] = self.path(root, r, alts)
                except ResourceError:
                    missing.append(f"{r} (looked in {root / r}" + "".join(f", {root / a}" for a in alts) + ")")
        if missing:
            raise ResourceError(
                "composite: missing release files: " + "; ".join(missing)
                + ". Download the Composite dataset (correctness CSVs) and the Flickr8k/Flickr30k/COCO captions "
                "into --data-root."
            )
        items: dict[str, ScoreItem] = {}
        human, part_of = [], []
        info: dict[str, Any] = {"skipped_unparsable_rows": {}, "dropped_candidate_is_reference": 0, "skipped_nan_ratings": 0}
        for part, (rel, k) in PARTS.items():
            ref_rel = _REFS[part][0]
            refs_by_image = _coco_refs(paths[ref_rel]) if part == "coco" else _token_refs(paths[ref_rel])
            skipped = 0
            csv_path = paths[rel]
            with open(csv_path, encoding="utf-8", newline="") as f:
                reader = csv.reader(f)
                header = next(reader, None)
                if header is None:
                    raise malformed(csv_path, "header", "empty file")
                for rowno, row in enumerate(reader, 2):
                    fields = row[3].split("http", 1)[1].split(";") if len(row) > 3 and "http" in row[3] else []
                    if len(fields) < 1 + 2 * k:
                        skipped += 1
                        continue
                    image_id = fields[0].split("/")[-1].rsplit(".", 1)[0]
                    cands = fields[1 : 1 + k]
                    try:
                        ratings = [float(x) for x in fields[1 + k : 1 + 2 * k]]
                    except ValueError:
                        skipped += 1
                        continue
                    if image_id not in refs_by_image:
                        raise malformed(csv_path, f"row {rowno}", f"image {image_id!r} has no references in {paths[ref_rel]}")
                    raw_refs = refs_by_image[image_id]
                    refs = tuple(collapse(r) for r in raw_refs)
                    for j, (cand, rating) in enumerate(zip(cands, ratings)):
                        if part == "flickr8k" and cand in raw_refs:
                            info["dropped_candidate_is_reference"] += 1
                            continue
                        if math.isnan(rating):
                            info["skipped_nan_ratings"] += 1
                            continue
                        # Aditya et al. 2015: each pair rated 1 to 5; an infinite or off-scale rating is refused
                        judgment(rating, csv_path, f"row {rowno}", "a rating", 1, 5)
                        key = f"{part}|{image_id}|{rowno}|{j}"
                        image = fields[0].split("/")[-1]
                        items[key] = ScoreItem(collapse(cand), refs, image=image)
                        human.append(rating)
                        part_of.append(part)
            info["skipped_unparsable_rows"][part] = skipped
        if not items:
            raise malformed(paths[PARTS["flickr8k"][0]], "all rows", "no parsable rating rows in the composite CSVs")
        info["rows"] = len(items)
        info["rows_per_part"] = {p: part_of.count(p) for p in PARTS}
        files = self.checksum_files(root, {r: paths[r] for r in paths}, info)
        data = {"human": np.array(human, float), "part": np.array(part_of)}
        return Loaded(self, {"": Setting("", items)}, data, files, info, root)

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        metric = np.asarray(scores[""], float)
        human, part = loaded.data["human"], loaded.data["part"]
        out = kendall_specs(metric, human, "", headline="c")
        for p in PARTS:
            sel = part == p
            if sel.sum() >= 2:
                out += kendall_specs(metric[sel], human[sel], "", suffix=f"_{p}", variants=("c",), headline="")
        return out

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]):
        return loaded.data["human"], np.asarray(scores[""], float)
