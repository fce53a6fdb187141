"""FOIL with CHAIR (issue 47 item 8): a FOIL original is one of its image's COCO captions, so
CHAIR's ground truth (instances + the image's COCO captions) used to contain the very caption
being judged, and an original could never be hallucinated, while the references the other
metrics get leave it out. The FOIL protocol now leaves it out of CHAIR's ground truth too, for
both captions of the pair; worked out by hand below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ijson")

import capeval.bench as cb  # noqa: E402
from capeval.errors import InputError  # noqa: E402

FILES = {1: "COCO_val2014_000000000001.jpg", 2: "COCO_val2014_000000000002.jpg"}
INSTANCES = {1: ["dog", "couch"], 2: ["person", "horse"]}
OTHER_CAPTIONS = {1: ["a brown dog on a sofa"], 2: ["a rider on a horse"]}
# (group id, image, original (also a COCO caption of the image), foil)
PAIRS = [
    (10, 1, "a dog with a laptop on a couch", "a dog with a cat on a couch"),   # laptop only in the original
    (20, 2, "a man riding a horse near a car", "a man riding a cow near a car"),  # car only in the original
    (30, 1, "a brown dog lying on a couch", "a brown cat lying on a couch"),
]
# CHAIR-s (original, foil) with the original left out of the ground truth:
#   10: laptop is in no other caption nor instance -> original 1; foil: cat 1 (laptop gone too) -> tie
#   20: car only in the original -> 1; foil: cow, car -> 1 -> tie
#   30: original 0; foil cat -> 1 -> right
# and with it kept (the old behaviour): 10: 0 vs 1 (cat), 20: 0 vs 1 (cow), 30: 0 vs 1 -> all right
WITHOUT = [(1, 1), (1, 1), (0, 1)]
WITH = [(0, 1), (0, 1), (0, 1)]


def _write(root: Path) -> Path:
    (root / "data" / "foil").mkdir(parents=True)
    coco = root / "coco"
    coco.mkdir()
    images = [{"id": k, "file_name": name} for k, name in FILES.items()]
    captions = [(k, c) for k, cs in OTHER_CAPTIONS.items() for c in cs] + [(img, orig) for _, img, orig, _ in PAIRS]
    cap_json = {"images": images, "annotations": [{"id": n, "image_id": k, "caption": c}
                                                  for n, (k, c) in enumerate(captions)]}
    names = sorted({n for v in INSTANCES.values() for n in v})
    instances = {"images": images, "categories": [{"id": j + 1, "name": n} for j, n in enumerate(names)],
                 "annotations": [{"id": 100 * k + j, "image_id": k, "category_id": names.index(n) + 1}
                                 for k, objs in INSTANCES.items() for j, n in enumerate(objs)]}
    empty = {"images": [], "categories": instances["categories"], "annotations": []}
    (coco / "instances_val2014.json").write_text(json.dumps(instances))
    (coco / "instances_train2014.json").write_text(json.dumps(empty))
    (coco / "captions_val2014.json").write_text(json.dumps(cap_json))
    (coco / "captions_train2014.json").write_text(json.dumps({"images": [], "annotations": []}))
    (root / "data" / "foil" / "captions_val2014.json").write_text(json.dumps(cap_json))
    anns = []
    for gid, img, orig, foil in PAIRS:
        anns += [{"id": gid, "image_id": img, "caption": orig, "foil": False},
                 {"id": gid, "image_id": img, "caption": foil, "foil": True}]
    (root / "data" / "foil" / "foilv1.0_test_2017.json").write_text(json.dumps({"images": images, "annotations": anns}))
    return coco


def _accuracy(pairs: list[tuple[int, int]]) -> tuple[float, int]:
    return 100.0 * sum(o < f for o, f in pairs) / len(pairs), sum(o == f for o, f in pairs)


def test_the_judged_caption_leaves_chairs_ground_truth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    coco = _write(tmp_path)
    run = cb.run(["foil"], ["chair-s"], data_root=tmp_path / "data", bootstrap=0,
                 options={"chair": {"annotations": str(coco)}})
    got = {(r.metric, r.statistic): r.value for r in run}
    acc, ties = _accuracy(WITHOUT)
    for setting in ("1ref", "4ref"):
        assert got[("chair-s", f"accuracy_{setting}")] == pytest.approx(acc)
        assert got[("chair-s", f"ties_{setting}")] == ties
    # the old ground truth (the original kept) on request gives the old numbers
    run = cb.run(["foil"], ["chair-s"], data_root=tmp_path / "data", bootstrap=0,
                 options={"chair": {"annotations": str(coco), "truth_excludes": None}})
    got = {(r.metric, r.statistic): r.value for r in run}
    assert got[("chair-s", "accuracy_4ref")] == pytest.approx(_accuracy(WITH)[0])


def test_scorer_option_and_signature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from capeval.metrics.chair.scorer import Chair

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    coco = _write(tmp_path)
    cands = {"a": "a dog with a laptop on a couch"}
    images = {"a": FILES[1]}
    kept = Chair(annotations=str(coco)).score(cands, images=images)["chair-s"]
    left_out = Chair(annotations=str(coco), truth_excludes={"a": PAIRS[0][2]}).score(cands, images=images)["chair-s"]
    assert kept.items["a"] == 0.0 and left_out.items["a"] == 1.0
    assert "truth:" not in str(kept.signature) and "truth:coco-minus(n=1)" in str(left_out.signature)
    with pytest.raises(InputError, match="truth_excludes: item 'zz' is not among the candidates"):
        Chair(annotations=str(coco), truth_excludes={"zz": "x"}).score(cands, images=images)
    for bad in (["a"], {"a": 3}):
        with pytest.raises(InputError, match="truth_excludes"):
            Chair(annotations=str(coco), truth_excludes=bad)
