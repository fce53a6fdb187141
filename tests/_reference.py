"""Runs of the reference implementation (pycocoevalcap, with Java) cached on disk, and the
one rule for references that cannot run.

The Java tokenizer and METEOR are slow; their outputs on the real data are cached in
pytest's cache directory keyed by a hash of the inputs, so reruns are fast and CI runs
them once.

A test whose reference (Java, pycocoevalcap, scipy, transformers, ...) or data is missing
is skipped on a developer's machine, but fails under ``CI=true``: a CI run must never pass
without having compared with the reference (``.ci/run`` installs what is needed).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pickle
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, NoReturn

import pytest

CACHE = Path(__file__).resolve().parents[1] / ".pytest_cache" / "reference"

# The benchmark data every test reads: $CAPEVAL_DATA, else ../shared/data beside the checkout
# (tests take it through the ``shared_data`` fixture; module-level constants import it here).
SHARED_DATA = Path(os.environ.get("CAPEVAL_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


def in_ci() -> bool:
    """True when ``$CI`` says so (GitHub Actions, GitLab and most CI systems set ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def unavailable(reason: str) -> NoReturn:
    """Skip the current test because ``reason`` (a missing reference or data); fail under CI."""
    if in_ci():
        pytest.fail(f"{reason} [CI=true: a missing reference, dependency or data set is a failure, not a skip]", pytrace=False)
    pytest.skip(reason)


def require_module(name: str, reason: str) -> ModuleType:
    """``pytest.importorskip`` that fails instead of skipping under CI."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        error = str(e)
    unavailable(f"cannot import {name} ({error}): {reason}")


def require_java() -> None:
    """pycocoevalcap 1.2 and a ``java`` on the PATH: what the Java reference needs."""
    if shutil.which("java") is None:
        unavailable("java not found on PATH: the reference implementation (pycocoevalcap) needs it")
    require_module("pycocoevalcap", "pycocoevalcap==1.2 is the reference implementation (test extra)")


def require_javac() -> None:
    """``javac`` too (tests that compile a small harness against a reference jar)."""
    require_java()
    if shutil.which("javac") is None:
        unavailable("javac not found on PATH: needed to call the reference jar's classes directly (install a JDK)")


def cached(name: str, payload: Any, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per distinct ``payload`` (pickled under .pytest_cache/reference)."""
    key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    path = CACHE / f"{name}-{key}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            return pickle.load(f)
    value = compute()
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(value, f)
    tmp.replace(path)
    return value


def java_ptb(ids: list[str], cands: dict[str, str], refs: dict[str, list[str]]) -> tuple[dict, dict]:
    """pycocoevalcap-tokenised (gts, res) in its own layout ``{id: [str]}``."""
    require_java()

    def run() -> tuple[dict, dict]:
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

        tok = PTBTokenizer()
        gts = tok.tokenize({i: [{"caption": r} for r in refs[i]] for i in ids})
        res = tok.tokenize({i: [{"caption": cands[i]}] for i in ids})
        return gts, res

    return cached("ptb", [ids, cands, refs], run)
