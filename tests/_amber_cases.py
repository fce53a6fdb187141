"""Random AMBER cases built from AMBER's word lists, the same for tests/test_amber.py and for
``tools/amber_reference.py`` (which records what the official ``inference.py`` computes on them).

- an annotation folder in the released layout: 1,200 generative entries (random objects of
  relation.json as ``truth`` and ``hallu``, some repeated, some in both lists, a few empty
  ``hallu``) and 600 yes/no questions of every discriminative type;
- one response per id: object words, their associated words, safe words, plurals, capitalised
  words, filler and punctuation (generative); "Yes", "No" and near misses (yes/no);
- deterministic stand-ins for the script's tools (the NLTK tagger data and spaCy's
  en_core_web_lg cannot be installed here): a tokenizer, a context-dependent tagger, a
  plural-stripping lemmatizer that leaves capitalised words alone, and a symmetric pair
  similarity with 1.0 for the same word and a few pairs above 0.8 (some exactly 0.8).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import zlib
from pathlib import Path

N_GENERATIVE = 1200
N_DISCRIMINATIVE = 600
SEED = 20231114
WORDS = Path(__file__).parent / "data" / "amber"
FILLER = ("a", "the", "an", "two", "some", "with", "on", "in", "next", "to", "is", "are", "of", "near", "and",
          "sitting", "holding", "big", "small", "red", "white", "there", "it", "up", "under", "image", "scene",
          "view", "shows", "background", "left", "side", "thing", "object")
PUNCT = (".", ",", "!", "?", ";", ":", "'s", "(", ")")
TYPES = ("discriminative-attribute-state", "discriminative-attribute-number", "discriminative-attribute-action",
         "discriminative-hallucination", "discriminative-relation", "relation")
ANSWERS = ("Yes", "No", "Yes", "No", "yes", "no", "No.", "Yes.", " No", "Maybe")


def _h(text: str) -> int:
    return zlib.crc32(text.encode())


def association() -> dict[str, list[str]]:
    return json.loads((WORDS / "relation.json").read_text(encoding="utf-8"))


def safe_words() -> list[str]:
    return (WORDS / "safe_words.txt").read_text(encoding="utf-8").split("\n")


def annotations(rng: random.Random) -> list[dict]:
    keys = sorted(association())
    out = []
    for k in range(N_GENERATIVE):
        truth = rng.sample(keys, rng.randint(1, 9))
        hallu = rng.sample(keys, rng.randint(0, 6) if rng.random() < 0.05 else rng.randint(1, 6))
        if rng.random() < 0.1:
            truth.append(rng.choice(truth))
        if rng.random() < 0.1 and hallu:
            truth.insert(rng.randint(0, len(truth)), rng.choice(hallu))
        out.append({"id": k + 1, "type": "generative", "truth": truth, "hallu": hallu})
    for k in range(N_DISCRIMINATIVE):
        out.append({"id": N_GENERATIVE + k + 1, "type": rng.choice(TYPES), "truth": rng.choice(("yes", "no"))})
    return out


def _word(rng: random.Random, entry: dict, table: dict[str, list[str]], vocab: list[str], safe: list[str]) -> str:
    r = rng.random()
    if r < 0.22 and entry["truth"]:
        obj = rng.choice(entry["truth"])
        word = rng.choice(table[obj]) if table[obj] and rng.random() < 0.4 else obj
    elif r < 0.38 and entry["hallu"]:
        obj = rng.choice(entry["hallu"])
        word = rng.choice(table[obj]) if table[obj] and rng.random() < 0.4 else obj
    elif r < 0.55:
        word = rng.choice(vocab)
    elif r < 0.6:
        word = rng.choice(safe)
    elif r < 0.65:
        word = rng.choice(PUNCT)
    else:
        word = rng.choice(FILLER)
    if word.isalpha() and rng.random() < 0.15:
        word += "s"
    if word.isalpha() and rng.random() < 0.06:
        word = word.capitalize()
    return word


def responses(rng: random.Random, entries: list[dict]) -> list[dict]:
    table = association()
    vocab = sorted(set(table) | {w for ws in table.values() for w in ws})
    safe = safe_words()
    out = []
    for entry in entries:
        if entry["type"] != "generative":
            out.append({"id": entry["id"], "response": rng.choice(ANSWERS)})
            continue
        n = rng.choice((0, 1, 2)) if rng.random() < 0.03 else rng.randint(3, 30)
        words = [_word(rng, entry, table, vocab, safe) for _ in range(n)]
        out.append({"id": entry["id"], "response": " ".join(words)})
    rng.shuffle(out)
    return out


def build(folder: Path) -> list[dict]:
    """Write the annotation folder; return the responses (the official layout, shuffled)."""
    rng = random.Random(SEED)
    entries = annotations(rng)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "annotations.json").write_text(json.dumps(entries), encoding="utf-8")
    for name in ("relation.json", "safe_words.txt"):
        shutil.copyfile(WORDS / name, folder / name)
    return responses(rng, entries)


# --- the stand-in tools -------------------------------------------------------------------------------

_TOKEN = re.compile(r"'s|\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def tag(tokens: list[str]) -> list[tuple[str, str]]:
    out = []
    prev = "<s>"
    for tok in tokens:
        if not tok[0].isalpha():
            pos = "."
        elif tok.lower() in FILLER[:19]:
            pos = "DT"
        else:
            h = _h(prev + " " + tok) % 10
            pos = ("VBG", "JJ")[h - 7] if 7 <= h <= 8 else "NNP" if tok[0].isupper() else "NNS" if tok.endswith("s") else "NN"
        out.append((tok, pos))
        prev = tok
    return out


def lemmatize(word: str) -> str:
    # WordNet knows lower-case lemmas only: a capitalised word comes back unchanged
    if word.endswith("s") and len(word) > 3 and word.islower() and _h(word) % 5:
        return word[:-1]
    return word


def similarity(a: str, b: str) -> float:
    if a == b:
        return 1.0
    h = _h("|".join(sorted((a, b))))
    value = (h % 1001) / 1000
    return value if h % 7 == 0 else value * 0.8
