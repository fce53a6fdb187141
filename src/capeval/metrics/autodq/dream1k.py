"""The DREAM-1K annotation file (Tarsier's ``data/annotations/DREAM-1k.jsonl``), read as
``evaluation/evaluate.py`` reads it.

Released in bytedance/tarsier; the Hugging Face dataset the README names, ``omni-research/DREAM-1K``
(gated; ``video/video.zip``, 3.85 GB, and ``json/metadata.json``, its fields ``idx``, ``video_file``,
``source``, ``duration``, ``description``, ``events``, ``n_subjects``, ``n_shots``, ``n_events`` all
typed as strings, revision 99da78d, as its card and file listing show) holds the videos and
annotations in another layout, not read here (capeval has no copy to check it against). The repository
file: 1,000 records, one JSON object a line, 200 per subtask (``dataset``): ``DREAM/movie_animation``,
``DREAM/movie_live_action``, ``DREAM/vertical_video``, ``DREAM/videvo``, ``DREAM/youtube`` (the
``tarsier`` branch's first release names the third and fourth ``DREAM/shorts`` and ``DREAM/stock``;
same texts and events).
Two layouts, both read here:

- ``main``/``tarsier2`` (:data:`RELEASE`): ``messages`` (a user turn with the video and the
  instruction, an assistant turn whose text part carries the human description as
  ``reference``), ``dataset``, ``task``, ``idx``, ``vid``, ``extra_info`` (``duration``,
  ``events``, ``n_events``, ``n_shots``, ``n_subjects``);
- ``tarsier`` branch (:data:`RELEASE_V1`): ``text: {prompt, response}``, ``video_file``, the rest alike.

As ``evaluate.py`` does (lines 22-74 at :data:`COMMIT`): records whose ``dataset`` does not
start with ``DREAM/`` are not DREAM-1K's and are skipped; the reference is the ``reference`` of
every assistant text part joined (``extract_item_for_eval``); ``extra_info.events``, when a
list, are the reference's events (otherwise the judge extracts them). The item id is ``vid``
(the README: the video file is named by it); a second record with the same id is refused
(the script keeps the first of a repeated ``dataset`` + ``idx`` silently). Read line by line,
each line bounded (:func:`capeval.io.reading.iter_lines`) and its nesting checked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capeval.errors import InputError
from capeval.metrics.autodq.official import COMMIT, REPO

FILE = "data/annotations/DREAM-1k.jsonl"
#: sha256 of DREAM-1k.jsonl at COMMIT (branches main and tarsier2) and on the tarsier branch (e3f27ef)
RELEASE = "f1d1e15c8568a7a30e32354bf9e9db18d16746c6b52b786452819eccbc7353b4"
RELEASE_V1 = "171d7c14c0c49407eadf3d96a4dc2a6d5314fc2e2281cd247a97250a16cc2f15"
URL = f"https://raw.githubusercontent.com/{REPO}/{COMMIT}/{FILE}"
HF_DATASET = "omni-research/DREAM-1K"
SUBTASKS = ("DREAM/movie_animation", "DREAM/movie_live_action", "DREAM/vertical_video", "DREAM/videvo",
            "DREAM/youtube")


@dataclass(frozen=True)
class Record:
    """One video: its human description, its annotated events (None: to be extracted), its subtask."""

    reference: str
    events: tuple[str, ...] | None
    subtask: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Annotations:
    """The records by id (``vid`` as text), and the file's sha256."""

    records: dict[str, Record]
    sha256: str
    path: str


def _reference(rec: dict[str, Any], where: str) -> str:
    if isinstance(rec.get("messages"), list):
        parts = []
        for msg in rec["messages"]:
            if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
                raise InputError(f"{where}: a message without a content list")
            if msg.get("role") != "assistant":
                continue
            for part in msg["content"]:
                if isinstance(part, dict) and part.get("type") == "text" and part.get("reference"):
                    if not isinstance(part["reference"], str):
                        raise InputError(f"{where}: a reference that is not text")
                    parts.append(part["reference"])
        text = "".join(parts)
    elif isinstance(rec.get("text"), dict) and isinstance(rec["text"].get("response"), str):
        text = rec["text"]["response"]
    else:
        raise InputError(f"{where}: neither 'messages' (Tarsier2 layout) nor 'text.response' (Tarsier layout)")
    if not text.strip():
        raise InputError(f"{where}: the reference description is empty")
    return text


def load(path: str | os.PathLike[str]) -> Annotations:
    """The DREAM-1K records of an annotation file (either layout); one-line errors naming the line."""
    import hashlib
    import json

    from capeval.io.nesting import json_loads
    from capeval.io.reading import iter_lines

    path = Path(path).expanduser()
    digest = hashlib.sha256()
    records: dict[str, Record] = {}
    for n, line in enumerate(iter_lines(path), 1):
        digest.update(line.encode("utf-8"))
        if not line.strip():
            continue
        where = f"{path}, line {n}"
        try:
            rec = json_loads(line, str(path), line=n)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object")
        dataset = rec.get("dataset")
        if not isinstance(dataset, str):
            raise InputError(f"{where}: no 'dataset' name")
        if dataset.split("/")[0] != "DREAM":  # evaluate.py:65, the benchmark's records only
            continue
        vid = rec.get("vid", rec.get("idx"))
        if isinstance(vid, bool) or not isinstance(vid, (int, str)) or not str(vid).strip():
            raise InputError(f"{where}: no 'vid' (the video id)")
        key = str(vid)
        if key in records:
            raise InputError(f"{where}: video {key!r} appears twice (ids must be unique)")
        extra = rec.get("extra_info") or {}
        if not isinstance(extra, dict):
            raise InputError(f"{where}: 'extra_info' is not an object")
        events = extra.get("events")
        if isinstance(events, list):  # evaluate_dream_gpt.py:246, else extracted by the judge
            if not all(isinstance(e, str) for e in events):
                raise InputError(f"{where}: 'extra_info.events' holds something that is not text")
            events = tuple(events)
        else:
            events = None
        counts = {k: extra[k] for k in ("n_subjects", "n_shots", "n_events")
                  if isinstance(extra.get(k), int) and not isinstance(extra.get(k), bool)}
        records[key] = Record(_reference(rec, where), events, dataset, counts)
    if not records:
        raise InputError(f"{path}: no DREAM-1K record (a 'dataset' starting with 'DREAM/')")
    return Annotations(records, digest.hexdigest(), os.fspath(path))
