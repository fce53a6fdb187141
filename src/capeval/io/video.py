"""Video inputs: find each item's video, decode it, and pick the frames EMScore looks at.

The public face of three modules, one per job (their docstrings hold the rules):

- :mod:`capeval.io.video_sources`  where an item's video is: a folder of ``<id>.<ext>`` videos
  and ``<id>/`` frame folders, or a mapping ``{id: source}``;
- :mod:`capeval.io.video_decode`   decoding with PyAV (T = the frames that decode) or reading a
  frame folder / array / list, and sampling ``int(linspace(0, T - 1, N))`` frames;
- :mod:`capeval.io.video_windows`  segments ``(start_s, end_s)``: frame timestamps from pts,
  the closed-window inclusion rule, one decoding per file for all of its segments.

Use ``from capeval.io import video as vf`` and ``vf.<name>``. To replace a function in a
test (``monkeypatch``), patch it in the module that defines it: rebinding a name here does
not change what the other modules call.
"""

from __future__ import annotations

from capeval.io.video_decode import (
    DEFAULT_N_FRAMES,
    SAMPLING,
    SampledFrames,
    decode_video,
    load_frames,
    read_frame_folder,
    sample_indices,
)
from capeval.io.video_sources import (
    IMAGE_EXTENSIONS,
    VIDEO_EXTENSIONS,
    VideoFolder,
    as_video_index,
    resolve_source,
    source_key,
)
from capeval.io.video_windows import (
    SEGMENT_RULE,
    Window,
    exact_fraction,
    load_video_windows,
    load_windows,
    parse_segment,
    window_indices,
)

__all__ = [
    "DEFAULT_N_FRAMES",
    "IMAGE_EXTENSIONS",
    "SAMPLING",
    "SEGMENT_RULE",
    "VIDEO_EXTENSIONS",
    "SampledFrames",
    "VideoFolder",
    "Window",
    "as_video_index",
    "decode_video",
    "exact_fraction",
    "load_frames",
    "load_video_windows",
    "load_windows",
    "parse_segment",
    "read_frame_folder",
    "resolve_source",
    "sample_indices",
    "source_key",
    "window_indices",
]
