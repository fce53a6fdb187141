"""Polaris (Wada et al., CVPR 2024, the Polos paper) and Nebula (Matsuda et al., ACCV 2024, the
DENEB paper): large human-judgment sets for image captioning, one human score per candidate.

Polaris protocol, read in the official evaluation code (github.com/keio-smilab24/Polos at
839d64d): ``validate/validate_cvpr.py`` lines 17-26 (``compute_coef``) evaluates the **test**
split only, ``data_en/polaris/polaris_test.csv``; ``validate/dataset.py`` lines 5-19 reads its
columns ``mt`` (the candidate, ``astype(str)``), ``refs`` (a Python list literal, ``eval``-ed:
**all** references of the row go to the metric), ``score`` (the human score, float) and
``imgid`` (the image file name inside ``data_en/polaris/images``, i.e. ``images.tar.gz``
extracted); ``polos/models/model_base.py`` lines 502-509 (``CVPRDataset``) keeps **every row**
(it asserts that each image opens; nothing is deduplicated, filtered or aggregated per image);
``validate/metrics.py`` lines 14-37 scores each row and correlates the per-row scores with the
per-row human scores through ``polos/metrics/regression_metrics.py`` lines 32-47:
``scipy.stats.kendalltau(x, y, variant="c")`` (kendall_type ``'c'``, line 25 of validate_cvpr.py).
So the statistic is Kendall tau-c x100 over all 26,122 test rows (tau-b is reported beside it,
as ``validate/compute_correlations.py`` lines 84-89 print both). Strings are passed on as
written (the Polos code does not normalise whitespace); an empty candidate is an error here
(pandas would have turned it into the string ``"nan"``).

Nebula protocol: the DENEB code (github.com/Ka2ukiMatsuda/DENEB at 0dfea82) is the Polos code
with Nebula's paths: ``validate/validate_cvpr.py`` lines 18-31 evaluate the **test** split
with ``kendall_type='c'``, ``validate/dataset.py`` lines 5-19 read the same four columns from
a CSV. The public release is the Hugging Face dataset ``Ka2ukiMatsuda/Nebula`` (Parquet:
``file_name``, ``image``, ``refs``, ``mt``, ``human_score``; train 26,382 / valid 3,298 /
test 3,298 rows, the repository README); this loader reads that release, row by row, all
references, tau-c headline. Test scores: ``scores="original"`` (the release's
``human_score``, the DENEB paper's numbers) or ``scores="corrected"`` (the Spica corrections
applied as the authors' kit does, see :mod:`capeval.bench.spica`; the numbers of arXiv
2512.21582). The default is ``original``: the benchmark's own paper.

Layouts (under ``--data-root``):

- Polaris, Hugging Face dataset ``yuwd/Polaris`` at revision :data:`POLARIS_REVISION`, its
  root files in ``polaris/``: ``polaris/polaris_test.csv`` (``polaris_val.csv``), images in
  ``polaris/images/<imgid>``.
- Nebula at revision :data:`NEBULA_REVISION`: ``nebula/data/test-*.parquet`` (reading Parquet
  needs ``pyarrow``, extra ``capeval[parquet]``); for ``scores="corrected"`` also
  ``spica/spica_{train,val,test}.csv``.

The sha256 of every file read is checked against the hashes below where the dataset publishes
one (a mismatch is a one-line error); files whose hash is not published are recorded in the
benchmark signature as computed here.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench import spica
from capeval.bench._common import kendall_specs
from capeval.bench.base import (Benchmark, Loaded, ScoreItem, Setting, StatSpec, check_loader_options, judgment,
                                malformed, sha256_file)
from capeval.errors import InputError, ResourceError

POLARIS_REVISION = "c3a34f70ac797e64d2d5096c34add3507f7ce10c"
NEBULA_REVISION = "a4c99b14818d834bca2b9a8b1fa3741deda94b47"
#: the human scores' scale: Polaris's and Nebula's are means of ratings normalised to [0, 1]
#: (Wada et al. 2024, Sec. 3; Matsuda et al. 2024); Spica corrects Nebula's on the same scale
HUMAN_SCALE = (0.0, 1.0)

# Git LFS sha256 published on the dataset's file pages; None: not published (recorded only).
# polaris_val.csv: huggingface.co/datasets/yuwd/Polaris/blob/da6b83d461434b45a9b520329ad1de3cc9bb0150/polaris_val.csv
# ("Git LFS Details"); no page giving polaris_test.csv's was found
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
    protocol_id = "polaris-v2"  # v2: strings as written (v1 collapsed whitespace)
    files = POLARIS_FILES
    loader_options = {"split": ("test", "val")}

    def load(self, root: Path, seed: int = 0, split: str = "test", **options: Any) -> Loaded:
        check_loader_options([self], {self.name: {"split": split, **options}})
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
                except (ValueError, SyntaxError) as exc:
                    raise malformed(path, where, f"refs must be a list literal ({exc})") from None
                if not isinstance(refs, (list, tuple)) or not all(isinstance(r, str) for r in refs):
                    raise malformed(path, where, "refs must be a list of strings")
                score = judgment(row["score"], path, where, "score", *HUMAN_SCALE)
                if not row["mt"].strip() or not row["imgid"].strip():
                    raise malformed(path, where, "empty candidate (mt) or image (imgid)")
                # as written: the Polos code hands mt and refs to the metric without normalising them
                items[str(len(items))] = ScoreItem(row["mt"], tuple(refs), image=f"polaris/images/{row['imgid']}")
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
                "tau-b x100 between the metric and the human score; bootstrap resamples rows; scores=original "
                "(the release's human_score) or scores=corrected (Spica corrections). Images are "
                "embedded in the Parquet files: extract them to <images>/nebula/images/<file_name> for "
                "image-conditioned metrics.")
    protocol_id = "nebula-v2"  # v2: strings as written; scores option
    files: dict[str, str | None] = {}  # shard names carry their own hash suffix; no sha256 published here
    loader_options = {"split": ("test", "valid"), "scores": ("original", "corrected")}

    def load(self, root: Path, seed: int = 0, split: str = "test", scores: str = "original",
             **options: Any) -> Loaded:
        check_loader_options([self], {self.name: {"split": split, "scores": scores, **options}})
        if scores == "corrected" and split != "test":
            raise InputError("nebula: scores=corrected applies to the test split only (the corrections are "
                             "of test scores)")
        fixes = spica.spica_paths(root) if scores == "corrected" else {}
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
                refs = row["refs"]
                if not isinstance(refs, list):
                    raise malformed(shard, f"row {k}", "refs must be a list")
                score = judgment(row["human_score"], shard, f"row {k}", "human_score", *HUMAN_SCALE)
                if not isinstance(row["mt"], str) or not row["mt"].strip() or not row["file_name"]:
                    raise malformed(shard, f"row {k}", "empty candidate (mt) or file_name")
                # as written (the DENEB code does not normalise the strings either)
                items[str(len(items))] = ScoreItem(row["mt"], tuple(str(r) for r in refs),
                                                   image=f"nebula/images/{row['file_name']}")
                human.append(float(score))
        info: dict[str, Any] = {"rows": len(items), "split": split, "scores": scores, "revision": NEBULA_REVISION,
                                "shards": [s.name for s in shards]}
        if fixes:
            human, info["corrected_rows"] = spica.apply([i.image for i in items.values()],
                                                        [i.candidate for i in items.values()], human,
                                                        spica.corrected_scores(fixes))
        paths = {f"nebula/data/{s.name}": s for s in shards} | fixes
        files = _check(self.name, root, paths, self.files, info)
        return Loaded(self, {"": Setting("", items)}, np.array(human, float), files, info, root,
                      options={"split": split, "scores": scores})
