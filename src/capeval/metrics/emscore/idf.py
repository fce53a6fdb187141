"""Which IDF table an EMScore call uses: the option's choices and the corpus tables.

The official ``EMScorer.score`` takes its IDF corpus from the references whenever they are
passed (for the reference-free part too), else from the candidates; EMScore's VATEX-EVAL and
ActivityNet-FOIL scripts use the training captions as a fixed corpus. Formula:
:func:`capeval.metrics.emscore.formulas.compute_idf`.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

from capeval.errors import InputError
from capeval.metrics.emscore import formulas as em

#: ``idf=`` values besides True/False and a list of sentences
IDF_CHOICES = ("auto", "candidates", "references", "none")

# (backbone, prefix, corpus sha256) -> table: a benchmark scores several settings with one
# corpus of hundreds of thousands of sentences
_CORPUS_TABLES: dict[tuple[Any, str, str], em.Idf] = {}


def check_idf(idf: Any) -> str | tuple[str, ...]:
    """Normalise the ``idf`` option: one of :data:`IDF_CHOICES`, or a tuple of corpus sentences."""
    if idf is True or idf is False:
        return "auto" if idf else "none"
    if isinstance(idf, str):
        key = idf.strip().lower()
        if key in ("true", "yes"):
            key = "auto"
        if key in ("false", "no"):
            key = "none"
        if key not in IDF_CHOICES:
            raise InputError(f"idf must be one of {list(IDF_CHOICES)}, True/False or a list of sentences, got {idf!r}")
        return key
    if isinstance(idf, Sequence) and all(isinstance(s, str) for s in idf):
        if not idf:
            raise InputError("idf corpus is empty")
        return tuple(idf)
    raise InputError(f"idf must be True/False, one of {list(IDF_CHOICES)} or a list of sentences")


def idf_table(source: str, corpus_ids: list[list[int]], context_length: int) -> tuple[em.Idf, str]:
    """The table of one call from its own sentences' token ids, and its signature text."""
    if source == "none":
        return em.Idf.uniform(), "none"
    if not corpus_ids:
        return em.Idf.uniform(), "none(empty corpus)"
    idf = em.compute_idf(corpus_ids, eot_id=corpus_ids[0][-1], pad_id=0, context_length=context_length)
    return idf, f"{source}(n={len(corpus_ids)})"


def corpus_idf(backbone: Any, prefix: str, corpus: tuple[str, ...],
               tokenize: Callable[[list[str]], tuple[dict[str, list[int]], set[str]]]) -> tuple[em.Idf, str]:
    """The table of a fixed corpus (cached per backbone, prefix and corpus), and its signature text."""
    digest = hashlib.sha256("\n".join(corpus).encode("utf-8")).hexdigest()
    key = (getattr(backbone, "signature_hash", id(backbone)), prefix, digest)
    if key not in _CORPUS_TABLES:
        texts = [prefix + s for s in corpus]
        tokenized, _ = tokenize(list(dict.fromkeys(texts)))
        corpus_ids = [tokenized[t] for t in texts]
        idf = em.compute_idf(corpus_ids, eot_id=corpus_ids[0][-1], pad_id=0, context_length=backbone.context_length)
        while len(_CORPUS_TABLES) >= 4:
            _CORPUS_TABLES.pop(next(iter(_CORPUS_TABLES)))
        _CORPUS_TABLES[key] = idf
    return _CORPUS_TABLES[key], f"corpus(n={len(corpus)},sha={digest[:12]})"
