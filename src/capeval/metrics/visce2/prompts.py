"""VisCE2's prompts: packaged data files, verified by sha256, rendered by slot substitution.

The templates in ``capeval/data/visce2`` are the reference code's prompt files byte for byte
(Silviase/VisCE2 at commit f08b2e1, ``prompts/*.txt``; ``task.txt`` is its ``desc_task``
constant); ``manifest.json`` holds their sha256 and the slot labels the reference's
``Prompter.format`` inserts (``[cand]`` -> ``"Candidate:\\n" + caption`` and so on).
``llava_v1.json`` is LLaVA's ``llava_v1`` conversation (system message, roles ``USER`` /
``ASSISTANT``, separators ``" "`` and ``"</s>"``), which the ``transformers`` backend wraps
around the rendered prompt as the reference does:

    <system> USER: <image>\\n<prompt> ASSISTANT:

Variants (Maeda et al. 2024, Table 1 / Appendix A):

============== ======================== ==================
metric         step 1 (per image)       step 2 (rating)
============== ======================== ==================
visce2         visual_context.txt       visce_2.txt   ([task] [cand] [context])
visce2-vanilla -                        base.txt      ([task] [cand])
visce2-ref     -                        references.txt ([task] [cand] [refs])
visce2-desc    caption.txt              captions.txt  ([task] [cand] [caption])
============== ======================== ==================

Slots are replaced in one pass, so text inside a caption or context that looks like a slot
(``[context]``) is left alone; the reference replaces slot by slot, which would substitute
into such text. Both agree on every input without slot markers.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Sequence

from capeval.errors import InputError, ResourceError

#: where the reference prompts come from (recorded in the signature)
SOURCE = "Silviase/VisCE2@f08b2e1"
_SLOT = re.compile(r"\[(?:task|cand|context|caption|refs)\]")


@dataclass(frozen=True)
class Variant:
    """One metric's prompts: the step-1 prompt file (or None) and the rating template."""

    metric: str
    step1: str | None  # file of the per-image prompt (visual context / description)
    step1_kind: str | None  # "context" / "description": the slot value the step-1 answer fills
    rating: str  # file of the rating template
    needs_references: bool = False


VARIANTS: dict[str, Variant] = {
    "visce2": Variant("visce2", "visual_context.txt", "context", "visce_2.txt"),
    "visce2-vanilla": Variant("visce2-vanilla", None, None, "base.txt"),
    "visce2-ref": Variant("visce2-ref", None, None, "references.txt", needs_references=True),
    "visce2-desc": Variant("visce2-desc", "caption.txt", "description", "captions.txt"),
}


def _read(name: str) -> bytes:
    try:
        return (resources.files("capeval") / "data" / "visce2" / name).read_bytes()
    except (FileNotFoundError, OSError) as exc:
        raise ResourceError(f"visce2: packaged prompt file {name} is missing ({exc}); reinstall capeval") from None


@lru_cache(maxsize=None)
def manifest() -> dict[str, Any]:
    """The parsed ``manifest.json`` (slots, sha256 of every prompt file)."""
    return json.loads(_read("manifest.json").decode("utf-8"))


@lru_cache(maxsize=None)
def prompt_file(name: str) -> str:
    """Text of a packaged prompt file, after checking its sha256 against the manifest."""
    expected = manifest()["sha256"].get(name)
    if expected is None:
        raise ResourceError(f"visce2: {name} is not a packaged prompt file")
    data = _read(name)
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        # e.g. a checkout that converted line endings: the prompts define the metric
        raise ResourceError(f"visce2: prompt file {name} has sha256 {actual[:16]}..., expected {expected[:16]}...; "
                            "the packaged prompts were modified (line-ending conversion?); reinstall capeval")
    return data.decode("utf-8")


def file_sha(name: str) -> str:
    """Full sha256 of a packaged prompt file (as listed in the manifest)."""
    prompt_file(name)  # verifies it
    return manifest()["sha256"][name]


