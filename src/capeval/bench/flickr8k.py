"""Flickr8k-Expert and Flickr8k-CF (Hodosh et al. 2013), as CLIPScore / PAC-S evaluate them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench._common import MID_ALL_PAIRS, kendall_specs
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, collapse, judgment, malformed

_CITE = (
    "Hodosh, Young & Hockenmaier 2013, Framing Image Description as a Ranking Task: Data, Models "
    "and Evaluation Metrics (JAIR 47)"
)
_TOKENS = "flickr8k/Flickr8k.token.txt"


def read_flickr8k_tokens(path: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(``{caption_id: text}``, ``{image: [texts in file order]}``) from Flickr8k.token.txt."""
    captions: dict[str, str] = {}
    by_image: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            cid, sep, text = line.rstrip("\n").partition("\t")
            if not sep or "#" not in cid:
                raise malformed(path, f"line {lineno}", "expected '<image>.jpg#<k><TAB><caption>'")
            captions[cid] = text
            by_image.setdefault(cid.split("#")[0], []).append(text)
    if not captions:
        raise malformed(path, "whole file", "no captions")
    return captions, by_image


def expert_pairs(root: Path) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """The 5,664 distinct Flickr8k-Expert (image, caption) pairs as a COCO-style scoring set.

    ``(ids, {id: candidate}, {id: [the image's 5 references]})`` with ids ``"<image>|<caption id>"``
    in file order; pairs whose caption belongs to the image itself and repeated pairs are
    left out. The speed benchmarks and the parity tests score this set with the ``coco``
    preset.
    """
    root = Path(root)
    captions, by_image = read_flickr8k_tokens(root / _TOKENS)
    ids: list[str] = []
    cands: dict[str, str] = {}
    refs: dict[str, list[str]] = {}
    path = root / "flickr8k" / "ExpertAnnotations.txt"
    for image, cid, *_rest, lineno in _read_tsv(path, 5, "image, caption id, 3 expert scores"):
        key = f"{image}|{cid}"
        if cid.split("#")[0] == image or key in cands:
            continue
        ids.append(key)
        cands[key] = _caption(captions, cid, path, lineno)
        refs[key] = by_image[image]
    return ids, cands, refs


def _read_tsv(path: Path, ncols: int, what: str) -> list[list[str]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != ncols:
                raise malformed(path, f"line {lineno}", f"expected {ncols} tab-separated columns ({what}), got {len(cols)}")
            rows.append(cols + [str(lineno)])
    if not rows:
        raise malformed(path, "whole file", "no rows")
    return rows


def _caption(captions: Mapping[str, str], cid: str, path: Path, lineno: str) -> str:
    if cid not in captions:
        raise malformed(path, f"line {lineno}", f"caption id {cid!r} is not in {_TOKENS}")
    return captions[cid]


class Flickr8kExpert(Benchmark):
    name = "flickr8k-expert"
    title = "Flickr8k-Expert"
    citation = _CITE
    protocol = (
        "5,822 expert-judged (image, caption) pairs; pairs whose candidate is one of the image's own "
        "references (whitespace-collapsed text) are dropped (158), leaving 5,664 pairs. Each of the three "
        "expert ratings (1-4) is a separate row (16,992). References: the image's 5 Flickr8k captions. "
        "Kendall tau-b and tau-c x100 (papers report tau-c). Bootstrap resamples pairs, keeping a pair's "
        "three rows together."
    )
    protocol_id = "clipscore-v1"
    image_checksums = ("flickr8k_checksum.txt",)
    files = {
        "flickr8k/ExpertAnnotations.txt": "56c2b1a9e1a46ba73b8b151abd7c3c8b1676fbacadb559d0c2eb6524b166cf4f",
        _TOKENS: "1e1f3a371ba1a1bf742e6930521c037e046b2bf3fcc2390ba8405e0301ed7689",
    }
    human_label = "expert rating (1-4)"

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        paths = {rel: self.path(root, rel) for rel in self.files}
        captions, by_image = read_flickr8k_tokens(paths[_TOKENS])
        ann = paths["flickr8k/ExpertAnnotations.txt"]
        rows = _read_tsv(ann, 5, "image, caption id, 3 expert scores")
        items: dict[str, ScoreItem] = {}
        human = []
        dropped = 0
        for image, cid, s1, s2, s3, lineno in rows:
            if image not in by_image:
                raise malformed(ann, f"line {lineno}", f"image {image!r} has no captions in {_TOKENS}")
            # Hodosh et al. 2013, Sec. 4.2: each expert scores a pair 1 (no relation) to 4 (no errors)
            ratings = [judgment(s, ann, f"line {lineno}", "an expert score", 1, 4, integer=True) for s in (s1, s2, s3)]
            refs = tuple(collapse(r) for r in by_image[image])
            cand = collapse(_caption(captions, cid, ann, lineno))
            if cand in refs:
                dropped += 1
                continue
            key = f"{image}|{cid}"
            if key in items:
                raise malformed(ann, f"line {lineno}", f"pair {key!r} appears twice")
            items[key] = ScoreItem(cand, refs, image=image)
            human.append(ratings)
        info = {"rows_in_file": len(rows), "pairs": len(items), "rows": 3 * len(items), "dropped_candidate_is_reference": dropped}
        files = self.checksum_files(root, paths, info)
        return Loaded(self, {"": Setting("", items)}, np.array(human, dtype=float), files, info, root)

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        human = loaded.data  # (pairs, 3)
        metric = np.repeat(np.asarray(scores[""], float), 3)
        table = np.arange(human.size).reshape(-1, 3)
        return kendall_specs(metric, human.ravel(), "", rows_per_unit=table, headline="c")

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]):
        return loaded.data.ravel(), np.repeat(np.asarray(scores[""], float), 3)


