"""DREAM-1K AutoDQ test cases shared by tests/test_autodq.py and the generator of
tests/data/autodq_official.json: a small annotation file in the released layout, the candidates,
and the scripted judge (its answer depends only on the prompt and how often it was asked).

Run ``python tests/_autodq_cases.py`` (with the bytedance/tarsier mirror) to write the recorded
run of the official evaluate_dream_gpt.py on these cases."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import threading
import types
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

MIRROR = Path("/work/.mirror/bytedance+tarsier/repo")
COMMIT = "63de87a760c2aec6b31470a08046969a13787126"
OFFICIAL_FILE = "evaluation/metrics/evaluate_dream_gpt.py"
RECORDED = Path(__file__).parent / "data" / "autodq_official.json"

# vid, subtask, reference, annotated events (None: no 'events'), candidate
CASES = [
    ("1", "DREAM/movie_animation", "A cat jumps on the table. The cat knocks over a cup.",
     ["A cat jumps on the table.", "The cat knocks over a cup."], "A cat leaps onto a table and a dog barks."),
    ("2", "DREAM/movie_animation", "A man runs, trips and falls.", ["A man runs.", "The man trips.", "The man falls."],
     "The Man runs and then he falls \"hard\"."),
    ("3", "DREAM/movie_live_action", "The sky is blue.\nClouds drift.", [], "A blue sky\nwith clouds."),
    ("4", "DREAM/movie_live_action", "A boy kicks a ball.", ["A boy kicks a ball."], "a boy and a ball."),
    ("5", "DREAM/videvo", "Waves crash on rocks.", ["Waves crash on rocks."], "the sea hits rocks."),
    ("6", "DREAM/videvo", "A bird lands. The bird sings.", ["A bird lands.", "The bird sings."],
     "a bird lands and sings."),
    ("7", "DREAM/youtube", "A girl says \"hi\" and dances.", ["A girl dances."], "a dog runs in a park."),
]
# the judge's answers, per prompt, try after try (the last repeats)
EXTRACT = {  # keyed by the caption as the extraction prompt holds it (lower-cased, " -> ')
    "a cat leaps onto a table and a dog barks.": ['{"events": ["a cat leaps onto a table", "a dog barks"]}'],
    "the man runs and then he falls 'hard'.": ["Here are the events: a man runs",
                                                "```python\n{'events': ['a man runs', 'the man falls hard']}\n```"],
    "a blue sky\nwith clouds.": ["{'events': []}"],
    "a boy and a ball.": ["I cannot do that."],  # never: an error item at the extraction step
    "the sea hits rocks.": ['{"events": ["the sea hits rocks"]}'],
    "a bird lands and sings.": ['```json\n{"events": ["x happens", "y happens"]}\n```'],
    "a dog runs in a park.": ['{"events": ["a dog runs", 5]}'],  # only the first event must be text
    # the references' events (the runs without annotated events): as many as annotated
    "a cat jumps on the table. the cat knocks over a cup.": ["{'events': ['a cat jumps', 'the cat knocks a cup']}"],
    "a man runs, trips and falls.": ["{'events': ['a man runs', 'the man trips']", "{'events': ['a man runs', "
                                     "'the man trips', 'the man falls']}"],
    "the sky is blue.\nclouds drift.": ["{'events': []}"],
    "a boy kicks a ball.": ["{'events': ['a boy kicks a ball']}"],
    "waves crash on rocks.": ["{'events': ['waves crash']}"],
    "a bird lands. the bird sings.": ["{'events': ['a bird lands', 'the bird sings']}"],
    "a girl says 'hi' and dances.": ["{'events': ['a girl dances']}"],
}
ENTAIL = {  # keyed by the description the entailment prompt holds (lower-cased)
    # recall of 1, precision of 1 (neutral is no hit)
    "a cat leaps onto a table and a dog barks.": [
        '{"events": [{"event": "a", "relationship": "entailment", "reason": "r"}, '
        '{"event": "b", "relationship": "contradiction", "reason": "r"}]}'],
    "a cat jumps on the table. the cat knocks over a cup.": [
        '{"events": [{"event": "a", "relationship": "entailment"}, {"event": "b", "relationship": "neutral"}]}'],
    # recall of 2: a fence, a trailing comma, capitals and spaces; precision of 2: wrong length, then read
    "the man runs and then he falls \"hard\".": [
        '```json\n{"events": [\n  {"relationship": "Entailment "},\n  {"relationship": "contradiction"},\n'
        '  {"relationship": "ENTAILMENT"},\n]}\n```'],
    "a man runs, trips and falls.": ['{"events": [{"relationship": "entailment"}]}',
                                      '{"events": [{"relationship": "entailment"}, {"relationship": "neutral"}]}'],
    # empty event lists: one entry stands for the description, the score is 1.0 whatever it says
    "a blue sky\nwith clouds.": ['{"events": [{"relationship": "neutral"}]}'],
    "the sky is blue.\nclouds drift.": ['{"events": [{"relationship": "contradiction"}]}'],
    # recall of 5 never read: an error item at the recall step (precision never asked)
    "the sea hits rocks.": ['{"events": [{"relationship": "yes"}]}'],
    # recall of 6: no opening brace, True, "} {" and ",]" mended by the official clean-up
    "a bird lands and sings.": ['"events": [{"relationship": "entailment", "ok": True} '
                                '{"relationship": "entailment", "ok": False},]'],
    "a bird lands. the bird sings.": ['{"events": [{"relationship": "contradiction"}, '
                                      '{"relationship": "ENTAILMENT"}]}'],
    "a dog runs in a park.": ['{"events": [{"relationship": "contradiction"}]}'],
    "a girl says \"hi\" and dances.": ['{"events": [{"relationship": "entailment"}, {"relationship": "entailment"}]}'],
}
#: (recall, precision) read off the answers above by hand; 4 and 5 fail
HAND = {"1": (0.5, 0.5), "2": (2 / 3, 0.5), "3": (1.0, 1.0), "6": (1.0, 0.5), "7": (0.0, 1.0)}
FAILED = {"4": "candidate events", "5": "recall"}


def extra_info(vid: str, events: list[str]) -> dict[str, Any]:
    """The record's extra_info: counts spread over the script's buckets."""
    return {"duration": 3.0, "events": events, "n_events": 3 * int(vid) % 10, "n_shots": int(vid) % 5,
            "n_subjects": (3 * int(vid)) % 6}


def annotation_lines() -> list[str]:
    """The cases in the main-branch layout, plus one record of another benchmark (skipped)."""
    out = []
    for vid, sub, ref, events, _ in CASES:
        out.append(json.dumps({
            "messages": [{"role": "user", "content": [{"type": "video", "video": {"video_file": "<placeholder>"},
                                                         "text": None, "reference": None},
                                                        {"type": "text", "text": "Describe the video in detail.",
                                                         "reference": None, "video": None}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "", "reference": ref,
                                                              "video": None}]}],
            "dataset": sub, "task": "video/caption", "idx": int(vid),
            "extra_info": extra_info(vid, events), "vid": int(vid)}))
    out.append(json.dumps({"messages": [], "dataset": "TVBench/AA", "idx": 1, "vid": "x"}))
    return out


def answer(prompt: str, k: int) -> str:
    """The scripted answer to the k-th asking (0-based) of ``prompt``."""
    if prompt.startswith("Bellow is a description"):
        caption = prompt.split("Video Description: ", 1)[1].split("\n\nExtract at most", 1)[0]
        script = EXTRACT[caption]
    else:
        desc = prompt.split("Video Description:\n", 1)[1].split("\n\nEvents: ", 1)[0]
        script = ENTAIL[desc]
    return script[min(k, len(script) - 1)]


class Judge:
    """The scripted judge: counts how often each prompt was asked."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        with self.lock:
            k = self.seen[prompt]
            self.seen[prompt] += 1
        return answer(prompt, k)


