"""OpenAI's own CLIP code and files, taken from an installed ``clip`` package (``clip-anytorch``).

The package cannot be imported here (its ``__init__`` imports torchvision, which breaks this
torch), so it is located with ``importlib.util.find_spec`` without importing it and single
modules are loaded by file path: ``simple_tokenizer.py`` (needs ftfy and regex) and
``model.py`` (needs only torch). Install it with ``pip install --no-deps clip-anytorch``;
nothing of it is vendored into this repository.

When the package is missing the tests that need it are skipped, except under ``CI=true``,
where they fail (:func:`_reference.unavailable`).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from _reference import unavailable

VOCAB_FILE = "bpe_simple_vocab_16e6.txt.gz"
INSTALL_HINT = "pip install --no-deps clip-anytorch"


def clip_package_dir() -> Path | None:
    """Folder of the installed ``clip`` package (found without importing it), or None."""
    try:
        spec = importlib.util.find_spec("clip")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0])
    needed = ("simple_tokenizer.py", "model.py", VOCAB_FILE)
    return folder if all((folder / name).is_file() for name in needed) else None


def require_clip_package() -> Path:
    """The package folder, else skip (fail under ``CI=true``) naming what to install."""
    folder = clip_package_dir()
    if folder is None:
        unavailable(f"OpenAI's clip package (simple_tokenizer.py, model.py, {VOCAB_FILE}) is not installed: "
                    f"{INSTALL_HINT}")
    return folder


def real_vocab() -> Path:
    """The real ``bpe_simple_vocab_16e6.txt.gz`` shipped in the package."""
    return require_clip_package() / VOCAB_FILE


@lru_cache(maxsize=None)
def _load(filename: str) -> ModuleType:
    path = require_clip_package() / filename
    name = f"_upstream_clip_{Path(filename).stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # ftfy / regex missing
        del sys.modules[name]
        unavailable(f"cannot load {path}: {exc}")
    return module


def simple_tokenizer_module() -> ModuleType:
    """OpenAI's ``clip/simple_tokenizer.py``, loaded by file path."""
    return _load("simple_tokenizer.py")


@lru_cache(maxsize=1)
def simple_tokenizer():
    """OpenAI's ``SimpleTokenizer`` on the package's own vocabulary file."""
    return simple_tokenizer_module().SimpleTokenizer(str(real_vocab()))


def clip_model_module() -> ModuleType:
    """OpenAI's ``clip/model.py`` (``CLIP``, ``build_model``, ...), loaded by file path."""
    return _load("model.py")


def openai_tokenize(texts: list[str], context_length: int = 77) -> list[list[int]]:
    """``clip.tokenize(texts, truncate=True)`` redone without padding: SOT + ids + EOT, first 77 with EOT last.

    ``clip/clip.py`` imports torchvision, so its few lines of truncation are restated here.
    """
    tok = simple_tokenizer()
    sot, eot = tok.encoder["<|startoftext|>"], tok.encoder["<|endoftext|>"]
    out = []
    for text in texts:
        ids = [sot, *tok.encode(text), eot]
        if len(ids) > context_length:
            ids = ids[:context_length]
            ids[-1] = eot
        out.append(ids)
    return out
