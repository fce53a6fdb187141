"""Inputs shared by the explorer's tests (tests/test_explorer.py, tests/test_explorer_browser.py)."""

from __future__ import annotations

import json
from pathlib import Path


def write_coco(folder: Path) -> dict[str, str]:
    """A three-image COCO 2014 folder: image 1 has a dog, 2 a cat, 3 a person (a man); returns
    captions whose CHAIR hallucinations are known by construction (cat and couch; dog; horse)."""
    folder.mkdir()
    cats = [{"id": 1, "name": "dog"}, {"id": 2, "name": "cat"}, {"id": 3, "name": "couch"}, {"id": 4, "name": "person"},
            {"id": 5, "name": "horse"}]
    images = [{"id": i, "file_name": f"COCO_val2014_{i:012d}.jpg"} for i in (1, 2, 3)]
    inst = [{"id": k, "image_id": k, "category_id": c, "segmentation": [[1.0, 2.0, 3.0, 4.0]]}
            for k, c in ((1, 1), (2, 2), (3, 4))]
    caps = [{"id": 10 * k, "image_id": k, "caption": t} for k, t in ((1, "a dog lying down"), (2, "a cat"), (3, "a man"))]
    head = {"info": {}, "licenses": []}
    for split, (im, ins, cap) in (("val", (images, inst, caps)), ("train", ([], [], []))):
        (folder / f"instances_{split}2014.json").write_text(json.dumps({**head, "images": im, "categories": cats,
                                                                        "annotations": ins}))
        (folder / f"captions_{split}2014.json").write_text(json.dumps({**head, "images": im, "annotations": cap}))
    return {"1": "A dog and two cats on a couch.", "2": "A cat sleeping next to a dog.", "3": "A man riding a horse."}


CHAIR_MARKS = {"1": ["cat", "couch"], "2": ["dog"], "3": ["horse"]}
