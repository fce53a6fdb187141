"""Ground-truth objects of COCO images for CHAIR, read from a COCO 2014 annotation folder.

CHAIR (LisaAnne/Hallucination ``utils/chair.py``) needs four files of the COCO 2014 release
(``annotations_trainval2014.zip``): ``instances_{train,val}2014.json`` (the objects segmented
in each image) and ``captions_{train,val}2014.json`` (the objects named in its reference
captions). The instance files are 160-330 MB of JSON, so they are streamed (``ijson``) once
and what CHAIR uses (per image: its category names and reference captions; file name -> id)
is kept as one compact JSON file in the capeval cache, keyed by the sha256 of the four files.

Each file is bounded while it is streamed (:class:`capeval.io.reading.JsonStream`): at most
``CAPEVAL_MAX_ANNOTATION_BYTES`` (1 GiB, three times ``instances_train2014.json``), nesting
at most 100 deep, strings at most ``CAPEVAL_MAX_LINE_BYTES``, a top-level object whose lists
(``categories``/``annotations``, ``images``/``annotations``) appear once each; every entry
is checked for the fields and types used, and a key twice in an entry, a category id or a
file name given twice with different meanings are refused, never resolved by the last one
winning. A cache entry that is not what this module writes is rebuilt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from capeval.errors import InputError
from capeval.hashing import files_digest
from capeval.paths import folder_files

FILES = ("instances_train2014.json", "instances_val2014.json", "captions_train2014.json", "captions_val2014.json")
#: bump when the compact layout changes
_LAYOUT = 1


class CocoAnnotations:
    """Per image id: COCO category names and reference captions; COCO file name -> image id."""

    def __init__(self, categories: dict[int, list[str]], captions: dict[int, list[str]], file_ids: dict[str, int],
                 digest: str):
        self.categories = categories
        self.captions = captions
        self.file_ids = file_ids
        self.digest = digest

    def image_id(self, candidate_id: str) -> int:
        """The COCO image id of a candidate id: a number, or a COCO file name (with or without folders)."""
        text = candidate_id.strip()
        if text.isascii() and text.isdigit():  # "²".isdigit() too, which int() refuses; "١٢" is not image 12
            number = int(text)
            if number in self.captions or number in self.categories:
                return number
            raise InputError(f"candidate {candidate_id!r}: image id {number} is in neither COCO 2014 caption file")
        name = os.path.basename(text)
        if name in self.file_ids:
            return self.file_ids[name]
        raise InputError(f"candidate {candidate_id!r}: not a COCO 2014 image id or file name "
                         "(e.g. 391895 or COCO_val2014_000000391895.jpg)")


def annotation_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The four COCO 2014 files CHAIR reads, or a one-line error naming what is missing."""
    return folder_files("chair.annotations", folder, FILES,
                        "the COCO 2014 annotation folder of annotations_trainval2014.zip",
                        "CHAIR needs the COCO 2014 instance and caption files of annotations_trainval2014.zip")


#: the lists each kind of file must have at its top level
_TOP = {"instances": ("categories", "annotations"), "captions": ("images", "annotations")}


class _Entry(dict):
    """An object as ``ijson`` builds it, noting a key given twice (``json.load``, what the
    official code reads the files with, would keep the last value silently; raising inside
    ijson's C builder is not safe, so the key is noted and the entry refused after)."""

    __slots__ = ("duplicate",)

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self:
            self.duplicate = key
        dict.__setitem__(self, key, value)


