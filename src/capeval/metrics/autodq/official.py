"""DREAM-1K AutoDQ as Tarsier's ``evaluation/metrics/evaluate_dream_gpt.py`` defines it: the two
prompts (byte for byte), how their answers are read, and how the scores are aggregated.

Source: bytedance/tarsier at :data:`COMMIT` (branch ``main``; the file is the same on the
``tarsier`` and ``tarsier2`` branches and unchanged since 2024-11-27). Line numbers below are of
that file.

- Event extraction (``call_azure_gpt_api_for_events``, lines 64-86): one user message,
  :func:`extract_prompt`. The caption is first lower-cased and its ``"`` replaced by ``'``
  (``extract_events``, lines 172-176). The answer: a leading ```` ```json ```` or
  ```` ```python ```` fence removed with every ```` ``` ```` (lines 152-155, no strip before the
  test), then ``ast.literal_eval``; ``result['events']`` must be a list whose first element (if
  any) is a string (lines 185-189); anything else is asked again (:func:`read_events`).
- Entailment (``call_azure_gpt_api``, lines 34-61): one user message, :func:`entail_prompt`: the
  description, then ``Events: {events}`` where ``{events}`` is the Python list's ``repr``; an
  empty list is replaced by ``[reference.replace('\\n', ' ')]`` (line 36). The answer is
  normalised by ``try_call_api_for_eval`` (lines 104-121, :func:`normalise_entail_answer`), read
  with ``json.loads``; ``['events']`` must have as many entries as the events sent (one for an
  empty list, line 215), each with a ``relationship`` among entailment / neutral /
  contradiction after ``strip().lower()`` (lines 218-226) (:func:`read_relationships`).
- Score (``evaluate_one_sample``, lines 198-238): hits / number of events, 1.0 for an empty
  list. Both directions are called with ``is_recall=True`` (lines 253-254), so only
  ``entailment`` counts, for precision too (``neutral`` would count only with
  ``is_recall=False``, which the script never passes). Recall: the reference's events against
  the prediction; precision: the prediction's events against the reference (line 254 swaps
  the two texts). Both texts lower-cased (line 243).
- Every answer that cannot be read is asked again, at most ``max_retry=10`` times per step
  (lines 170, 198); a sample still failing is left out of every mean and counted as Failed
  (lines 268-273, 340-344).
- Aggregation (``_summarize_metric_by_subtask``, lines 350-392): per subtask (the record's
  ``dataset``, e.g. ``DREAM/youtube``) the mean recall and the mean precision over its
  successful samples (``np.average``), F1 = 2rp / (r + p) of those means (``count_f1``); OVERALL
  = the mean of the subtask means (subtasks with at least one success), F1 of those.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from typing import Any, Iterable, Mapping, Sequence

REPO = "bytedance/tarsier"
COMMIT = "63de87a760c2aec6b31470a08046969a13787126"
PATH = "evaluation/metrics/evaluate_dream_gpt.py"
SOURCE = f"{REPO}@{COMMIT[:7]}/{PATH}"
#: the script's judge (line 281): an Azure deployment of OpenAI's gpt-3.5-turbo-0125
OFFICIAL_MODEL = "gpt-35-turbo-0125"
#: ``max_retry`` of extract_events and evaluate_one_sample (lines 170, 198)
OFFICIAL_TRIES = 10
RELATIONSHIPS = ("entailment", "neutral", "contradiction")
#: the classes counted as a hit: ``pos_classes`` with ``is_recall=True`` (line 221), both directions
POSITIVE = ("entailment",)

# call_azure_gpt_api_for_events, lines 71-82 (the caption goes between head and tail)
_EXTRACT_HEAD = "Bellow is a description of a video clip:\nVideo Description: "
_EXTRACT_TAIL = (
    "\n\n"
    "Extract at most 10 key events from the above video description paragraph. Requirements\n:"
    "- An event must include an action, motion or movement (NOT STATIC INFORMATION). DON'T repeat same events.\n"
    "- Every event is represented by a brief sentence within 10 words, with a subject, a predicate and optionally "
    "an object, avoid unnecessary appearance descriptions.\n"
    "- Every event must be atomic, meaning that it cannot be further split into multiple events.\n"
    "- Scene cuts and camera motions are NOT events.\n"
    "- Substitute pronouns by the nouns they refer to.\n\n"
    "Please generate the response in the form of a Python dictionary string with keys \"events\". The value of "
    "\"events\" is a List(str), of which each item is an event. "
    "DO NOT PROVIDE ANY OTHER OUTPUT TEXT OR EXPLANATION. Only provide the Python dictionary string. "
    "For example, your response should look like this: {\"events\": [event1, event2, ...]}"
)
# call_azure_gpt_api, lines 43-57 (description, then the events' repr)
_ENTAIL_HEAD = (
    "Given a video description and a list of events. For each event, classify the relationship between the video "
    "description and the event into three classes: entailment, neutral, contradiction.\n"
    "- \"entailment\" means that the video description entails the event.\n"
    "- \"contradiction\" means that some detail in the video description contradicts with the event.\n"
    "- \"neutral\" means that the relationship is neither \"entailment\" or \"contradiction\".\n\n"
    "Video Description:\n"
)
_ENTAIL_MIDDLE = "\n\nEvents: "
_ENTAIL_TAIL = (
    "\n"
    "Output a JSON formed as:\n"
    "{\n"
    "  \"events\": [\n"
    "    {\"event\": \"copy an event here\", \"relationship\": \"put class name here\",  \"reason\": \"give your "
    "reason here\"},\n"
    "    ...\n"
    "  ]\n"
    "}\n\n"
    "DO NOT PROVIDE ANY OTHER OUTPUT TEXT OR EXPLANATION. Only output the JSON. Output:"
)
#: the two prompts with their slots named (what the signature's hashes are of)
EXTRACT_TEMPLATE = _EXTRACT_HEAD + "{caption}" + _EXTRACT_TAIL
ENTAIL_TEMPLATE = _ENTAIL_HEAD + "{description}" + _ENTAIL_MIDDLE + "{events}" + _ENTAIL_TAIL
EXTRACT_SHA256 = hashlib.sha256(EXTRACT_TEMPLATE.encode("utf-8")).hexdigest()
ENTAIL_SHA256 = hashlib.sha256(ENTAIL_TEMPLATE.encode("utf-8")).hexdigest()


def extraction_input(text: str) -> str:
    """The caption as ``extract_events`` hands it to the prompt: lower-cased, ``"`` -> ``'``."""
    return text.lower().replace("\"", "'")


