"""Loaders of the release-format benchmarks (composite, foil, vatex-eval, activitynet-foil) on
small fixtures written in the public release formats, scored with a text metric or a stub."""

from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import capeval.bench as cb
from capeval import registry
from capeval.errors import InputError, ResourceError
from capeval.registry import MetricSpec
from capeval.result import MetricResult, Report, Signature


class LengthScorer:
    """Reference-free stub metric: number of words of the candidate."""

    produces: ClassVar[tuple[str, ...]] = ("stub-length",)
    needs: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, metrics=None, **_: Any):
        self.metrics = tuple(metrics or self.produces)

    def score(self, candidates, references=None, progress=False, **inputs) -> Report:
        items = {k: float(len(v.split())) for k, v in candidates.items()}
        self.last_inputs = inputs
        return Report([MetricResult("stub-length", float(np.mean(list(items.values()))), items, Signature.build("stub-length"))])


class ImageStub(LengthScorer):
    produces = ("stub-image",)
    needs = frozenset({"images"})
    seen: ClassVar[dict[str, Any]] = {}

    def score(self, candidates, references=None, progress=False, **inputs) -> Report:
        ImageStub.seen = dict(inputs)
        items = {k: float(len(v)) for k, v in candidates.items()}
        return Report([MetricResult("stub-image", 0.0, items, Signature.build("stub-image"))])


@pytest.fixture()
def stub_metrics():
    registry.register(MetricSpec("stub-length", "test_bench_fixtures:LengthScorer", "stub-length", "stub", needs=frozenset()))
    registry.register(MetricSpec("stub-image", "test_bench_fixtures:ImageStub", "stub-image", "stub", needs=frozenset({"images"})))
    yield
    for name in ("stub-length", "stub-image"):
        registry._METRICS.pop(name, None)


# -- composite ------------------------------------------------------------------------


def _write_composite(root: Path) -> None:
    comp = root / "composite"
    comp.mkdir(parents=True)
    (comp / "Flickr8k.token.txt").write_text(
        "".join(f"111_aaa.jpg#{k}\ta dog runs on the grass number {k} .\n" for k in range(5))
        + "".join(f"222_bbb.jpg#{k}\ta man rides a bike {k} .\n" for k in range(5))
    )
    (comp / "results_20130124.token").write_text(
        "".join(f"333.jpg#{k}\ttwo people walk on a beach {k}\n" for k in range(5))
    )
    (comp / "captions_val2014.json").write_text(
        json.dumps({"annotations": [{"image_id": 42, "caption": f"a cat on a sofa {k}"} for k in range(5)]})
    )

    def write(name: str, rows: list[str]) -> None:
        with open(comp / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["HITId", "x", "y", "Input.all"])
            for r in rows:
                w.writerow(["h", "", "", r])
            w.writerow(["summary", "", "", "no url here"])  # the release ends with two summary rows
            w.writerow(["", "", "", ""])

    write(
        "8k_correctness.csv",
        [
            "img:http://x/111_aaa.jpg;a dog runs on grass;a cat sleeps;a dog runs on the grass number 0 .;5;1;5",
            "img:http://x/222_bbb.jpg;a man on a bike;a dog;a car;4;1;2",
        ],
    )
    write("30k_correctness.csv", ["img:http://x/333.jpg;people on a beach;a beach;a dog;a man;5;3;1;2"])
    write("coco_correctness.csv", ["img:http://x/COCO_val2014_000000000042.jpg;a cat;a sofa;a dog;a cat on a sofa;4;2;1;5"])


def test_composite_fixture_loads_and_scores(tmp_path: Path) -> None:
    _write_composite(tmp_path)
    loaded = cb.load("composite", data_root=tmp_path)
    items = loaded.settings[""].items
    # 6 Flickr8k candidates minus 1 that is a reference; 4 Flickr30k; 4 COCO
    assert loaded.info["rows_per_part"] == {"flickr8k": 5, "flickr30k": 4, "coco": 4}
    assert loaded.info["dropped_candidate_is_reference"] == 1
    assert loaded.info["skipped_unparsable_rows"] == {"flickr8k": 2, "flickr30k": 2, "coco": 2}
    assert all(len(it.references) == 5 for it in items.values())
    res = cb.run(["composite"], ["bleu-1"], data_root=tmp_path, bootstrap=0)
    stats_ = {r.statistic for r in res}
    assert {"kendall_tau_b", "kendall_tau_c", "kendall_tau_c_flickr8k", "kendall_tau_c_coco"} <= stats_
    assert all(-100 <= r.value <= 100 for r in res if not np.isnan(r.value))


