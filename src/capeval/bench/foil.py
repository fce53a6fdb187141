"""FOIL-COCO (Shekhar et al. 2017): prefer the original caption over its one-word foil."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench import statistics as stats
from capeval.bench._common import MID_ALL_PAIRS, accuracy_spec, count_spec
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, collapse, malformed, read_release_json

_FOIL = "foil/foilv1.0_test_2017.json"
_COCO = "foil/captions_val2014.json"
_COCO_ALT = ("coco/captions_val2014.json", "coco/annotations/captions_val2014.json", "composite/captions_val2014.json")


class Foil(Benchmark):
    name = "foil"
    title = "FOIL-COCO (test)"
    citation = (
        "Shekhar et al. 2017, FOIL it! Find One mismatch between Image and Language caption (ACL); "
        "protocol of Hessel et al. 2021 (CLIPScore)"
    )
    protocol = (
        "Annotations of foilv1.0_test_2017.json grouped by `id`: one original caption (foil: false) and its "
        "foils. Each (original, foil) pair is scored with references = the image's COCO val2014 captions minus "
        "the original (exact text), 4-ref setting, and the first of those, 1-ref setting; CHAIR's ground truth "
        "leaves the original out too, for both captions. Accuracy x100 = share of pairs with score(original) > "
        "score(foil), strictly (ties are errors, counted as ties_*: capeval's rule, which the papers do not state)."
    )
    protocol_id = "clipscore-v2"  # v2: CHAIR's ground truth without the original (issue 47)
    image_checksums = ()
    files = {_FOIL: None, _COCO: None}
    human_label = "original (1) vs foil (0)"

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        paths = {_FOIL: self.path(root, _FOIL), _COCO: self.path(root, _COCO, _COCO_ALT)}
        try:
            foil = read_release_json(paths[_FOIL])
            images = {int(im["id"]): str(im["file_name"]) for im in foil["images"]}
            anns = foil["annotations"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise malformed(paths[_FOIL], "JSON", f"expected {{images: [{{id, file_name}}], annotations: [...]}} ({exc})") from None
        try:
            coco = read_release_json(paths[_COCO])
            refs: dict[int, list[str]] = {}
            for a in coco["annotations"]:
                refs.setdefault(int(a["image_id"]), []).append(str(a["caption"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise malformed(paths[_COCO], "JSON", f"expected a COCO captions file ({exc})") from None
        groups: dict[Any, dict[str, list[dict[str, Any]]]] = {}
        for n, a in enumerate(anns):
            if not isinstance(a, dict) or not {"id", "image_id", "caption", "foil"} <= set(a):
                raise malformed(paths[_FOIL], f"annotations[{n}]", "expected id, image_id, caption, foil")
            if not isinstance(a["foil"], bool):  # the label: true (a foil caption) or false (the original)
                raise malformed(paths[_FOIL], f"annotations[{n}]", f"foil must be true or false, got {a['foil']!r:.40}")
            groups.setdefault(a["id"], {"foil": [], "orig": []})["foil" if a["foil"] else "orig"].append(a)
        pairs = []
        no_orig = []
        for gid, g in groups.items():
            if len(g["orig"]) != 1:
                no_orig.append(gid)
                continue
            orig = g["orig"][0]
            iid = int(orig["image_id"])
            if iid not in refs:
                raise malformed(paths[_COCO], f"image {iid}", "FOIL image has no COCO captions")
            kept = [r for r in refs[iid] if r != orig["caption"]]
            if not kept:
                raise malformed(paths[_COCO], f"image {iid}", "no reference left after removing the original caption")
            for f in g["foil"]:
                pairs.append((gid, iid, str(orig["caption"]), str(f["caption"]), tuple(collapse(r) for r in kept)))
        if no_orig:
            raise malformed(paths[_FOIL], f"id {no_orig[0]!r}", f"{len(no_orig)} caption group(s) without exactly one original caption")
        settings = {}
        for name, n_refs in (("1ref", 1), ("4ref", None)):
            items: dict[str, ScoreItem] = {}
            for k, (gid, iid, orig, foil_c, kept) in enumerate(pairs):
                r = kept[:1] if n_refs == 1 else kept
                image = images.get(iid)
                items[f"{k}/orig"] = ScoreItem(collapse(orig), r, image=image)
                items[f"{k}/foil"] = ScoreItem(collapse(foil_c), r, image=image)
            settings[name] = Setting(name, items, description=f"{name} references")
        info = {"pairs": len(pairs), "caption_groups": len(groups), "images": len({p[1] for p in pairs})}
        files = self.checksum_files(root, paths, info)
        # CHAIR's ground truth leaves the original out for both captions of a pair, as the references do
        excludes = {f"{k}/{side}": orig for k, (_, _, orig, _, _) in enumerate(pairs) for side in ("orig", "foil")}
        return Loaded(self, settings, pairs, files, info, root, options={"ties": "wrong"},
                      metric_options={**MID_ALL_PAIRS, "chair": {"truth_excludes": excludes}})

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        out = []
        for name in ("1ref", "4ref"):
            if name not in scores:
                continue
            sc = np.asarray(scores[name], float).reshape(-1, 2)
            correct = stats.pairwise_correct(sc[:, 0], sc[:, 1], np.zeros(len(sc), int), ties="wrong")
            out.append(accuracy_spec(f"accuracy_{name}", correct, name, headline=name == "4ref"))
            out.append(count_spec(f"ties_{name}", float((sc[:, 0] == sc[:, 1]).sum()), len(sc), name))
        return out
