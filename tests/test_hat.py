"""HAT: the loader on a fixture in the released layout (hat-trainval.json), AP against scikit-learn
on random scores with ties, localization accuracy by hand, and ``capeval bench hat`` with ALOHa
through a scripted judge (its localized objects reach the statistic)."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest

import _aloha_cases as cases
import capeval.bench as cb
from capeval.bench.hat import average_precision, localized_right, names_word
from capeval.errors import ResourceError
from capeval.metrics.aloha import prompts

SAMPLES = [  # (caption, references, hallucinated words)
    ("A dog sitting next to two cats.", ["A dog on a couch.", "A brown dog sleeping."], ["cats."]),
    ("A man riding a horse on a beach.", ["A man rides a horse by the sea."], []),
    ("A red bus parked by a tree.", ["A bus on a street.", "A city bus."], ["tree."]),
    ("Two kites in a blue sky.", ["Kites flying in the sky."], []),
    ("A woman holding an umbrella and a puppy.", ["A woman with an umbrella in the rain."], ["puppy."]),
]


def write_hat(root: Path) -> Path:
    """hat/hat-trainval.json in the released layout (keys and types of DavidMChan/aloha's file)."""
    rows = []
    for k, (cap, refs, bad) in enumerate(SAMPLES):
        rows.append({"sample_id": f"id-{k}", "caption": cap,
                     "grounding": [[w, w in bad] for w in cap.split(" ")],
                     "contains_hallucination": bool(bad), "image_path": f"COCO_val2014_{k:012d}.jpg",
                     "session_id": "s", "references": refs, "is_gold": False, "is_positive": True,
                     "is_machine_generated": True})
    (root / "hat").mkdir(parents=True, exist_ok=True)
    path = root / "hat" / "hat-trainval.json"
    path.write_text(json.dumps(rows, indent=2))
    return path


def test_average_precision_is_sklearns():
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 40))
        y = rng.random(n) < 0.4
        if not y.any():
            continue
        s = np.round(rng.standard_normal(n), 1)  # ties
        assert average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    assert np.isnan(average_precision(np.array([True, False]), np.array([0.1, np.nan])))


@pytest.mark.parametrize("obj,word,right", [("cat", "cats.", True), ("puppy", "puppies", True), ("bus", "buses", True),
                                            ("red bus", "bus", True), ("tree", "street", False), ("", "cats", False),
                                            # irregular plurals (issue 47 item 8): the LLM's singular names them
                                            ("man", "men", True), ("person", "people", True),
                                            ("child", "children,", True), ("tooth", "teeth", True),
                                            ("knife", "knives", True), ("woman", "Women", True), ("mouse", "mice", True),
                                            ("wolf", "wolves", True), ("cookie", "cookies", True),
                                            ("man", "woman", False), ("men", "man", True), ("ox", "box", False),
                                            ("glass", "glasses", True), ("sheep", "sheep", True)])
def test_word_rule(obj, word, right):
    assert localized_right(obj, [(word, True)]) is right
    assert not localized_right(obj, [(word, False)])
    assert names_word("dog", "Dog,")


def _script():
    """The scripted judge: each caption's objects; the references' objects."""
    script = {}
    objects = {0: "- dog\n- cat", 1: "- man\n- horse\n- beach", 2: "- red bus\n- tree", 3: "- kite\n- blue sky",
               4: "- woman\n- umbrella\n- puppy"}
    for k, (cap, refs, _) in enumerate(SAMPLES):
        script[prompts.candidate_turn(cap)] = objects[k]
        script[prompts.references_turn(refs)] = "\n".join(f"- {w}" for w in
                                                          ("dog couch", "man horse sea", "bus street", "kite sky",
                                                           "woman umbrella rain")[k].split())
    return script


