"""The MSCOCO objects a caption mentions, as CHAIR's ``caption_to_words`` finds them
(LisaAnne/Hallucination ``utils/chair.py``, commit 6e4d33c).

Steps: :func:`~capeval.metrics.chair.words.caption_words` (lower-case, NLTK 3.2.5
``word_tokenize``, Pattern ``singularize``); greedy left-to-right merge of two-word phrases
from the double-word table; drop ``seat`` when ``toilet`` is present; keep the words in the
synonym list and map each to its object (the first word of its line).

Kept as the official code has them (``variant="official"``, the default):

- the synonym file is split on ``", "`` after stripping each line, so an entry written after
  a double space keeps a leading space and can never match (`` motor bike``, `` cheesecake``);
- a word listed on several lines maps to the *last* line's object (the inverse table is
  filled line by line);
- the double-word table lists ``hot dog`` and ``teddy bear`` twice and maps ``bow tie`` to
  ``tie`` (the later assignment wins), ``toilet seat`` to ``toilet`` and ``wine glas`` (the
  singular Pattern makes of ``glass``) to ``wine glass``.

``variant="stripped"`` strips every synonym entry, so `` motor bike`` and `` cheesecake``
count; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from capeval.errors import InputError
from capeval.metrics.chair.words import caption_words

VARIANTS = ("official", "stripped")

_COCO_DOUBLE_WORDS = (
    "motor bike", "motor cycle", "air plane", "traffic light", "street light", "traffic signal", "stop light",
    "fire hydrant", "stop sign", "parking meter", "suit case", "sports ball", "baseball bat", "baseball glove",
    "tennis racket", "wine glass", "hot dog", "cell phone", "mobile phone", "teddy bear", "hair drier",
    "potted plant", "bow tie", "laptop computer", "stove top oven", "hot dog", "teddy bear", "home plate",
    "train track",
)
# "baby bird" is a bird, not a person; "passenger jet" a jet
_ANIMAL_WORDS = ("bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "animal",
                 "cub")
_VEHICLE_WORDS = ("jet", "train")


def _double_words() -> dict[str, str]:
    table = {w: w for w in _COCO_DOUBLE_WORDS}
    for animal in _ANIMAL_WORDS:
        table[f"baby {animal}"] = animal
        table[f"adult {animal}"] = animal
    for vehicle in _VEHICLE_WORDS:
        table[f"passenger {vehicle}"] = vehicle
    table.update({"bow tie": "tie", "toilet seat": "toilet", "wine glas": "wine glass"})
    return table


@dataclass(frozen=True)
class Mention:
    """One object mention: the caption's word (after merging) and the MSCOCO object it names."""

    word: str
    object: str


class ObjectVocabulary:
    """CHAIR's synonym table and double-word rules (see the module docs for the variants)."""

    def __init__(self, synonym_lines: list[str], variant: str = "official"):
        if variant not in VARIANTS:
            raise InputError(f"option chair.variant={variant!r}: expected one of {', '.join(VARIANTS)}")
        self.variant = variant
        self.inverse: dict[str, str] = {}
        for line in synonym_lines:
            entries = line.strip().split(", ")
            if variant == "stripped":
                entries = [e.strip() for e in entries]
            for entry in entries:
                self.inverse[entry] = entries[0]
        self.double_words = _double_words()

    def merged_words(self, caption: str) -> list[str]:
        """The caption's words with two-word phrases merged (the official ``double_words`` list)."""
        words = caption_words(caption)
        merged: list[str] = []
        i = 0
        while i < len(words):
            pair = " ".join(words[i : i + 2])
            if pair in self.double_words:
                merged.append(self.double_words[pair])
                i += 2
            else:
                merged.append(words[i])
                i += 1
        return merged

    def mentions(self, caption: str) -> list[Mention]:
        """The MSCOCO object mentions of ``caption``, in order (CHAIR's ``caption_to_words``)."""
        merged = self.merged_words(caption)
        if "toilet" in merged and "seat" in merged:
            merged = [w for w in merged if w != "seat"]
        return [Mention(w, self.inverse[w]) for w in merged if w in self.inverse]

    def object_of_category(self, name: str) -> str:
        """The CHAIR object of a COCO category name (``inverse_synonym_dict[name]``)."""
        try:
            return self.inverse[name]
        except KeyError:
            raise InputError(f"COCO category {name!r} is not in CHAIR's synonym list") from None


@lru_cache(maxsize=2)
def vocabulary(variant: str = "official") -> ObjectVocabulary:
    """The vocabulary built from the shipped ``synonyms.txt`` (see data/chair/NOTICE.md)."""
    text = resources.files("capeval.data").joinpath("chair/synonyms.txt").read_text(encoding="utf-8")
    return ObjectVocabulary(text.splitlines(True), variant)
