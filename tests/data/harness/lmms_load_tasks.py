"""Child process of tests/test_harness_tasks.py: lmms-eval 0.7.3's own task loader reads capeval's task files.

argv[1]: JSON {"folder", "docs": [coco documents], "preds": [...], "out": folder for submission files}.
Prints one JSON object: the tasks TaskManager indexed, each task's resolved functions, and for
capeval_coco2017_cap_val its BLEU-4 and CIDEr aggregations next to lmms-eval's own coco_cap aggregations (pycocoevalcap,
Java) on the same documents, when Java is there.
"""

import json
import os
import runpy
import shutil
import sys
import types

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "stub_imports.py"))

from lmms_eval.tasks import TaskManager  # noqa: E402

spec = json.loads(sys.argv[1])
manager = TaskManager(include_path=spec["folder"], include_defaults=False)
out = {"index": {name: entry["type"] for name, entry in manager.task_index.items()}, "tasks": {}}


def named(fn):
    return f"{fn.__module__}.{fn.__qualname__}" if callable(fn) else repr(fn)


for name, entry in manager.task_index.items():
    if entry["type"] != "task":
        continue
    config = manager._get_config(name)  # mode="full": every !function imported
    out["tasks"][name] = {
        "process_results": named(config["process_results"]),
        "doc_to_visual": named(config["doc_to_visual"]),
        "doc_to_text": named(config["doc_to_text"]),
        "dataset_path": config["dataset_path"],
        "metrics": {m["metric"]: named(m["aggregation"]) for m in config["metric_list"]},
    }

config = manager._get_config("capeval_coco2017_cap_val")
items = {}
for doc, pred in zip(spec["docs"], spec["preds"]):
    for metric, value in config["process_results"](doc, [pred]).items():
        items.setdefault(metric, []).append(value)
ours = {m["metric"]: m["aggregation"](items[m["metric"]]) for m in config["metric_list"] if m["metric"] in (
    "capeval_Bleu_4", "capeval_CIDEr")}
out["ours"] = ours
out["items"] = items["capeval_CIDEr"]
if shutil.which("java"):
    from lmms_eval.tasks.coco_cap import utils as coco  # lmms-eval's own task, real pycocoevalcap

    theirs_items = [coco.coco_process_result(doc, [pred])["coco_CIDEr"]
                    for doc, pred in zip(spec["docs"], spec["preds"])]
    args = types.SimpleNamespace(output_path=spec["out"])
    # two of the seven (each call starts Java twice): BLEU-4 and CIDEr
    out["theirs"] = {"capeval_Bleu_4": coco.coco_bleu4(theirs_items, args),
                     "capeval_CIDEr": coco.coco_cider(theirs_items, args)}
print(json.dumps(out))
