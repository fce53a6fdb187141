"""The scripted judge of tests/test_capability.py: for every fixture item (and, for
``dynamic_object_number``, every object) the replies a 127.0.0.1 judge gives on its 1st, 2nd,
... request of that exact prompt (the last one repeats), and the score the official rules give
each item (worked out by hand from eval.py's checks, not by capeval's code).

Captions are ``"Caption of <file_id>."``; the dimension is read from the system prompt.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

DATA = Path(__file__).parent / "data" / "capability"

# (dimension, file_id[, object]) -> replies by request number
REPLIES: dict[tuple[str, ...], list[str]] = {
    ("object_category", "object_category_0"): ['```json\n{"object_category": "red kite", "score": "1", "reason": "ok"}\n```'],
    ("object_category", "object_category_1"): ['{"object_category": "bench", "score": -1, "reason": "no"}'],
    # JSON's true is no Python literal: unparsed, asked again
    ("object_category", "object_category_2"): ['{"object_category": "lighthouse", "score": 0, "ok": true}',
                                               '{"object_category": "lighthouse", "score": 0}'],
    ("object_number", "object_number_0"): ['{"object_number": "{dog: 2}", "score": 1, "reason": "r"}'],
    # a dict whose value is an int: .strip() fails (eval.py:166), asked again
    ("object_number", "object_number_1"): ['{"object_number": {"blue cup": 3}, "score": 1}',
                                           '{"object_number": {"blue cup": "3"}, "score": "-1"}'],
    ("object_color", "object_color_0"): ['Here it is:\n```python\n{"object_color": "{car: red}", "score": 1}\n```'],
    ("object_color", "object_color_1"): ['{"object_color": "{table: leg: golden}", "score": 0}'],
    ("spatial_relation", "spatial_relation_0"): ['```\n{"spatial_relation": "x", "score": 1}\n```'],
    ("spatial_relation", "spatial_relation_1"): ['{"spatial_relation": "x", "score": 2}'],  # never valid
    ("scene", "scene_0"): ['{"scene": "park", "score": True}'],  # True == 1
    ("scene", "scene_1"): ['{"scene": "kitchen", "score": 0.0}'],
    ("camera_angle", "camera_angle_0"): ['{"pred": "[\'level angle\']", "reason": "r"}'],
    # an explanation in pred: eval.py:266 calls .split on the list, asked again
    ("camera_angle", "camera_angle_1"): ['{"pred": ["high angle: Shooting from above the subject (overhead shot)"]}',
                                         '{"pred": ["low angle"]}'],
    ("camera_angle", "camera_angle_2"): ['{"pred": "N/A", "reason": "none"}'],
    # the prompt's own example ends with "},": a tuple, not a dict
    ("OCR", "OCR_0"): ['{"OCR": "OPEN 24 HOURS", "score": 1, "reason": "r"},', '{"OCR": "OPEN 24 HOURS", "score": 1}'],
    ("OCR", "OCR_1"): ['{"OCR": "Caf\u00e9 du Nord", "score": -1}'],
    ("style", "style_0"): ['{"pred": ["realistic: Represents subjects truthfully with lifelike detail and accuracy."]}'],
    ("style", "style_1"): ['{"pred": ["pixel art", "N/A"]}'],
    ("style", "style_2"): ['{"pred": []}'],
    ("character_identification", "character_identification_0"): ['{"character_identification": "x", "score": "1"}'],
    ("character_identification", "character_identification_1"): ["not json at all"],  # never parsed
    ("dynamic_object_number", "dynamic_object_number_0", "table"): ['{"object_number": "{table: 4}", "score": 1}'],
    ("dynamic_object_number", "dynamic_object_number_0", "chair"): ['{"object_number": "{chair: 3}", "score": -1}'],
    # a dict fails in dynamic_object_number (eval.py:188 reads the wrapper's key)
    ("dynamic_object_number", "dynamic_object_number_1", "cup"): ['{"object_number": {"cup": "1"}, "score": 1}',
                                                                   '{"object_number": "{cup: 1}", "score": 0}'],
    ("dynamic_object_number", "dynamic_object_number_2", "lamp"): ['{"object_number": "{lamp: 3}", "score": 1}'],
    # unparsed first: the vase is not asked in that round (eval.py:392)
    ("dynamic_object_number", "dynamic_object_number_2", "book"): ["garbage", '{"object_number": "{book: 5}", "score": 0}'],
    ("dynamic_object_number", "dynamic_object_number_2", "vase"): ['{"object_number": "{vase: 1}", "score": 1}'],
    ("action", "event_1"): ['{"action": "waves", "score": 1}'],
    ("action", "event_2"): ['{"action": "jumps over", "score": 0}'],
    ("event", "event_1"): ['{"event": "x", "score": 1}'],
    ("event", "event_2"): ['{"event": "x", "score": 0}'],
    ("event", "event_3"): ['{"event": "x", "score": -1}'],
    ("camera_movement", "camera_movement_0"): ['{"pred": ["left", "up"]}'],
    ("camera_movement", "camera_movement_1"): ['{"pred": "fixed"}', '{"pred": ["fixed"]}'],
    ("camera_movement", "camera_movement_2"): ['{"pred": ["out"]}'],
}

# the score of each item by eval.py's rules, with max_retry_times >= 1 and max_allow_missing=0
# (None: no valid reply in any round, left out of the counts)
EXPECTED: dict[tuple[str, str], object] = {
    ("object_category", "object_category_0"): 1, ("object_category", "object_category_1"): -1,
    ("object_category", "object_category_2"): 0,
    ("object_number", "object_number_0"): 1, ("object_number", "object_number_1"): -1,
    ("object_color", "object_color_0"): 1, ("object_color", "object_color_1"): 0,
    ("spatial_relation", "spatial_relation_0"): 1, ("spatial_relation", "spatial_relation_1"): None,
    ("scene", "scene_0"): 1, ("scene", "scene_1"): 0,
    ("camera_angle", "camera_angle_0"): 1, ("camera_angle", "camera_angle_1"): -1, ("camera_angle", "camera_angle_2"): 0,
    ("OCR", "OCR_0"): 1, ("OCR", "OCR_1"): -1,
    ("style", "style_0"): 1, ("style", "style_1"): 0, ("style", "style_2"): -1,
    ("character_identification", "character_identification_0"): 1,
    ("character_identification", "character_identification_1"): None,
    ("dynamic_object_number", "dynamic_object_number_0"): [1, -1],
    ("dynamic_object_number", "dynamic_object_number_1"): [0],
    ("dynamic_object_number", "dynamic_object_number_2"): [1, 0, 1],
    ("action", "event_1"): 1, ("action", "event_2"): 0,
    ("event", "event_1"): 1, ("event", "event_2"): 0, ("event", "event_3"): -1,
    ("camera_movement", "camera_movement_0"): 1, ("camera_movement", "camera_movement_1"): 1,
    ("camera_movement", "camera_movement_2"): -1,
}

_SYSTEMS = json.loads((Path(__file__).parents[1] / "src" / "capeval" / "data" / "capability" / "prompts.json")
                      .read_text(encoding="utf-8"))["system"]
_CAPTION = re.compile(r"Caption: Caption of (\S+)\.\n")
_OBJECT = re.compile(r"Object Number: \{([^:]+):")


def key_of(system: str, user: str) -> tuple[str, ...]:
    """The script key of a request."""
    dim = next(d for d, s in _SYSTEMS.items() if s == system)
    fid = _CAPTION.search(user).group(1)
    if dim == "dynamic_object_number":
        return dim, fid, _OBJECT.search(user).group(1)
    return dim, fid


def captions() -> dict[str, str]:
    """``{file_id: caption}`` of every fixture row."""
    out = {}
    for f in sorted((DATA / "annotations").glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            fid = json.loads(line)["file_id"]
            out[fid] = f"Caption of {fid}."
    return out


class Judge:
    """``reply(body)`` for :class:`test_judges.Scripted`: the scripted reply of the request's
    prompt by how often that prompt was asked before; ``asked`` counts them."""

    def __init__(self) -> None:
        self.asked: dict[tuple[str, str], int] = {}

    def __call__(self, body: dict) -> tuple[str, None]:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        n = self.asked.get((system, user), 0)
        self.asked[(system, user)] = n + 1
        replies = REPLIES[key_of(system, user)]
        return replies[min(n, len(replies) - 1)], None