def _stream(path: Path, prefix: str, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, entry)`` for each entry of the top-level list ``prefix`` ("annotations.item")
    of a ``kind`` ("instances"/"captions") file, streamed within the bounds of the module docs."""
    from capeval._optional import require
    from capeval.io.reading import JsonStream, max_annotation_bytes

    ijson = require("ijson", extra="chair", purpose="streaming the COCO annotation files for CHAIR")
    top = prefix.split(".")[0]
    try:
        with JsonStream(path, max_bytes=max_annotation_bytes(), keys=_TOP[kind],
                        limit_hint="set CAPEVAL_MAX_ANNOTATION_BYTES to raise the limit") as f:
            for k, entry in enumerate(ijson.items(f, prefix, use_float=True, buf_size=JsonStream.CHUNK,
                                                  map_type=_Entry)):
                where = f"{path}: {top}[{k}]"
                if not isinstance(entry, dict):
                    raise InputError(f"{where}: expected an object, got {_type_name(entry)}")
                if getattr(entry, "duplicate", None) is not None:
                    raise InputError(f"{where}: the key {entry.duplicate!r} appears twice (only one value can be "
                                     "kept; remove or rename the duplicate)")
                yield where, entry
            first = f.shape.values.get(top)  # the parser has read the whole file by now
    except ijson.JSONError as exc:
        raise InputError(f"{path}: not valid JSON ({_first_line(exc)})") from None
    if first is None:
        raise InputError(f"{path}: no {top!r} list at the top level (a COCO 2014 {kind} file has "
                         f"{' and '.join(_TOP[kind])})")
    if first != "[":
        raise InputError(f"{path}: {top!r} must be a list [...] (a COCO 2014 {kind} file's layout)")


def _first_line(exc: BaseException) -> str:
    text = exc.args[0] if exc.args else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = str(text).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:120]


def _type_name(value: Any) -> str:
    return {list: "a list", str: "a string", dict: "an object", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _int_field(row: dict[str, Any], key: str, where: str) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InputError(f"{where}: {key}={value!r:.40}, expected an integer")
    return int(value)


def _str_field(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        raise InputError(f"{where}: {key}={value!r:.40}, expected a string")
    return value


def _extract(paths: list[Path]) -> dict[str, Any]:
    inst_train, inst_val, cap_train, cap_val = paths
    categories: dict[int, list[str]] = {}
    captions: dict[int, list[str]] = {}
    files: dict[str, int] = {}
    # CHAIR reads val before train for the annotations; the order of a set does not matter,
    # the order of the captions is kept as theirs (val, then train)
    for path in (inst_val, inst_train):
        names: dict[int, str] = {}
        for where, c in _stream(path, "categories.item", "instances"):
            cat, name = _int_field(c, "id", where), _str_field(c, "name", where)
            if names.setdefault(cat, name) != name:
                raise InputError(f"{where}: category id {cat} is given twice, as {names[cat]!r} and {name!r}")
        for where, ann in _stream(path, "annotations.item", "instances"):
            cat = _int_field(ann, "category_id", where)
            if cat not in names:
                raise InputError(f"{where}: annotation {ann.get('id')!r:.40} has category_id {cat}, not in its "
                                 "categories")
            categories.setdefault(_int_field(ann, "image_id", where), []).append(names[cat])
    for path in (cap_val, cap_train):
        for where, img in _stream(path, "images.item", "captions"):
            name, number = _str_field(img, "file_name", where), _int_field(img, "id", where)
            if files.setdefault(name, number) != number:
                raise InputError(f"{where}: file name {name!r} is given to two images, {files[name]} and {number}")
        for where, ann in _stream(path, "annotations.item", "captions"):
            if not isinstance(ann.get("caption"), str):
                raise InputError(f"{where}: caption annotation {ann.get('id')!r:.40} has no caption string")
            captions.setdefault(_int_field(ann, "image_id", where), []).append(ann["caption"])
    return {"layout": _LAYOUT, "categories": {str(k): sorted(set(v)) for k, v in categories.items()},
            "captions": {str(k): v for k, v in captions.items()}, "files": files}


def _check_sizes(paths: list[Path]) -> None:
    """Each file at most ``CAPEVAL_MAX_ANNOTATION_BYTES``, refused before it is hashed."""
    from capeval.io.reading import max_annotation_bytes

    limit = max_annotation_bytes()
    for path in paths:
        size = path.stat().st_size
        if size > limit:
            raise InputError(f"{path}: {size:,} bytes, more than the {limit:,} an annotation file may have (set "
                             "CAPEVAL_MAX_ANNOTATION_BYTES to raise the limit)")


def _is_digits(text: Any) -> bool:
    digits = text[1:] if isinstance(text, str) and text.startswith("-") else text
    return isinstance(digits, str) and digits.isascii() and digits.isdigit() and len(digits) <= 20


def _valid_entry(data: Any, digest: str) -> bool:
    """Whether a cache entry has the layout :func:`_extract` writes (for these files)."""
    if not isinstance(data, dict) or data.get("layout") != _LAYOUT or data.get("digest") != digest:
        return False
    tables = [data.get("categories"), data.get("captions")]
    files = data.get("files")
    if not all(isinstance(t, dict) for t in (*tables, files)):
        return False
    for table in tables:
        for key, values in table.items():
            if not _is_digits(key) or not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                return False
    return all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in files.items())


def _read_cache(path: Path, digest: str) -> dict[str, Any] | None:
    """The cache entry at ``path``, or None (a miss) when it is absent, not a regular file,
    too large, not JSON or not of the layout written here: such an entry is rebuilt."""
    import stat

    from capeval.io.reading import read_json

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        data = read_json(path)
    except (OSError, InputError):
        return None
    return data if _valid_entry(data, digest) else None


def load_annotations(folder: str | os.PathLike[str], cache: bool = True) -> CocoAnnotations:
    """The COCO 2014 annotations CHAIR needs, streamed once and then read from the capeval cache."""
    from capeval.io.atomic import atomic_write_json
    from capeval.paths import cache_dir, make_cache_folder

    paths = annotation_files(folder)
    _check_sizes(paths)
    digest = files_digest(paths)
    cached = cache_dir() / "chair" / f"coco2014-{digest[:32]}.json"
    data = _read_cache(cached, digest) if cache else None
    if data is None:
        data = _extract(paths)
        data["digest"] = digest
        if cache and _writable_entry(cached):
            make_cache_folder(cached.parent)
            atomic_write_json(cached, data, indent=None)
    return CocoAnnotations({int(k): v for k, v in data["categories"].items()},
                           {int(k): v for k, v in data["captions"].items()},
                           {k: int(v) for k, v in data["files"].items()}, digest)


def _writable_entry(path: Path) -> bool:
    """Whether a cache entry may be written at ``path``: absent, or a regular file (replaced).
    Anything else there (a FIFO, which a write would block on; a folder; a link) is left as it
    is, and the table is used without being cached."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(mode)
