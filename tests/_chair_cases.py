"""Random CHAIR cases built from the synonym list: a COCO 2014 annotation folder and one
caption per image, the same for the test and for ``tools/chair_reference.py``, which records
what the official code computes on them (tests/data/chair_official.json).

Captions mix object words (singular, plural, double words, the special cases: toilet seat,
baby/adult animals, passenger jet/train, wine glasses, bow tie), filler words, punctuation
and several sentences; some images have no instances, some no object in any caption.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

N_CAPTIONS = 1200
SEED = 20181031
FILLER = ("a", "the", "an", "two", "some", "with", "on", "in", "next", "to", "is", "are", "of", "near", "and",
          "sitting", "holding", "big", "small", "red", "white", "his", "her", "there", "it", "up", "seat", "under")
SPECIAL = ("toilet seat", "baby bird", "adult cat", "baby elephant", "passenger jet", "passenger train",
           "wine glasses", "wine glass", "bow tie", "hot dogs", "teddy bears", "stop sign", "motor bike",
           "motor bikes", "cheesecake", "traffic lights", "cell phone", "men", "women", "children", "people",
           "mice", "knives", "dr.", "mr.", "st.", "u.s.", "i.e.", "oxen", "geese", "buses", "glasses", "ears")
PUNCT = (".", ",", "!", "?", ";", ":", "'s", "'", "\"", "(", ")", "...", "--")


def synonym_lines(text: str) -> list[list[str]]:
    return [line.strip().split(", ") for line in text.splitlines(True)]


def plural(word: str) -> str:
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def caption(rng: random.Random, objects: list[str]) -> str:
    sentences = []
    for _ in range(rng.randint(1, 3)):
        words = []
        for _ in range(rng.randint(0, 14)):
            r = rng.random()
            if r < 0.35:
                word = rng.choice(objects)
                words.append(plural(word) if rng.random() < 0.4 else word)
            elif r < 0.45:
                words.append(rng.choice(SPECIAL))
            elif r < 0.55:
                words.append(rng.choice(PUNCT))
            else:
                words.append(rng.choice(FILLER))
        text = " ".join(words)
        if rng.random() < 0.5 and text:
            text = text[0].upper() + text[1:]
        sentences.append(text + rng.choice((".", ".", "!", "", " .")))
    return " ".join(sentences)


def build(folder: Path, synonyms_text: str) -> dict[str, str]:
    """Write the four COCO 2014 files into ``folder``; return ``{image id: caption}``."""
    rng = random.Random(SEED)
    lines = synonym_lines(synonyms_text)
    heads = [line[0] for line in lines]
    words = sorted({w.strip() for line in lines for w in line if w.strip()})
    categories = [{"id": k + 1, "name": name} for k, name in enumerate(heads)]
    inst = {"train": [], "val": []}
    caps = {"train": [], "val": []}
    images = {"train": [], "val": []}
    candidates = {}
    for image_id in range(1, N_CAPTIONS + 1):
        split = "val" if image_id % 3 else "train"
        images[split].append({"id": image_id, "file_name": f"COCO_{split}2014_{image_id:012d}.jpg"})
        for _ in range(rng.choice((0, 1, 2, 3, 5))):
            inst[split].append({"id": len(inst[split]) + 1, "image_id": image_id,
                                "category_id": rng.randint(1, len(heads)), "segmentation": [[1.0, 2.0, 3.0, 4.0]]})
        for _ in range(rng.randint(1, 3)):
            caps[split].append({"id": image_id * 10 + len(caps[split]), "image_id": image_id,
                                "caption": caption(rng, words)})
        candidates[str(image_id)] = caption(rng, words)
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        header = {"info": {}, "licenses": []}
        (folder / f"instances_{split}2014.json").write_text(json.dumps(
            {**header, "images": images[split], "categories": categories, "annotations": inst[split]}))
        (folder / f"captions_{split}2014.json").write_text(json.dumps(
            {**header, "images": images[split], "annotations": caps[split]}))
    return candidates


TOKENIZER_VOCAB = ("a", "dog", "dogs", "man", "mr.", "dr.", "st.", "u.s.", "e.g.", "etc.", "i.e.", "cat's", "isn't",
                   "cannot", "gonna", "(", ")", "[", "]", "\"", "'", "''", "``", "--", "...", ".", ",", ";", ":", "?",
                   "!", "\u201c", "\u201d", "\u2018", "\u2019", "\u00ab", "\u00bb", "$", "3.5", "1,000", "a.m.",
                   "traffic", "light", "The", "It", "wine", "glasses", "10:30", "toilet", "seat", "'tis", " ", "\n",
                   "\t", "U.S.", "No.", "vs.", "inc.", "J.", "A.", "Smith", "2.", "ca.", "fig.", "Fig.", "p.m.")


def tokenizer_texts(n: int = 3000) -> list[str]:
    """Random texts full of abbreviations, initials, numbers, quotes and sentence ends."""
    rng = random.Random(SEED + 1)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(TOKENIZER_VOCAB) for _ in range(rng.randint(0, 30)))
        out.append(text.lower() if rng.random() < 0.5 else text)
    return out
