"""Pascal-50S (Vedantam et al. 2015): pairwise caption preference, four categories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench import statistics as stats
from capeval.bench._common import accuracy_spec, count_spec
from capeval.bench.base import (Benchmark, Loaded, ScoreItem, Setting, StatSpec, check_loader_options, collapse,
                                judgment, malformed, read_release_json)
from capeval.ranges import POSITIVE_INT

CATEGORIES = ("HC", "HI", "HM", "MM")
_JSON = "pascal50s/pascal_50s.json"
_MAT = "pascal50s/pascal50S.mat"


class Pascal50S(Benchmark):
    name = "pascal-50s"
    title = "Pascal-50S"
    citation = "Vedantam, Zitnick & Parikh 2015, CIDEr: Consensus-based Image Description Evaluation (CVPR)"
    protocol = (
        "4 x 1,000 caption pairs (HC: two human captions, correct; HI: human, one incorrect; HM: human vs "
        "machine; MM: two machine). Human label = the `label` field of pascal_50s.json (majority of 48 votes, "
        "random tie-break, by its producers). A metric prefers caption A iff score(A) > score(B); a tie counts "
        "as a vote for B as in the reference code (tie counts are reported as ties_<cat>). Reference-based "
        "metrics use 5 references drawn at random (without replacement, per pair, numpy default_rng(seed)) from "
        "the image's full list in pascal50S.mat, accuracy averaged over 5 draws; the `_fixed` statistics use "
        "the single draw stored in pascal_50s.json. Accuracy x100 per category and their mean; bootstrap "
        "resamples pairs within categories."
    )
    protocol_id = "reference-ties-second-v1"
    image_checksums = ("pascal_50s_checksum.txt",)
    files = {
        _JSON: "f6033bbcf74583a22d289cf080fff5b930c04cf6d29e33e0170552e8e0237da9",
        _MAT: "28178122b75e8c5f3c7a5690afe12fcd2a1121a9abe2658dc85901301a96a7d8",
    }
    human_label = "human-preferred caption"
    # defaults draws=5, nrefs=5, refs=both: the protocol above
    loader_options = {"draws": POSITIVE_INT, "nrefs": POSITIVE_INT, "refs": ("random", "fixed", "both")}

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        draws = int(options.get("draws", 5))
        nrefs = int(options.get("nrefs", 5))
        mode = options.get("refs", "both")
        check_loader_options([self], {self.name: options})
        paths = {_JSON: self.path(root, _JSON)}
        if mode != "fixed":
            paths[_MAT] = self.path(root, _MAT)
        jpath = paths[_JSON]
        try:
            data = read_release_json(jpath)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise malformed(jpath, "JSON", str(exc)) from None
        if not isinstance(data, dict) or set(CATEGORIES) - set(data):
            raise malformed(jpath, "top level", f"expected an object with keys {', '.join(CATEGORIES)}")
        full: dict[str, list[str]] = {}
        if _MAT in paths:
            full = read_pascal_mat(paths[_MAT])
        pairs = []  # (category, image basename, a, b, label, fixed refs)
        for cat in CATEGORIES:
            for i, rec in enumerate(data[cat]):
                try:
                    a, b = rec["captions"]
                    # the index of the caption the majority of the 48 votes preferred (Vedantam et al. 2015)
                    label = int(judgment(rec["label"], jpath, f"{cat}[{i}]", "label", 0, 1, integer=True))
                    refs = [str(r) for r in rec["references"]]
                    image = str(rec["image"]).rsplit("/", 1)[-1]
                except (KeyError, TypeError, ValueError) as exc:
                    raise malformed(jpath, f"{cat}[{i}]", f"expected captions [a, b], label, references, image ({exc})") from None
                if full and image not in full:
                    raise malformed(paths[_MAT], image, "image of pascal_50s.json has no reference list in pascal50S.mat")
                pairs.append((cat, image, str(a), str(b), label, refs))
        settings: dict[str, Setting] = {}
        if mode in ("random", "both"):
            rng = np.random.default_rng(seed)
            for d in range(draws):
                items: dict[str, ScoreItem] = {}
                for k, (cat, image, a, b, _label, _refs) in enumerate(pairs):
                    pool = full[image]
                    pick = rng.choice(len(pool), size=min(nrefs, len(pool)), replace=False)
                    refs = tuple(collapse(pool[j]) for j in pick)
                    items[f"{k}/a"] = ScoreItem(collapse(a), refs, image=image)
                    items[f"{k}/b"] = ScoreItem(collapse(b), refs, image=image)
                settings[f"draw{d + 1}"] = Setting(f"draw{d + 1}", items, description=f"random draw {d + 1}")
        if mode in ("fixed", "both"):
            items = {}
            for k, (cat, image, a, b, _label, refs) in enumerate(pairs):
                fixed = tuple(collapse(r) for r in refs)
                items[f"{k}/a"] = ScoreItem(collapse(a), fixed, image=image)
                items[f"{k}/b"] = ScoreItem(collapse(b), fixed, image=image)
            settings["fixed"] = Setting("fixed", items, description="references of pascal_50s.json")
        in_full = sum(all(collapse(r) in {collapse(x) for x in full.get(im, [])} for r in refs) for _c, im, _a, _b, _l, refs in pairs)
        sizes: dict[str, int] = {}
        for lst in full.values():
            sizes[str(len(lst))] = sizes.get(str(len(lst)), 0) + 1
        info = {
            "pairs": {c: sum(p[0] == c for p in pairs) for c in CATEGORIES},
            "label_share_first": round(float(np.mean([p[4] == 0 for p in pairs])), 4),
            "label_check": "pascal_50s.json carries labels but not the 48 votes; the majority vote cannot be "
            "recomputed from the local files (votes are in consensus_pascal.mat of the original release)",
            "fixed_draw_references_found_in_mat": in_full if full else None,
            "reference_list_sizes": sizes,
            "draws": draws if mode != "fixed" else 0,
            "ties": "second caption (reference code)",
        }
        files = self.checksum_files(root, paths, info)
        opts = {"draws": draws if mode != "fixed" else None, "nrefs": nrefs, "refs": mode, "seed": seed, "ties": "second"}
        return Loaded(self, settings, pairs, files, info, root, options=opts)

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        pairs = loaded.data
        cats = np.array([p[0] for p in pairs])
        labels = np.array([p[4] for p in pairs])
        out: list[StatSpec] = []
        groups = {}
        draws = sorted(s for s in scores if s.startswith("draw"))
        if draws:
            groups[""] = draws
        if "fixed" in scores:
            groups["_fixed"] = ["fixed"]
        for suffix, names in groups.items():
            correct = np.zeros(len(pairs))
            ties = np.zeros(len(pairs))
            for s in names:
                sc = np.asarray(scores[s], float).reshape(-1, 2)
                correct += stats.pairwise_correct(sc[:, 0], sc[:, 1], labels, ties="second")
                ties += sc[:, 0] == sc[:, 1]
            correct /= len(names)
            ties /= len(names)
            setting = names[0]
            for cat in CATEGORIES:
                sel = cats == cat
                out.append(accuracy_spec(f"accuracy_{cat}{suffix}", correct[sel], setting))
            out.append(accuracy_spec(f"accuracy_mean{suffix}", correct, setting, strata=cats, headline=suffix == ""))
            for cat in CATEGORIES:
                sel = cats == cat
                out.append(count_spec(f"ties_{cat}{suffix}", float(ties[sel].sum()), int(sel.sum()), setting))
        return out


def read_pascal_mat(path: Path) -> dict[str, list[str]]:
    """``{image basename: [reference sentences]}`` from pascal50S.mat (no scipy needed)."""
    from capeval.bench.matfile import loadmat

    mat = loadmat(path)
    if "train_sent_final" not in mat:
        raise malformed(path, "variables", f"expected 'train_sent_final', found {sorted(mat)}")
    out: dict[str, list[str]] = {}
    for k, entry in enumerate(np.asarray(mat["train_sent_final"]).ravel()):
        if not isinstance(entry, dict) or "name" not in entry or "sentences" not in entry:
            raise malformed(path, f"train_sent_final[{k}]", "expected a struct with fields name, sentences")
        name = str(entry["name"]).rsplit("/", 1)[-1]
        sents = [str(s).strip() for s in np.asarray(entry["sentences"]).ravel()]
        out[name] = [s for s in sents if s]
    return out