def test_composite_missing_files_listed(tmp_path: Path) -> None:
    with pytest.raises(ResourceError, match=r"8k_correctness\.csv.*30k_correctness\.csv.*coco_correctness\.csv"):
        cb.load("composite", data_root=tmp_path)


# -- foil -----------------------------------------------------------------------------


def _write_foil(root: Path) -> None:
    (root / "foil").mkdir(parents=True)
    refs = {1: ["a dog on a sofa", "a brown dog lying on a couch", "dog resting", "a dog sleeps on a sofa", "a pet on a couch"],
            2: ["a man riding a horse", "a person on a horse", "a rider and horse", "man on horseback", "a horse with a rider"]}
    (root / "foil" / "captions_val2014.json").write_text(
        json.dumps({"annotations": [{"image_id": i, "caption": c} for i, cs in refs.items() for c in cs]})
    )
    anns = [
        {"id": 10, "image_id": 1, "caption": "a brown dog lying on a couch", "foil": False},
        {"id": 10, "image_id": 1, "caption": "a brown cat lying on a couch", "foil": True},
        {"id": 10, "image_id": 1, "caption": "a brown dog lying on a bed", "foil": True},
        {"id": 20, "image_id": 2, "caption": "a man riding a horse", "foil": False},
        {"id": 20, "image_id": 2, "caption": "a man riding a cow", "foil": True},
    ]
    images = [{"id": 1, "file_name": "COCO_val2014_000000000001.jpg"}, {"id": 2, "file_name": "COCO_val2014_000000000002.jpg"}]
    (root / "foil" / "foilv1.0_test_2017.json").write_text(json.dumps({"images": images, "annotations": anns}))


def test_foil_fixture(tmp_path: Path) -> None:
    _write_foil(tmp_path)
    loaded = cb.load("foil", data_root=tmp_path)
    assert loaded.info["pairs"] == 3
    one, four = loaded.settings["1ref"].items, loaded.settings["4ref"].items
    assert len(one) == len(four) == 6
    assert four["0/orig"].references == ("a dog on a sofa", "dog resting", "a dog sleeps on a sofa", "a pet on a couch")
    assert one["0/orig"].references == ("a dog on a sofa",)
    assert one["0/orig"].image == "COCO_val2014_000000000001.jpg"
    res = cb.run(["foil"], ["bleu-1", "rouge-l"], data_root=tmp_path, bootstrap=50)
    acc = {(r.metric, r.statistic): r.value for r in res}
    assert 0 <= acc[("bleu-1", "accuracy_4ref")] <= 100
    assert ("rouge-l", "ties_1ref") in acc
    assert res.comparisons and res.comparisons[0]["statistic"] == "accuracy_4ref"


def test_foil_group_without_original_is_an_error(tmp_path: Path) -> None:
    _write_foil(tmp_path)
    p = tmp_path / "foil" / "foilv1.0_test_2017.json"
    data = json.loads(p.read_text())
    data["annotations"] = [a for a in data["annotations"] if not (a["id"] == 20 and not a["foil"])]
    p.write_text(json.dumps(data))
    with pytest.raises(ResourceError, match=r"foilv1\.0_test_2017\.json.*id 20"):
        cb.load("foil", data_root=tmp_path)


# -- vatex-eval -----------------------------------------------------------------------


