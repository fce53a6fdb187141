"""Shared fixtures: the real benchmark data in ../shared/data and reference outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_DATA = Path(os.environ.get("CAPEVAL_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long-running end-to-end test (deselect with -m 'not slow')")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "README.md").exists():
        pytest.skip(f"benchmark data not found at {SHARED_DATA} (set CAPEVAL_DATA or place ../shared/data)")
    return SHARED_DATA


def flickr8k_expert_pairs(root: Path) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """(ids, {id: candidate}, {id: [5 references]}) for the 5,664 Flickr8k-Expert pairs."""
    captions: dict[str, str] = {}
    by_image: dict[str, list[str]] = {}
    with open(root / "flickr8k" / "Flickr8k.token.txt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            cid, text = line.rstrip("\n").split("\t", 1)
            captions[cid] = text
            by_image.setdefault(cid.split("#")[0], []).append(text)
    ids: list[str] = []
    cands: dict[str, str] = {}
    refs: dict[str, list[str]] = {}
    seen = set()
    with open(root / "flickr8k" / "ExpertAnnotations.txt", encoding="utf-8") as f:
        for line in f:
            image, cid, *_ = line.rstrip("\n").split("\t")
            if cid.split("#")[0] == image:
                continue
            key = f"{image}|{cid}"
            if key in seen:
                continue
            seen.add(key)
            ids.append(key)
            cands[key] = captions[cid]
            refs[key] = by_image[image]
    return ids, cands, refs


@pytest.fixture(scope="session")
def expert_pairs(shared_data: Path):
    return flickr8k_expert_pairs(shared_data)


SAMPLE_VIDEO_ID = "Bfyp0C02sko_000248_000258"


@pytest.fixture(scope="session")
def sample_video(shared_data: Path) -> Path:
    """The bundled 10 s VATEX-style clip (250 frames at 25 fps)."""
    path = shared_data / "samples" / "video" / f"{SAMPLE_VIDEO_ID}.mp4"
    if not path.exists():
        pytest.skip(f"sample video not found: {path}")
    return path


@pytest.fixture(scope="session")
def all_frames(sample_video: Path):
    """Every decoded RGB frame of the sample clip, (250, H, W, 3) uint8."""
    av = pytest.importorskip("av")
    import numpy as np

    with av.open(str(sample_video)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.fixture(scope="session")
def bb():
    """A tiny randomly initialised CLIP backbone."""
    backbone = pytest.importorskip("capeval.clip.backbone")
    return backbone.random_backbone("tiny", seed=0)
