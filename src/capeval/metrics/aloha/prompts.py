"""ALOHa's object-extraction requests (DavidMChan/aloha ``object_parser/prompts.py`` and
``object_parser/openai.py``): the definition of the metric, rebuilt here from their parts.

A request is a chat: the system prompt, then ``n`` few-shot turns (a user message with the
caption(s), an assistant message with the ``- object`` list), then the user message of the
item. The ``aloha`` entry of the official ``METRICS`` uses 3 examples for the candidate
(``num_target_examples=3``) and 3 for the references; those are the ones kept here.
:data:`SYSTEM_SHA256` and :data:`EXAMPLES_SHA256` pin them to the official text (tests compare
with the fetched repository).
"""

from __future__ import annotations

import hashlib
import json

SOURCE = "DavidMChan/aloha@7da6b90/src/aloha/object_parser"

_RULES = (
    "Strictly abide by the following rules:\n"
    "- Include all attributes and adjectives that describe the object, if present\n"
    "- Do not repeat objects\n"
    "- Do not include objects that are mentioned but have no visual presence in the image, such as light, sound, "
    "or emotions\n"
    "- If the caption is uncertain about an object, YOU MUST include '(possibly)' after the object\n"
    "- If the caption thinks an object can be one of several things, include 'or' and all the possible objects\n"
    "- Always give the singular form of the object, even if the caption uses the plural form\n"
)
_TASK = ("You are an assistant that parses visually present objects from {what}. Given {given}, you list ALL the "
         "objects visually present in the image or photo described by the captions.\n\n")
#: ``SINGLE_OBJECT_SYSTEM_PROMPT`` (the candidate) and ``MULTI_OBJECT_SYSTEM_PROMPT`` (the references)
SINGLE_SYSTEM = _TASK.format(what="an image caption", given="an image caption") + _RULES
MULTI_SYSTEM = _TASK.format(what="a set of image captions", given="a set of image captions") + _RULES

# (caption(s), objects) of the first three examples of each list; the official answers are
# "- object" lines joined by "\n" (the second reference example ends with one more "\n")
_SINGLE = [
    ("Two women playing violin and banjo in front of a window.", ["woman", "violin", "banjo", "window"]),
    ("A group of young boys sit at their desks in a classroom in the democratic republic of the congo.",
     ["young boy", "desk", "classroom"]),
    ("A man in a black tank top or shirt is getting his hair braided.", ["man", "black tank top or shirt", "hair"]),
]
_MULTI = [
    (["A baseball player runs into home plate during a game.", "A man is running the bases in a baseball game.",
      "A group of players playing a baseball game.", "A man is running to home base in a baseball game.",
      "A man in a white shirt and gray pants walks toward a grassy area as kids in baseball uniforms and an umpire "
      "are near him."],
     ["baseball player", "home plate", "man", "base", "home base", "baseball game", "white shirt", "gray pants",
      "grassy area", "kid", "baseball uniform", "umpire"], ""),
    (["Several people riding on a motorcycle with an umbrella open.",
      "Couples riding motor cycles carrying umbrellas and people sitting at tables.",
      "A group of people riding scooters while holding umbrellas.",
      "Some tables and umbrellas sitting next to a building.",
      "Pedestrians and motorcyclists near an open outdoor market."],
     ["person", "couple", "motorcycle", "umbrella", "table", "scooter", "building", "pedestrian", "motorcyclist",
      "open outdoor market"], "\n"),
    (["A person standing next to the water and a umbrella.",
      "The man rides the skateboard next to the water and the umbrella.",
      "A man standing on a pier overlooking the lake with an umbrella nearby.",
      "A man riding a skate board on railings near waterfront.", "A person is standing at the side of a big lake."],
     ["water", "umbrella", "man", "person", "skateboard", "pier", "lake", "big lake", "skateboard", "railing",
      "waterfront"], ""),
]


def candidate_turn(caption: str) -> str:
    """The user message of a candidate (``extract_objects_single_caption``)."""
    return f"Caption: {caption}\nObjects:"


def references_turn(captions: list[str] | tuple[str, ...]) -> str:
    """The user message of an item's references (``extract_objects_multiple_captions``)."""
    lines = "\n".join(f"- {c}" for c in captions)
    return f"Captions:\n{lines}\nObjects:"


def _answer(objects: list[str]) -> str:
    return "\n".join(f"- {o}" for o in objects)


#: the few-shot ``(user, assistant)`` turns, as sent
SINGLE_EXAMPLES: tuple[tuple[str, str], ...] = tuple((candidate_turn(c), _answer(o)) for c, o in _SINGLE)
MULTI_EXAMPLES: tuple[tuple[str, str], ...] = tuple((references_turn(c), _answer(o) + tail) for c, o, tail in _MULTI)

SYSTEM_SHA256 = hashlib.sha256((SINGLE_SYSTEM + MULTI_SYSTEM).encode("utf-8")).hexdigest()
EXAMPLES_SHA256 = hashlib.sha256(json.dumps([SINGLE_EXAMPLES, MULTI_EXAMPLES]).encode("utf-8")).hexdigest()


def chat(prompt: str) -> list[dict[str, str]]:
    """The whole chat of one request whose last user message is ``prompt``: the candidate's
    system prompt and examples for ``"Caption: ..."``, the references' for ``"Captions:\\n..."``
    (the two openings cannot be confused), as ``OpenAIObjectParser`` builds it."""
    multi = prompt.startswith("Captions:\n")
    system, shots = (MULTI_SYSTEM, MULTI_EXAMPLES) if multi else (SINGLE_SYSTEM, SINGLE_EXAMPLES)
    out = [{"role": "system", "content": system}]
    for user, assistant in shots:
        out += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    out.append({"role": "user", "content": prompt})
    return out