def _write_vatex(root: Path, n: int = 12) -> np.ndarray:
    d = root / "vatex-eval"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    words = ["a", "man", "plays", "guitar", "on", "stage", "dog", "runs", "in", "park"]
    cands = np.array([" ".join(rng.choice(words, int(rng.integers(3, 9)))) for _ in range(n)], dtype=object)
    gts = np.array([[" ".join(rng.choice(words, 6)) for _ in range(9)] for _ in range(n)], dtype=object)
    human = rng.integers(1, 6, 3 * n).astype(float)
    vids = np.array([f"vid{i // 2}" for i in range(n)], dtype=object)
    for name, obj in (("candidates_list.pkl", cands), ("gts_list.pkl", gts), ("human_scores.pkl", human), ("video_ids.pkl", vids)):
        with open(d / name, "wb") as f:
            pickle.dump(obj, f)
    # EMScore's IDF corpus (VATEX-EVAL-demo.py reads it from the same folder)
    (d / "vatex_train_en_annotations.json").write_text(json.dumps({"t1": ["a man plays guitar"], "t2": ["a dog runs"]}))
    return human.reshape(3, n).T


def test_vatex_eval_fixture_text_and_stub(tmp_path: Path, stub_metrics) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    human = _write_vatex(tmp_path)
    loaded = cb.load("vatex-eval", data_root=tmp_path)
    assert loaded.metric_options["emscore"] == {"idf": ["a man plays guitar", "a dog runs"]}
    assert sorted(loaded.settings) == ["refs0", "refs1", "refs9"]
    assert len(loaded.settings["refs9"].items["0"].references) == 9
    assert loaded.settings["refs0"].with_references is False
    res = cb.run(["vatex-eval"], ["bleu-1", "stub-length"], data_root=tmp_path, bootstrap=0)
    got = {(r.metric, r.statistic): r.value for r in res}
    assert ("bleu-1", "kendall_tau_b_refs0") not in got  # reference-based: no 0-ref setting
    assert ("stub-length", "kendall_tau_b_refs0") in got
    lengths = np.array([len(loaded.settings["refs0"].items[str(i)].candidate.split()) for i in range(len(human))], float)
    expect_tau = np.mean([scipy_stats.kendalltau(lengths, human[:, a])[0] for a in range(3)]) * 100
    expect_rho = np.mean([scipy_stats.spearmanr(lengths, human[:, a])[0] for a in range(3)]) * 100
    assert got[("stub-length", "kendall_tau_b_refs0")] == pytest.approx(expect_tau)
    assert got[("stub-length", "spearman_refs0")] == pytest.approx(expect_rho)


