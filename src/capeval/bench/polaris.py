"""Polaris (Wada et al., CVPR 2024, the Polos paper) and Nebula (Matsuda et al., ACCV 2024, the
DENEB paper): large human-judgment sets for image captioning, one human score per candidate.

Layouts (under ``--data-root``), exactly as the datasets publish them:

- Polaris, Hugging Face dataset ``yuwd/Polaris`` at revision :data:`POLARIS_REVISION`:
  ``polaris/polaris_test.csv`` (and ``polaris_val.csv``, ``polaris_train.csv``) with the
  columns the Polos code reads (``validate/dataset.py`` of the Polos demo): ``mt`` (the
  candidate), ``refs`` (a Python list literal of references), ``score`` (the human score) and
  ``imgid`` (the image file name inside ``images.tar.gz``, extracted to ``polaris/images/``).
- Nebula, Hugging Face dataset ``Ka2ukiMatsuda/Nebula`` at revision :data:`NEBULA_REVISION`:
  ``nebula/data/test-*.parquet`` with the columns of its dataset card: ``file_name``,
  ``image`` (embedded bytes), ``refs`` (list of strings), ``mt`` (the candidate),
  ``human_score``. Reading Parquet needs ``pyarrow`` (extra ``capeval[parquet]``).

Statistic: Kendall tau (b and c, x100) between the metric and the human score over the
test split's rows; tau-c is the headline, as in the Polos paper's Polaris column. The
sha256 of every file read is checked against the hashes below where the dataset publishes
one (a mismatch is a one-line error); files whose hash is not published are recorded in the
benchmark signature as computed here.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench._common import kendall_specs
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, collapse, malformed, sha256_file
from capeval.errors import InputError, ResourceError

POLARIS_REVISION = "c3a34f70ac797e64d2d5096c34add3507f7ce10c"
NEBULA_REVISION = "a4c99b14818d834bca2b9a8b1fa3741deda94b47"

# Git LFS sha256 published on the dataset's file pages; None: not published (recorded only)
POLARIS_FILES: dict[str, str | None] = {
    "polaris/polaris_test.csv": None,
    "polaris/polaris_val.csv": "fb57d64d31e09abd44ce152c83c8411b386e49d3ed55509c4b58d1f7556b54a4",
}


def _check(bench: str, root: Path, paths: Mapping[str, Path], known: Mapping[str, str | None],
           info: dict[str, Any]) -> dict[str, str]:
    """sha256 of every file; a published hash that differs is an error (one line)."""
    out, unknown = {}, []
    for rel, p in paths.items():
        digest = sha256_file(p)
        expected = known.get(rel)
        if expected is not None and digest != expected:
            raise ResourceError(f"{bench}: {p} differs from the published file (sha256 {digest[:12]}..., "
                                f"expected {expected[:12]}...); download it again")
        if expected is None:
            unknown.append(rel)
        out[rel] = digest
    if unknown:
        info["unverified_files"] = unknown  # no published hash: the computed one is in the signature
    return out


class _HumanScoreBenchmark(Benchmark):
    human_label = "human score"

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        return kendall_specs(np.asarray(scores[""], float), loaded.data, "", headline="c")

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]):
        return loaded.data, np.asarray(scores[""], float)


class Polaris(_HumanScoreBenchmark):
    name = "polaris"
    title = "Polaris (test split)"
    citation = ("Wada et al. 2024, Polos: Multimodal Metric Learning from Human Feedback for Image Captioning "
                f"(CVPR); data: huggingface.co/datasets/yuwd/Polaris@{POLARIS_REVISION[:12]}")
    protocol = ("26,122 test rows (candidate, references, image, mean human score in [0, 1]); Kendall tau-c "
                "(headline) and tau-b x100 between the metric and the human score; bootstrap resamples rows.")
    protocol_id = "polaris-v1"
    files = POLARIS_FILES

    def load(self, root: Path, seed: int = 0, split: str = "test", **options: Any) -> Loaded:
        if options:
            raise InputError(f"polaris: unknown option(s) {', '.join(sorted(options))} (known: split)")
        if split not in ("test", "val"):
            raise InputError(f"polaris: split must be 'test' or 'val', got {split!r}")
        rel = f"polaris/polaris_{split}.csv"
        path = self.path(root, rel)
        items: dict[str, ScoreItem] = {}
        human = []
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"mt", "refs", "score", "imgid"} - set(reader.fieldnames or ())
            if missing:
                raise malformed(path, "header", f"missing column(s) {', '.join(sorted(missing))}")
            for row_no, row in enumerate(reader, 2):
                where = f"row {row_no}"
                try:
                    refs = ast.literal_eval(row["refs"])  # the Polos code eval()s it; literal_eval is the safe subset
                    score = float(row["score"])
                except (ValueError, SyntaxError) as exc:
                    raise malformed(path, where, f"refs must be a list literal and score a number ({exc})") from None
                if not isinstance(refs, (list, tuple)) or not all(isinstance(r, str) for r in refs):
                    raise malformed(path, where, "refs must be a list of strings")
                if not np.isfinite(score):
                    raise malformed(path, where, f"score is {score}")
                items[str(len(items))] = ScoreItem(collapse(row["mt"]), tuple(collapse(r) for r in refs),
                                                   image=f"polaris/images/{row['imgid']}")
                human.append(score)
        if not items:
            raise malformed(path, "whole file", "no rows")
        info: dict[str, Any] = {"rows": len(items), "split": split, "revision": POLARIS_REVISION}
        files = _check(self.name, root, {rel: path}, self.files, info)
        return Loaded(self, {"": Setting("", items)}, np.array(human, float), files, info, root,
                      options={"split": split})


class Nebula(_HumanScoreBenchmark):
    name = "nebula"
    title = "Nebula (test split)"
    citation = ("Matsuda et al. 2024, DENEB: A Hallucination-Robust Automatic Evaluation Metric for Image "
                f"Captioning (ACCV); data: huggingface.co/datasets/Ka2ukiMatsuda/Nebula@{NEBULA_REVISION[:12]}")
    protocol = ("3,298 test rows (candidate mt, references, image, human score); Kendall tau-c (headline) and "
                "tau-b x100 between the metric and the human score; bootstrap resamples rows. Images are "
                "embedded in the Parquet files: extract them to <images>/nebula/images/<file_name> for "
                "image-conditioned metrics.")
    protocol_id = "nebula-v1"
    files: dict[str, str | None] = {}  # shard names carry their own hash suffix; no sha256 published here

    def load(self, root: Path, seed: int = 0, split: str = "test", **options: Any) -> Loaded:
        if options:
            raise InputError(f"nebula: unknown option(s) {', '.join(sorted(options))} (known: split)")
        if split not in ("test", "valid"):
            raise InputError(f"nebula: split must be 'test' or 'valid', got {split!r}")
        shards = sorted((root / "nebula" / "data").glob(f"{split}-*.parquet"))
        if not shards:
            raise ResourceError(f"nebula: missing data files nebula/data/{split}-*.parquet under {root}; "
                                f"download the dataset Ka2ukiMatsuda/Nebula@{NEBULA_REVISION[:12]} into {root / 'nebula'}")
        from capeval._optional import require

        pq = require("pyarrow.parquet", extra="parquet", purpose="the Nebula benchmark (Parquet files)")
        items: dict[str, ScoreItem] = {}
        human = []
        for shard in shards:
            try:
                table = pq.read_table(shard, columns=["file_name", "refs", "mt", "human_score"])
            except Exception as exc:  # pyarrow's errors: missing columns, not Parquet
                raise malformed(shard, "whole file", f"expected Parquet with file_name, refs, mt, human_score "
                                f"({str(exc).splitlines()[0]})") from None
            for k, row in enumerate(table.to_pylist()):
                refs, score = row["refs"], row["human_score"]
                if not isinstance(refs, list) or score is None or not np.isfinite(float(score)):
                    raise malformed(shard, f"row {k}", "refs must be a list and human_score a number")
                items[str(len(items))] = ScoreItem(collapse(str(row["mt"])), tuple(collapse(str(r)) for r in refs),
                                                   image=f"nebula/images/{row['file_name']}")
                human.append(float(score))
        info: dict[str, Any] = {"rows": len(items), "split": split, "revision": NEBULA_REVISION,
                                "shards": [s.name for s in shards]}
        files = _check(self.name, root, {f"nebula/data/{s.name}": s for s in shards}, self.files, info)
        return Loaded(self, {"": Setting("", items)}, np.array(human, float), files, info, root,
                      options={"split": split})
