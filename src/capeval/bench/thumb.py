"""THumB 1.0 (Kasai et al. 2022): MSCOCO captions rated for precision, recall and total."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench import statistics as stats
from capeval.bench._common import correlation_spec
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, collapse, judgment, malformed

_ROWS = "thumb/mscoco_THumB-1.0.jsonl"
_REFS = "thumb/mscoco_references.json"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise malformed(path, f"line {lineno}", f"invalid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise malformed(path, f"line {lineno}", "expected a JSON object")
            obj["_line"] = lineno
            out.append(obj)
    if not out:
        raise malformed(path, "whole file", "no records")
    return out


class THumB(Benchmark):
    name = "thumb"
    title = "THumB 1.0 (MSCOCO)"
    citation = "Kasai et al. 2022, Transparent Human Evaluation for Image Captioning (NAACL)"
    protocol = (
        "2,500 rows = 500 COCO val images x 5 systems (incl. Human); 4 references per image (the fifth "
        "COCO caption is the Human system's output). Pearson r x100 between the metric and precision P, "
        "recall R and the total score (human_score), over all rows and without the Human system's rows; "
        "bootstrap resamples rows."
    )
    protocol_id = "thumb-v1"
    image_checksums = ()  # COCO val2014 images; no checksum list published
    files = {
        _ROWS: "463ebf947c793a541922ead33eb10a885e77c19e9c7d27cf89e034bfff643efa",
        _REFS: "897672f1f53ed33a376237c33fabc89ebbd04b40e9ced82691c2e9c9324d8fdf",
    }
    human_label = "THumB total score"

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        paths = {rel: self.path(root, rel) for rel in self.files}
        refs: dict[str, tuple[str, ...]] = {}
        for rec in _jsonl(paths[_REFS]):
            if "seg_id" not in rec or not isinstance(rec.get("refs"), list) or not rec["refs"]:
                raise malformed(paths[_REFS], f"line {rec['_line']}", "expected {seg_id, refs: [...]}")
            refs[str(rec["seg_id"])] = tuple(collapse(str(r)) for r in rec["refs"])
        items: dict[str, ScoreItem] = {}
        human, systems = [], []
        for rec in _jsonl(paths[_ROWS]):
            where = f"line {rec['_line']}"
            try:
                seg, system, hyp = str(rec["seg_id"]), str(rec["SYS"]), str(rec["hyp"])
                raw = [rec["P"], rec["R"], rec["human_score"]]
            except KeyError as exc:
                raise malformed(paths[_ROWS], where, f"expected seg_id, SYS, hyp, P, R, human_score ({exc})") from None
            # THumB 1.0 (Kasai et al. 2022, Sec. 2): P and R on 1-5; the total is their mean plus three
            # penalties (fluency, conciseness, inclusive language), each between -0.5 and 0
            scores = [judgment(v, paths[_ROWS], where, what, low, 5)
                      for v, what, low in zip(raw, ("P", "R", "human_score"), (1, 1, -0.5))]
            if seg not in refs:
                raise malformed(paths[_ROWS], where, f"seg_id {seg!r} has no references in {_REFS}")
            key = f"{seg}|{system}"
            if key in items:
                raise malformed(paths[_ROWS], where, f"row {key!r} appears twice")
            items[key] = ScoreItem(collapse(hyp), refs[seg], image=str(rec.get("image", "")) or None)
            human.append(scores)
            systems.append(system)
        info = {
            "rows": len(items),
            "images": len({k.split("|")[0] for k in items}),
            "systems": sorted(set(systems)),
            "human_rows": sum(s == "Human" for s in systems),
        }
        files = self.checksum_files(root, paths, info)
        data = {"human": np.array(human, float), "system": np.array(systems)}
        return Loaded(self, {"": Setting("", items)}, data, files, info, root)

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        metric = np.asarray(scores[""], float)
        human = loaded.data["human"]
        keep = loaded.data["system"] != "Human"
        out = []
        for subset, sel in (("", slice(None)), ("_no_human", keep)):
            for j, what in enumerate(("P", "R", "total")):
                out.append(
                    correlation_spec(
                        f"pearson_{what}{subset}",
                        stats.pearson,
                        metric[sel],
                        human[sel, j],
                        "",
                        headline=(what == "total"),
                    )
                )
        return out

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]):
        return loaded.data["human"][:, 2], np.asarray(scores[""], float)