def load_official(client: Any, source: str | None = None) -> types.ModuleType:
    """evaluate_dream_gpt.py at COMMIT as a module, its imports stubbed (no pool, no timeout
    decorator, ``client`` as the Azure client)."""
    if source is None:
        source = subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"{COMMIT}:{OFFICIAL_FILE}"],
                                capture_output=True, text=True, check=True).stdout
    pm = types.ModuleType("pathos.multiprocessing")
    pm.ProcessingPool = None  # type: ignore[attr-defined]
    pathos = types.ModuleType("pathos")
    pathos.multiprocessing = pm  # type: ignore[attr-defined]
    ft = types.ModuleType("func_timeout")
    ft.func_set_timeout = lambda s: (lambda f: f)  # type: ignore[attr-defined]
    fte = types.ModuleType("func_timeout.exceptions")
    fte.FunctionTimedOut = type("FunctionTimedOut", (Exception,), {})  # type: ignore[attr-defined]
    ft.exceptions = fte  # type: ignore[attr-defined]
    gpt = types.ModuleType("tools.gpt_api")
    gpt.azure_gpt4_client = client  # type: ignore[attr-defined]
    tools = types.ModuleType("tools")
    tools.gpt_api = gpt  # type: ignore[attr-defined]

    class Table:  # prettytable.PrettyTable: the rows are what the script prints
        def __init__(self, header: list[str]) -> None:
            self.rows = [header]

        def add_row(self, row: list[Any]) -> None:
            self.rows.append([x.item() if hasattr(x, "item") else x for x in row])

    pt = types.ModuleType("prettytable")
    pt.PrettyTable = Table  # type: ignore[attr-defined]
    stubs = {"pathos": pathos, "pathos.multiprocessing": pm, "func_timeout": ft, "func_timeout.exceptions": fte,
             "tools": tools, "tools.gpt_api": gpt, "prettytable": pt}
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    module = types.ModuleType("evaluate_dream_gpt")
    module.__dict__["_stubs"] = stubs
    try:
        exec(compile(source, OFFICIAL_FILE, "exec"), module.__dict__)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module


