"""COCO with Karpathy's splits (Karpathy & Fei-Fei 2015), from a folder the user provides.

Layout (what the standard ``dataset_coco.json`` describes)::

    <root>/dataset_coco.json        (or <root>/annotations/dataset_coco.json, or annotations=PATH)
    <root>/train2014/COCO_train2014_*.jpg
    <root>/val2014/COCO_val2014_*.jpg

``dataset_coco.json``: ``{"images": [{"filepath": "val2014", "filename": ..., "cocoid": 391895,
"split": "train" | "restval" | "val" | "test", "sentences": [{"raw": ...}, ...]}, ...]}``.
Splits: ``train`` = Karpathy's train + restval (113,287 images, what captioning and BRIDGE,
Sec. 4.1, train on), ``val`` and ``test`` = 5,000 images each; ``restval`` alone on request.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from capeval.errors import InputError

KARPATHY_SPLITS: dict[str, tuple[str, ...]] = {
    "train": ("train", "restval"), "val": ("val",), "test": ("test",), "restval": ("restval",),
}
ANNOTATION_NAMES = ("dataset_coco.json", "annotations/dataset_coco.json")


@dataclass(frozen=True)
class CaptionedImage:
    """One training/validation image: ``id``, ``image`` (path, PIL image or uint8 array), its captions."""

    id: str
    image: Any
    captions: tuple[str, ...]
    split: str = ""


def find_annotations(root: str | os.PathLike[str], annotations: str | os.PathLike[str] | None = None) -> Path:
    """``annotations`` when given, else ``dataset_coco.json`` in ``root`` or ``root/annotations``."""
    if annotations is not None:
        path = Path(annotations)
        if not path.is_file():
            raise InputError(f"Karpathy annotations file not found: {path}")
        return path
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"COCO root folder not found: {root}")
    for name in ANNOTATION_NAMES:
        if (root / name).is_file():
            return root / name
    raise InputError(f"no dataset_coco.json (Karpathy splits) in {root} or {root / 'annotations'}; "
                     "pass its path as annotations")


def load_karpathy(root: str | os.PathLike[str], split: str = "train", annotations: str | os.PathLike[str] | None = None,
                  limit: int | None = None, check_files: bool = True) -> list[CaptionedImage]:
    """The images of one Karpathy split with their raw captions, in file order (first ``limit`` only)."""
    if split not in KARPATHY_SPLITS:
        raise InputError(f"unknown Karpathy split {split!r}; use one of {', '.join(KARPATHY_SPLITS)}")
    path = find_annotations(root, annotations)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise InputError(f"{path}: expected {{\"images\": [...]}} (Karpathy's dataset_coco.json)")
    wanted = KARPATHY_SPLITS[split]
    out: list[CaptionedImage] = []
    root = Path(root)
    for n, entry in enumerate(data["images"]):
        try:
            if entry["split"] not in wanted:
                continue
            file = root / entry.get("filepath", "") / entry["filename"]
            captions = tuple(" ".join(s["raw"].split()) for s in entry["sentences"] if s.get("raw", "").strip())
            image_id = str(entry.get("cocoid", entry.get("imgid", Path(entry["filename"]).stem)))
        except (KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"{path}: image #{n} lacks {exc} (expected split, filename, sentences[].raw)") from None
        if not captions:
            raise InputError(f"{path}: image #{n} ({entry['filename']}) has no caption")
        out.append(CaptionedImage(image_id, file, captions, entry["split"]))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise InputError(f"{path}: no image in split {split!r} ({'+'.join(wanted)})")
    if check_files and not Path(out[0].image).is_file():
        raise InputError(f"COCO image {out[0].image} not found: {root} must hold the folders named by "
                         f"dataset_coco.json's filepath (train2014/, val2014/)")
    return out


def split_items(data: Sequence[CaptionedImage] | None, coco_root: str | os.PathLike[str] | None,
                annotations: str | os.PathLike[str] | None, split: str,
                limit: int | None) -> list[CaptionedImage] | None:
    """The items of a training split: ``data`` when given (first ``limit``), else the Karpathy
    ``split`` under ``coco_root``; None when there is neither."""
    if data is not None:
        return list(data)[:limit] if limit else list(data)
    if coco_root is None:
        return None
    return load_karpathy(coco_root, split, annotations, limit)
