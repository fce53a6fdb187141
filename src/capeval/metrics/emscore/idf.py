"""Which IDF table an EMScore call uses: the option's choices and the corpus tables.

The official ``EMScorer.score`` takes its IDF corpus from the references whenever they are
passed (for the reference-free part too), else from the candidates; EMScore's VATEX-EVAL and
ActivityNet-FOIL scripts use the training captions as a fixed corpus. Formula:
:func:`capeval.metrics.emscore.formulas.compute_idf`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
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


# -- corpus statistics counted in parts (the Ray engine's first pass) ----------------------
def idf_source(mode: str | tuple[str, ...], have_refs: bool) -> str | None:
    """The corpus a call's table comes from (``references``/``candidates``), or None when
    the table does not depend on the call (``none``, a fixed corpus)."""
    if isinstance(mode, tuple) or mode == "none":
        return None
    return mode if mode != "auto" else ("references" if have_refs else "candidates")


def count_part(source: str, ids: list[str], cand_text: dict[str, str], ref_text: dict[str, list[str]],
               tok_ids: dict[str, list[int]], context_length: int) -> dict[str, Any]:
    """Counts of one part of the corpus: ``{"n", "df", "eot"}``, added by :func:`add_counts`."""
    if source == "references":
        corpus_ids = [tok_ids[r] for i in ids for r in ref_text[i]]
    else:
        corpus_ids = [tok_ids[cand_text[i]] for i in ids]
    df = em.document_counts(corpus_ids, pad_id=0, context_length=context_length)
    return {"source": source, "n": len(corpus_ids), "df": df, "eot": corpus_ids[0][-1] if corpus_ids else None}


def add_counts(total: dict[str, Any] | None, part: dict[str, Any]) -> dict[str, Any]:
    """``total`` plus the next part, in corpus order (the df keys keep their first-seen order)."""
    if total is None:
        return {"source": part["source"], "n": part["n"], "df": Counter(part["df"]), "eot": part["eot"]}
    total["n"] += part["n"]
    total["df"].update(part["df"])
    if total["eot"] is None:
        total["eot"] = part["eot"]
    return total


def table_from_counts(counts: dict[str, Any]) -> tuple[em.Idf, str]:
    """The table and signature text a single call over the whole corpus would have built."""
    if counts["n"] == 0:
        return em.Idf.uniform(), "none(empty corpus)"
    return em.idf_from_counts(counts["n"], counts["df"], counts["eot"]), f"{counts['source']}(n={counts['n']})"


def scorer_counts(scorer: Any, candidates: dict[str, str], references: dict[str, list[str]] | None
                  ) -> dict[str, Any] | None:
    """The counts of one part of a call's corpus for an EMScore-family ``scorer`` (None when
    its table does not depend on the call); :meth:`EMScore.use_idf` takes the merged table."""
    source = idf_source(scorer.idf, references is not None)
    if source is None:
        return None
    ids = list(candidates)
    cand_text = {i: scorer.prefix + candidates[i] for i in ids}
    ref_text = {i: [scorer.prefix + r for r in references[i]] for i in ids} if references is not None else {}
    texts = list(cand_text.values()) if source == "candidates" else [r for rs in ref_text.values() for r in rs]
    tok_ids, _ = scorer._tokenize(list(dict.fromkeys(texts)))
    return count_part(source, ids, cand_text, ref_text, tok_ids, scorer.backbone.context_length)