def official_run(with_events: bool = True) -> dict[str, Any]:
    """The official script on the cases: every prompt it sent (in order), each sample's
    (score_r, score_p) or failure, and its summary table's rows."""
    judge = Judge()
    sent: list[str] = []

    class Completion:
        def __init__(self, text: str) -> None:
            self.text = text

        def model_dump_json(self) -> str:
            return json.dumps({"choices": [{"message": {"content": self.text}}]})

    class Client:
        def __init__(self) -> None:
            self.chat = self.completions = self

        def create(self, model: str, messages: list[dict[str, Any]]) -> Completion:
            assert len(messages) == 1 and messages[0]["role"] == "user"
            sent.append(messages[0]["content"])
            return Completion(judge(messages[0]["content"]))

    mod = load_official(Client())
    metric = mod.DREAMGPTMetric("DREAM")
    samples: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for vid, sub, ref, events, cand in CASES:
            data = {"prediction": cand, "response": ref, "dataset": sub, "idx": f"{sub}_{vid}",
                    "extra_info": extra_info(vid, events)}
            if with_events:
                data["events"] = events
            out = mod.process_one_sample((data, "gpt-35-turbo-0125", False))
            out["subtask"] = sub
            metric.update_metric(out)
            samples[vid] = [out["result"]["score_r"], out["result"]["score_p"]] if out["success"] else None
        sys.modules["prettytable"] = mod.__dict__["_stubs"]["prettytable"]
        try:
            metric._summarize_metric_by_subtask()
            # select_bucket evaluates "3in [4, 5]" (Python 3.11: a SyntaxWarning); an empty bucket's np.average warns
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
                metric._summarize_metric_by_bucket()
        finally:
            sys.modules.pop("prettytable", None)
    prompts = list(dict.fromkeys(sent))
    index = {p: k for k, p in enumerate(prompts)}
    return {"prompts": prompts, "order": [index[p] for p in sent], "samples": samples, "table": metric.table.rows,
            "buckets": [t.rows for t in metric.bucket_tables if not isinstance(t, str)]}


if __name__ == "__main__":
    blob = subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"{COMMIT}:{OFFICIAL_FILE}"],
                          capture_output=True, check=True).stdout
    import hashlib

    record = {"source": f"github:bytedance/tarsier@{COMMIT}:{OFFICIAL_FILE}",
              "file_sha256": hashlib.sha256(blob).hexdigest(),
              "note": "written by tests/_autodq_cases.py: the official script run on CASES with the scripted judge",
              "with_events": official_run(True), "without_events": official_run(False)}
    RECORDED.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {RECORDED}")
