"""Shared fixtures: the real benchmark data in ../shared/data, a per-session cache, and
reference outputs.

Every test session gets its own temporary ``$CAPEVAL_CACHE`` (set here, before anything
computes a cache path), so tests never read or write the user's cache; METEOR's resource
index is therefore built once per session, on first use. ``CAPEVAL_TEST_CACHE=DIR`` opts
in to a persistent directory instead (to skip that build when running tests repeatedly).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from _reference import SHARED_DATA, in_ci, require_module, unavailable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_OWN_CACHE: Path | None = None
if os.environ.get("CAPEVAL_TEST_CACHE"):
    os.environ["CAPEVAL_CACHE"] = os.environ["CAPEVAL_TEST_CACHE"]
else:
    _OWN_CACHE = Path(tempfile.mkdtemp(prefix="capeval-test-cache-"))
    os.environ["CAPEVAL_CACHE"] = str(_OWN_CACHE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long-running end-to-end test (deselect with -m 'not slow')")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


def _import_skip_message(report: pytest.CollectReport | pytest.TestReport) -> str | None:
    """The message of a skip raised by ``pytest.importorskip``, else None."""
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return None
    message = str(report.longrepr[2])
    return message if "could not import" in message else None


def _fail_import_skip_in_ci(report: pytest.CollectReport | pytest.TestReport) -> None:
    message = _import_skip_message(report) if in_ci() else None
    if message:
        report.outcome = "failed"
        report.longrepr = f"{message} [CI=true: a missing dependency is a failure, not a skip]"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    # Safety net for the rule in _reference.unavailable: under CI a test skipped by a plain
    # pytest.importorskip (a missing reference or extra) fails instead of passing silently.
    _fail_import_skip_in_ci((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    # the same for a module-level importorskip, which skips the whole file at collection
    _fail_import_skip_in_ci((yield).get_result())


def pytest_report_header(config: pytest.Config) -> list[str]:
    mode = "CI=true: missing references/data FAIL" if in_ci() else "missing references/data are skipped"
    return [f"capeval: CAPEVAL_CACHE={os.environ['CAPEVAL_CACHE']}; data={SHARED_DATA}; {mode}"]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``$CAPEVAL_DATA`` or ``../shared/data``; skipped when absent (a failure under CI)."""
    if not (SHARED_DATA / "README.md").exists():
        unavailable(f"benchmark data not found at {SHARED_DATA} (set CAPEVAL_DATA or place ../shared/data)")
    return SHARED_DATA


def flickr8k_expert_pairs(root: Path) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """(ids, {id: candidate}, {id: [5 references]}) for the 5,664 Flickr8k-Expert pairs."""
    from capeval.bench.flickr8k import expert_pairs

    return expert_pairs(root)


@pytest.fixture(scope="session")
def expert_pairs(shared_data: Path):
    return flickr8k_expert_pairs(shared_data)


SAMPLE_VIDEO_ID = "Bfyp0C02sko_000248_000258"


@pytest.fixture(scope="session")
def sample_video(shared_data: Path) -> Path:
    """The bundled 10 s VATEX-style clip (250 frames at 25 fps)."""
    path = shared_data / "samples" / "video" / f"{SAMPLE_VIDEO_ID}.mp4"
    if not path.exists():
        unavailable(f"sample video not found: {path}")
    return path


@pytest.fixture(scope="session")
def all_frames(sample_video: Path):
    """Every decoded RGB frame of the sample clip, (250, H, W, 3) uint8."""
    av = require_module("av", "PyAV decodes the sample video (video extra)")
    import numpy as np

    with av.open(str(sample_video)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.fixture(scope="session")
def bb():
    """A tiny randomly initialised CLIP backbone."""
    backbone = require_module("capeval.models.clip.backbone", "the CLIP backbone needs torch (clip extra)")
    return backbone.random_backbone("tiny", seed=0)


@pytest.fixture(autouse=True)
def _read_limits_as_found() -> Any:
    # ``capeval score --max-json-bytes/--max-line-bytes/...`` set the environment variables every
    # reader of the job sees (cli/score.py); a test calling ``main`` in-process would leave them for
    # the tests after it (with pytest-xdist, for whichever tests share its worker)
    from capeval.io.reading import LIMITS

    names = [variable for variable, *_ in LIMITS.values()]
    saved = {name: os.environ.get(name) for name in names}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
