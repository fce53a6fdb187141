"""SPICE without Java: parse captions into scene graphs, match their tuples, report F1.

SPICE (Anderson et al., ECCV 2016) parses each caption into a scene graph (objects,
attributes, relations), merges the graphs of an item's references into one, and scores
the candidate's tuples against it: precision, recall and F1 of matching tuples (exact or
WordNet-synonym match). Range [0, 1] (SPICE's non-exclusive matching can, rarely, give an
item F1 above 1: see :mod:`.tuples`); higher is better. As pycocoevalcap computes it:
captions are PTB-tokenised first (lower-cased, punctuation removed), the system score is
the mean of the per-item F1 ("All" tuples), and the per-category breakdown
(``-subset``: Object, Attribute, Relation, Cardinality, Color, Size) comes with each item.

The parser (:mod:`capeval.metrics.spice.parser`, spaCy-based) stands in for SPICE's CoreNLP
3.6.0 dependency parse + rules; everything after it (graphs, merging, matching,
statistics) follows SPICE 1.0's Java (:mod:`.graph`, :mod:`.tuples`). For the official jar
itself see :class:`capeval.metrics.spice.java.SpiceJava` (``spice-java``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from capeval.errors import InputError
from capeval.metrics.spice.graph import SynsetLookup, build_graph
from capeval.metrics.spice.tuples import CATEGORIES, Evaluation, evaluate, macro_average
from capeval.metrics.text import TextChunk, TextScorer
from capeval.ranges import check_option
from capeval.result import MetricResult, Signature

#: the score names of SPICE's JSON output, "All" first
SCORE_NAMES = ("All", *CATEGORIES)

ProposedTuples = list[tuple[str, ...]]


def result_from_evaluations(metric: str, ids: list[str], per_item: list[Mapping[str, Evaluation]],
                            signature: Signature, errors: Mapping[str, str] | None = None) -> MetricResult:
    """The :class:`MetricResult` of SPICE scores, shared by ``spice`` and ``spice-java``.

    ``errors``: items left out (id -> reason), listed in ``extras["errors"]`` and ``skipped``.

    ``items``: per-item F1 of all tuples; ``system``: their mean (pycocoevalcap's
    ``np.mean`` of ``All.f``); ``extras``: ``precision``/``recall`` per item, ``scores``
    (per item, every category's ``tp fp fn f pr re numImages`` as SPICE's JSON holds them;
    NaN for a category without reference tuples) and ``averages`` (SPICE's report: means
    over the items without NaN, counts summed).
    """
    f1 = [float(ev["All"].f) for ev in per_item]
    system = float(np.mean(np.array(f1, dtype=np.float64))) if f1 else float("nan")
    extras: dict[str, Any] = {
        "precision": {i: float(ev["All"].pr) for i, ev in zip(ids, per_item)},
        "recall": {i: float(ev["All"].re) for i, ev in zip(ids, per_item)},
        "scores": {i: {name: ev[name].to_dict() for name in SCORE_NAMES if name in ev} for i, ev in zip(ids, per_item)},
        "averages": {name: macro_average(ev[name] for ev in per_item).to_dict() for name in SCORE_NAMES},
    }
    if errors:
        extras["errors"] = dict(errors)
    return MetricResult(metric, system, dict(zip(ids, f1)), signature, extras, skipped=tuple(errors or ()))


class Spice(TextScorer):
    """SPICE 1.0 in Python: per-item F1 of scene-graph tuples; system score = mean F1.

    Options: ``tokenizer`` (``"ptb"`` as pycocoevalcap, or ``"none"``); ``spacy_model`` goes
    to the parser; ``synsets`` (SPICE's default; ``False`` is ``-noSynsets``: exact
    matching only); ``merge_similar`` (merge similar concepts while building graphs; None:
    same as ``synsets``, as in SPICE where ``-noSynsets`` turns off both); ``cache_dir``:
    where METEOR 1.5's WordNet index lives (shared with ``meteor``); ``chunk_size`` and
    ``workers``: the text pipeline's chunks and forked worker processes (each chunk's
    distinct captions are parsed once); ``parser``: a ready parser object with
    ``parse_many(captions)`` (tests, custom parsers); ``synonyms``: a ready
    ``word -> synset ids`` lookup instead of METEOR's WordNet tables; ``max_words``: an item
    whose candidate or any reference has more (PTB) tokens is not parsed but left out with
    its reason (``extras["errors"]``, ``skipped``) — parsing grows faster than linearly with a
    caption's length (a 100,000-word caption takes minutes); the official pipeline has no limit,
    and the default, 10,000, is far above any caption of the benchmarks, so published numbers
    never meet it; ``None``: no limit.
    """


    produces: ClassVar[tuple[str, ...]] = ("spice",)

    def __init__(
        self,
        metrics: Sequence[str] | None = None,
        tokenizer: str = "ptb",
        spacy_model: str | None = None,
        synsets: bool = True,
        merge_similar: bool | None = None,
        cache_dir: str | None = None,
        chunk_size: int | None = None,
        workers: int | None = None,
        parser: Any = None,
        synonyms: SynsetLookup | None = None,
        max_words: int | None = 10_000,
    ):
        check_option("spice", "max_words", max_words)  # declared in capeval.ranges
        self.max_words = max_words
        super().__init__(metrics, tokenizer, chunk_size, workers)
        self.synsets = bool(synsets)
        self.merge_similar = self.synsets if merge_similar is None else bool(merge_similar)
        if parser is not None and not callable(getattr(parser, "parse_many", None)):
            raise InputError(f"spice: parser must have a parse_many(captions) method, got {type(parser).__name__}")
        if synonyms is not None and not callable(synonyms):
            raise InputError(f"spice: synonyms must map a word to its synset ids, got {type(synonyms).__name__}")
        if synonyms is None:
            from capeval.metrics.spice.wordnet import WordNetSynsets

            synonyms = WordNetSynsets(cache_dir)
        self.synonyms = synonyms
        self.parser = parser if parser is not None else _default_parser(spacy_model)

    # -- parsing ------------------------------------------------------------------
    def parse(self, captions: Sequence[str]) -> dict[str, ProposedTuples]:
        """Caption -> proposed tuples, each distinct caption parsed once (blank ones: none)."""
        unique = list(dict.fromkeys(c for c in captions if c.strip()))
        parsed = list(self.parser.parse_many(unique)) if unique else []
        if len(parsed) != len(unique):
            raise InputError(f"the SPICE parser returned {len(parsed)} results for {len(unique)} captions")
        out: dict[str, ProposedTuples] = {c: [] for c in captions if not c.strip()}
        out.update({c: [tuple(t) for t in tuples] for c, tuples in zip(unique, parsed)})
        return out

    def score_tuples(self, candidate: Sequence[Sequence[str]],
                     references: Sequence[Sequence[Sequence[str]]]) -> dict[str, Evaluation]:
        """SPICE of one item from proposed tuples: the candidate's graph against the graph
        of all references merged; ``{"All": ..., "Object": ..., ...}``."""
        cand = build_graph([candidate], self.synonyms, self.merge_similar)
        ref = build_graph(references, self.synonyms, self.merge_similar)
        return evaluate(cand.tuples(), ref.tuples(), self.synsets)

    # -- TextScorer streaming steps ---------------------------------------------------
    def too_long(self, hyp: str, refs: Sequence[str]) -> str | None:
        """Why an item (tokenised) is not parsed, or None: a caption over ``max_words``."""
        if self.max_words is None:
            return None
        for role, text in (("candidate", hyp), *(("reference", r) for r in refs)):
            words = len(text.split())
            if words > self.max_words:
                return (f"{role} of {words} words is longer than spice max_words={self.max_words} "
                        f"(-O spice.max_words=N raises it)")
        return None

    def score_chunk(self, chunk: TextChunk, corpus: Any) -> list[dict[str, Evaluation] | str]:
        """Every item's SPICE scores (all categories) for one chunk of tokenised captions; an
        item over ``max_words``: the reason it is left out."""
        reasons = [self.too_long(h, rs) for h, rs in zip(chunk.hyps, chunk.refs)]
        kept = [(h, rs) for h, rs, why in zip(chunk.hyps, chunk.refs, reasons) if why is None]
        parsed = self.parse([c for h, rs in kept for c in (h, *rs)])
        return [self.score_tuples(parsed[h], [parsed[r] for r in rs]) if why is None else why
                for h, rs, why in zip(chunk.hyps, chunk.refs, reasons)]

    def merge(self, ids: list[str], parts: list[Any], nrefs: str) -> list[MetricResult]:
        per_item = [ev for part in parts for ev in part]
        errors = {i: ev for i, ev in zip(ids, per_item) if isinstance(ev, str)}
        kept = [(i, ev) for i, ev in zip(ids, per_item) if not isinstance(ev, str)]
        return [result_from_evaluations("spice", [i for i, _ in kept], [ev for _, ev in kept],
                                        self.signature(nrefs), errors)]

    def signature(self, nrefs: str) -> Signature:
        """Everything the number depends on: tokenizer, references, parser and its model,
        the synonym resource, matching and merging."""
        return Signature.build(
            "spice", **self.signature_params(nrefs), **parser_fields(self.parser),
            synonyms=getattr(self.synonyms, "fingerprint", "custom"),
            synsets="yes" if self.synsets else "no", merge="yes" if self.merge_similar else "no",
            subsets="yes", max_words=self.max_words if self.max_words is not None else "none",
            version_spice="1.0-py",
        )


def _default_parser(spacy_model: str | None) -> Any:
    from capeval.metrics.spice.parser import SceneGraphParser

    # the text pipeline's worker processes parallelise; the parser gets only its model
    if spacy_model is None:
        return SceneGraphParser()
    if "spacy_model" not in inspect.signature(SceneGraphParser).parameters:
        raise InputError("spice: this SPICE parser takes no spacy_model option")
    return SceneGraphParser(spacy_model=spacy_model)


def parser_fields(parser: Any) -> dict[str, Any]:
    """Signature fields describing the parser: its ``signature_fields()`` when it has one,
    else its class name, ``version`` and ``spacy_model`` attributes when present."""
    fields = getattr(parser, "signature_fields", None)
    if callable(fields):
        return dict(fields())
    name = type(parser).__name__
    version = getattr(parser, "version", None)
    out: dict[str, Any] = {"parser": f"{name}-{version}" if version else name}
    for attr in ("spacy_model", "spacy_version"):
        value = getattr(parser, attr, None)
        if value is not None:
            out[attr] = value
    return out
