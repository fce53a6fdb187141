"""VDC's released question files (rese1f/aurora ``post_eval/<dimension>.jsonl``) as the script reads them.

Layout: one JSON object per line, ``{video_id: [{"question": str, "answer": str, "category": str},
...]}`` (one video per line in the release). ``process_vdc_result.py`` (lines 171-177) merges the
lines with ``dict.update``, so a video listed twice keeps its LAST list: the release's
``main_object.jsonl`` lists four videos twice (two of them with different questions). capeval keeps
the last list as the script does, and reports the replaced ids (``QAFile.replaced``, the result's
``extras["qa_replaced"]``) rather than replacing them silently. ``category`` is not read by the
script and not here.

``capeval download vdc`` puts the five files under ``<data root>/vdc/`` (sha256 below); a file
given with ``-O vdcscore.qa=FILE`` is read as it is, its sha256 in the signature.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from capeval.errors import InputError, shown
from capeval.metrics.vdcscore.prompts import COMMIT

DIMENSIONS = ("camera", "short", "background", "main_object", "detailed")
#: sha256 of each released file at :data:`~capeval.metrics.vdcscore.prompts.COMMIT`
RELEASE = {
    "camera": "d6f346a6c56c84e8bd3e8e40bc3ea9c2039763eb9e4f607fa1c412b3f7a1ea33",
    "short": "deaf83c8f5f55c9a8f515c2634cf49077bf42ebc1bbbd6b938bb99d5e5bec630",
    "background": "3f83846114a9b384ea0b58f90589bcc32787ccdf90f182638bfe393711d8b85b",
    "main_object": "a38b4b951427af0f8b316566a115942f7e3d88d8ffdc52b2f41202c37aeed303",
    "detailed": "f08bc3e97bcfb14fe9dd8d032c797066624b7b28e7239b0d4131486e5f83c982",
}
SIZES = {"camera": "2.4 MB", "short": "2.3 MB", "background": "2.3 MB", "main_object": "2.3 MB", "detailed": "2.7 MB"}
URL = "https://raw.githubusercontent.com/rese1f/aurora/{commit}/post_eval/{dimension}.jsonl"


@dataclass(frozen=True)
class QAFile:
    """The questions of each video (``{video_id: ((question, answer), ...)}``), the ids a later
    line replaced, the file's sha256 and the dimension it belongs to (``custom`` when unknown)."""

    questions: dict[str, tuple[tuple[str, str], ...]]
    replaced: tuple[str, ...]
    sha256: str
    dimension: str


def downloaded(dimension: str) -> Path:
    """Where ``capeval download vdc`` puts the file of ``dimension``."""
    from capeval.paths import data_home

    return data_home() / "vdc" / f"{dimension}.jsonl"


def locate(qa: str | os.PathLike[str] | None, dimension: str | None) -> tuple[Path, str]:
    """``(file, dimension)`` from the ``qa`` and ``dimension`` options (one-line errors).

    ``qa`` alone: its dimension is its file name's stem when that is one of :data:`DIMENSIONS`
    (``camera.jsonl``), else ``custom``; ``dimension`` alone: the downloaded release file."""
    if dimension is not None and dimension not in DIMENSIONS:
        raise InputError(f"option vdcscore.dimension: expected one of {', '.join(DIMENSIONS)}, got {shown(dimension)}")
    if qa is None or qa == "":
        if dimension is None:
            raise InputError("vdcscore needs the questions: -O vdcscore.dimension=camera (one of "
                             f"{', '.join(DIMENSIONS)}; after `capeval download vdc`) or -O vdcscore.qa=FILE.jsonl")
        path = downloaded(dimension)
        if not path.is_file():
            raise InputError(f"vdcscore: {path} not found: run `capeval download vdc` (the released question "
                             f"files of rese1f/aurora at {COMMIT[:7]}) or pass -O vdcscore.qa=FILE.jsonl")
        return path, dimension
    if not isinstance(qa, (str, os.PathLike)):
        raise InputError(f"option vdcscore.qa: expected a file name, got {shown(qa)}")
    path = Path(os.fspath(qa)).expanduser()
    stem = path.name[:-len(".jsonl")] if path.name.endswith(".jsonl") else path.stem
    return path, dimension or (stem if stem in DIMENSIONS else "custom")


def load(path: Path, dimension: str) -> QAFile:
    """Read a question file (bounded lines and nesting; one-line errors naming file and line)."""
    from capeval.hashing import file_digest
    from capeval.io.nesting import json_loads
    from capeval.io.reading import iter_lines

    questions: dict[str, tuple[tuple[str, str], ...]] = {}
    replaced: list[str] = []
    for n, line in enumerate(iter_lines(path), 1):
        if not line.strip():
            continue  # the script would stop on a blank line (json.loads('')); it carries nothing
        try:
            data = json_loads(line, str(path), line=n)
        except ValueError as exc:
            raise InputError(f"{path}, line {n}: not JSON ({str(exc).splitlines()[0][:120]})") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}, line {n}: expected an object {{video_id: [{{question, answer}}, ...]}}")
        for video, entries in data.items():
            if video in questions:
                replaced.append(video)  # the script's dict.update keeps this later list
            questions[video] = _entries(entries, video, path, n)
    if not questions:
        raise InputError(f"{path}: no videos (an empty question file)")
    return QAFile(questions, tuple(dict.fromkeys(replaced)), file_digest(path), dimension)


def _entries(entries: object, video: str, path: Path, line: int) -> tuple[tuple[str, str], ...]:
    """One video's ``[(question, answer), ...]``: a non-empty list of objects with string
    ``question`` and ``answer`` (the script divides by the list's length)."""
    where = f"{path}, line {line}, video {video!r}"
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{where}: expected a non-empty list of {{question, answer}} objects")
    out = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("question"), str) \
                or not isinstance(entry.get("answer"), str):
            raise InputError(f"{where}, question {k}: expected an object with string question and answer, got "
                             f"{shown(entry)}")
        out.append((entry["question"], entry["answer"]))
    return tuple(out)