def test_bench_hat_with_aloha_and_a_text_metric(tmp_path):
    write_hat(tmp_path)
    opts = {"aloha": {"backend": cases.ScriptedBackend(_script()), "embedder": cases.encode,
                      "spacy_model": cases.FakeNLP(), "cache": None}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture is not the released file (sha256 differs)
        res = cb.run(["hat"], ["aloha", "bleu-1"], data_root=tmp_path, bootstrap=20, options=opts)
    rec = {(r.metric, r.statistic): r for r in res}
    assert rec[("aloha", "ap")].n == 5 and 0 < rec[("aloha", "ap")].value <= 100
    assert ("bleu-1", "la") not in rec and ("bleu-1", "ap") in rec  # BLEU does not localize
    la = rec[("aloha", "la")]
    assert la.n == 3 and la.value in (0.0, 100 / 3, 200 / 3, 100.0)
    # the statistic by hand, from the same scorer's localized objects
    from capeval.metrics.aloha.scorer import ALOHa

    scorer = ALOHa(**opts["aloha"] | {"backend": cases.ScriptedBackend(_script())}, no_objects="clean")
    out = scorer.score({f"id-{k}": s[0] for k, s in enumerate(SAMPLES)},
                       {f"id-{k}": s[1] for k, s in enumerate(SAMPLES)})["aloha"]
    want = [localized_right(out.extras["localized"][f"id-{k}"], [(w, w in s[2]) for w in s[0].split(" ")])
            for k, s in enumerate(SAMPLES) if s[2]]
    assert la.value == pytest.approx(100 * sum(want) / len(want))
    hal = np.array([bool(s[2]) for s in SAMPLES])
    scores = np.array([out.items[f"id-{k}"] for k in range(len(SAMPLES))])
    assert rec[("aloha", "ap")].value == pytest.approx(100 * average_precision(hal, -scores))


def test_malformed_release_names_the_sample(tmp_path):
    path = write_hat(tmp_path)
    rows = json.loads(path.read_text())
    rows[2]["contains_hallucination"] = "yes"
    path.write_text(json.dumps(rows))
    with pytest.raises(ResourceError, match="sample id-2.*contains_hallucination"):
        cb.get_benchmark("hat").load(tmp_path)


def test_random_order_does_not_change_ap():
    rng = random.Random(1)
    y = np.array([rng.random() < 0.5 for _ in range(30)] + [True])
    s = np.array([rng.random() for _ in range(31)])
    perm = np.random.default_rng(2).permutation(31)
    assert average_precision(y, s) == average_precision(y[perm], s[perm])


def write_nocaps_foil(root: Path) -> None:
    """nocaps-foil/nocaps-val-foil.json in the released layout."""
    rows = [{"image_path": f"{k:016x}.jpg", "references": [f"a {w} on the grass", f"the {w} is small"],
             "baseline": f"A {w} on the grass.", "foil": f"A {f} on the grass.", "replacement": [w, f],
             "domain": d}
            for k, (w, f, d) in enumerate([("dog", "cat", "in-domain"), ("car", "bus", "near-domain"),
                                           ("kite", "tree", "out-domain"), ("man", "woman", "near-domain")])]
    (root / "nocaps-foil").mkdir(parents=True, exist_ok=True)
    (root / "nocaps-foil" / "nocaps-val-foil.json").write_text(json.dumps(rows))


def test_bench_nocaps_foil_with_aloha(tmp_path):
    write_nocaps_foil(tmp_path)
    rows = json.loads((tmp_path / "nocaps-foil" / "nocaps-val-foil.json").read_text())
    script = {}
    for r in rows:
        w, f = r["replacement"]
        script[prompts.candidate_turn(r["baseline"])] = f"- {w}\n- grass"
        script[prompts.candidate_turn(r["foil"])] = f"- {f}\n- grass"
        script[prompts.references_turn(r["references"])] = f"- {w}\n- grass"
    opts = {"aloha": {"backend": cases.ScriptedBackend(script), "embedder": cases.encode,
                      "spacy_model": cases.FakeNLP(), "cache": None}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cb.run(["nocaps-foil"], ["aloha"], data_root=tmp_path, bootstrap=0, options=opts)
    rec = {r.statistic: r for r in res}
    # a baseline matches its references exactly (ALOHa 1), a foil does not: every foil ranks first
    assert rec["ap"].value == pytest.approx(100.0) and rec["ap"].n == 8
    assert rec["ap_near-domain"].n == 4 and rec["ap_in-domain"].value == pytest.approx(100.0)
    # the foil word is the foil's only non-matching object unless its random cosine beats "grass"
    scorer_opts = dict(opts["aloha"], backend=cases.ScriptedBackend(script))
    from capeval.metrics.aloha.scorer import ALOHa

    out = ALOHa(**scorer_opts).score({str(k): r["foil"] for k, r in enumerate(rows)},
                                     {str(k): r["references"] for k, r in enumerate(rows)})["aloha"]
    want = [out.extras["localized"][str(k)] == r["replacement"][1] for k, r in enumerate(rows)]
    assert rec["la"].value == pytest.approx(100 * sum(want) / 4) and rec["la"].n == 4
