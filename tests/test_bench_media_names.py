"""A benchmark's image and video names come from its data files: resolved under the media folder
(issue 46 item 1), so a data file naming ``../`` or an absolute path never reaches a file outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from capeval.bench.media import resolve_media
from capeval.errors import InputError


@pytest.mark.parametrize("name", ["../secret.jpg", "/etc/passwd", "a/../../secret.jpg", "..\\secret.jpg", "a\x00.jpg",
                                  "x" * 300 + ".jpg"])
@pytest.mark.parametrize("kind", ["image", "video"])
def test_escaping_names_are_refused(tmp_path: Path, name: str, kind: str) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    (tmp_path / "secret.jpg").write_bytes(b"not yours")
    (folder / "ok.jpg").write_bytes(b"fine")
    with pytest.raises(InputError) as info:
        resolve_media("somebench", ["ok.jpg", name], folder, kind=kind)
    assert "somebench" in str(info.value) and "\n" not in str(info.value)


def test_names_inside_and_frame_folders_still_resolve(tmp_path: Path) -> None:
    folder = tmp_path / "videos"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.jpg").write_bytes(b"x")
    (folder / "clip1.mp4").write_bytes(b"x")
    (folder / "clip2").mkdir()
    got = resolve_media("b", ["sub/a.jpg"], folder)
    assert got == {"sub/a.jpg": str(folder / "sub" / "a.jpg")}
    got = resolve_media("b", ["clip1", "clip2"], folder, kind="video")
    assert got == {"clip1": str(folder / "clip1.mp4"), "clip2": str(folder / "clip2")}
