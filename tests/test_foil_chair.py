"""FOIL with PAC-S++ and CHAIR side by side in one bench run (issue 39): a fixture in the released
FOIL layout (``foil/foilv1.0_test_2017.json``, ``foil/captions_val2014.json``) and a COCO 2014
annotation folder. CHAIR's accuracy on FOIL is the share of (original, foil) pairs where the
original has the lower hallucination rate (the runner negates lower-is-better scores), ties
errors as for every metric; the expected values below are worked out by hand from the CHAIR
definition, caption by caption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ijson")

import capeval.bench as cb  # noqa: E402

FILES = {k: f"COCO_val2014_{k:012d}.jpg" for k in (1, 2, 3, 4)}
INSTANCES = {1: ["dog", "couch"], 2: ["person", "horse"], 3: ["cat"], 4: ["kite"]}
REFERENCES = {1: ["a dog sleeping on a couch", "a brown dog on a sofa"], 2: ["a man rides a horse", "a rider on a horse"],
              3: ["a cat sitting on a wooden table", "a cat on a table"],
              4: ["a kite and an airplane in the sky", "a kite flying high"]}
# (group id, image, original, foils); what CHAIR sees, word by word:
PAIRS = [
    (10, 1, "a brown dog lying on a couch", ["a brown cat lying on a couch",     # cat: not in image 1
                                              "a brown dog lying on a bed"]),     # bed: not in image 1
    (20, 2, "a man riding a horse", ["a man riding a cow"]),                      # cow hallucinated
    (30, 3, "a cat sitting on a table", ["a dog sitting on a table"]),            # table: a reference names it
    (40, 4, "a red kite in the sky", ["a red plane in the sky"]),                 # plane: a reference names it
    (50, 1, "a dog with a laptop on a couch", ["a dog with a blanket on a couch"]),  # the original hallucinates
    (60, 2, "a man riding a horse near a car", ["a man riding a cow near a car"]),   # both hallucinate
]
# per pair (in order): chair-s (original, foil), chair-i (original, foil)
EXPECTED_S = [(0, 1), (0, 1), (0, 1), (0, 1), (0, 0), (1, 0), (1, 1)]
EXPECTED_I = [(0, 1 / 2), (0, 1 / 2), (0, 1 / 2), (0, 1 / 2), (0, 0), (1 / 3, 0), (1 / 3, 2 / 3)]


def _accuracy(pairs: list[tuple[float, float]]) -> tuple[float, int]:
    """FOIL accuracy for a lower-is-better score: original strictly lower; ties wrong (and counted)."""
    return 100.0 * sum(o < f for o, f in pairs) / len(pairs), sum(o == f for o, f in pairs)


def write_fixture(root: Path) -> Path:
    """``root/data/foil/...`` (the FOIL release) and ``root/coco`` (the four COCO 2014 files)."""
    (root / "data" / "foil").mkdir(parents=True)
    coco = root / "coco"
    coco.mkdir()
    images = [{"id": k, "file_name": name} for k, name in FILES.items()]
    captions = {"images": images, "annotations": [{"id": 100 * k + j, "image_id": k, "caption": c}
                                                  for k, refs in REFERENCES.items() for j, c in enumerate(refs)]}
    names = sorted({n for v in INSTANCES.values() for n in v})
    cats = [{"id": j + 1, "name": n} for j, n in enumerate(names)]
    instances = {"images": images, "categories": cats,
                 "annotations": [{"id": 1000 * k + j, "image_id": k, "category_id": names.index(n) + 1}
                                 for k, objs in INSTANCES.items() for j, n in enumerate(objs)]}
    empty = {"images": [], "categories": cats, "annotations": []}
    (coco / "instances_val2014.json").write_text(json.dumps(instances))
    (coco / "instances_train2014.json").write_text(json.dumps(empty))
    (coco / "captions_val2014.json").write_text(json.dumps(captions))
    (coco / "captions_train2014.json").write_text(json.dumps({"images": [], "annotations": []}))
    (root / "data" / "foil" / "captions_val2014.json").write_text(json.dumps(captions))
    anns = []
    for gid, img, orig, foils in PAIRS:
        anns.append({"id": gid, "image_id": img, "caption": orig, "foil": False})
        anns += [{"id": gid, "image_id": img, "caption": f, "foil": True} for f in foils]
    (root / "data" / "foil" / "foilv1.0_test_2017.json").write_text(json.dumps({"images": images, "annotations": anns}))
    return coco


def test_chair_on_foil_counts_hallucinations_as_worked_out_by_hand(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    coco = write_fixture(tmp_path)
    run = cb.run(["foil"], ["chair-s", "chair-i"], data_root=tmp_path / "data", bootstrap=0,
                 options={"chair": {"annotations": str(coco)}})
    got = {(r.metric, r.statistic): r.value for r in run}
    for metric, expected in (("chair-s", EXPECTED_S), ("chair-i", EXPECTED_I)):
        acc, ties = _accuracy(expected)
        for setting in ("1ref", "4ref"):  # CHAIR reads no reference: both settings give the same pairs
            assert got[(metric, f"accuracy_{setting}")] == pytest.approx(acc, abs=1e-9)
            assert got[(metric, f"ties_{setting}")] == ties
    assert got[("chair-s", "accuracy_4ref")] == pytest.approx(400 / 7) and got[("chair-i", "accuracy_4ref")] == pytest.approx(500 / 7)


def test_pacs_plus_plus_and_chair_side_by_side_in_one_run(tmp_path: Path, monkeypatch, bb) -> None:
    """One ``bench.run`` with PAC-S++ (tiny random CLIP, the fixture's images) and CHAIR: each metric's
    FOIL accuracy equals its own run alone (the images given for PAC-S++ name CHAIR's COCO images too)."""
    from PIL import Image

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    coco = write_fixture(tmp_path)
    images = tmp_path / "images"
    images.mkdir()
    for k, name in FILES.items():
        Image.new("RGB", (40 + 8 * k, 36), (50 * k, 200 - 40 * k, 90)).save(images / name)
    options = {"pac-s++": {"backbone": bb}, "chair": {"annotations": str(coco)}}
    both = cb.run(["foil"], ["pac-s++", "chair-s", "chair-i"], data_root=tmp_path / "data", images=images,
                  bootstrap=20, options=options, verify_media=False)
    alone_pac = cb.run(["foil"], ["pac-s++"], data_root=tmp_path / "data", images=images, bootstrap=20,
                       options=options, verify_media=False)
    alone_chair = cb.run(["foil"], ["chair-s", "chair-i"], data_root=tmp_path / "data", bootstrap=20, options=options)
    table = {(r.metric, r.statistic): r.value for r in both}
    assert {m for m, _ in table} == {"pac-s++", "chair-s", "chair-i"}
    for r in list(alone_pac) + list(alone_chair):
        assert table[(r.metric, r.statistic)] == pytest.approx(r.value, abs=1e-12), (r.metric, r.statistic)
    assert table[("chair-s", "accuracy_4ref")] == pytest.approx(_accuracy(EXPECTED_S)[0])
    # paired tests across the three metrics on the headline statistic
    assert {(c["metric_a"], c["metric_b"]) for c in both.comparisons} == {
        ("pac-s++", "chair-s"), ("pac-s++", "chair-i"), ("chair-s", "chair-i")}


def test_cli_bench_foil_with_chair(tmp_path: Path, capsys, monkeypatch) -> None:
    """``capeval bench foil -m chair-s chair-i -O chair.annotations=DIR``: no image folder needed;
    without the option a one-line error names it."""
    from capeval.cli.main import main

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    coco = write_fixture(tmp_path)
    args = ["bench", "foil", "-m", "chair-s", "chair-i", "--data-root", str(tmp_path / "data"), "--bootstrap", "0", "-q"]
    assert main(args + ["-O", f"chair.annotations={coco}", "--json"]) == 0
    records = {(r["metric"], r["statistic"]): r["value"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert records[("chair-i", "accuracy_1ref")] == pytest.approx(500 / 7)
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("capeval: error:") and "chair.annotations=DIR" in err[0]
