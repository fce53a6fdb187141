"""Runs of the reference implementation (pycocoevalcap, with Java) cached on disk.

The Java tokenizer and METEOR are slow; their outputs on the real data are cached in
pytest's cache directory keyed by a hash of the inputs, so reruns are fast and CI runs
them once.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

CACHE = Path(__file__).resolve().parents[1] / ".pytest_cache" / "reference"


def need_java() -> None:
    if shutil.which("java") is None:
        pytest.skip("java not found: the reference implementation (pycocoevalcap) needs it")
    pytest.importorskip("pycocoevalcap", reason="pycocoevalcap==1.2 is the reference implementation (test extra)")


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
    need_java()

    def run() -> tuple[dict, dict]:
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

        tok = PTBTokenizer()
        gts = tok.tokenize({i: [{"caption": r} for r in refs[i]] for i in ids})
        res = tok.tokenize({i: [{"caption": cands[i]}] for i in ids})
        return gts, res

    return cached("ptb", [ids, cands, refs], run)
