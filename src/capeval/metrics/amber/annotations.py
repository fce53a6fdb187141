"""AMBER's annotation folder (junyangwang0410/AMBER ``data/``, commit 534babf) as ``inference.py`` reads it.

Three files, all required (``-O amber.annotations=DIR``):

- ``annotations.json``: a list whose entry ``k`` describes AMBER id ``k + 1`` (the script
  indexes ``ground_truth[id - 1]``): ``type`` (``generative`` for ids 1..1004, else a
  discriminative kind), ``truth`` (generative: the objects in the image; discriminative:
  ``"yes"``/``"no"``) and, for generative entries, ``hallu`` (objects a model is prone to
  invent for that image);
- ``relation.json``: ``{object: [associated words]}``, the association table: a word listed
  under an annotated object counts as that object;
- ``safe_words.txt``: one word per line, nouns never judged (``line.split('\\n')[0]`` of
  each line of the file read as text, so Windows line ends are folded as Python's text
  mode does).

AMBER's "hallucination words" (the nouns the generative metrics look at) are every key and
every listed word of ``relation.json``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capeval.errors import InputError
from capeval.hashing import files_digest
from capeval.paths import folder_files

FILES = ("annotations.json", "relation.json", "safe_words.txt")
#: the release read by the paper's script: junyangwang0410/AMBER data/ at this commit, sha256 of each file
COMMIT = "534babf6bbfcce2e735c26289dedfb21cef3c939"
RELEASE = {"annotations.json": "db22a436c4836fbb295e60b4e80d519573077579fb7032f01b193c1bd022b797",
           "relation.json": "c4c1491e9bbc3209abc1888c12a1bf8413bdbab8a0d8be04b990a2e7680cf23e",
           "safe_words.txt": "f92cf1123f4578a2630832fac3e6ac4de36212ea55859d3bed4fd233723f4043"}
_NAME = re.compile(r"(?:.*[/\\])?AMBER_(\d+)\.(?:jpe?g|png)", re.IGNORECASE)


@dataclass(frozen=True)
class AmberData:
    """The parsed folder: entries by id, the association table, the word lists and a digest."""

    entries: tuple[dict[str, Any], ...]
    association: dict[str, list[str]]
    vocabulary: frozenset[str]
    safe_words: tuple[str, ...]
    digest: str

    def entry(self, candidate_id: str) -> tuple[int, dict[str, Any]]:
        """``(AMBER id, its annotation)`` of a candidate id: ``12`` or an image name ``AMBER_12.jpg``."""
        text = candidate_id.strip()
        match = _NAME.fullmatch(text)
        number = text if match is None else match.group(1)
        if not (number.isascii() and number.isdigit()):  # "²".isdigit() too, which int() refuses
            raise InputError(f"candidate {candidate_id!r}: not an AMBER id (1..{len(self.entries)}) or image name "
                             "(AMBER_12.jpg)", candidate_id)
        amber_id = int(number)
        if not 1 <= amber_id <= len(self.entries):
            raise InputError(f"candidate {candidate_id!r}: AMBER id {amber_id} is not in annotations.json "
                             f"(ids 1..{len(self.entries)})", candidate_id)
        return amber_id, self.entries[amber_id - 1]


def _read_json(path: Path) -> Any:
    from capeval.io.reading import read_json_text

    from capeval.io.nesting import json_loads

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) < len(keys):  # json.load keeps the last silently
            raise InputError(f"{path}: key {next(k for k in keys if keys.count(k) > 1)!r} appears twice in one object")
        return dict(pairs)

    text = read_json_text(path)  # refused unread past capeval's JSON size limit
    try:
        return json_loads(text, str(path), object_pairs_hook=unique)
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"{path}: not readable JSON ({str(exc).splitlines()[0][:120]})") from None


def _check_entries(raw: Any, path: Path, association: dict[str, list[str]]) -> tuple[dict[str, Any], ...]:
    if not isinstance(raw, list):
        raise InputError(f"{path}: expected a list of annotations, got {type(raw).__name__}")
    for k, entry in enumerate(raw):
        where = f"{path}, entry {k + 1}"
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise InputError(f"{where}: expected an object with a 'type' string")
        if entry.get("id", k + 1) != k + 1:
            # inference.py reads ground_truth[id - 1]: the list position is the id
            raise InputError(f"{where}: has id {entry.get('id')!r}; AMBER ids are the list positions (1-based)")
        if entry["type"] == "generative":
            for key in ("truth", "hallu"):
                words = entry.get(key)
                if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                    raise InputError(f"{where}: generative '{key}' must be a list of words")
                unknown = [w for w in words if w not in association]
                if unknown:  # inference.py would stop with a KeyError on association[word]
                    raise InputError(f"{where}: '{key}' word {unknown[0]!r} is not a key of relation.json")
        elif entry.get("truth") not in ("yes", "no"):
            raise InputError(f"{where}: discriminative 'truth' must be \"yes\" or \"no\", got {entry.get('truth')!r:.40}")
    return tuple(raw)


def _check_association(raw: Any, path: Path) -> dict[str, list[str]]:
    if not isinstance(raw, dict) or not all(
            isinstance(v, list) and all(isinstance(w, str) for w in v) for v in raw.values()):
        raise InputError(f"{path}: expected an object {{word: [associated words]}}")
    return raw


def label(digest: str) -> str:
    """``534babf`` for the released data/ folder (:func:`files_digest` of :data:`RELEASE`), else
    ``custom-<digest>``: what a signature records of the annotations."""
    import hashlib

    release = hashlib.sha256("".join(f"{name}:{RELEASE[name]}\n" for name in FILES).encode()).hexdigest()
    return COMMIT[:7] if digest == release else f"custom-{digest[:12]}"


def annotation_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The three files of the folder, or a one-line error naming what is missing."""
    return folder_files("amber.annotations", folder, FILES,
                        "AMBER's data/ folder: annotations.json, relation.json, safe_words.txt",
                        "AMBER's data/ folder of junyangwang0410/AMBER")


