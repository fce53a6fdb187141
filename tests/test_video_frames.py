"""Video inputs: decoding the bundled sample with PyAV, frame folders, sampling and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from capeval.errors import InputError
from _reference import unavailable
from capeval.io import video as vf
from capeval.io import video_decode

SAMPLE_ID = "Bfyp0C02sko_000248_000258"
# Per-frame mean RGB value of the 10 sampled frames as OpenCV decodes them (cap.read() +
# cvtColor BGR2RGB, opencv-python-headless 5.0.0.93), i.e. the reference pipeline's pixels.
CV2_MEANS = [151.8366, 153.1093, 155.4055, 159.1744, 153.094, 115.9327, 106.059, 143.366, 153.1486, 147.1486]


@pytest.fixture(scope="module")
def sample_video(shared_data: Path) -> Path:
    path = shared_data / "samples" / "video" / f"{SAMPLE_ID}.mp4"
    if not path.exists():
        unavailable(f"sample video not found: {path}")
    pytest.importorskip("av")
    return path


def test_sample_indices_as_vatex_eval_demo():
    assert vf.sample_indices(250, 10) == [0, 27, 55, 83, 110, 138, 166, 193, 221, 249]
    assert vf.sample_indices(1, 10) == [0] * 10
    assert vf.sample_indices(4, 10) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]  # int() truncation, repeats
    assert vf.sample_indices(5, None) == [0, 1, 2, 3, 4]
    assert vf.sample_indices(7, 1) == [0]
    with pytest.raises(InputError):
        vf.sample_indices(5, 0)
    with pytest.raises(ValueError):
        vf.sample_indices(0, 10)


def test_decode_sample_video(sample_video: Path):
    s = vf.decode_video(sample_video, 10, "x")
    assert s.kind == "video" and s.total == 250
    assert s.indices == (0, 27, 55, 83, 110, 138, 166, 193, 221, 249)
    assert len(s.frames) == 10
    for fr in s.frames:
        assert fr.shape == (360, 640, 3) and fr.dtype == np.uint8
    means = [float(f.mean()) for f in s.frames]
    assert means == pytest.approx(CV2_MEANS, abs=0.05)


def test_decode_all_frames_and_few(sample_video: Path):
    s = vf.decode_video(sample_video, None)
    assert s.total == 250 and len(s.frames) == 250 and s.indices == tuple(range(250))
    assert float(s.frames[27].mean()) == pytest.approx(CV2_MEANS[1], abs=0.05)
    one = vf.decode_video(sample_video, 1)
    assert one.indices == (0,)


def test_video_folder_lookup(sample_video: Path, tmp_path: Path):
    (tmp_path / f"{SAMPLE_ID}.mp4").symlink_to(sample_video)
    frames = tmp_path / "clip2"
    frames.mkdir()
    for k in (1, 2, 10, 3):  # natural order 1, 2, 3, 10
        from PIL import Image

        Image.fromarray(np.full((4, 6, 3), k, dtype=np.uint8)).save(frames / f"frame_{k}.png")
    (frames / "notes.txt").write_text("not a frame")
    (frames / ".hidden.png").write_bytes(b"")
    idx = vf.as_video_index(str(tmp_path))
    src = vf.resolve_source(idx, SAMPLE_ID)
    assert Path(src).name == f"{SAMPLE_ID}.mp4"
    folder = vf.load_frames(vf.resolve_source(idx, "clip2"), 10, "clip2")
    assert folder.kind == "folder" and folder.total == 4
    assert [p.name for p in folder.frames[:4]] == ["frame_1.png", "frame_1.png", "frame_1.png", "frame_2.png"]
    assert folder.frames[-1].name == "frame_10.png"
    assert vf.load_frames(src, 3).indices == (0, 124, 249)
    with pytest.raises(InputError) as err:
        vf.resolve_source(idx, "nope")
    assert err.value.item_id == "nope" and "nope" in str(err.value)


def test_ambiguous_and_missing(tmp_path: Path):
    (tmp_path / "a.mp4").write_bytes(b"x")
    (tmp_path / "a.webm").write_bytes(b"x")
    idx = vf.as_video_index(tmp_path)
    with pytest.raises(InputError, match="several"):
        vf.resolve_source(idx, "a")
    with pytest.raises(InputError, match="not found"):
        vf.as_video_index(tmp_path / "missing-dir")
    with pytest.raises(InputError, match="video not found"):
        vf.load_frames(tmp_path / "missing.mp4", 10, "m")
    with pytest.raises(InputError, match="no entry"):
        vf.resolve_source(vf.as_video_index({"b": "x.mp4"}), "a")
    with pytest.raises(InputError, match="needs videos"):
        vf.as_video_index(None)


def test_undecodable_and_empty(tmp_path: Path):
    pytest.importorskip("av")
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"this is not a video at all" * 100)
    with pytest.raises(InputError) as err:
        vf.decode_video(bad, 10, "vid-7")
    assert err.value.item_id == "vid-7" and "bad.mp4" in str(err.value)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty.mp4"):
        vf.load_frames(empty, 10, "e")
    folder = tmp_path / "noframes"
    folder.mkdir()
    with pytest.raises(InputError, match="holds no images"):
        vf.load_frames(folder, 10, "f")


def test_truncated_video_is_an_error_naming_the_file(sample_video: Path, tmp_path: Path):
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(sample_video.read_bytes()[:200_000])  # moov atom at the end: unreadable
    with pytest.raises(InputError, match="cut.mp4"):
        vf.decode_video(cut, 10, "cut")


def test_arrays_and_lists():
    arr = np.zeros((7, 4, 4, 3), dtype=np.uint8)
    arr[:, 0, 0, 0] = np.arange(7)
    s = vf.load_frames(arr, 3)
    assert s.indices == (0, 3, 6) and [int(f[0, 0, 0]) for f in s.frames] == [0, 3, 6]
    lst = vf.load_frames([arr[i] for i in range(7)], None)
    assert lst.total == 7 and len(lst.frames) == 7
    with pytest.raises(InputError):
        vf.load_frames(np.zeros((0, 4, 4, 3), dtype=np.uint8), 3, "z")
    with pytest.raises(InputError):
        vf.load_frames([], 3, "z")
    with pytest.raises(InputError):
        vf.load_frames(42, 3, "z")


@pytest.mark.parametrize("wrong_count", [0, 200, 300])
def test_sampling_uses_decoded_count_not_container_field(sample_video: Path, monkeypatch, wrong_count):
    """T is what decodes: a wrong/missing container frame count only costs a second pass."""
    monkeypatch.setattr(video_decode, "frame_count_hint", lambda path: wrong_count)
    s = vf.decode_video(sample_video, 10)
    assert s.total == 250 and s.indices == (0, 27, 55, 83, 110, 138, 166, 193, 221, 249)
    assert [float(f.mean()) for f in s.frames] == pytest.approx(CV2_MEANS, abs=0.05)
