"""LongCap-Arena (Matsuda et al., EMNLP 2025, "VELA: An LLM-Hybrid-as-a-Judge Approach for
Evaluating Long Image Captions"): long candidate captions of MLLMs against long human references,
judged by people from three perspectives (Descriptiveness, Relevance, Fluency); 7,805 images,
32,246 judgments (the paper's abstract).

Release read here: the Hugging Face dataset ``Ka2ukiMatsuda/LongCap-Arena`` (licence
BSD-3-Clause-Clear, the dataset card; the images are SA-1B images under SA-1B's terms). The card's
``configs`` list fifteen splits, ``{train,val,test,dci_val,dci_test}.{desc,rel,flu}``, each stored as
``data/<split>-NNNNN-of-NNNNN.parquet``; a row (the card's example) is ``file_name`` (``sa_<id>.jpg``),
``image`` (embedded, not read here), ``refs`` (a list of long reference captions), ``cand`` (the
long candidate) and ``score`` (the human judgment of that perspective, e.g. ``0.625``).

Protocol. The VELA paper evaluates on two test sets, Test A and Test B, per perspective, with
Kendall's tau between metric and human scores. The split names come from the reproduction kit of
the VELA authors' group (github.com/YuigaWada/CaptionEvalKit-for-VLMs, Y. Wada is a VELA
co-author; ``capevalkit/infrastructure/benchmarks/legacy.py`` at 23f154b): Test A = ``dci_val``,
Test B = ``dci_test``; that kit scores every row (all references of the row, one human score per
row) and reports tau-b and tau-c x100 (its expected values cite the paper's Table 1 and Appendix D
Table 4 for both). The VELA repository itself could not be read here. Headline: tau-c, the variant
of the same group's Polos / DENEB evaluation scripts (``kendall_type='c'``); tau-b is reported
beside it. Loader options: ``split`` (``test-a``, ``test-b``) and ``perspective`` (``desc``,
``rel``, ``flu``); the ``vela`` metric is told the perspective (its ``perspective`` option,
:attr:`Loaded.metric_options`; a user's ``-O vela.perspective`` still wins). Scores are accepted
in [0, 1] (the card's example is 0.625; the card does not state the scale): anything else, NaN
included, is a one-line error naming the shard and row. Whitespace in the candidate and in every
reference is collapsed by default (runs of spaces, tabs and newlines to one space, none at either
end: ``" ".join(s.split())``), as that kit's loader does (same file and commit: ``_normalize_text``,
line 76, applied to ``row["cand"]`` and each of ``row["refs"]`` in ``_write_hf_longcaparena_cache``,
lines 665-666). Loader option ``whitespace=keep`` passes the strings on as written (what capeval's
protocol ``longcap-arena-v1`` did); it is named in the benchmark signature (``whitespace:keep``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench._common import kendall_specs
from capeval.bench.base import (Benchmark, Loaded, ScoreItem, Setting, StatSpec, check_loader_options, collapse,
                                judgment, malformed)
from capeval.errors import ResourceError

REPO = "Ka2ukiMatsuda/LongCap-Arena"
#: no commit of the dataset could be read here: the download follows ``main`` and the files'
#: sha256 go into the benchmark signature as computed
REVISION = "main"
SPLITS = {"test-a": "dci_val", "test-b": "dci_test"}  # the paper's names -> the release's
PERSPECTIVES = {"desc": "Descriptiveness", "rel": "Relevance", "flu": "Fluency"}
HUMAN_SCALE = (0.0, 1.0)
#: how the captions' whitespace is read: collapsed as CaptionEvalKit's loader does (default), or as written
WHITESPACE = ("collapse", "keep")
_COLUMNS = ["file_name", "refs", "cand", "score"]


def shard_prefix(split: str, perspective: str) -> str:
    """``data/<release split>.<perspective>-``: the start of the shards' names in the release."""
    return f"data/{SPLITS[split]}.{perspective}-"


