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