class Flickr8kCF(Benchmark):
    name = "flickr8k-cf"
    title = "Flickr8k-CF (CrowdFlower)"
    citation = _CITE
    protocol = (
        "47,830 (image, caption) pairs with CrowdFlower yes/no judgments; human score = #yes / (#yes + #no). "
        "Each image's reference list loses every caption judged as a candidate for that image "
        "(whitespace-collapsed text match); all candidates of the image are scored against the reduced list. "
        "Images whose list would become empty have their pairs dropped (counted; none on the release files). "
        "Kendall tau-b (reported by papers) and tau-c x100; bootstrap resamples pairs."
    )
    protocol_id = "clipscore-v1"
    image_checksums = ("flickr8k_checksum.txt",)
    files = {
        "flickr8k/CrowdFlowerAnnotations.txt": "72a74aef443df4848fb1f3c23654ee9e0ca5b528198f68e2efedf11b6ca61260",
        _TOKENS: "1e1f3a371ba1a1bf742e6930521c037e046b2bf3fcc2390ba8405e0301ed7689",
    }
    human_label = "share of 'yes' judgments"

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        paths = {rel: self.path(root, rel) for rel in self.files}
        captions, by_image = read_flickr8k_tokens(paths[_TOKENS])
        ann = paths["flickr8k/CrowdFlowerAnnotations.txt"]
        rows = _read_tsv(ann, 5, "image, caption id, fraction yes, #yes, #no")
        judged: dict[str, set[str]] = {}
        parsed = []
        for image, cid, _frac, yes, no, lineno in rows:
            if image not in by_image:
                raise malformed(ann, f"line {lineno}", f"image {image!r} has no captions in {_TOKENS}")
            # counts of yes/no judgments: whole numbers >= 0
            n_yes, n_no = (int(judgment(v, ann, f"line {lineno}", what, 0, math.inf, integer=True))
                           for v, what in ((yes, "#yes"), (no, "#no")))
            cand = collapse(_caption(captions, cid, ann, lineno))
            judged.setdefault(image, set()).add(cand)
            parsed.append((image, cid, cand, n_yes, n_no, lineno))
        reduced = {im: tuple(r for r in (collapse(x) for x in by_image[im]) if r not in judged[im]) for im in judged}
        empty = sorted(im for im, refs in reduced.items() if not refs)
        items: dict[str, ScoreItem] = {}
        human = []
        dropped_empty = dropped_nojudg = 0
        for image, cid, cand, n_yes, n_no, lineno in parsed:
            if not reduced[image]:
                dropped_empty += 1
                continue
            if n_yes + n_no == 0:
                dropped_nojudg += 1
                continue
            key = f"{image}|{cid}"
            if key in items:
                raise malformed(ann, f"line {lineno}", f"pair {key!r} appears twice")
            items[key] = ScoreItem(cand, reduced[image], image=image)
            human.append(n_yes / (n_yes + n_no))
        sizes: dict[int, int] = {}
        for refs in reduced.values():
            sizes[len(refs)] = sizes.get(len(refs), 0) + 1
        info = {
            "rows_in_file": len(rows),
            "pairs": len(items),
            "images": len(reduced),
            "reference_list_sizes": {str(k): v for k, v in sorted(sizes.items())},
            "images_with_empty_reference_list": empty,
            "pairs_dropped_empty_references": dropped_empty,
            "pairs_dropped_no_judgments": dropped_nojudg,
        }
        files = self.checksum_files(root, paths, info)
        return Loaded(self, {"": Setting("", items)}, np.array(human, dtype=float), files, info, root,
                      metric_options=MID_ALL_PAIRS)

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        return kendall_specs(np.asarray(scores[""], float), loaded.data, "", headline="b")

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]):
        return loaded.data, np.asarray(scores[""], float)