def test_vatex_pickle_with_code_is_refused(tmp_path: Path) -> None:
    _write_vatex(tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with open(tmp_path / "vatex-eval" / "video_ids.pkl", "wb") as f:
        pickle.dump(Evil(), f)
    with pytest.raises(ResourceError, match=r"video_ids\.pkl.*refusing"):
        cb.load("vatex-eval", data_root=tmp_path)


@pytest.mark.parametrize("content", ['["a list"]', '{"t1": "not a list"}', '{"t1": [1, 2]}', "{}", "{bad json"])
def test_vatex_idf_corpus_malformed_or_missing_is_named(tmp_path: Path, content: str) -> None:
    _write_vatex(tmp_path)
    path = tmp_path / "vatex-eval" / "vatex_train_en_annotations.json"
    path.write_text(content)
    with pytest.raises(ResourceError, match=r"malformed data file .*vatex_train_en_annotations\.json"):
        cb.load("vatex-eval", data_root=tmp_path)
    path.unlink()
    with pytest.raises(ResourceError, match=r"missing data file 'vatex-eval/vatex_train_en_annotations\.json'.*IDF corpus"):
        cb.load("vatex-eval", data_root=tmp_path)


# -- activitynet-foil ------------------------------------------------------------------


def _write_anet(root: Path) -> None:
    d = root / "activitynet-foil"
    d.mkdir(parents=True)
    right = {"results": {
        "v1": [{"sentence": "a man opens the door"}, {"sentence": "he walks into the kitchen"}],
        "v2": [{"sentence": "a girl plays the piano"}],
    }}
    foil = {"results": {
        "v1": [{"sentence": "a man opens the window"}, {"sentence": "he walks into the garden"}],
        "v2": [{"sentence": "a girl plays the piano"}],
    }}
    t1 = {"v1": {"duration": 20.0, "timestamps": [[0, 9], [10, 20]]}, "v2": {"duration": 8.0, "timestamps": [[0, 8]]}}
    t2 = {
        "v1": {"duration": 20.0, "sentences": ["a man opens the door", "the man walks into the kitchen"], "timestamps": [[0, 10], [11, 20]]},
        "v2": {"duration": 8.0, "sentences": ["a girl is playing the piano"], "timestamps": [[0, 8]]},
    }
    train = {"t1": {"duration": 5.0, "sentences": ["a man opens a door", " ".join(["x"] * 67)]}}
    for name, obj in (("final_right_video_sentences.json", right), ("final_foil_video_sentences.json", foil),
                      ("anet_entities_test_1.json", t1), ("anet_entities_test_2.json", t2), ("train.json", train)):
        (d / name).write_text(json.dumps(obj))


def test_activitynet_foil_fixture(tmp_path: Path, stub_metrics) -> None:
    _write_anet(tmp_path)
    loaded = cb.load("activitynet-foil", data_root=tmp_path)
    items = loaded.settings["refs"].items
    assert loaded.info == {"videos": 2, "segments": 6, "idf_corpus": 1}  # the 67-word sentence is left out
    assert loaded.metric_options["pac-s-video"] == {"idf": ["a man opens a door"]}
    assert items["v1/right/0"].references == ("a man opens the door",)  # > 40 % overlap rule
    assert items["v1/right/1"].references == ("the man walks into the kitchen",)
    assert items["v1/right/1"].segment == (10.0, 20.0)
    res = cb.run(["activitynet-foil"], ["bleu-1", "stub-length"], data_root=tmp_path, bootstrap=0)
    got = {(r.metric, r.statistic): r.value for r in res}
    # v1: the correct paragraph matches its references better; v2: identical paragraphs -> tie -> wrong
    assert got[("bleu-1", "accuracy_refs")] == 50.0
    assert got[("bleu-1", "ties_refs")] == 1.0
    assert ("stub-length", "accuracy_norefs") in got


# -- media checks -------------------------------------------------------------------------


def test_image_metric_without_images_is_a_clear_error(shared_data: Path, stub_metrics) -> None:
    with pytest.raises(InputError, match=r"stub-image needs the images of benchmark flickr8k-expert.*--images"):
        cb.run(["flickr8k-expert"], ["stub-image"], data_root=shared_data)


def test_image_metric_lists_missing_images(shared_data: Path, stub_metrics) -> None:
    with pytest.raises(ResourceError, match=r"flickr8k-expert: 998 image file\(s\) missing: .*looked for"):
        cb.run(["flickr8k-expert"], ["stub-image"], data_root=shared_data, images=shared_data / "flickr8k" / "images")


def test_image_checksum_mismatch_is_listed(tmp_path: Path, stub_metrics) -> None:
    from capeval.bench.media import resolve_media

    (tmp_path / "1000268201_693b08cb0e.jpg").write_bytes(b"not the original image")
    with pytest.raises(ResourceError, match=r"1 image file\(s\) differ from the published checksums.*1000268201_693b08cb0e"):
        resolve_media("x", ["1000268201_693b08cb0e.jpg"], tmp_path, ("flickr8k_checksum.txt",))
    found = resolve_media("x", ["1000268201_693b08cb0e.jpg"], tmp_path, ("flickr8k_checksum.txt",), verify=False)
    assert found["1000268201_693b08cb0e.jpg"].endswith("1000268201_693b08cb0e.jpg")


def test_real_images_pass_checksums(shared_data: Path) -> None:
    from capeval.bench.media import resolve_media

    names = [p.name for p in (shared_data / "flickr8k" / "images").glob("*.jpg")]
    found = resolve_media("flickr8k-expert", names, shared_data / "flickr8k" / "images", ("flickr8k_checksum.txt",))
    assert len(found) == 2


def test_video_metric_on_image_benchmark(shared_data: Path, stub_metrics) -> None:
    registry.register(MetricSpec("stub-video", "test_bench_fixtures:LengthScorer", "stub-video", "stub", needs=frozenset({"videos"})))
    try:
        with pytest.raises(InputError, match="needs videos; benchmark thumb is an image benchmark"):
            cb.run(["thumb"], ["stub-video"], data_root=shared_data)
    finally:
        registry._METRICS.pop("stub-video", None)
