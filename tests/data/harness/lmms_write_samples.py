"""Child process of tests/test_harness_from.py: lmms-eval 0.7.3's own code writes samples files.

argv[1]: a JSON spec {"out": folder, "tasks": {task: {"module", "process", "target", "docs", "preds"}}}.
For each task, each document goes through the task's own ``process_results`` inside
``evaluator._process_document_results`` (the logged record), and the records through
``EvaluationTracker.save_results_samples`` (the file), as ``lmms-eval --log_samples`` does.
"""

import importlib
import json
import os
import runpy
import sys
import types

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "stub_imports.py"))

spec = json.loads(sys.argv[1])
os.environ["AMBER_BASE_DIR"] = spec["amber_dir"]  # amber_g's utils read it at import time
os.environ.setdefault("HF_HOME", spec["out"])  # youcook2's utils too (lmms-eval's CLI sets it)

import lmms_eval.evaluator as evaluator  # noqa: E402
from lmms_eval.api.instance import Instance  # noqa: E402
from lmms_eval.loggers.evaluation_tracker import EvaluationTracker  # noqa: E402

tracker = EvaluationTracker(output_path=spec["out"])
tracker.general_config_tracker.model_name_sanitized = "model"
tracker.date_id = "20261206_100000"  # set by save_results_aggregated in a full run

for task_name, task in spec["tasks"].items():
    module = importlib.import_module(task["module"])
    process = getattr(module, task["process"])
    target = task["target"]

    class Task:
        """What _process_document_results asks of a ConfigurableTask."""

        config = types.SimpleNamespace(repeats=1)

        def process_results(self, doc, results):
            return process(doc, results)

        def doc_to_target(self, doc):  # ConfigurableTask: a field name, or a !function
            return getattr(module, target[3:])(doc) if target.startswith("fn:") else doc[target]

    samples = []
    for doc_id, (doc, pred) in enumerate(zip(task["docs"], task["preds"])):
        if "binary" in doc:  # an image's bytes, as the datasets carry them; dropped from the log
            doc["binary"] = doc["binary"].encode()
        request = Instance(request_type="generate_until",
                           arguments=("Describe the image.", {"max_new_tokens": 64}, lambda d: [], doc_id, task_name,
                                      "test"),
                           idx=0, metadata={"task": task_name, "doc_id": doc_id, "repeats": 1})
        request.doc = doc
        request.resps = [pred]
        request.filtered_resps["none"] = pred
        done = evaluator._process_document_results((doc_id, doc, [request]), task=Task(), filter_key="none",
                                                   reasoning_tags=None, log_samples=True)
        samples.append(done.logged_sample)
    tracker.save_results_samples(task_name=task_name, samples=samples)
print("written")
