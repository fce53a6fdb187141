"""``capeval.bench.run`` on the video benchmarks end to end, with a tiny random CLIP and the
bundled sample clip standing in for every video of release-format fixtures.

ActivityNet-FOIL items are scored on their segments; the statistics are recomputed here from
scores of pre-trimmed frame arrays (frames ``i`` with ``start <= i / 25 <= end``).
"""

from __future__ import annotations

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
import capeval.video.specs  # noqa: E402,F401
from capeval.errors import InputError  # noqa: E402
from capeval.video import frames as vf  # noqa: E402

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


def _write_anet(root: Path, seg_ts=SEG_TS) -> None:
    d = root / "activitynet-foil"
    d.mkdir(parents=True)
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
    real = vf._decode_pass
    monkeypatch.setattr(vf, "_decode_pass", lambda *a, **kw: (passes.append(str(a[0])), real(*a, **kw))[1])
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
    assert res.benchmarks["activitynet-foil"]["info"] == {"videos": 3, "segments": 12}
    for r in res:
        assert "segments:pts[start,end]" in r.metric_signature
    # the identical v_c paragraphs tie under every metric
    assert got[("emscore", "ties_norefs")].value >= 1
    assert got[("ref-emscore", "ties_refs")].value >= 1

    # recompute from pre-trimmed frame arrays, scored without segments
    loaded = cb.load("activitynet-foil", data_root=tmp_path)
    items = loaded.settings["refs"].items
    cands = {k: it.candidate for k, it in items.items()}
    refs = {k: list(it.references) for k, it in items.items()}
    trimmed = {k: _trimmed(all_frames, *it.segment) for k, it in items.items()}
    free = capeval.score(cands, None, "emscore", options={"emscore": {"backbone": bb}}, videos=trimmed)["emscore"]
    withr = capeval.score(cands, refs, "ref-emscore", options={"emscore": {"backbone": bb}},
                          videos=trimmed)["ref-emscore"]
    acc, ties = _expected_accuracy(free.items)
    assert got[("emscore", "accuracy_norefs")].value == pytest.approx(acc)
    assert got[("emscore", "ties_norefs")].value == ties
    assert got[("emscore", "accuracy_refs")].value == pytest.approx(acc)  # reference-free: same corpus
    acc, ties = _expected_accuracy(withr.items)
    assert got[("ref-emscore", "accuracy_refs")].value == pytest.approx(acc)
    assert got[("ref-emscore", "ties_refs")].value == ties
    # and the segment scores themselves equal the pre-trimmed ones
    direct = capeval.score(cands, None, "emscore", options={"emscore": {"backbone": bb}},
                           videos={k: str(sample_video) for k in cands},
                           segments={k: it.segment for k, it in items.items()})["emscore"]
    assert direct.items == pytest.approx(free.items, abs=1e-6)
    assert direct.extras["segment_frames"]["v_b/right/1"] == 2  # 2.00 and 2.04 s, both ends included


def test_activitynet_foil_segment_past_the_video_is_named(tmp_path, bb, sample_video):
    seg_ts = dict(SEG_TS, v_b=[[0.5, 9.5], [12, 14]])  # the file is 10 s long
    _write_anet(tmp_path, seg_ts)
    videos = _video_dir(tmp_path, list(RIGHT), sample_video)
    with pytest.raises(InputError, match=r"item 'v_b/right/1': segment \(12, 14\) s .* holds no frame"):
        cb.run(["activitynet-foil"], ["emscore"], data_root=tmp_path, videos=videos,
               options={"emscore": {"backbone": bb}}, bootstrap=0)


# -- VATEX-EVAL ------------------------------------------------------------------------------


def _write_vatex(root: Path, n: int = 12) -> tuple[np.ndarray, list[str]]:
    d = root / "vatex-eval"
    d.mkdir(parents=True)
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
    # reference-free: the same scores whatever the setting
    assert got[("emscore", "kendall_tau_b_refs0")].value == got[("emscore", "kendall_tau_b_refs9")].value

    loaded = cb.load("vatex-eval", data_root=tmp_path)
    items = loaded.settings["refs9"].items
    cands = {k: it.candidate for k, it in items.items()}
    refs = {k: list(it.references) for k, it in items.items()}
    vmap = {k: str(sample_video) for k in items}
    free = capeval.score(cands, None, "emscore", options={"emscore": {"backbone": bb}}, videos=vmap)["emscore"]
    withr = capeval.score(cands, refs, "ref-emscore", options={"emscore": {"backbone": bb}}, videos=vmap)["ref-emscore"]
    for metric, scores in (("emscore", free), ("ref-emscore", withr)):
        m = np.around([scores.items[str(i)] for i in range(len(human))], 4)
        tau = 100 * np.mean([scipy_stats.kendalltau(m, human[:, a])[0] for a in range(3)])
        rho = 100 * np.mean([scipy_stats.spearmanr(m, human[:, a])[0] for a in range(3)])
        assert got[(metric, "kendall_tau_b_refs9")].value == pytest.approx(tau)
        assert got[(metric, "spearman_refs9")].value == pytest.approx(rho)