class LongCapArena(Benchmark):
    name = "longcap-arena"
    title = "LongCap-Arena (VELA paper; Test A / Test B x Descriptiveness / Relevance / Fluency)"
    citation = ("Matsuda et al. 2025, VELA: An LLM-Hybrid-as-a-Judge Approach for Evaluating Long Image Captions "
                f"(EMNLP); data: huggingface.co/datasets/{REPO}")
    protocol = ("One test set (split=test-a: dci_val, test-b: dci_test) and one perspective (perspective=desc, rel, "
                "flu) per run: every row (long candidate, all its long references, image, human score in [0, 1]), "
                "whitespace collapsed as CaptionEvalKit's loader does (whitespace=keep: strings as written); "
                "Kendall tau-c (headline) and tau-b x100 between metric and human scores; bootstrap resamples rows. "
                "Images are embedded in the Parquet files: capeval download writes them to "
                "<data>/longcap-arena/images/<file_name> (--images <data> for image-conditioned metrics).")
    protocol_id = "longcap-arena-v2"  # v2: whitespace collapsed by default (v1: strings as written)
    files: dict[str, str | None] = {}  # no sha256 published for the shards: recorded as computed
    human_label = "human score"
    loader_options = {"split": tuple(SPLITS), "perspective": tuple(PERSPECTIVES), "whitespace": WHITESPACE}

    def load(self, root: Path, seed: int = 0, split: str = "test-a", perspective: str = "desc",
             whitespace: str = "collapse", **options: Any) -> Loaded:
        check_loader_options([self], {self.name: {"split": split, "perspective": perspective,
                                                  "whitespace": whitespace, **options}})
        prefix = shard_prefix(split, perspective)
        folder = root / self.name / "data"
        shards = sorted(folder.glob(f"{Path(prefix).name}*.parquet"))
        if not shards:
            raise ResourceError(f"longcap-arena: missing data files {self.name}/{prefix}*.parquet under {root}; run "
                                f"`capeval download longcap-arena` (the dataset {REPO}) or pass --data-root DIR")
        from capeval._optional import require

        pq = require("pyarrow.parquet", extra="parquet", purpose="the LongCap-Arena benchmark (Parquet files)")
        items: dict[str, ScoreItem] = {}
        human: list[float] = []
        for shard in shards:
            k = -1
            try:
                batches = pq.ParquetFile(shard).iter_batches(columns=_COLUMNS, batch_size=256)
                for batch in batches:  # bounded memory: the embedded images are never read
                    for row in batch.to_pylist():
                        k += 1
                        where = f"row {k}"
                        items[str(len(items))] = _item(row, shard, where, whitespace == "collapse")
                        human.append(judgment(row["score"], shard, where, "score", *HUMAN_SCALE))
            except Exception as exc:
                if type(exc).__module__.startswith("pyarrow"):
                    raise malformed(shard, "whole file", f"expected Parquet with {', '.join(_COLUMNS)} "
                                    f"({str(exc).splitlines()[0]})") from None
                raise
        if not items:
            raise malformed(shards[0], "whole file", "no rows")
        info: dict[str, Any] = {"rows": len(items), "split": split, "release_split": f"{SPLITS[split]}.{perspective}",
                                "perspective": PERSPECTIVES[perspective], "revision": REVISION,
                                "whitespace": whitespace, "shards": [s.name for s in shards]}
        files = self.checksum_files(root, {f"{self.name}/data/{s.name}": s for s in shards}, info)
        info["unverified_files"] = sorted(files)  # nothing published to compare with
        # the default (collapse) is what protocol v2 means; the old reading is named where chosen
        named = {"split": split, "perspective": perspective, **({"whitespace": whitespace} if whitespace != "collapse"
                                                                  else {})}
        return Loaded(self, {"": Setting("", items)}, np.array(human, float), files, info, root, options=named,
                      metric_options={"vela": {"perspective": perspective}})

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        return kendall_specs(np.asarray(scores[""], float), loaded.data, "", headline="c")

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]):
        return loaded.data, np.asarray(scores[""], float)


def _item(row: Mapping[str, Any], shard: Path, where: str, collapsed: bool = True) -> ScoreItem:
    """One row as a :class:`ScoreItem`; ``collapsed``: its candidate and references whitespace-collapsed
    (``" ".join(s.split())``, CaptionEvalKit's ``_normalize_text``), else as written."""
    refs, cand, name = row["refs"], row["cand"], row["file_name"]
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) and r.strip() for r in refs):
        raise malformed(shard, where, "refs must be a non-empty list of non-empty strings")
    if not isinstance(cand, str) or not cand.strip():
        raise malformed(shard, where, "empty candidate (cand)")
    _image_name(name, shard, where)
    if collapsed:
        cand, refs = collapse(cand), [collapse(r) for r in refs]
    return ScoreItem(cand, tuple(refs), image=f"longcap-arena/images/{name}")


def _image_name(name: object, shard: Path, where: str, folder: Path | None = None) -> str:
    """``file_name`` of a row: a plain file name (no folder, no ``..``, no NUL or other control
    character), checked by :func:`capeval.paths.resolve_under` (``links=False`` under ``folder``
    when the image is written there); else a one-line error naming the shard and row."""
    from capeval.errors import InputError
    from capeval.paths import resolve_under

    if not isinstance(name, str) or not name.strip():
        raise malformed(shard, where, "empty file_name")
    if Path(name).name != name or "\\" in name or name in (".", ".."):
        raise malformed(shard, where, f"file_name must be a plain file name, got {name!r:.60}")
    try:
        resolve_under(folder or Path("images"), name, what="file_name", links=folder is None)
    except InputError as exc:
        raise malformed(shard, where, str(exc)) from None
    return name


def extract_images(root: Path) -> str:
    """Write the images embedded in the downloaded shards to ``root/longcap-arena/images/<file_name>``
    (where ``capeval bench --images ROOT`` looks for them); each name once, atomically, a batch
    of rows at a time. Returns a one-line note for ``capeval download``."""
    from capeval._optional import require
    from capeval.io.atomic import atomic_write_bytes

    shards = sorted((root / "longcap-arena" / "data").glob("*.parquet"))
    if not shards:
        return ""
    pq = require("pyarrow.parquet", extra="parquet", purpose="the LongCap-Arena images (Parquet files)")
    folder = root / "longcap-arena" / "images"
    folder.mkdir(parents=True, exist_ok=True)
    written = present = 0
    for shard in shards:
        k = -1  # the row in the shard, counted across batches (as the loader counts them)
        try:
            batches = pq.ParquetFile(shard).iter_batches(columns=["file_name", "image"], batch_size=32)
            for batch in batches:
                for row in batch.to_pylist():
                    k += 1
                    name = _image_name(row["file_name"], shard, f"row {k}", folder)
                    target = folder / name
                    if target.is_file():
                        present += 1
                        continue
                    image = row["image"]
                    data = image.get("bytes") if isinstance(image, dict) else None
                    if not data:
                        raise malformed(shard, f"row {k}", "no embedded image bytes")
                    atomic_write_bytes(target, data)
                    written += 1
        except Exception as exc:
            if type(exc).__module__.startswith("pyarrow"):
                raise malformed(shard, "whole file", f"expected Parquet with file_name, image "
                                f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
            raise
    return (f"images: {written} written, {present} already there, in {folder}; pass --images {root} to "
            "capeval bench for image-conditioned metrics (vela)")