def slots_sha() -> str:
    """sha256 of the slot labels (canonical JSON), which are part of every rendered prompt."""
    blob = json.dumps(manifest()["slots"], sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def variant(metric: str) -> Variant:
    """The :class:`Variant` of a metric name."""
    try:
        return VARIANTS[metric]
    except KeyError:
        raise InputError(f"visce2: unknown variant {metric!r}; known: {', '.join(VARIANTS)}") from None


def step1_prompt(metric: str) -> str | None:
    """The per-image prompt of ``metric`` (visual context / description request), or None.

    The reference sends these files as they are (no slot in them is filled).
    """
    v = variant(metric)
    return prompt_file(v.step1) if v.step1 else None


def render_rating(metric: str, candidate: str, *, context: str | None = None,
                  references: Sequence[str] | None = None, description: str | None = None) -> str:
    """The rating prompt of ``metric`` for one candidate, as the reference's ``Prompter.format``.

    ``[task]`` -> the task sentence (with its surrounding newlines), ``[cand]`` ->
    ``"Candidate:\\n" + candidate``, ``[context]`` -> ``"Visual Context:\\n" + context``,
    ``[caption]`` -> ``"Visual Context:\\n" + description``, ``[refs]`` ->
    ``"References:\\n" + "\\n".join(references)``.
    """
    v = variant(metric)
    values: dict[str, str | Sequence[str] | None] = {
        "candidate": candidate, "context": context, "references": references, "description": description,
    }
    slots: Mapping[str, Any] = manifest()["slots"]
    template = prompt_file(v.rating)

    def fill(match: re.Match[str]) -> str:
        slot = slots[match.group(0)]
        if "file" in slot:
            return prompt_file(slot["file"])
        value = values[slot["value"]]
        if value is None:
            raise InputError(f"{metric}: the rating prompt needs {slot['value']!r}, none given")
        if not isinstance(value, str):
            value = slot.get("join", "\n").join(value)
        return slot["label"] + value

    return _SLOT.sub(fill, template)


def llava_v1(prompt: str) -> tuple[str, str]:
    """``(before, after)`` the image in LLaVA's ``llava_v1`` conversation for one user turn.

    ``before + "<image>" + after`` is the reference's ``conv.get_prompt()`` for the user
    message ``"<image>\\n" + prompt`` followed by an empty assistant turn:
    ``system + sep + "USER: " + "<image>\\n" + prompt + sep + "ASSISTANT:"``.
    """
    conv = conversation()
    user, assistant = conv["roles"]
    before = conv["system"] + conv["sep"] + user + ": "
    after = conv["image_prefix"][len(conv["image_token"]):] + prompt + conv["sep"] + assistant + ":"
    return before, after


def llava_v1_text(prompt: str) -> str:
    """The full ``llava_v1`` conversation string (with the ``<image>`` placeholder)."""
    before, after = llava_v1(prompt)
    return before + conversation()["image_token"] + after


@lru_cache(maxsize=None)
def conversation() -> dict[str, Any]:
    """LLaVA's ``llava_v1`` conversation template (``llava_v1.json``)."""
    return json.loads(prompt_file("llava_v1.json"))


def signature_fields(metric: str, template: bool) -> dict[str, str]:
    """Prompt identities for the signature: ``file@sha256[:16]`` of every file the metric uses."""
    v = variant(metric)
    out = {"prompts": SOURCE}
    if v.step1:
        out["step1_prompt"] = f"{v.step1}@{file_sha(v.step1)[:16]}"
    out["rating_prompt"] = f"{v.rating}@{file_sha(v.rating)[:16]}"
    out["task"] = f"task.txt@{file_sha('task.txt')[:16]}"
    out["slots"] = slots_sha()[:16]
    if template:
        out["template"] = f"llava_v1@{file_sha('llava_v1.json')[:16]}"
    return out