def extract_prompt(caption: str) -> str:
    """The event-extraction prompt for an already prepared caption (:func:`extraction_input`)."""
    return _EXTRACT_HEAD + caption + _EXTRACT_TAIL


def entail_prompt(description: str, events: Sequence[Any], reference: str) -> str:
    """The entailment prompt: ``description`` (lower-cased by the caller, as line 243) against
    ``events`` written as Python writes the list (``f"{events}"``); an empty list becomes
    ``[reference.replace('\\n', ' ')]`` (line 36)."""
    shown = list(events) if events else [reference.replace("\n", " ")]
    return _ENTAIL_HEAD + description + _ENTAIL_MIDDLE + f"{shown}" + _ENTAIL_TAIL


# ------------------------------------------------------------------ reading the answers
def read_events(answer: str) -> tuple[list[Any] | None, str]:
    """``(events, "")`` as ``extract_events`` accepts them, else ``(None, why)`` (asked again).

    ``ast.literal_eval`` is the official reader (a Python literal, not JSON); its parser is
    linear in the text and stops nesting at 200 levels (a SyntaxError), and capeval's answer
    size cap (``max_response_mb``) bounds the text. Every exception counts as unreadable, as
    the official ``except Exception`` (line 191)."""
    text = answer
    if text.startswith("```json"):
        text = text.replace("```json", "").replace("```", "").strip()
    elif text.startswith("```python"):
        text = text.replace("```python", "").replace("```", "").strip()
    try:
        result = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        return None, f"not a Python literal ({type(exc).__name__})"
    try:
        events = result["events"]
    except (KeyError, TypeError, IndexError):
        return None, "no 'events' key"
    if not isinstance(events, list):
        return None, f"'events' is a {type(events).__name__}, not a list"
    if events and not isinstance(events[0], str):
        return None, "the first event is not a string"
    return events, ""


_NEWLINES = re.compile(r"\n+")
_SPACES = re.compile(r"\s+")


def normalise_entail_answer(answer: str) -> str:
    """``try_call_api_for_eval``'s clean-up (lines 104-121), step by step (each linear)."""
    q = answer.strip()
    q = _NEWLINES.sub("\n", q)
    q = _SPACES.sub(" ", q)
    if q.startswith("```json"):
        q = q.replace("```json", "").replace("```", "").strip()
    elif q.startswith("```python"):
        q = q.replace("```python", "").replace("```", "").strip()
    if not q.startswith("{"):
        q = "{" + q
    if not q.endswith("}"):
        q = q + "}"
    q = q.replace("True", "true").replace("False", "false")
    q = q.replace("} {", "}, {").replace("}{", "}, {")
    q = q.replace(",\n}", "\n}").replace(", \n}", "\n}").replace(", }", "}").replace(",}", "}")
    q = q.replace(",\n]", "\n]").replace(", \n]", "\n]").replace(", ]", "]").replace(",]", "]")
    q = q.replace("[Placeholder]", "null")
    return q.replace("{Events:", "").strip()


