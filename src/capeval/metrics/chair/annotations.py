"""Ground-truth objects of COCO images for CHAIR, read from a COCO 2014 annotation folder.

CHAIR (LisaAnne/Hallucination ``utils/chair.py``) needs four files of the COCO 2014 release
(``annotations_trainval2014.zip``): ``instances_{train,val}2014.json`` (the objects segmented
in each image) and ``captions_{train,val}2014.json`` (the objects named in its reference
captions). The instance files are 160-330 MB of JSON, so they are streamed (``ijson``) once
and what CHAIR uses (per image: its category names and reference captions; file name -> id)
is kept as one compact JSON file in the capeval cache, keyed by the sha256 of the four files.
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


def _stream(path: Path, prefix: str) -> Iterator[dict[str, Any]]:
    from capeval._optional import require

    ijson = require("ijson", extra="chair", purpose="streaming the COCO annotation files for CHAIR")
    try:
        with open(path, "rb") as f:
            yield from ijson.items(f, prefix, use_float=True)
    except ijson.JSONError as exc:
        raise InputError(f"{path}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None


def _int_field(row: Any, key: str, path: Path) -> int:
    value = row.get(key) if isinstance(row, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InputError(f"{path}: an entry has {key}={value!r:.40}, expected an integer")
    return int(value)


def _extract(paths: list[Path]) -> dict[str, Any]:
    inst_train, inst_val, cap_train, cap_val = paths
    categories: dict[int, list[str]] = {}
    captions: dict[int, list[str]] = {}
    files: dict[str, int] = {}
    # CHAIR reads val before train for the annotations; the order of a set does not matter,
    # the order of the captions is kept as theirs (val, then train)
    for path in (inst_val, inst_train):
        names = {_int_field(c, "id", path): str(c.get("name")) for c in _stream(path, "categories.item")}
        for ann in _stream(path, "annotations.item"):
            cat = _int_field(ann, "category_id", path)
            if cat not in names:
                raise InputError(f"{path}: annotation {ann.get('id')!r} has category_id {cat}, not in its categories")
            categories.setdefault(_int_field(ann, "image_id", path), []).append(names[cat])
    for path in (cap_val, cap_train):
        for img in _stream(path, "images.item"):
            files[str(img.get("file_name"))] = _int_field(img, "id", path)
        for ann in _stream(path, "annotations.item"):
            text = ann.get("caption") if isinstance(ann, dict) else None
            if not isinstance(text, str):
                raise InputError(f"{path}: caption annotation {ann.get('id')!r} has no caption string")
            captions.setdefault(_int_field(ann, "image_id", path), []).append(text)
    return {"layout": _LAYOUT, "categories": {str(k): sorted(set(v)) for k, v in categories.items()},
            "captions": {str(k): v for k, v in captions.items()}, "files": files}


def load_annotations(folder: str | os.PathLike[str], cache: bool = True) -> CocoAnnotations:
    """The COCO 2014 annotations CHAIR needs, streamed once and then read from the capeval cache."""
    from capeval.io.atomic import atomic_write_json
    from capeval.paths import cache_dir, make_cache_folder

    paths = annotation_files(folder)
    digest = files_digest(paths)
    cached = cache_dir() / "chair" / f"coco2014-{digest[:32]}.json"
    data = None
    if cache and cached.is_file():
        try:
            data = json.loads(cached.read_text(encoding="utf-8"))
            if data.get("layout") != _LAYOUT or data.get("digest") != digest:
                data = None
        except (OSError, ValueError, AttributeError):
            data = None  # a damaged cache entry is rebuilt
    if data is None:
        data = _extract(paths)
        data["digest"] = digest
        if cache:
            make_cache_folder(cached.parent)
            atomic_write_json(cached, data, indent=None)
    return CocoAnnotations({int(k): v for k, v in data["categories"].items()},
                           {int(k): v for k, v in data["captions"].items()},
                           {k: int(v) for k, v in data["files"].items()}, digest)
