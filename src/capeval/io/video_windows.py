"""Time windows (segments) of a video: which frames fall in ``(start_s, end_s)``, sampled.

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
    window are then sampled with the uniform rule of :mod:`capeval.io.video_decode`,
    ``int(linspace(0, W - 1, N))`` over its ``W`` frames (all ``W`` for ``N = None``);
    :attr:`SampledFrames.indices` are indices into the whole video. Each video file is decoded once for all of its segments (a demux-only
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
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import InputError
from capeval.io import video_decode
from capeval.io.video_decode import SampledFrames, load_frames, sample_indices

#: short description of the segment rule, for signatures
SEGMENT_RULE = "pts[start,end]"

#: a segment as :func:`parse_segment` returns it: exact (start, end) in seconds
Window = tuple[Fraction, Fraction]


def exact_fraction(x: Any) -> Fraction:
    """A number as an exact fraction, floats read as the decimal they print as (0.4 -> 2/5).

    Accepts ints, floats, numpy numbers, :class:`~fractions.Fraction` and numeric strings;
    raises ``ValueError`` (booleans, non-finite numbers, bad strings), ``TypeError`` or
    ``ZeroDivisionError`` (``"1/0"``) otherwise.
    """
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
        s, e = exact_fraction(start), exact_fraction(end)
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


def predict_times(path: Path) -> tuple[list[Fraction], Fraction] | None:
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

    predicted = predict_times(path)
    wanted: set[int] = set()
    if predicted is not None:
        for idx, _, _ in choose(*predicted).values():
            wanted.update(idx)
    timing: dict[str, Any] = {}
    # through the module, so that patching decode_pass there (tests count passes) reaches here
    total, kept = video_decode.decode_pass(path, wanted, first, timing)
    if total == 0:
        raise InputError(f"item {first!r}: video {path} has no decodable frames", first)
    times, duration = _frame_times(timing, total, path, first)
    chosen = choose(times, duration)
    missing = {i for idx, _, _ in chosen.values() for i in idx} - set(kept)
    if missing:
        total2, more = video_decode.decode_pass(path, missing, first)
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
        rate = exact_fraction(fps)
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
