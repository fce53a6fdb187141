"""The functions capeval's lmms-eval task files name (``capeval/harness/lmms_eval/*.yaml``).

Each task is one of lmms-eval 0.7.3's caption tasks (its dataset, prompt, generation settings and
``doc_to_visual``/``doc_to_text``, named from lmms-eval's own modules) with the scores computed by
capeval: ``process_results`` keeps each item as lmms-eval's own does (``{"answer", "pred",
"image_id"}``, the layout ``capeval score --from lmms-eval`` reads back), and each metric's
aggregation scores all items with :func:`capeval.score` (BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and
the Java-free SPICE; numbers as pycocoevalcap's, 0..1 as lmms-eval reports them). The ``_clip``
tasks add CLIP-S and RefCLIP-S, scored item by item while lmms-eval processes each document
(the image is at hand only then), on ``$CAPEVAL_LMMS_DEVICE`` (default ``cpu``); their system score
is the mean of the items', as capeval's (``metrics/clip_score.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

#: lmms-eval metric name (after ``capeval_``) -> capeval metric
TEXT = {"Bleu_1": "bleu-1", "Bleu_2": "bleu-2", "Bleu_3": "bleu-3", "Bleu_4": "bleu-4", "METEOR": "meteor",
        "ROUGE_L": "rouge-l", "CIDEr": "cider-d", "SPICE": "spice"}
IMAGE = {"CLIP_S": "clip-s", "RefCLIP_S": "ref-clip-s"}

_scored: dict[str, Any] = {"key": None, "scores": {}}  # the last item set's system scores: lmms-eval asks per metric
_clip: dict[str, Any] = {}


def _item(pred: list[str], image_id: Any, references: list[str]) -> dict[str, Any]:
    return {"answer": list(references), "pred": pred[0] if pred else "", "image_id": image_id}


def _text_results(item: dict[str, Any]) -> dict[str, Any]:
    return {f"capeval_{name}": item for name in TEXT}


def _coco_id(doc: dict[str, Any]) -> int:
    """The image id in lmms-lab's COCO-Caption(2017) ``question_id``, the image's file name (as
    lmms-eval's tasks/coco_cap/utils.py ``coco_process_result`` reads it)."""
    return int(doc["question_id"].split("_")[-1].split(".")[0])


def coco_process_result(doc: dict[str, Any], result: list[str]) -> dict[str, Any]:
    """COCO Captions 2014/2017 (lmms-lab-encoder/COCO-Caption, COCO-Caption2017)."""
    return _text_results(_item(result, _coco_id(doc), doc["answer"]))


def nocaps_process_result(doc: dict[str, Any], result: list[str]) -> dict[str, Any]:
    """nocaps validation (lmms-lab-encoder/NoCaps): ``image_id``, ``annotations_captions``."""
    return _text_results(_item(result, doc["image_id"], doc["annotations_captions"]))


def flickr_process_result(doc: dict[str, Any], result: list[str]) -> dict[str, Any]:
    """Flickr30k test (lmms-lab-encoder/flickr30k): ``img_id``, ``caption``."""
    return _text_results(_item(result, int(doc["img_id"]), doc["caption"]))


def textcaps_process_result(doc: dict[str, Any], result: list[str]) -> dict[str, Any]:
    """TextCaps validation (lmms-lab-encoder/TextCaps): ``image_id``, ``caption_str``."""
    return _text_results(_item(result, doc["image_id"], doc["caption_str"]))


def coco_process_result_clip(doc: dict[str, Any], result: list[str]) -> dict[str, Any]:
    """:func:`coco_process_result` plus this item's CLIP-S and RefCLIP-S on ``doc["image"]``."""
    item = _item(result, _coco_id(doc), doc["answer"])
    out = _text_results(item)
    key = str(item["image_id"])
    if "scorer" not in _clip:  # one model for both: RefCLIP-S reuses the item's CLIP-S (metrics/clip_score.py)
        from capeval.metrics.clip_score import ClipScore

        _clip["scorer"] = ClipScore(tuple(IMAGE.values()), device=os.environ.get("CAPEVAL_LMMS_DEVICE", "cpu"))
    report = _clip["scorer"].score({key: item["pred"]}, {key: item["answer"]}, images={key: doc["image"]})
    for name, metric in IMAGE.items():
        out[f"capeval_{name}"] = float(report[metric].items[key])
    return out


def _system(results: list[Any], name: str) -> float:
    """capeval's system score ``name`` of the items lmms-eval collected; the other text metrics of
    the same items are scored in the same call and kept, so the task's per-metric aggregations
    cost one scoring (BLEU-1..4 and the rest; SPICE only when a task asks for it)."""
    if name in IMAGE:
        return float(sum(results) / len(results))
    import capeval

    candidates = {str(r["image_id"]): r["pred"] for r in results}
    references = {str(r["image_id"]): r["answer"] for r in results}
    key = hashlib.sha256(json.dumps([candidates, references], sort_keys=True).encode()).hexdigest()
    if _scored["key"] != key:
        _scored.update(key=key, scores={})
    scores = _scored["scores"]
    if TEXT[name] not in scores:
        metrics = [m for m in TEXT.values() if m != "spice"] if name != "SPICE" else ["spice"]
        scores.update(capeval.score(candidates, references, metrics=metrics).scores)
    return float(scores[TEXT[name]])


def bleu_1(results: list[Any]) -> float:
    return _system(results, "Bleu_1")


def bleu_2(results: list[Any]) -> float:
    return _system(results, "Bleu_2")


def bleu_3(results: list[Any]) -> float:
    return _system(results, "Bleu_3")


def bleu_4(results: list[Any]) -> float:
    return _system(results, "Bleu_4")


def meteor(results: list[Any]) -> float:
    return _system(results, "METEOR")


def rouge_l(results: list[Any]) -> float:
    return _system(results, "ROUGE_L")


def cider(results: list[Any]) -> float:
    return _system(results, "CIDEr")


def spice(results: list[Any]) -> float:
    return _system(results, "SPICE")


def clip_s(results: list[Any]) -> float:
    return _system(results, "CLIP_S")


def ref_clip_s(results: list[Any]) -> float:
    return _system(results, "RefCLIP_S")
