"""Locating each item's video: a folder of videos / frame folders, or a mapping ``{id: source}``.

Where a video comes from
    ``videos`` is either a folder or a mapping ``{id: source}``. In a folder, item ``id`` is
    ``<folder>/<id>.<ext>`` with ``ext`` one of :data:`VIDEO_EXTENSIONS` (any case), or a frame
    folder ``<folder>/<id>/``. Having both (or two video files with different extensions) is
    an error rather than a guess. A mapping's value may be a video file, a frame folder, an
    array ``(T, H, W, 3)`` of uint8 RGB frames, or a list of frames (image paths, PIL images
    or ``(H, W, 3)`` uint8 arrays).

Decoding and sampling a source: :mod:`capeval.io.video_decode`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from capeval.errors import InputError

#: extensions (any case) of the video files a videos folder may hold
VIDEO_EXTENSIONS = ("mp4", "avi", "mov", "mkv", "webm")
#: extensions (any case) of the images a frame folder may hold
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "bmp", "webp")


def file_extension(name: str) -> str:
    """The lower-cased extension of a file name (``""`` when it has none)."""
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
                elif file_extension(entry.name) in VIDEO_EXTENSIONS:
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
