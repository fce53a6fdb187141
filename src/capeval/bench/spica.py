"""The corrected Nebula test scores: human scores of the Spica release (Hugging Face dataset
``hiranohachiman/Spica``) replacing those of Nebula's test rows with the same image and candidate.

Where this comes from: the DENEB authors' reproduction kit (github.com/YuigaWada/CaptionEvalKit-for-VLMs
@23f154b, ``benchmarks/README.md``: "scores are corrected from matching ``imgid + mt`` rows in
``hiranohachiman/Spica``, matching the arXiv:2512.21582 note that Nebula annotation errors were
corrected"; the rule is ``capevalkit/infrastructure/benchmarks/legacy.py`` lines 515-550):

- key of a row: the image file name without its extension, and the candidate with its whitespace
  collapsed (``" ".join(mt.split())``);
- the corrected score of a key: the mean of ``score`` over every Spica row with that key, in all
  three files ``spica_train.csv``, ``spica_val.csv``, ``spica_test.csv`` (columns ``imgid``,
  ``mt``, ``score``);
- a Nebula test row whose key Spica lacks keeps its own ``human_score``.

Layout under ``--data-root``: ``spica/spica_{train,val,test}.csv``. No revision of the Spica
dataset is named by any source found (see docs/bench.md), so none is pinned: the sha256 of
each file read goes into the benchmark signature.
"""

from __future__ import annotations

import csv
from pathlib import Path, PurePosixPath

from capeval.bench.base import judgment, malformed
from capeval.errors import ResourceError

SPICA_FILES = ("spica/spica_train.csv", "spica/spica_val.csv", "spica/spica_test.csv")


def key(image: str, candidate: str) -> tuple[str, str]:
    """The matching key of a row: image name without extension, whitespace-collapsed candidate."""
    return PurePosixPath(image).stem, " ".join(candidate.split())


def spica_paths(root: Path) -> dict[str, Path]:
    """The three Spica files under ``root`` (a one-line error naming the first missing one)."""
    out = {rel: root / rel for rel in SPICA_FILES}
    for rel, p in out.items():
        if not p.is_file():
            raise ResourceError(f"nebula: scores=corrected needs {rel} under {root} (Hugging Face dataset "
                                f"hiranohachiman/Spica), missing; download it or pass scores=original")
    return out


def corrected_scores(paths: dict[str, Path]) -> dict[tuple[str, str], float]:
    """``{key: mean Spica score}`` over all rows of all files."""
    total: dict[tuple[str, str], float] = {}
    count: dict[tuple[str, str], int] = {}
    for path in paths.values():
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"imgid", "mt", "score"} - set(reader.fieldnames or ())
            if missing:
                raise malformed(path, "header", f"missing column(s) {', '.join(sorted(missing))}")
            for row_no, row in enumerate(reader, 2):
                score = judgment(row["score"], path, f"row {row_no}", "score", 0.0, 1.0)  # Nebula's scale
                k = key(row["imgid"], row["mt"])
                total[k] = total.get(k, 0.0) + score
                count[k] = count.get(k, 0) + 1
    return {k: total[k] / count[k] for k in total}


def apply(images: list[str], candidates: list[str], scores: list[float],
          lookup: dict[tuple[str, str], float]) -> tuple[list[float], int]:
    """Each row's corrected score (its own where Spica has no row of its key) and how many changed."""
    out, changed = [], 0
    for image, cand, score in zip(images, candidates, scores):
        new = lookup.get(key(image, cand), score)
        changed += new != score
        out.append(new)
    return out, changed
