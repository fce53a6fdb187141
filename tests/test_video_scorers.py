"""EMScore / PAC-S video scorers end to end on the bundled sample clip with a tiny random CLIP.

Numbers are checked against the plain loop formulas of ``test_video_emscore_math`` fed with
embeddings computed here one caption / one frame set at a time, so the scorer's batching,
deduplication, IDF corpus choice, [SOT]/[EOT] handling and reference max are all exercised.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("av")

import capeval  # noqa: E402
from capeval.errors import InputError, MissingDependencyError  # noqa: E402
from capeval.io import video as vf  # noqa: E402
from test_video_emscore_math import loop_idf, loop_refs, loop_video  # noqa: E402

SAMPLE_ID = "Bfyp0C02sko_000248_000258"

CANDIDATES = {
    "eggs": "A person is frying a pan of eggs that are colored pink and green.",
    "dog": "a dog runs on the grass",
    "cook": "someone is cooking eggs in a pan on the stove",
    "long": "eggs " * 90,  # 92 tokens before truncation
}
REFERENCES = {
    "eggs": ["Two egg yolks are placed in food flavored white yolk on a pan until they are cooked.",
             "a person cooks eggs in a pan"],
    "dog": ["a person cooks eggs in a pan"],
    "cook": ["eggs are fried in a pan", "a cook fries two eggs", "someone is cooking"],
    "long": ["eggs in a pan"],
}


@pytest.fixture(scope="module")
def videos(sample_video: Path) -> dict[str, str]:
    return {k: str(sample_video) for k in CANDIDATES}


# -- independent computation ----------------------------------------------------------------


def frame_vectors(bb, path: Path, n: int = 10) -> list[list[float]]:
    import av

    with av.open(str(path)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    idx = [int(x) for x in np.linspace(0, len(frames) - 1, n)]
    px = torch.stack([bb.load_image(frames[i]) for i in idx])
    return bb.encode_images(px).tolist()


def token_vectors(bb, text: str) -> tuple[list[int], list[list[float]]]:
    ids, _ = bb.tokenize([text])
    states, mask = bb.encode_text_tokens(ids)
    return ids[0], states[0, : len(ids[0])].tolist()


def expected(bb, video: Path, cands, refs=None, idf_from=None):
    """Item scores by the loop formulas; the IDF corpus as the official ``EMScorer.score``:
    the references whenever given (for the reference-free part too), else the candidates."""
    frames = frame_vectors(bb, video)
    toks = {t: token_vectors(bb, t) for t in [*cands.values(), *(r for rs in (refs or {}).values() for r in rs)]}
    ctx = bb.context_length
    idf_from = idf_from or ("references" if refs is not None else "candidates")
    if idf_from == "references":
        free_table = loop_idf([toks[r][0] for k in cands for r in refs[k]], ctx)
    else:
        free_table = loop_idf([toks[c][0] for c in cands.values()], ctx)
    free = {}
    for k, c in cands.items():
        p, r, f, coarse = loop_video(toks[c][1], toks[c][0], frames, free_table)
        free[k] = ((f + coarse) / 2, (p, r, f, coarse))
    if refs is None:
        return free, None
    ref_table = free_table
    both = {}
    for k, c in cands.items():
        vp, vr, vfm, vc = loop_video(toks[c][1], toks[c][0], frames, ref_table)
        rp, rr, rf, rc = loop_refs(toks[c][1], toks[c][0], [(toks[r][1], toks[r][0]) for r in refs[k]], ref_table)
        both[k] = (((vfm + vc) / 2 + (rf + rc) / 2) / 2, (vp, vr, vfm, vc, rp, rr, rf, rc))
    return free, both


# -- tests ----------------------------------------------------------------------------------


def test_end_to_end_equals_loop_formulas(bb, videos, sample_video):
    report = capeval.score(CANDIDATES, REFERENCES, metrics="emscore,ref-emscore", videos=videos,
                           options={"emscore": {"backbone": bb}})
    free, both = expected(bb, sample_video, CANDIDATES, REFERENCES)
    em, ref = report["emscore"], report["ref-emscore"]
    for k in CANDIDATES:
        assert em.items[k] == pytest.approx(free[k][0], abs=1e-6)
        p, r, f, c = free[k][1]
        assert [em.extras[x][k] for x in ("precision", "recall", "f", "coarse")] == pytest.approx([p, r, f, c], abs=1e-6)
        assert ref.items[k] == pytest.approx(both[k][0], abs=1e-6)
        names = ["video_precision", "video_recall", "video_f", "video_coarse",
                 "ref_precision", "ref_recall", "ref_f", "ref_coarse"]
        assert [ref.extras[x][k] for x in names] == pytest.approx(list(both[k][1]), abs=1e-6)
    assert em.system == pytest.approx(np.mean(list(em.items.values())))
    assert em.extras["n_truncated"] == 1 and ref.extras["n_truncated"] == 1
    assert em.extras["total_frames"] == {k: 250 for k in CANDIDATES}
    sig = str(em.signature)
    for part in ("metric:emscore", "backbone:random/tiny", "sha256:random(seed=0)", "frames:10",
                 "sampling:linspace-int", "idf:references(n=7)", "tokens:sot..eot", "av:"):
        assert part in sig, part
    assert "idf:references(n=7)" in str(ref.signature) and "nrefs:1-3" in str(ref.signature)
    json.loads(report.to_json(per_item=True))
    # without references the corpus is the candidates
    alone = capeval.score(CANDIDATES, metrics="emscore", videos=videos, options={"emscore": {"backbone": bb}})
    free, _ = expected(bb, sample_video, CANDIDATES)
    assert alone["emscore"].items == pytest.approx({k: v[0] for k, v in free.items()}, abs=1e-6)
    assert "idf:candidates(n=4)" in str(alone["emscore"].signature)


def test_default_idf_is_the_references_whenever_given(bb, sample_video):
    """EMScorer.score: ``idf_corpus = refs if refs else cands`` with refs flattened per candidate,
    so a reference shared by two candidates counts twice; the table by hand from the ids."""
    cands = {"a": "a dog runs on the grass", "b": "eggs in a pan"}
    refs = {"a": ["a dog runs", "a pan"], "b": ["a pan", "eggs"]}
    vids = {k: str(sample_video) for k in cands}
    got = capeval.load("emscore", backbone=bb).score(cands, refs, videos=vids)["emscore"]
    assert "idf:references(n=4)" in str(got.signature)
    ids = {t: bb.tokenize([t])[0][0] for t in ["a dog runs", "a pan", "eggs", *cands.values()]}
    corpus = [ids["a dog runs"], ids["a pan"], ids["a pan"], ids["eggs"]]
    sot, eot = corpus[0][0], corpus[0][-1]
    # df counted by hand: every sentence has [SOT], [EOT] and padding (0); "a pan" twice
    df: dict[int, int] = {}
    for sent in corpus:
        for t in set(sent) | {0}:
            df[t] = df.get(t, 0) + 1
    n = 4
    table = {t: float(np.log((n + 1) / (c + 1))) for t, c in df.items()}
    assert table[sot] == 0.0 and table[0] == 0.0
    table[eot] = sum(table.values()) / len(table)  # [EOT]: plain mean of the table's entries
    for t in set(ids["eggs"][1:-1]) - set(ids["a dog runs"]) - set(ids["a pan"]):
        assert table[t] == pytest.approx(np.log(5 / 2))  # in one sentence of four
    from collections import defaultdict

    hand = defaultdict(lambda: float(np.log(n + 1)), table)  # unseen ids: log(N + 1)
    assert dict(hand) == pytest.approx(dict(loop_idf(corpus, bb.context_length)))
    frames = frame_vectors(bb, sample_video)
    for k, c in cands.items():
        cid, toks = token_vectors(bb, c)
        p, r, f, coarse = loop_video(toks, cid, frames, hand)
        assert got.extras["precision"][k] == pytest.approx(p, abs=1e-6)
        assert got.items[k] == pytest.approx((f + coarse) / 2, abs=1e-6)
    # the candidates' corpus stays available, and differs
    other = capeval.load("emscore", backbone=bb, idf="candidates").score(cands, refs, videos=vids)["emscore"]
    assert "idf:candidates(n=2)" in str(other.signature)
    assert other.extras["precision"]["a"] != pytest.approx(got.extras["precision"]["a"], abs=1e-6)


def test_each_video_embedded_once(bb, videos, monkeypatch):
    calls = []
    original = bb.encode_images

    def counting(px):
        calls.append(px.shape[0])
        return original(px)

    monkeypatch.setattr(bb, "encode_images", counting)
    capeval.score(CANDIDATES, metrics="emscore", videos=videos, options={"emscore": {"backbone": bb}})
    assert sum(calls) == 10  # 4 items share one video: 10 frames embedded once


def test_frame_folder_gives_the_same_scores(bb, sample_video, tmp_path):
    from PIL import Image

    sampled = vf.decode_video(sample_video, 10)
    folder = tmp_path / "clips" / "eggs"
    folder.mkdir(parents=True)
    for k, frame in enumerate(sampled.frames):
        Image.fromarray(frame).save(folder / f"{k:03d}.png")  # lossless: identical pixels
    (tmp_path / "clips" / "dog.mp4").symlink_to(sample_video)
    cands = {"eggs": CANDIDATES["eggs"], "dog": CANDIDATES["dog"]}
    scorer = capeval.load("emscore", backbone=bb)
    from_dir = scorer.score(cands, videos=str(tmp_path / "clips"))["emscore"]
    from_video = scorer.score(cands, videos={k: str(sample_video) for k in cands})["emscore"]
    assert from_dir.items["eggs"] == pytest.approx(from_video.items["eggs"], abs=1e-6)
    assert from_dir.extras["total_frames"] == {"eggs": 10, "dog": 250}


def test_bad_videos_error_or_skip(bb, sample_video, tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00" * 1000)
    vids = {"eggs": str(sample_video), "dog": str(bad), "cook": str(tmp_path / "missing.mp4")}
    cands = {k: CANDIDATES[k] for k in vids}
    scorer = capeval.load("emscore", backbone=bb)
    with pytest.raises(InputError) as err:
        scorer.score(cands, videos=vids)
    assert err.value.item_id in ("dog", "cook")
    assert "broken.mp4" in str(err.value) or "missing.mp4" in str(err.value)
    res = scorer.score(cands, videos=vids, skip_bad_items=True)["emscore"]
    assert res.skipped == ("dog", "cook") and list(res.items) == ["eggs"]
    # the folder form: a missing id names the expected paths
    with pytest.raises(InputError, match="no video found"):
        scorer.score({"nope": "a caption"}, videos=str(tmp_path))


def test_all_skipped_gives_nan_system(bb, tmp_path):
    res = capeval.load("emscore", backbone=bb).score({"a": "x"}, videos={"a": str(tmp_path / "no.mp4")},
                                                     skip_bad_items=True)["emscore"]
    assert res.skipped == ("a",) and len(res.items) == 0 and np.isnan(res.system)


def test_single_caption_uses_uniform_fallback(bb, sample_video):
    res = capeval.load("emscore", backbone=bb).score({"a": "eggs in a pan"}, videos={"a": str(sample_video)})
    r = res["emscore"]
    assert r.extras["n_zero_idf"] == 1 and np.isfinite(r.items["a"])


def test_options_all_frames_idf_none_and_custom_corpus(bb, videos, sample_video):
    cands = {k: CANDIDATES[k] for k in ("eggs", "dog")}
    vids = {k: videos[k] for k in cands}
    allf = capeval.load("emscore", backbone=bb, n_frames=None).score(cands, videos=vids)["emscore"]
    assert "frames:all" in str(allf.signature) and allf.extras["total_frames"]["eggs"] == 250
    none = capeval.load("emscore", backbone=bb, idf=False).score(cands, videos=vids)["emscore"]
    assert "idf:none" in str(none.signature)
    # idf=False: every token weighs 1, so P is the plain mean over [SOT]..[EOT]
    frames = frame_vectors(bb, sample_video)
    ids, toks = token_vectors(bb, cands["dog"])
    from collections import defaultdict

    p, *_ = loop_video(toks, ids, frames, defaultdict(lambda: 1.0))
    assert none.extras["precision"]["dog"] == pytest.approx(p, abs=1e-6)
    corpus = ["a man is cooking", "eggs in a pan", "a dog runs"]
    custom = capeval.load("emscore", backbone=bb, idf=corpus).score(cands, videos=vids)["emscore"]
    assert "idf:corpus(n=3," in str(custom.signature)
    table = loop_idf([bb.tokenize([s])[0][0] for s in corpus], bb.context_length)
    p, *_ = loop_video(toks, ids, frames, table)
    assert custom.extras["precision"]["dog"] == pytest.approx(p, abs=1e-6)


def test_pac_s_video_names_and_needs(bb, videos):
    report = capeval.score(CANDIDATES, REFERENCES, metrics="pac-s-video,ref-pac-s-video", videos=videos,
                           options={"pac-s-video": {"backbone": bb}})
    assert list(report) == ["pac-s-video", "ref-pac-s-video"]
    assert "variant:pac-s-video:full_F" in str(report["pac-s-video"].signature)
    same = capeval.score(CANDIDATES, REFERENCES, metrics="emscore", videos=videos, options={"emscore": {"backbone": bb}})
    assert report["pac-s-video"].items == pytest.approx(dict(same["emscore"].items))  # same formula, same model
    with pytest.raises(InputError, match="needs references"):
        capeval.score(CANDIDATES, metrics="ref-pac-s-video", videos=videos, options={"ref-pac-s-video": {"backbone": bb}})
    with pytest.raises(InputError, match="needs videos"):
        capeval.score(CANDIDATES, metrics="emscore", options={"emscore": {"backbone": bb}})
    from capeval import registry

    assert registry.get("ref-emscore").needs == {"videos", "references"}
    assert registry.get("emscore").extra == "video"


def test_cli_scores_the_sample(bb, sample_video, tmp_path, capsys, monkeypatch):
    import capeval.models.clip.backbone as backbone
    from capeval.cli.main import main

    monkeypatch.setattr(backbone, "load_backbone", lambda name, **kw: bb)
    vids = tmp_path / "videos"
    vids.mkdir()
    (vids / f"{SAMPLE_ID}.mp4").symlink_to(sample_video)
    cands = tmp_path / "cands.json"
    refs = tmp_path / "refs.json"
    cands.write_text(json.dumps({SAMPLE_ID: CANDIDATES["eggs"]}))
    refs.write_text(json.dumps({SAMPLE_ID: REFERENCES["eggs"]}))
    code = main(["score", "--metrics", "emscore,ref-emscore", "--videos", str(vids), "--candidates", str(cands),
                 "--references", str(refs), "--backbone", "random", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload["scores"]) == {"emscore", "ref-emscore"}
    assert payload["signatures"]["emscore"].startswith("metric:emscore|")


def test_missing_pyav_names_the_extra(monkeypatch, sample_video):
    monkeypatch.setitem(sys.modules, "av", None)  # import av -> ImportError
    with pytest.raises(MissingDependencyError, match=r"\.\[video\]"):
        vf.decode_video(sample_video, 10)


def test_specs_import_nothing_heavy():
    code = ("import sys, capeval, capeval.io.video; "
            "bad = [m for m in ('torch', 'av', 'PIL') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
