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

Segments (a time window ``(start_s, end_s)`` of a video, e.g. ActivityNet-FOIL)
    Frame timestamps: ``t_i = (pts_i - pts_0) * time_base`` in exact rational arithmetic,
    where ``pts_i`` is the presentation timestamp PyAV gives decoded frame ``i`` (frames in
    presentation order, as decoded), ``pts_0`` that of the first decoded frame (so the first
    frame is at 0 s, whatever the container's start offset) and ``time_base`` the frame's
    (else the stream's) time base. When a decoded frame has no pts, every frame gets
    ``t_i = i / average_rate`` instead. The video's duration is ``D = t_last + d_last``
    (``d_last``: the last frame's own duration, else the previous frame interval, else
    ``1 / average_rate``). Segment bounds are read as the decimal numbers they print as
    (``0.4`` is exactly 2/5, not the binary float just below), so a frame stamped exactly
    on a bound is not lost to rounding.

    Inclusion rule: a frame belongs to the segment iff ``start <= t_i <= end`` (closed at both
    ends), after clamping to the video: ``start = max(start, 0)``, ``end = min(end, D)``.
    ``start > end`` (as given), non-finite bounds, a start at or after ``D`` and a window
    holding no frame timestamp are errors naming the item (skippable). The frames of the
    window are then sampled with the rule above: ``int(linspace(0, W - 1, N))`` over its
    ``W`` frames (all ``W`` for ``N = None``); :attr:`SampledFrames.indices` are indices into
    the whole video. Each video file is decoded once for all of its segments (a demux-only
    pass over packet timestamps predicts which frames to keep; if the decoded timestamps
    disagree, one more decoding pass fetches the missing frames). Frame folders, arrays and
    frame lists have no timestamps: segments of them need ``fps`` (frame ``i`` is at
    ``i / fps``), otherwise they are rejected with an :class:`InputError`.

    The reference protocol (EMScore's ``ActivityNet-FOIL_demo.py``) differs slightly: it
    embeds every frame of the whole video once (cached per-frame features) and slices them
    by index, ``feats[int(start * T // duration) : int(end * T // duration)]`` with
    ``duration`` the annotation's (``anet_entities_*.json``) rather than the file's, keeping
    every frame of the slice. For a constant-frame-rate file whose length matches the
    annotation, that is the same window up to one frame at each end (the reference rounds
    both bounds down and excludes the end); ``n_frames=None`` keeps every frame as it does.

Errors
    A missing video, an undecodable or empty file, a folder without images: :class:`InputError`
    naming the item and the file; scorers can record such items as skipped instead.
    A decoding error part-way through a file is an error too (OpenCV would silently stop
    there and sample from the frames read so far).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from capeval.errors import InputError

VIDEO_EXTENSIONS = ("mp4", "avi", "mov", "mkv", "webm")
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "bmp", "webp")

#: frames EMScore's VATEX-EVAL demo samples per video
DEFAULT_N_FRAMES = 10
#: short description of the sampling rule, for signatures
SAMPLING = "linspace-int"
#: short description of the segment rule, for signatures
SEGMENT_RULE = "pts[start,end]"

#: a segment as :func:`parse_segment` returns it: exact (start, end) in seconds
Window = tuple[Fraction, Fraction]


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


def _decode_pass(path: Path, wanted: set[int] | None, item_id: str | None,
                 timing: dict[str, Any] | None = None) -> tuple[int, dict[int, np.ndarray]]:
    """Decode every frame of the first video stream; keep the ``wanted`` ones as RGB arrays.

    With ``timing`` (a dict), also record every frame's ``pts`` and ``time_base``, the last
    frame's ``duration`` and the stream's ``rate`` in it (see :func:`_frame_times`).
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


# -- segments ------------------------------------------------------------------------------


def _exact(x: Any) -> Fraction:
    """A number as an exact fraction, floats read as the decimal they print as (0.4 -> 2/5)."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (bool, np.bool_)):
        raise ValueError("a boolean is not a time")
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, str):
        return Fraction(x.strip())
    f = float(x)
    if not math.isfinite(f):
        raise ValueError(f"{x!r} is not finite")
    return Fraction(repr(f))


def parse_segment(value: Any, item_id: str | None = None) -> Window:
    """``(start_s, end_s)`` -> exact ``(max(start, 0), end)``; :class:`InputError` when malformed."""
    try:
        start, end = value
        s, e = _exact(start), _exact(end)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise InputError(
            f"item {item_id!r}: a segment must be (start_s, end_s) with finite numbers, got {value!r}", item_id
        ) from exc
    if s > e:
        raise InputError(f"item {item_id!r}: segment starts after it ends: ({float(s):g}, {float(e):g}) s", item_id)
    return (max(s, Fraction(0)), e)


def window_indices(times: Sequence[Fraction], duration: Fraction, window: Window,
                   n_frames: int | None) -> tuple[list[int], int, tuple[Fraction, Fraction]]:
    """Sampled frame indices (into the whole video) of ``window``, the frame count W in it and
    the clamped window. ``times`` are the frames' timestamps, ``duration`` the video's."""
    start, end = window[0], min(window[1], duration)
    if start >= duration or start > end:
        return [], 0, (start, end)
    inside = [i for i, t in enumerate(times) if start <= t <= end]
    if not inside:
        return [], 0, (start, end)
    return [inside[r] for r in sample_indices(len(inside), n_frames)], len(inside), (start, end)


def _frame_times(timing: dict[str, Any], total: int, path: Path, item_id: str | None) -> tuple[list[Fraction], Fraction]:
    """Timestamps of the decoded frames and the video's duration (see the module notes)."""
    pts, bases, rate = timing["pts"], timing["time_base"], timing.get("rate")
    rate = Fraction(rate) if rate else None
    if total and all(p is not None for p in pts):
        bases = [Fraction(b) if b else Fraction(timing["stream_time_base"]) for b in bases]
        times = [(p - pts[0]) * b for p, b in zip(pts, bases)]
        last = timing.get("duration")
        if last:
            step = Fraction(last) * bases[-1]
        elif total > 1:
            step = times[-1] - times[-2]
        else:
            step = 1 / rate if rate else Fraction(0)
    elif rate:
        times = [Fraction(i) / rate for i in range(total)]
        step = 1 / rate
    else:
        raise InputError(
            f"item {item_id!r}: {path} gives its frames no timestamps and no frame rate; cannot cut segments", item_id
        )
    return times, times[-1] + max(step, Fraction(0))


def _predict_times(path: Path) -> tuple[list[Fraction], Fraction] | None:
    """Frame timestamps from packet pts (demuxing only, no decoding); None when unavailable."""
    from capeval._optional import require

    av = require("av", extra="video", purpose="decoding videos")
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return None
            stream = container.streams.video[0]
            tb = Fraction(stream.time_base)
            pts = sorted(p.pts for p in container.demux(stream) if p.pts is not None and p.size)
    except Exception:
        return None  # the decoding pass reports the error
    if not pts:
        return None
    times = [(p - pts[0]) * tb for p in pts]
    step = times[-1] - times[-2] if len(times) > 1 else Fraction(0)
    return times, times[-1] + step


def _errors_for_all(keys: Sequence[Hashable], exc: InputError) -> dict[Hashable, InputError]:
    return {k: exc for k in keys}


def _empty_window(item_id: str | None, source: str, window: Window, clamped: tuple[Fraction, Fraction],
                  duration: Fraction) -> InputError:
    return InputError(
        f"item {item_id!r}: segment ({float(window[0]):g}, {float(window[1]):g}) s of {source} holds no frame "
        f"(video duration {float(duration):.3f} s; a frame is in the segment when start <= t <= end)",
        item_id,
    )


def load_video_windows(path: str | os.PathLike[str], windows: Mapping[Hashable, Window | None],
                       n_frames: int | None, owners: Mapping[Hashable, str]) -> dict[Hashable, SampledFrames | InputError]:
    """Sample several windows (``None``: the whole video) of one video file, decoding it once.

    Returns ``{key: SampledFrames}``, or an :class:`InputError` for a key whose window holds
    no frame; a file that cannot be read raises (naming the first owner).
    """
    path = Path(path)
    keys = list(windows)
    first = owners[keys[0]] if keys else None

    def choose(times: Sequence[Fraction], duration: Fraction) -> dict[Hashable, tuple[list[int], int, Any]]:
        out = {}
        for k in keys:
            w = windows[k]
            if w is None:
                out[k] = (sample_indices(len(times), n_frames), len(times), None)
            else:
                out[k] = window_indices(times, duration, w, n_frames)
        return out

    predicted = _predict_times(path)
    wanted: set[int] = set()
    if predicted is not None:
        for idx, _, _ in choose(*predicted).values():
            wanted.update(idx)
    timing: dict[str, Any] = {}
    total, kept = _decode_pass(path, wanted, first, timing)
    if total == 0:
        raise InputError(f"item {first!r}: video {path} has no decodable frames", first)
    times, duration = _frame_times(timing, total, path, first)
    chosen = choose(times, duration)
    missing = {i for idx, _, _ in chosen.values() for i in idx} - set(kept)
    if missing:
        total2, more = _decode_pass(path, missing, first)
        if total2 != total:
            raise InputError(
                f"item {first!r}: video {path} decoded to {total} then {total2} frames; cannot sample reproducibly",
                first,
            )
        kept.update(more)
    out: dict[Hashable, SampledFrames | InputError] = {}
    for k in keys:
        idx, n_in, clamped = chosen[k]
        if not idx:
            out[k] = _empty_window(owners[k], str(path), windows[k], clamped, duration)
            continue
        win = None if clamped is None else (float(clamped[0]), float(clamped[1]))
        out[k] = SampledFrames(str(path), "video", total, tuple(idx), tuple(kept[i] for i in idx),
                               win, n_in if win is not None else None)
    return out


def load_windows(source: Any, windows: Mapping[Hashable, Window | None], n_frames: int | None,
                 owners: Mapping[Hashable, str], fps: Any = None) -> dict[Hashable, SampledFrames | InputError]:
    """Sample each window (``None``: the whole video) of one source; errors per key, not raised.

    Video files: :func:`load_video_windows` (one decoding). Frame folders, arrays and lists:
    frame ``i`` is at ``i / fps``; without ``fps`` their segments are rejected.
    """
    keys = list(windows)
    if not keys:
        return {}
    first = owners[keys[0]]
    if all(windows[k] is None for k in keys):
        try:
            s = load_frames(source, n_frames, first)
        except InputError as exc:
            return _errors_for_all(keys, exc)
        return {k: s for k in keys}
    try:
        if isinstance(source, (str, os.PathLike)) and Path(source).is_file():
            return load_video_windows(source, windows, n_frames, owners)
        whole = load_frames(source, None, first)
    except InputError as exc:
        return _errors_for_all(keys, exc)
    rate: Fraction | None = None
    if fps is not None:
        rate = _exact(fps)
        if rate <= 0:
            raise InputError(f"fps must be positive, got {fps!r}")
    times = [Fraction(i) / rate for i in range(whole.total)] if rate else []
    duration = Fraction(whole.total) / rate if rate else Fraction(0)
    out: dict[Hashable, SampledFrames | InputError] = {}
    for k in keys:
        w = windows[k]
        if w is None:
            idx = sample_indices(whole.total, n_frames)
            out[k] = SampledFrames(whole.source, whole.kind, whole.total, tuple(idx), tuple(whole.frames[i] for i in idx))
            continue
        if rate is None:
            out[k] = InputError(
                f"item {owners[k]!r}: a segment needs frame timestamps, but this video is a {whole.kind} "
                f"({whole.source}) without any; pass the fps option (frames per second of the frames given) "
                "or a video file",
                owners[k],
            )
            continue
        idx, n_in, clamped = window_indices(times, duration, w, n_frames)
        if not idx:
            out[k] = _empty_window(owners[k], whole.source, w, clamped, duration)
            continue
        out[k] = SampledFrames(whole.source, whole.kind, whole.total, tuple(idx), tuple(whole.frames[i] for i in idx),
                               (float(clamped[0]), float(clamped[1])), n_in)
    return out
