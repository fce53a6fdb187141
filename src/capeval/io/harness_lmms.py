"""lmms-eval's ``--log_samples`` files read as candidates, references and item ids.

lmms-eval 0.7.3 (PyPI) writes one JSON object a line to ``<date>_samples_<task>.jsonl``
(``loggers/evaluation_tracker.py``, ``EvaluationTracker.save_results_samples``): the record
``evaluator.py`` built in ``_process_document_results`` (``doc_id``, ``target``,
``filtered_resps`` flattened to one value when the document had one request, ``resps`` only
when it differs, ...) without ``doc`` and ``arguments``, updated with the task's
``process_results`` output: one field per metric, each holding the dict the task's
aggregation reads. The dataset document itself is not kept, so candidates, references and
ids are read from those per-metric dicts, in each task's own layout (:data:`TASKS`, each
entry naming the lmms-eval function that wrote it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from capeval.errors import InputError, UnknownNameError, shown
from capeval.io.inputs import id_text

#: the lmms-eval release whose layouts :data:`TASKS` describes
LMMS_EVAL_VERSION = "0.7.3"


@dataclass(frozen=True)
class Layout:
    """Where one lmms-eval task's ``process_results`` put an item's pieces."""

    field: str  # the per-metric field holding the item's dict
    ids: tuple[str, ...]  # fields of that dict naming the item ("doc_id" is the record's own)
    references: str | None  # field of that dict with the references (a list, or one string), None: none
    candidate: str  # "pred" (that dict's, the text the task scored) or "filtered_resps" (the record's)
    source: str  # the lmms-eval function that wrote the dict

    def item_id(self, record: dict[str, Any], entry: dict[str, Any], where: str) -> str:
        if self.ids == ("doc_id",):  # amber_g: the log keeps no AMBER id; the dataset lists ids 1.. in order
            doc = record.get("doc_id")
            if not isinstance(doc, int) or isinstance(doc, bool) or doc < 0:
                raise InputError(f"{where}: doc_id must be a whole number >= 0, got {shown(doc)}")
            return str(doc + 1)
        parts = []
        for name in self.ids:
            if name not in entry:
                raise InputError(f"{where}: {self.field} has no {name!r} (the item id in {self.source})")
            value = entry[name]
            if isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                parts.extend(id_text(v, where) for v in value)  # youcook2's segment [start, end]
            else:
                parts.append(id_text(value, f"{where}: {self.field}.{name}"))
        return "_".join(parts)


def _layout(prefix: str, source: str, ids: tuple[str, ...] = ("image_id",)) -> Layout:
    return Layout(f"{prefix}CIDEr", ids, "answer", "pred", source)


def _test(prefix: str, source: str) -> Layout:  # test splits: no references; ``pred`` may be the whole list
    return Layout(f"{prefix}passthrough", ("image_id",), None, "filtered_resps", source)


_COCO = _layout("coco_", "tasks/coco_cap/utils.py coco_process_result")
_KARPATHY = _layout("coco_", "tasks/coco_cap/utils.py coco_process_result_karpathy")
_NOCAPS = _layout("nocaps_", "tasks/nocaps/utils.py nocaps_process_result")
_FLICKR = _layout("flickr_", "tasks/flickr30k/utils.py flickr_process_result")
_TEXTCAPS = _layout("textcaps_", "tasks/textcaps/utils.py textcaps_process_result")
_VATEX = _layout("vatex_", "tasks/vatex/utils.py vatex_process_result", ("video_id",))
_CAPEVAL = _layout("capeval_", "capeval/harness/lmms_tasks.py process_result")

#: lmms-eval task name -> its layout (lmms-eval 0.7.3's caption tasks; capeval's own task files)
TASKS: dict[str, Layout] = {
    **dict.fromkeys(("coco2014_cap_val", "coco2017_cap_val", "coco2017_cap_val_lite"), _COCO),
    **dict.fromkeys(("coco_karpathy_val", "coco_karpathy_test"), _KARPATHY),
    "coco2014_cap_test": _test("coco_", "tasks/coco_cap/utils.py coco_test_process_result"),
    "coco2017_cap_test": _test("coco_", "tasks/coco_cap/utils.py coco_test_process_result"),
    **dict.fromkeys(("nocaps_val", "nocaps_val_lite"), _NOCAPS),
    "nocaps_test": _test("nocaps_", "tasks/nocaps/utils.py nocaps_test_process_result"),
    **dict.fromkeys(("flickr30k_test", "flickr30k_test_lite"), _FLICKR),
    **dict.fromkeys(("textcaps_val", "textcaps_val_lite", "textcaps_train"), _TEXTCAPS),
    "textcaps_test": _test("textcaps_", "tasks/textcaps/utils.py textcaps_test_process_result"),
    "vatex_test": _VATEX,
    "vatex_val_zh": Layout("vatex_CIDEr", ("video_id",), "answer", "pred",
                           "tasks/vatex/utils.py vatex_process_CN_result"),
    # one reference sentence per segment; the id is the video and the segment's start and end
    "youcook2_val": Layout("CIDEr", ("video", "timestamp"), "answer", "pred",
                           "tasks/youcook2/utils.py youcook2_process_results"),
    "detailcaps": _layout("detailcaps_", "tasks/detailcaps/utils.py detailcaps_process_result"),
    # ``pred`` is the caption's object words there; ``answer`` the image's objects, not captions
    "coco_cap_chair": Layout("coco_cap_chair_i", ("image_id",), None, "filtered_resps",
                             "tasks/coco_cap_chair/utils.py coco_cap_chair_process_result"),
    "amber_g": Layout("amber_chair", ("doc_id",), None, "filtered_resps",
                      "tasks/amber_g/utils.py amber_g_process_result"),
    **dict.fromkeys(("capeval_coco2017_cap_val", "capeval_coco2017_cap_val_clip", "capeval_coco2014_cap_val",
                     "capeval_nocaps_val", "capeval_flickr30k_test", "capeval_textcaps_val"), _CAPEVAL),
}

_NAME = re.compile(r"(?:.*_)?samples_(.+)\.jsonl")


def task_of(path: Path, task: str | None) -> tuple[str, Layout]:
    """The task of a samples file: ``task`` when given, else the ``<task>`` of lmms-eval's file name
    ``<date>_samples_<task>.jsonl``; an unknown task is an error listing the known ones."""
    if task is None:
        match = _NAME.fullmatch(path.name)
        if match is None:
            raise InputError(f"{path}: not an lmms-eval samples file name (<date>_samples_<task>.jsonl); give the "
                             "task as --from lmms-eval:TASK")
        task = match.group(1)
    if task not in TASKS:
        raise UnknownNameError(f"lmms-eval task {task!r} is not a caption task capeval reads (known: "
                               f"{', '.join(sorted(TASKS))})")
    return task, TASKS[task]


def _candidate(layout: Layout, record: dict[str, Any], entry: dict[str, Any], where: str) -> str:
    if layout.candidate == "pred":
        value = entry.get("pred")
        if not isinstance(value, str):
            raise InputError(f"{where}: {layout.field}.pred must be the caption (a string), got {shown(value)}")
        return value
    value = record.get("filtered_resps")
    if isinstance(value, list) and len(value) == 1:  # a document's one request, not flattened
        value = value[0]
    if isinstance(value, list):
        raise InputError(f"{where}: {len(value)} responses for one document (repeats?); capeval scores one caption "
                         "an item")
    if not isinstance(value, str):
        raise InputError(f"{where}: filtered_resps must be the caption (a string), got {shown(value)}")
    return value


def _references(layout: Layout, entry: dict[str, Any], where: str) -> list[str]:
    value = entry.get(layout.references or "")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(r, str) for r in value):
        raise InputError(f"{where}: {layout.field}.{layout.references} must be the references (strings), "
                         f"got {shown(value)}")
    return value


def iter_samples(path: Path, layout: Layout) -> Iterator[tuple[str, str, list[str] | None]]:
    """``(id, candidate, references or None)`` of each line of a samples file, streamed (each
    line at most :func:`~capeval.io.reading.max_line_bytes`); anything out of layout is an
    error naming the line."""
    from capeval.io.nesting import json_loads
    from capeval.io.reading import iter_lines

    for n, line in enumerate(iter_lines(path), 1):
        if not line.strip():
            continue
        where = f"{path}, line {n}"
        try:
            record = json_loads(line, str(path), line=n)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON ({exc.msg}); lmms-eval writes one object a line") from None
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object (one logged sample), got {type(record).__name__}")
        entry = record.get(layout.field)
        if not isinstance(entry, dict):
            raise InputError(f"{where}: no {layout.field!r} object, which {layout.source} writes (lmms-eval "
                             f"{LMMS_EVAL_VERSION}); is this the samples file of another task?")
        refs = _references(layout, entry, where) if layout.references else None
        yield layout.item_id(record, entry, where), _candidate(layout, record, entry, where), refs


def read_samples(path: Path, task: str | None = None) -> tuple[str, dict[str, str], dict[str, list[str]] | None]:
    """``(task, {id: candidate}, {id: references} or None)`` of an lmms-eval samples file.

    An id seen twice is an error naming both lines: the task's own aggregation would have merged
    the two items' captions under one image (COCO's ``imgToAnns``)."""
    task, layout = task_of(path, task)
    candidates: dict[str, str] = {}
    references: dict[str, list[str]] | None = {} if layout.references else None
    first: dict[str, int] = {}
    for n, (item, candidate, refs) in enumerate(iter_samples(path, layout), 1):
        if item in candidates:
            raise InputError(f"{path}: item {item!r} appears twice (samples {first[item]} and {n}); one caption an "
                             "item (several filters or repeats in one run?)", item)
        first[item] = n
        candidates[item] = candidate
        if references is not None and refs is not None:
            references[item] = refs
    if not candidates:
        raise InputError(f"{path}: no samples")
    return task, candidates, references
