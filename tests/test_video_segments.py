"""Video segments: timestamp windows of a video file / frame folder / array, and the scorers'
``segments=`` input (one decoding per file, equality with pre-trimmed frames, errors/skips).

The bundled sample is 10 s at 25 fps (250 frames, pts = 512 * i in a 1/12800 time base), so
frame ``i`` is at ``i / 25`` s exactly.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
av = pytest.importorskip("av")

import capeval  # noqa: E402
from capeval.errors import InputError  # noqa: E402
from capeval.io import video as vf  # noqa: E402
from capeval.io import video_decode, video_windows  # noqa: E402

SAMPLE_ID = "Bfyp0C02sko_000248_000258"
FPS = 25


def window_expected(start: float, end: float, n: int | None, total: int = 250) -> list[int]:
    """Independent statement of the rule: frames i with start <= i/25 <= end, int(linspace)."""
    inside = [i for i in range(total) if Fraction(repr(float(start))) <= Fraction(i, FPS) <= Fraction(repr(float(end)))]
    if n is None:
        return inside
    return [inside[int(x)] for x in np.linspace(0, len(inside) - 1, n)]


# -- frames layer ----------------------------------------------------------------------------


@pytest.mark.parametrize("start,end", [(0, 10), (2, 4), (0.4, 0.4), (0.41, 1.0), (3.3, 7.77), (9.9, 50), (-3, 1)])
def test_window_sampling_follows_timestamps(sample_video, start, end):
    out = vf.load_windows(sample_video, {"w": vf.parse_segment((start, end))}, 10, {"w": "item"})
    s = out["w"]
    assert list(s.indices) == window_expected(max(start, 0), min(end, 10), 10)
    assert s.total == 250
    assert s.window == (max(float(start), 0.0), min(float(end), 10.0))
    assert s.window_frames == len(window_expected(max(start, 0), min(end, 10), None))


def test_bounds_are_inclusive_and_exact(sample_video):
    # 2.0 s is frame 50 and 4.0 s frame 100: both ends included (51 frames), even though
    # 0.4 etc. are not exact binary floats
    out = vf.load_windows(sample_video, {"a": vf.parse_segment((2.0, 4.0)), "b": vf.parse_segment((0.4, 0.44))},
                          None, {"a": "a", "b": "b"})
    assert out["a"].indices == tuple(range(50, 101))
    assert out["b"].indices == (10, 11)


def test_window_pixels_match_the_decoded_frames(sample_video, all_frames):
    s = vf.load_windows(sample_video, {"w": vf.parse_segment((1, 3))}, 4, {"w": "w"})["w"]
    for i, frame in zip(s.indices, s.frames):
        assert np.array_equal(frame, all_frames[i])


def test_whole_video_window_equals_decode_video(sample_video):
    whole = vf.load_windows(sample_video, {"none": None, "seg": vf.parse_segment((1, 2))}, 10,
                            {"none": "x", "seg": "y"})["none"]
    ref = vf.decode_video(sample_video, 10)
    assert whole.indices == ref.indices and whole.total == ref.total and whole.window is None
    assert all(np.array_equal(a, b) for a, b in zip(whole.frames, ref.frames))


def test_many_windows_one_decoding(sample_video, monkeypatch):
    calls = []
    real = video_decode.decode_pass

    def counting(*args, **kw):
        calls.append(args[1])
        return real(*args, **kw)

    monkeypatch.setattr(video_decode, "decode_pass", counting)
    wins = {k: vf.parse_segment(w) for k, w in {"a": (0, 2), "b": (1, 5), "c": (4.5, 9.3), "d": (0, 10)}.items()}
    out = vf.load_windows(sample_video, {**wins, "whole": None}, 10, {k: k for k in [*wins, "whole"]})
    assert len(calls) == 1
    assert all(isinstance(v, vf.SampledFrames) for v in out.values())


def test_wrong_packet_prediction_still_correct(sample_video, monkeypatch):
    # a bad demux prediction only costs a second decoding pass, never other frames
    monkeypatch.setattr(video_windows, "predict_times", lambda path: ([Fraction(i, 7) for i in range(30)], Fraction(30, 7)))
    s = vf.load_windows(sample_video, {"w": vf.parse_segment((2, 4))}, 10, {"w": "w"})["w"]
    assert list(s.indices) == window_expected(2, 4, 10)


@pytest.mark.parametrize("window,match", [
    ((10, 12), r"item 'it': segment \(10, 12\) s of .* holds no frame \(video duration 10\.000 s"),
    ((20, 30), r"item 'it': segment \(20, 30\) s .* holds no frame"),
    ((1.01, 1.02), r"item 'it': segment \(1\.01, 1\.02\) s .* holds no frame"),
])
def test_empty_window_is_an_error_naming_the_item(sample_video, window, match):
    out = vf.load_windows(sample_video, {"w": vf.parse_segment(window, "it")}, 10, {"w": "it"})
    assert isinstance(out["w"], InputError) and out["w"].item_id == "it"
    with pytest.raises(InputError, match=match):
        raise out["w"]


@pytest.mark.parametrize("bad", [(3, 2), (float("nan"), 2), (1,), "ab", (None, 1), (True, 2)])
def test_malformed_segment(bad):
    with pytest.raises(InputError, match=r"item 'x'"):
        vf.parse_segment(bad, "x")


def test_frame_sources_need_fps(all_frames, tmp_path):
    arr = all_frames[:50]
    out = vf.load_windows(arr, {"w": vf.parse_segment((0.4, 0.8))}, None, {"w": "clip"})
    assert isinstance(out["w"], InputError)
    with pytest.raises(InputError, match=r"item 'clip': a segment needs frame timestamps.*array.*fps"):
        raise out["w"]
    out = vf.load_windows(arr, {"w": vf.parse_segment((0.4, 0.8))}, None, {"w": "clip"}, fps=25)
    assert out["w"].indices == tuple(range(10, 21))
    # a frame folder with fps="25" (strings and fractions are accepted)
    from PIL import Image

    folder = tmp_path / "clip"
    folder.mkdir()
    for i in range(12):
        Image.fromarray(all_frames[i]).save(folder / f"frame_{i}.png")
    out = vf.load_windows(folder, {"w": vf.parse_segment((0.2, 1))}, 3, {"w": "f"}, fps="25/2")
    assert [Path(p).name for p in out["w"].frames] == ["frame_3.png", "frame_7.png", "frame_11.png"]
    assert out["w"].window == (0.2, 0.96)  # clamped to 12 frames / 12.5 fps


# -- scorers ---------------------------------------------------------------------------------

CANDS = {
    "s1": "a person is frying eggs in a pan",
    "s2": "someone cooks on a stove",
    "s3": "a dog runs on the grass",
    "whole": "eggs are fried in a pan",
}
SEGS = {"s1": (0, 3.5), "s2": (2.2, 7.9), "s3": (6, 10)}


@pytest.mark.parametrize("n_frames", [10, 3, None])
def test_segment_scores_equal_pretrimmed_frames(bb, sample_video, all_frames, n_frames):
    videos = {k: str(sample_video) for k in CANDS}
    rep = capeval.score(CANDS, None, "emscore", options={"emscore": {"backbone": bb, "n_frames": n_frames}},
                        videos=videos, segments=SEGS)
    res = rep["emscore"]
    trimmed = {k: all_frames[window_expected(*SEGS[k], None)] for k in SEGS}
    trimmed["whole"] = str(sample_video)
    ref = capeval.score(CANDS, None, "emscore", options={"emscore": {"backbone": bb, "n_frames": n_frames}},
                        videos=trimmed)["emscore"]
    assert set(res.items) == set(CANDS)
    for k in CANDS:
        assert res.items[k] == pytest.approx(ref.items[k], abs=1e-6), k
        assert res.extras["coarse"][k] == pytest.approx(ref.extras["coarse"][k], abs=1e-6)
    assert res.extras["segment_frames"] == {k: len(window_expected(*SEGS[k], None)) for k in SEGS}
    assert res.extras["total_frames"] == {k: 250 for k in CANDS}
    assert "segments:pts[start,end]" in str(res.signature)
    assert "segments" not in str(ref.signature)


def test_segments_decode_once_and_embed_each_frame_once(bb, sample_video, monkeypatch):
    calls = []
    real = video_decode.decode_pass
    monkeypatch.setattr(video_decode, "decode_pass", lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
    rows = []
    real_enc = bb.encode_images
    monkeypatch.setattr(bb, "encode_images", lambda px: (rows.append(px.shape[0]), real_enc(px))[1])
    videos = {k: str(sample_video) for k in CANDS}
    segs = {"s1": (0, 10), "s2": (0, 10), "s3": (0, 5)}  # s1/s2 share a window, s3 overlaps it
    capeval.score(CANDS, None, "emscore", options={"emscore": {"backbone": bb, "n_frames": 10}},
                  videos=videos, segments=segs)
    assert len(calls) == 1
    expect = set(window_expected(0, 10, 10)) | set(window_expected(0, 5, 10))  # "whole" = the (0, 10) frames
    assert sum(rows) == len(expect)


def test_ref_metric_with_segments(bb, sample_video, all_frames):
    refs = {k: ["a person cooks eggs in a pan", "eggs in a pan"] for k in CANDS}
    videos = {k: str(sample_video) for k in CANDS}
    got = capeval.score(CANDS, refs, "ref-emscore", options={"emscore": {"backbone": bb}},
                        videos=videos, segments=SEGS)["ref-emscore"]
    trimmed = {k: all_frames[window_expected(*SEGS[k], None)] for k in SEGS} | {"whole": str(sample_video)}
    ref = capeval.score(CANDS, refs, "ref-emscore", options={"emscore": {"backbone": bb}}, videos=trimmed)["ref-emscore"]
    assert got.items == pytest.approx(ref.items, abs=1e-6)
    assert got.extras["segment_frames"]["s2"] == len(window_expected(2.2, 7.9, None))


def test_segment_errors_and_skips(bb, sample_video, all_frames):
    scorer = capeval.load("emscore", backbone=bb)
    videos = {k: str(sample_video) for k in CANDS}
    bad = {"s1": (0, 3), "s2": (12, 15), "s3": (4, 2)}
    with pytest.raises(InputError, match=r"item 's2': segment \(12, 15\) s .* holds no frame"):
        scorer.score(CANDS, videos=videos, segments={"s2": (12, 15)})
    with pytest.raises(InputError, match=r"item 's3': segment starts after it ends"):
        scorer.score(CANDS, videos=videos, segments={"s3": (4, 2)})
    res = scorer.score(CANDS, videos=videos, segments=bad, skip_bad_items=True)["emscore"]
    assert res.skipped == ("s2", "s3")
    assert set(res.items) == {"s1", "whole"}
    with pytest.raises(InputError, match=r"segments has id 'nope'"):
        scorer.score(CANDS, videos=videos, segments={"nope": (0, 1)})
    with pytest.raises(InputError, match=r"segments must be a mapping"):
        scorer.score(CANDS, videos=videos, segments=[(0, 1)])
    # frames without timestamps: rejected unless fps is given
    arrays = {k: all_frames for k in CANDS}
    with pytest.raises(InputError, match=r"item 's1': a segment needs frame timestamps.*fps"):
        scorer.score(CANDS, videos=arrays, segments={"s1": (0, 3)})
    with_fps = capeval.load("emscore", backbone=bb, fps=FPS)
    a = with_fps.score(CANDS, videos=arrays, segments=SEGS)["emscore"]
    b = scorer.score(CANDS, videos=videos, segments=SEGS)["emscore"]
    assert a.items == pytest.approx(b.items, abs=1e-6)
    assert "fps:25" in str(a.signature)
    with pytest.raises(InputError, match=r"fps must be a (positive number|number > 0)"):
        capeval.load("emscore", backbone=bb, fps=0)


def test_pac_s_video_accepts_segments(bb, sample_video):
    videos = {k: str(sample_video) for k in CANDS}
    rep = capeval.score(CANDS, None, "pac-s-video", options={"pac-s-video": {"backbone": bb}},
                        videos=videos, segments=SEGS)
    assert set(rep["pac-s-video"].items) == set(CANDS)
