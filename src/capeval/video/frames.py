"""Video inputs: find each item's video, decode it, and pick the frames EMScore looks at.

Where a video comes from
    ``videos`` is either a folder or a mapping ``{id: source}``. In a folder, item ``id`` is
    ``<folder>/<id>.<ext>`` with ``ext`` one of :data:`VIDEO_EXTENSIONS` (any case), or a frame
    folder ``<folder>/<id>/``. Having both (or two video files with different extensions) is
    an error rather than a guess. A mapping's value may be a video file, a frame folder, an
    array ``(T, H, W, 3)`` of uint8 RGB frames, or a list of frames (image paths, PIL images
    or ``(H, W, 3)`` uint8 arrays).

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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from capeval.errors import InputError

VIDEO_EXTENSIONS = ("mp4", "avi", "mov", "mkv", "webm")
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "bmp", "webp")

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
    backbone's ``load_image`` takes), one per entry of ``indices``; ``total`` is T.
    """

    source: str
    kind: str  # "video" | "folder" | "array" | "list"
    total: int
    indices: tuple[int, ...]
    frames: tuple[Any, ...]


# -- locating ------------------------------------------------------------------------------


def _natural_key(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def _ext(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


class VideoFolder:
    """Index of a folder of ``<id>.<ext>`` videos and ``<id>/`` frame folders (listed once)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        if not self.root.is_dir():
            raise InputError(f"videos folder not found: {self.root}")
        self._by_id: dict[str, list[Path]] = {}
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.is_dir():
                    self._by_id.setdefault(entry.name, []).append(Path(entry.path))
                elif _ext(entry.name) in VIDEO_EXTENSIONS:
                    self._by_id.setdefault(entry.name.rsplit(".", 1)[0], []).append(Path(entry.path))

    def find(self, item_id: str) -> Path:
        """The video file or frame folder of ``item_id``; :class:`InputError` when none or several."""
        found = self._by_id.get(item_id)
        if found is None and ("/" in item_id or os.sep in item_id):
            # ids with a path separator point into sub-folders
            base = self.root / item_id
            found = [p for p in [base] if p.is_dir()]
            found += [Path(f"{base}.{e}") for e in VIDEO_EXTENSIONS if Path(f"{base}.{e}").is_file()]
        if not found:
            exts = "|".join(VIDEO_EXTENSIONS)
            raise InputError(
                f"item {item_id!r}: no video found: expected {self.root / item_id}.<{exts}> or a frame folder "
                f"{self.root / item_id}/",
                item_id,
            )
        if len(found) > 1:
            names = ", ".join(sorted(str(p) for p in found))
            raise InputError(
                f"item {item_id!r}: several candidate videos ({names}); pass videos as a mapping {{id: path}}",
                item_id,
            )
        return found[0]


def resolve_source(videos: Any, item_id: str) -> Any:
    """The source of ``item_id`` in ``videos`` (a :class:`VideoFolder` or a mapping)."""
    if isinstance(videos, VideoFolder):
        return videos.find(item_id)
    if isinstance(videos, Mapping):
        if item_id in videos:
            return videos[item_id]
        raise InputError(f"item {item_id!r} has no entry in videos", item_id)
    raise InputError(
        f"videos must be a folder or a mapping {{id: video}}, got {type(videos).__name__}", item_id
    )


def as_video_index(videos: Any) -> VideoFolder | Mapping[str, Any]:
    """Normalise the ``videos`` argument: folder path -> :class:`VideoFolder`, mapping keys -> str."""
    if videos is None:
        raise InputError("this metric needs videos: pass videos=<folder> or videos={id: path}")
    if isinstance(videos, VideoFolder):
        return videos
    if isinstance(videos, (str, os.PathLike)):
        return VideoFolder(videos)
    if isinstance(videos, Mapping):
        out: dict[str, Any] = {}
        for key, value in videos.items():
            if str(key) in out:
                raise InputError(f"video id {str(key)!r} appears twice (ids are compared as strings)", str(key))
            out[str(key)] = value
        return out
    raise InputError(f"videos must be a folder or a mapping {{id: video}}, got {type(videos).__name__}")


def source_key(source: Any) -> tuple[str, Any]:
    """Hashable identity of a source, so a video shared by several items is embedded once."""
    if isinstance(source, (str, os.PathLike)):
        return ("path", os.path.realpath(os.fspath(source)))
    return ("object", id(source))


# -- loading -------------------------------------------------------------------------------


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
            if not e.name.startswith(".") and _ext(e.name) in IMAGE_EXTENSIONS and e.is_file()
        ]
    except OSError as exc:
        raise InputError(f"item {item_id!r}: cannot read frame folder {path}: {exc}", item_id) from exc
    if not names:
        exts = ", ".join(IMAGE_EXTENSIONS)
        raise InputError(f"item {item_id!r}: frame folder {path} holds no images ({exts})", item_id)
    names.sort(key=_natural_key)
    idx = sample_indices(len(names), n_frames)
    return SampledFrames(str(path), "folder", len(names), tuple(idx), tuple(path / names[i] for i in idx))


def _decode_pass(path: Path, wanted: set[int] | None, item_id: str | None) -> tuple[int, dict[int, np.ndarray]]:
    """Decode every frame of the first video stream; keep the ``wanted`` ones as RGB arrays."""
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
        try:
            for frame in container.decode(stream):
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


def _frame_count_hint(path: Path) -> int:
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
    hint = _frame_count_hint(path) if n_frames is not None else 0
    wanted = set(sample_indices(hint, n_frames)) if hint > 0 else (None if n_frames is None else set())
    total, kept = _decode_pass(path, wanted, item_id)
    if total == 0:
        raise InputError(f"item {item_id!r}: video {path} has no decodable frames", item_id)
    idx = sample_indices(total, n_frames)
    if not all(i in kept for i in idx):
        total2, kept = _decode_pass(path, set(idx), item_id)
        if total2 != total:
            raise InputError(
                f"item {item_id!r}: video {path} decoded to {total} then {total2} frames; cannot sample reproducibly",
                item_id,
            )
    return SampledFrames(str(path), "video", total, tuple(idx), tuple(kept[i] for i in idx))
