"""``capeval.bench.run`` on the video benchmarks end to end, with a tiny random CLIP and the
bundled sample clip standing in for every video of release-format fixtures.

ActivityNet-FOIL items are scored on their segments; the statistics are recomputed here from
scores of pre-trimmed frame arrays (frames ``i`` with ``start <= i / 25 <= end``). Both
benchmarks score with EMScore's protocol IDF corpus, the dataset's training captions
(``VATEX-EVAL-demo.py``: ``vatex_train_en_annotations.json``; ``ActivityNet-FOIL_demo.py``:
``train.json`` without sentences of more than 66 words), in every setting.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
av = pytest.importorskip("av")

import capeval  # noqa: E402
import capeval.bench as cb  # noqa: E402
from capeval.errors import InputError, ResourceError  # noqa: E402
from capeval.io import video_decode  # noqa: E402

SAMPLE_ID = "Bfyp0C02sko_000248_000258"


def _video_dir(root: Path, ids: list[str], sample: Path) -> Path:
    d = root / "videos"
    d.mkdir()
    for v in ids:
        try:
            os.symlink(sample, d / f"{v}.mp4")
        except OSError:
            shutil.copy(sample, d / f"{v}.mp4")
    return d


# -- ActivityNet-FOIL ------------------------------------------------------------------------

RIGHT = {
    "v_a": ["a person fries eggs in a pan", "the eggs are cooked on the stove", "he serves the eggs"],
    "v_b": ["someone is cooking", "a pan sits on the stove"],
    "v_c": ["eggs are fried"],
}
FOIL = {
    "v_a": ["a person fries fish in a pan", "the eggs are cooked on the stove", "he serves the eggs"],
    "v_b": ["someone is dancing", "a dog sits on the stove"],
    "v_c": ["eggs are fried"],  # identical paragraph: a tie, counted as not correct
}
SEG_TS = {"v_a": [[0, 3.5], [3.2, 7.8], [7.8, 10]], "v_b": [[0.5, 9.5], [2, 2.04]], "v_c": [[0, 10]]}
REF_TS = {"v_a": [[0, 4], [4, 10]], "v_b": [[0, 10]], "v_c": [[0, 10]]}
REF_S = {"v_a": ["a cook fries two eggs", "the eggs are served"], "v_b": ["a person cooks eggs"],
         "v_c": ["eggs in a pan"]}


# ActivityNet Captions train.json: the IDF corpus; the 67-word sentence is left out by the protocol
ANET_TRAIN = {
    "v_t1": {"duration": 30.0, "sentences": ["a man fries eggs in a pan", "he serves them on a plate"]},
    "v_t2": {"duration": 20.0, "sentences": ["a dog runs on the grass", " ".join(["word"] * 67)]},
    "v_t3": {"duration": 10.0, "sentences": ["someone is cooking on the stove", " ".join(["egg"] * 66)]},
}
ANET_CORPUS = ["a man fries eggs in a pan", "he serves them on a plate", "a dog runs on the grass",
               "someone is cooking on the stove", " ".join(["egg"] * 66)]


def _sha12(corpus: list[str]) -> str:
    return hashlib.sha256("\n".join(corpus).encode("utf-8")).hexdigest()[:12]


def _write_anet(root: Path, seg_ts=SEG_TS) -> None:
    d = root / "activitynet-foil"
    d.mkdir(parents=True)
    (d / "train.json").write_text(json.dumps(ANET_TRAIN))
    right = {"results": {v: [{"sentence": s} for s in ss] for v, ss in RIGHT.items()}}
    foil = {"results": {v: [{"sentence": s} for s in ss] for v, ss in FOIL.items()}}
    t1 = {v: {"duration": 10.0, "timestamps": seg_ts[v]} for v in RIGHT}
    t2 = {v: {"duration": 10.0, "timestamps": REF_TS[v], "sentences": REF_S[v]} for v in RIGHT}
    for name, obj in (("final_right_video_sentences.json", right), ("final_foil_video_sentences.json", foil),
                      ("anet_entities_test_1.json", t1), ("anet_entities_test_2.json", t2)):
        (d / name).write_text(json.dumps(obj))


def _trimmed(all_frames: np.ndarray, start: float, end: float) -> np.ndarray:
    idx = [i for i in range(len(all_frames)) if start <= i / 25 <= end]
    return all_frames[idx]


def _expected_accuracy(scores: dict[str, float]) -> tuple[float, float]:
    right_wins, ties = 0, 0
    for v in RIGHT:
        r = np.mean([scores[f"{v}/right/{i}"] for i in range(len(RIGHT[v]))])
        f = np.mean([scores[f"{v}/foil/{i}"] for i in range(len(FOIL[v]))])
        right_wins += r > f
        ties += r == f
    return 100.0 * right_wins / len(RIGHT), float(ties)


def test_activitynet_foil_emscore_end_to_end(tmp_path, bb, sample_video, all_frames, monkeypatch):
    _write_anet(tmp_path)
    videos = _video_dir(tmp_path, list(RIGHT), sample_video)
    passes = []
    real = video_decode.decode_pass
    monkeypatch.setattr(video_decode, "decode_pass", lambda *a, **kw: (passes.append(str(a[0])), real(*a, **kw))[1])
    res = cb.run(["activitynet-foil"], ["emscore", "ref-emscore"], data_root=tmp_path, videos=videos,
                 options={"emscore": {"backbone": bb}}, bootstrap=50)
    # one decoding per distinct file per scoring call, however many segments use it; 3 calls:
    # setting refs (ref-emscore, emscore) and setting norefs (emscore)
    files = {os.path.realpath(p) for p in videos.iterdir()}
    assert len(passes) == 3 * len(files)

    got = {(r.metric, r.statistic): r for r in res}
    assert set(got) == {
        ("emscore", "accuracy_refs"), ("emscore", "ties_refs"),
        ("emscore", "accuracy_norefs"), ("emscore", "ties_norefs"),
        ("ref-emscore", "accuracy_refs"), ("ref-emscore", "ties_refs"),
    }
    assert all(r.n == 3 for r in res)  # 3 videos (paragraph pairs)
    assert res.benchmarks["activitynet-foil"]["info"] == {"videos": 3, "segments": 12, "idf_corpus": 5}
    assert "train.json:" in res.benchmarks["activitynet-foil"]["signature"]
    for r in res:
        assert "segments:pts[start,end]" in r.metric_signature
        # the protocol's corpus, in both settings, for both metrics
        assert f"idf:corpus(n=5,sha={_sha12(ANET_CORPUS)})" in r.metric_signature
    # the identical v_c paragraphs tie under every metric
    assert got[("emscore", "ties_norefs")].value >= 1
    assert got[("ref-emscore", "ties_refs")].value >= 1

    # recompute from pre-trimmed frame arrays, scored without segments
    loaded = cb.load("activitynet-foil", data_root=tmp_path)
    items = loaded.settings["refs"].items
    cands = {k: it.candidate for k, it in items.items()}
    refs = {k: list(it.references) for k, it in items.items()}
    trimmed = {k: _trimmed(all_frames, *it.segment) for k, it in items.items()}
    opts = {"emscore": {"backbone": bb, "idf": ANET_CORPUS}}
    free = capeval.score(cands, None, "emscore", options=opts, videos=trimmed)["emscore"]
    withr = capeval.score(cands, refs, "ref-emscore", options=opts, videos=trimmed)["ref-emscore"]
    acc, ties = _expected_accuracy(free.items)
    assert got[("emscore", "accuracy_norefs")].value == pytest.approx(acc)
    assert got[("emscore", "ties_norefs")].value == ties
    assert got[("emscore", "accuracy_refs")].value == pytest.approx(acc)  # reference-free: same corpus
    acc, ties = _expected_accuracy(withr.items)
    assert got[("ref-emscore", "accuracy_refs")].value == pytest.approx(acc)
    assert got[("ref-emscore", "ties_refs")].value == ties
    # and the segment scores themselves equal the pre-trimmed ones
    direct = capeval.score(cands, None, "emscore", options=opts,
                           videos={k: str(sample_video) for k in cands},
                           segments={k: it.segment for k, it in items.items()})["emscore"]
    assert direct.items == pytest.approx(free.items, abs=1e-6)
    assert direct.extras["segment_frames"]["v_b/right/1"] == 2  # 2.00 and 2.04 s, both ends included


def test_activitynet_foil_idf_corpus_is_the_protocols_and_user_option_wins(tmp_path, bb, sample_video):
    _write_anet(tmp_path)
    videos = _video_dir(tmp_path, list(RIGHT), sample_video)
    loaded = cb.load("activitynet-foil", data_root=tmp_path)
    assert loaded.metric_options == {g: {"idf": ANET_CORPUS} for g in ("emscore", "pac-s-video")}
    res = cb.run(["activitynet-foil"], ["emscore"], data_root=tmp_path, videos=videos,
                 options={"emscore": {"backbone": bb, "idf": "candidates"}}, bootstrap=0)
    sigs = {r.statistic: r.metric_signature for r in res}
    assert "idf:candidates(n=12)" in sigs["accuracy_norefs"]  # the 12 segment sentences, right and foil
    (tmp_path / "activitynet-foil" / "train.json").unlink()
    with pytest.raises(ResourceError, match=r"train\.json.*IDF corpus"):
        cb.load("activitynet-foil", data_root=tmp_path)


def test_activitynet_foil_segment_past_the_video_is_named(tmp_path, bb, sample_video):
    seg_ts = dict(SEG_TS, v_b=[[0.5, 9.5], [12, 14]])  # the file is 10 s long
    _write_anet(tmp_path, seg_ts)
    videos = _video_dir(tmp_path, list(RIGHT), sample_video)
    with pytest.raises(InputError, match=r"item 'v_b/right/1': segment \(12, 14\) s .* holds no frame"):
        cb.run(["activitynet-foil"], ["emscore"], data_root=tmp_path, videos=videos,
               options={"emscore": {"backbone": bb}}, bootstrap=0)


# -- VATEX-EVAL ------------------------------------------------------------------------------


VATEX_TRAIN = {"t1": ["a man cooks eggs in a pan", "someone fries eggs"],
               "t2": ["a dog runs in the park", "a dog runs", "a man cooks"]}
VATEX_CORPUS = [c for caps in VATEX_TRAIN.values() for c in caps]


def _write_vatex(root: Path, n: int = 12) -> tuple[np.ndarray, list[str]]:
    d = root / "vatex-eval"
    d.mkdir(parents=True)
    (d / "vatex_train_en_annotations.json").write_text(json.dumps(VATEX_TRAIN))
    rng = np.random.default_rng(1)
    words = ["a", "man", "cooks", "eggs", "in", "pan", "dog", "runs", "on", "stove"]
    cands = np.array([" ".join(rng.choice(words, int(rng.integers(3, 9)))) for _ in range(n)], dtype=object)
    gts = np.array([[" ".join(rng.choice(words, 6)) for _ in range(9)] for _ in range(n)], dtype=object)
    human = rng.integers(1, 6, 3 * n).astype(float)
    vids = np.array([f"vid{i // 2}" for i in range(n)], dtype=object)
    for name, obj in (("candidates_list.pkl", cands), ("gts_list.pkl", gts), ("human_scores.pkl", human),
                      ("video_ids.pkl", vids)):
        with open(d / name, "wb") as f:
            pickle.dump(obj, f)
    return human.reshape(3, n).T, sorted(set(vids))


def test_vatex_eval_emscore_end_to_end(tmp_path, bb, sample_video):
    scipy_stats = pytest.importorskip("scipy.stats")
    human, vids = _write_vatex(tmp_path)
    videos = _video_dir(tmp_path, vids, sample_video)
    res = cb.run(["vatex-eval"], ["emscore", "ref-emscore"], data_root=tmp_path, videos=videos,
                 options={"emscore": {"backbone": bb}}, bootstrap=50)
    got = {(r.metric, r.statistic): r for r in res}
    expect = {("emscore", f"{s}_{k}") for s in ("kendall_tau_b", "spearman") for k in ("refs0", "refs1", "refs9")}
    expect |= {("ref-emscore", f"{s}_{k}") for s in ("kendall_tau_b", "spearman") for k in ("refs1", "refs9")}
    assert set(got) == expect
    assert all(r.n == 12 and -100 <= r.value <= 100 for r in res)
    assert all(r.ci_low is not None and r.ci_low <= r.value <= r.ci_high for r in res)
    assert all("segments" not in r.metric_signature for r in res)
    # VATEX-EVAL-demo.py: the training captions' IDF for every score, the 0-reference one included
    assert all(f"idf:corpus(n=5,sha={_sha12(VATEX_CORPUS)})" in r.metric_signature for r in res)
    assert res.benchmarks["vatex-eval"]["info"]["idf_corpus"] == 5
    # reference-free: the same scores whatever the setting
    assert got[("emscore", "kendall_tau_b_refs0")].value == got[("emscore", "kendall_tau_b_refs9")].value

    loaded = cb.load("vatex-eval", data_root=tmp_path)
    items = loaded.settings["refs9"].items
    cands = {k: it.candidate for k, it in items.items()}
    refs = {k: list(it.references) for k, it in items.items()}
    vmap = {k: str(sample_video) for k in items}
    opts = {"emscore": {"backbone": bb, "idf": VATEX_CORPUS}}
    free = capeval.score(cands, None, "emscore", options=opts, videos=vmap)["emscore"]
    withr = capeval.score(cands, refs, "ref-emscore", options=opts, videos=vmap)["ref-emscore"]
    # the corpus matters: the split's own references give other numbers
    own = capeval.score(cands, refs, "emscore", options={"emscore": {"backbone": bb}}, videos=vmap)["emscore"]
    assert "idf:references(n=108)" in str(own.signature)
    assert any(abs(own.items[k] - free.items[k]) > 1e-4 for k in free.items)
    for metric, scores in (("emscore", free), ("ref-emscore", withr)):
        m = np.around([scores.items[str(i)] for i in range(len(human))], 4)
        tau = 100 * np.mean([scipy_stats.kendalltau(m, human[:, a])[0] for a in range(3)])
        rho = 100 * np.mean([scipy_stats.spearmanr(m, human[:, a])[0] for a in range(3)])
        assert got[(metric, "kendall_tau_b_refs9")].value == pytest.approx(tau)
        assert got[(metric, "spearman_refs9")].value == pytest.approx(rho)
