"""Run ali-vilab/CAPability's ``evaluation/eval.py`` itself (its source from a git mirror, nothing
in it changed) against a judge server, in a child process:

    python _capability_official.py EVAL_DIR CAPTIONS GT SAVE OUT.json TASKS_JSON RETRIES ALLOW_MISSING

``openai`` is replaced by a small module whose ``OpenAI(...).chat.completions.create(model=,
messages=)`` POSTs exactly ``{"model", "messages"}`` to ``$SERVER_URL/chat/completions`` (what the
real client sends for that call). The official ``Evaluator`` runs with ``num_process=0`` and
``strict_match=False`` as its ``__main__`` does; per task ``evaluate_scores_by_task`` then
``calculate_metric``, and the means as ``evaluate`` computes them (``np.mean``), are written to
OUT.json.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
import urllib.request


def _stub_openai() -> None:
    mod = types.ModuleType("openai")

    class _Completions:
        def __init__(self, base_url: str, key: str):
            self.base_url, self.key = base_url.rstrip("/"), key

        def create(self, model, messages):
            data = json.dumps({"model": model, "messages": messages}).encode("utf-8")
            req = urllib.request.Request(self.base_url + "/chat/completions", data=data,
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {self.key}"})
            with urllib.request.urlopen(req, timeout=60) as reply:
                body = json.loads(reply.read())
            message = types.SimpleNamespace(content=body["choices"][0]["message"]["content"])
            return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])

    class OpenAI:
        def __init__(self, api_key=None, base_url=None):
            self.chat = types.SimpleNamespace(completions=_Completions(base_url, api_key))

    mod.OpenAI = OpenAI
    sys.modules["openai"] = mod


def main(argv: list[str]) -> None:
    eval_dir, captions, gt, save, out, tasks, retries, allow = argv
    _stub_openai()
    sys.path.insert(0, eval_dir)  # eval.py imports its prompt.py
    spec = importlib.util.spec_from_file_location("capability_official_eval", f"{eval_dir}/eval.py")
    official = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(official)
    import numpy as np

    task_list = json.loads(tasks)
    ev = official.Evaluator(captions, gt, save, tasks=task_list, num_process=0, eval_model="judge",
                            max_allow_missing=int(allow), auto_resume=True, max_retry_times=int(retries),
                            strict_match=False)
    metrics = {}
    for t in task_list:
        metrics[t] = {k: float(v) for k, v in ev.calculate_metric(t, ev.evaluate_scores_by_task(t)).items()}
    average = {k: float(np.mean([m[k] for m in metrics.values()])) for k in ("precision", "recall", "hit_rate",
                                                                              "f1_score")}
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"tasks": metrics, "average": average}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
