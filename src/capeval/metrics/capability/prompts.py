"""CAPability's judge prompts (Liu et al. 2025, arXiv 2502.14914; ali-vilab/CAPability
``evaluation/prompt.py``), rendered as its ``Prompts.get_prompts_by_task`` renders them.

The strings are data, byte for byte, in ``capeval/data/capability/prompts.json`` (their source
and commit inside): per dimension a system prompt and the user prompt cut where the caption and
the annotation go. What is filled in, as prompt.py's f-strings do (``format(value, "")``):

- ``object_category``, ``spatial_relation``, ``scene``, ``OCR``, ``character_identification``,
  ``action``, ``event``: the caption, then the annotation (a string);
- ``object_number``, ``object_color``: the caption, then ``{object: value}`` of the
  annotation's FIRST entry (``list(anno.items())[0]``, prompt.py:151 and :186);
- ``dynamic_object_number``: one user prompt per entry of the annotation, in its order
  (prompt.py:169), all with the same system prompt;
- ``camera_angle``, ``camera_movement``, ``style``: the caption only (the categories and
  their explanations are part of the text).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from typing import Any

#: the 13 dimensions, in eval.py's ``tasks="all"`` order (eval.py:43-47)
DIMENSIONS = ("object_category", "object_number", "object_color", "spatial_relation", "scene", "camera_angle",
              "OCR", "style", "character_identification", "dynamic_object_number", "action", "camera_movement",
              "event")
#: annotation is a string naming what the caption should mention (judge answers with a score)
TEXT_DIMENSIONS = ("object_category", "spatial_relation", "scene", "OCR", "character_identification", "action",
                   "event")
#: annotation ``{object: value}`` (only the first entry is asked, as prompt.py)
PAIR_DIMENSIONS = ("object_number", "object_color")
#: annotation is the right category; the judge classifies the caption (``pred``)
CLASS_DIMENSIONS = ("camera_angle", "camera_movement", "style")
VIDEO_DIMENSIONS = ("dynamic_object_number", "action", "camera_movement", "event")
#: the column names of the paper's tables (README assets/72B.png), for printing
SHORT = {"object_category": "Obj. Cate.", "object_number": "Obj. Num.", "object_color": "Obj. Color",
         "spatial_relation": "Spa. Rel.", "scene": "Scene", "camera_angle": "Cam. Ang.", "OCR": "OCR",
         "style": "Style", "character_identification": "Cha. Iden.", "dynamic_object_number": "(D) Obj. Num.",
         "action": "Act.", "camera_movement": "Cam. Mov.", "event": "Event"}


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """The prompt file (``source``, ``system``, ``user``, ``categories``)."""
    text = (resources.files("capeval") / "data" / "capability" / "prompts.json").read_text(encoding="utf-8")
    return json.loads(text)


def source() -> str:
    """``github:ali-vilab/CAPability@<commit>:evaluation/prompt.py``."""
    return str(data()["source"])


def short_source() -> str:
    """``ali-vilab/CAPability@<7 hex>`` (the signature's name of the prompts' origin)."""
    repo, _, rest = source().removeprefix("github:").partition("@")
    return f"{repo}@{rest[:7]}"


def system_prompt(dimension: str) -> str:
    """The system message of ``dimension``."""
    return str(data()["system"][dimension])


def categories(dimension: str) -> tuple[list[str], list[str]]:
    """``(categories, explanations)`` of a classification dimension (prompt.py's ``*_categories``
    are the explanations cut at their first ``:``)."""
    explains = list(data()["categories"][dimension])
    return [c.split(":")[0] for c in explains], explains


@lru_cache(maxsize=None)
def prompt_sha256(dimension: str) -> str:
    """sha256 of the dimension's system prompt and user pieces (what the signature names)."""
    d = data()
    blob = json.dumps([d["system"][dimension], d["user"][dimension]], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def render(dimension: str, caption: str, annotation: Any) -> tuple[str, list[str]]:
    """``(system prompt, [user prompt, ...])`` for one item: one user prompt, except for
    ``dynamic_object_number`` (one per annotated object). ``annotation`` is checked by
    :func:`capeval.metrics.capability.data.check_annotation` beforehand."""
    pieces = data()["user"][dimension]
    system = system_prompt(dimension)
    if dimension in CLASS_DIMENSIONS:
        return system, [pieces[0] + caption + pieces[1]]
    if dimension in TEXT_DIMENSIONS:
        return system, [pieces[0] + caption + pieces[1] + format(annotation, "") + pieces[2]]
    pairs = list(annotation.items())
    if dimension in PAIR_DIMENSIONS:
        pairs = pairs[:1]
    return system, [pieces[0] + caption + pieces[1] + format(k, "") + pieces[2] + format(v, "") + pieces[3]
                    for k, v in pairs]