#: the largest safe_words.txt read (AMBER's has 57 words)
MAX_SAFE_WORDS_BYTES = 10_000_000


def _check_sizes(paths: list[Path]) -> None:
    """Each file within its limit, refused before anything is hashed or read (a 2 GB file
    would otherwise be hashed whole first)."""
    from capeval.io.reading import max_json_bytes

    for path in paths:
        size = path.stat().st_size
        if path.name == "safe_words.txt":
            if size > MAX_SAFE_WORDS_BYTES:
                raise InputError(f"{path}: {size:,} bytes; a word list of AMBER has 57")
        elif size > max_json_bytes():
            raise InputError(f"{path}: {size:,} bytes, more than the {max_json_bytes():,} a JSON document may have "
                             "(set CAPEVAL_MAX_JSON_BYTES to raise the limit)")


def read_safe_words(path: Path) -> tuple[str, ...]:
    """``safe_words.txt`` as inference.py reads it: each line of the text file up to its newline."""
    if path.stat().st_size > MAX_SAFE_WORDS_BYTES:
        raise InputError(f"{path}: {path.stat().st_size:,} bytes; a word list of AMBER has 57")
    try:
        with open(path, encoding="utf-8") as f:
            return tuple(line.split("\n")[0] for line in f)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not readable ({exc})") from None


_LOADED: dict[tuple[str, str], AmberData] = {}


def load(folder: str | os.PathLike[str]) -> AmberData:
    """The AMBER annotation folder, checked and parsed (kept per process, keyed by its digest)."""
    paths = annotation_files(folder)
    _check_sizes(paths)
    digest = files_digest(paths)
    key = (str(Path(folder).resolve()), digest)
    if key not in _LOADED:
        ann_path, rel_path, safe_path = paths
        association = _check_association(_read_json(rel_path), rel_path)
        entries = _check_entries(_read_json(ann_path), ann_path, association)
        vocabulary = frozenset(association) | frozenset(w for words in association.values() for w in words)
        _LOADED[key] = AmberData(entries, association, vocabulary, read_safe_words(safe_path), digest)
    return _LOADED[key]
