"""Decoding a video (PyAV) or reading frames, and sampling the N frames EMScore looks at.

How T is determined (reproducibly)
    T is the number of frames that actually decode, not the container's frame-count field.
    The reference code (EMScore's ``encode_video``) reads with OpenCV until the container's
    ``CAP_PROP_FRAME_COUNT`` is reached or a read fails; for a well-formed file both agree.
    PyAV's ``rgb24`` conversion was checked to be bit-identical to OpenCV's
    ``cap.read()`` + ``cvtColor(BGR2RGB)`` on the bundled sample (all 250 frames). Frames of a
    frame folder are its image files (:data:`IMAGE_EXTENSIONS`, hidden files ignored) in
    natural name order (``frame_2`` before ``frame_10``; identical to plain sorting for
    zero-padded names), so T is the number of images.

Which frames (uniform sampling)
    ``indices = [int(x) for x in numpy.linspace(0, T - 1, N)]``, exactly as EMScore's
    VATEX-EVAL demo selects 10 of the cached per-frame features (``int`` truncates, it does
    not round: T = 250, N = 10 gives 0, 27, 55, 83, 110, 138, 166, 193, 221, 249). When
    T < N some frames repeat, as in the reference. ``N = None`` keeps every frame, which is
    what EMScore's ``EMScorer.score`` does when given video paths instead of cached features.

Errors
    A missing video, an undecodable or empty file, a folder without images: :class:`InputError`
    naming the item and the file; scorers can record such items as skipped instead.
    A decoding error part-way through a file is an error too (OpenCV would silently stop
    there and sample from the frames read so far).

Finding an item's source: :mod:`capeval.io.video_sources`; time windows (segments):
:mod:`capeval.io.video_windows`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import InputError
from capeval.io.video_sources import IMAGE_EXTENSIONS, file_extension

#: frames EMScore's VATEX-EVAL demo samples per video
DEFAULT_N_FRAMES = 10
#: short description of the sampling rule, for signatures
SAMPLING = "linspace-int"


def sample_indices(total: int, n_frames: int | None) -> list[int]:
    """Indices of the ``n_frames`` frames sampled out of ``total`` (all of them for ``None``).

    ``[int(x) for x in numpy.linspace(0, total - 1, n_frames)]`` as in EMScore's VATEX-EVAL demo.
    """
    if total <= 0:
        raise ValueError(f"a video needs at least one frame, got {total}")
    if n_frames is None:
        return list(range(total))
    if isinstance(n_frames, bool) or not isinstance(n_frames, (int, np.integer)) or n_frames < 1:
        raise InputError(f"n_frames must be a positive integer or None (all frames), got {n_frames!r}")
    return [int(x) for x in np.linspace(0, total - 1, int(n_frames))]


@dataclass(frozen=True)
class SampledFrames:
    """The frames of one video that a metric embeds.

    ``frames`` holds ``(H, W, 3)`` uint8 RGB arrays, image paths or PIL images (whatever the
    backbone's ``load_image`` takes), one per entry of ``indices``; ``total`` is T. For a
    segment, ``window`` is the clamped ``(start, end)`` in seconds and ``window_frames`` the
    number of frames in it (what was sampled from); ``indices`` index the whole video.
    """

    source: str
    kind: str  # "video" | "folder" | "array" | "list"
    total: int
    indices: tuple[int, ...]
    frames: tuple[Any, ...]
    window: tuple[float, float] | None = None
    window_frames: int | None = None



def _natural_key(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def load_frames(source: Any, n_frames: int | None = DEFAULT_N_FRAMES, item_id: str | None = None) -> SampledFrames:
    """Sample the frames of one source (video file, frame folder, array or list of frames)."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            return read_frame_folder(path, n_frames, item_id)
        if path.is_file():
            return decode_video(path, n_frames, item_id)
        raise InputError(f"item {item_id!r}: video not found: {path}", item_id)
    if isinstance(source, np.ndarray):
        if source.ndim != 4 or source.shape[-1] != 3 or source.shape[0] == 0:
            raise InputError(
                f"item {item_id!r}: a video array must have shape (T, H, W, 3) with T >= 1, got {source.shape}",
                item_id,
            )
        idx = sample_indices(source.shape[0], n_frames)
        return SampledFrames("<array>", "array", source.shape[0], tuple(idx), tuple(source[i] for i in idx))
    if isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        if len(source) == 0:
            raise InputError(f"item {item_id!r}: empty list of frames", item_id)
        idx = sample_indices(len(source), n_frames)
        return SampledFrames("<list>", "list", len(source), tuple(idx), tuple(source[i] for i in idx))
    raise InputError(
        f"item {item_id!r}: unsupported video source {type(source).__name__}; give a video file, a frame "
        "folder, a (T, H, W, 3) uint8 array or a list of frames",
        item_id,
    )


def read_frame_folder(path: str | os.PathLike[str], n_frames: int | None = DEFAULT_N_FRAMES,
                      item_id: str | None = None) -> SampledFrames:
    """Frames of a folder of images, in natural name order; returns image paths."""
    path = Path(path)
    try:
        names = [
            e.name for e in os.scandir(path)
            if not e.name.startswith(".") and file_extension(e.name) in IMAGE_EXTENSIONS and e.is_file()
        ]
    except OSError as exc:
        raise InputError(f"item {item_id!r}: cannot read frame folder {path}: {exc}", item_id) from exc
    if not names:
        exts = ", ".join(IMAGE_EXTENSIONS)
        raise InputError(f"item {item_id!r}: frame folder {path} holds no images ({exts})", item_id)
    names.sort(key=_natural_key)
    idx = sample_indices(len(names), n_frames)
    return SampledFrames(str(path), "folder", len(names), tuple(idx), tuple(path / names[i] for i in idx))


def decode_pass(path: Path, wanted: set[int] | None, item_id: str | None,
                timing: dict[str, Any] | None = None) -> tuple[int, dict[int, np.ndarray]]:
    """Decode every frame of the first video stream; keep the ``wanted`` ones (all for ``None``)
    as ``(H, W, 3)`` uint8 RGB arrays. Returns ``(frames decoded, {index: frame})``.

    With ``timing`` (a dict), also record every frame's ``pts`` and ``time_base``, the last
    frame's ``duration`` and the stream's ``rate`` in it (what :mod:`capeval.io.video_windows`
    times the frames with).
    """
    from capeval._optional import require

    av = require("av", extra="video", purpose="decoding videos")
    kept: dict[int, np.ndarray] = {}
    count = 0
    try:
        container = av.open(str(path))
    except Exception as exc:  # PyAV raises FFmpegError subclasses, OSError, ValueError, ...
        raise InputError(f"item {item_id!r}: cannot open video {path}: {exc}", item_id) from exc
    try:
        if not container.streams.video:
            raise InputError(f"item {item_id!r}: {path} has no video stream", item_id)
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"  # frame threading: faster, same pixels
        if timing is not None:
            timing["pts"], timing["time_base"] = [], []
            timing["rate"] = stream.average_rate or stream.guessed_rate
            timing["stream_time_base"] = stream.time_base
        try:
            for frame in container.decode(stream):
                if timing is not None:
                    timing["pts"].append(frame.pts)
                    timing["time_base"].append(frame.time_base)
                    timing["duration"] = getattr(frame, "duration", None)
                if wanted is None or count in wanted:
                    kept[count] = frame.to_ndarray(format="rgb24")
                count += 1
        except InputError:
            raise
        except Exception as exc:
            raise InputError(
                f"item {item_id!r}: decoding {path} failed after {count} frame(s): {exc}", item_id
            ) from exc
    finally:
        container.close()
    return count, kept


def frame_count_hint(path: Path) -> int:
    """The frame count the container declares (0 when unknown or unreadable); only a hint."""
    from capeval._optional import require

    av = require("av", extra="video", purpose="decoding videos")
    try:
        with av.open(str(path)) as container:
            if container.streams.video:
                return int(container.streams.video[0].frames or 0)
    except Exception:
        return 0  # the decoding pass reports the error
    return 0


def decode_video(path: str | os.PathLike[str], n_frames: int | None = DEFAULT_N_FRAMES,
                 item_id: str | None = None) -> SampledFrames:
    """Decode ``path`` with PyAV and sample ``n_frames`` frames (all for ``None``).

    One decoding pass when the container's frame count is right (the usual case), keeping
    only the sampled frames in memory; a second pass when the decoded count differs.
    """
    path = Path(path)
    hint = frame_count_hint(path) if n_frames is not None else 0
    wanted = set(sample_indices(hint, n_frames)) if hint > 0 else (None if n_frames is None else set())
    total, kept = decode_pass(path, wanted, item_id)
    if total == 0:
        raise InputError(f"item {item_id!r}: video {path} has no decodable frames", item_id)
    idx = sample_indices(total, n_frames)
    if not all(i in kept for i in idx):
        total2, kept = decode_pass(path, set(idx), item_id)
        if total2 != total:
            raise InputError(
                f"item {item_id!r}: video {path} decoded to {total} then {total2} frames; cannot sample reproducibly",
                item_id,
            )
    return SampledFrames(str(path), "video", total, tuple(idx), tuple(kept[i] for i in idx))