def read_relationships(answer: str, n_events: int) -> tuple[list[str] | None, str]:
    """The relationships of an entailment answer as ``evaluate_one_sample`` accepts them
    (lines 209-226), else ``(None, why)`` (asked again). ``n_events``: events sent (0: the
    reference stood in for them, one entry expected).

    Equivalent to the official try/except chain: after ``json.loads`` and ``['events']``,
    ``len()`` must equal (line 215) and each entry be indexable by ``'relationship'`` with a
    string value; iterating a dict or a string yields strings, which fail that index."""
    try:
        filled = json.loads(normalise_entail_answer(answer))["events"]
    except (ValueError, RecursionError):
        return None, "not JSON"
    except (KeyError, TypeError, IndexError):
        return None, "no 'events' key"
    try:
        size = len(filled)
    except TypeError:
        return None, f"'events' is a {type(filled).__name__}"
    if not (size == n_events or (n_events == 0 and size == 1)):
        return None, f"{size} relationships for {n_events} events"
    out = []
    for entry in filled:
        value = entry.get("relationship") if isinstance(entry, dict) else None
        if not isinstance(value, str) or value.strip().lower() not in RELATIONSHIPS:
            return None, "an entry without a relationship among entailment, neutral, contradiction"
        out.append(value.strip().lower())
    return out, ""


def hit_score(relationships: Sequence[str], n_events: int) -> float:
    """hits / events (1.0 when no event was sent), ``entailment`` the only hit (line 221)."""
    if n_events == 0:
        return 1.0
    return sum(r in POSITIVE for r in relationships) / n_events


# ------------------------------------------------------------------ aggregation
def count_f1(r: float, p: float) -> float:
    """``count_f1`` (line 30) on numpy floats: 0/0 is NaN (numpy warns, never raises)."""
    if r + p == 0 or math.isnan(r + p):
        return math.nan
    return 2 * r * p / (r + p)


def summarize(scores: Mapping[str, tuple[float, float]], subtask: Mapping[str, str],
              failed: Iterable[str] = ()) -> dict[str, Any]:
    """The script's summary table: per subtask (sorted) recall, precision, F1, success, failed;
    OVERALL the mean of the subtask means. ``scores``: item -> (recall, precision) of the
    successful items; ``failed``: the failed items (counted, never averaged)."""
    import numpy as np

    groups: dict[str, list[tuple[float, float]]] = {}
    for item, rp in scores.items():
        groups.setdefault(subtask[item], []).append(rp)
    fails: dict[str, int] = {}
    for item in failed:
        fails[subtask[item]] = fails.get(subtask[item], 0) + 1
    table: dict[str, dict[str, Any]] = {}
    recalls, precisions = [], []
    for name in sorted(groups):
        r = float(np.average([x[0] for x in groups[name]]))
        p = float(np.average([x[1] for x in groups[name]]))
        recalls.append(r)
        precisions.append(p)
        table[name] = {"f1": count_f1(r, p), "recall": r, "precision": p, "success": len(groups[name]),
                       "failed": fails.get(name, 0)}
    r = float(np.mean(recalls)) if recalls else math.nan
    p = float(np.mean(precisions)) if precisions else math.nan
    return {"subtasks": table, "f1": count_f1(r, p), "recall": r, "precision": p,
            "success": len(scores), "failed": sum(fails.values())}


#: ``DREAMGPTMetric.buckets`` (lines 288-296): the first bucket whose condition holds (``select_bucket``
#: evaluates ``f"{num}{key}"``; these are those conditions written out)
BUCKETS: dict[str, tuple[tuple[str, Any], ...]] = {
    "subjects": (("<=1", lambda n: n <= 1), ("==2", lambda n: n == 2), ("==3", lambda n: n == 3),
                 (">=4", lambda n: n >= 4)),
    "shots": (("<=1", lambda n: n <= 1), ("==2", lambda n: n == 2), ("==3", lambda n: n == 3),
              (">=4", lambda n: n >= 4)),
    "events": (("<=3", lambda n: n <= 3), ("in [4, 5]", lambda n: n in (4, 5)), ("in [6, 7]", lambda n: n in (6, 7)),
               (">=8", lambda n: n >= 8)),
}


def summarize_buckets(scores: Mapping[str, tuple[float, float]], counts: Mapping[str, Mapping[str, int]]
                      ) -> dict[str, dict[str, dict[str, Any]]]:
    """``_summarize_metric_by_bucket`` (lines 395-430): the successful items split by the
    annotation's ``n_subjects``, ``n_shots``, ``n_events``; per bucket mean recall, mean precision
    (NaN for an empty bucket, numpy's mean of nothing), their F1 and the count."""
    import numpy as np

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, buckets in BUCKETS.items():
        members: dict[str, list[tuple[float, float]]] = {key: [] for key, _ in buckets}
        for item, rp in scores.items():
            n = counts[item][f"n_{name}"]
            key = next((k for k, holds in buckets if holds(n)), None)
            if key is not None:
                members[key].append(rp)
        table = {}
        for key, rps in members.items():
            r = float(np.mean([x[0] for x in rps])) if rps else math.nan
            p = float(np.mean([x[1] for x in rps])) if rps else math.nan
            table[key] = {"recall": r, "precision": p, "f1": count_f1(r, p), "count": len(rps)}
        out[name] = table
    return out
