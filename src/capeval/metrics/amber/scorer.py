"""AMBER (Wang et al. 2023, "An LLM-free Multi-dimensional Benchmark for MLLMs Hallucination
Evaluation", arXiv:2311.07397) as its ``inference.py`` (junyangwang0410/AMBER@534babf) scores
a model's responses.

Candidates are ``{AMBER id: response}`` (ids 1..1004: image descriptions; 1005..15220: yes/no
answers), read from AMBER's annotation folder ``-O amber.annotations=DIR``. Metrics, system
values in percent rounded to one decimal as the script prints them:

- generative (:mod:`capeval.metrics.amber.generative`): ``amber-chair`` (lower is better),
  ``amber-cover`` (higher), ``amber-hal`` (lower), ``amber-cog`` (lower); per item the same
  ratio for the one response (CHAIR 0 without nouns), unrounded;
- discriminative (:mod:`capeval.metrics.amber.discriminative`): ``amber-accuracy``,
  ``amber-precision``, ``amber-recall``, ``amber-f1`` (higher is better; "No" is the positive
  class); per item 100 for a correct answer, else 0 (accuracy; precision: the items answered
  "No"; recall: the ``no`` questions; other items NaN; F1: NaN), the dimensions in the extras.

Each family scores the ids of its kind; an id of the other kind is an error unless metrics of
both families are asked for (the script's ``--evaluation_type a``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from capeval.errors import InputError
from capeval.io.inputs import normalize_candidates
from capeval.metrics.amber import discriminative as disc
from capeval.metrics.amber.annotations import label
from capeval.metrics.amber.generative import THRESHOLD, VARIANTS, Totals, judge
from capeval.metrics.amber.nouns import SPACY_MODEL, Tools, resolve
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

GENERATIVE = ("amber-chair", "amber-cover", "amber-hal", "amber-cog")
DISCRIMINATIVE = ("amber-accuracy", "amber-precision", "amber-recall", "amber-f1")


class Amber(ScorerBase):
    """AMBER's generative and discriminative metrics (see the module docs).

    ``annotations``: AMBER's ``data/`` folder (default: ``<data root>/amber``, where ``capeval
    download amber`` puts it); ``similarity_score``: the similarity a noun must exceed to count
    as an annotated word (0.8); ``variant``: ``official`` (default),
    ``lowercase`` (responses lower-cased before tagging), ``own-word`` (an annotated object named
    by its own word is credited to itself first) or ``lowercase+own-word``; ``rounded``: system
    values of the generative metrics rounded to one decimal as printed (default) or not (the
    discriminative F1 is made of rounded figures either way); ``tokenize``, ``tag``,
    ``lemmatize``, ``similarity``: callables (or ``"module:function"``) replacing NLTK's and
    spaCy's tools; ``spacy_model``: the pipeline of the similarity (``en_core_web_lg``).
    """

    produces: ClassVar[tuple[str, ...]] = GENERATIVE + DISCRIMINATIVE

    def __init__(self, metrics: Sequence[str] | None = None, annotations: str | None = None,
                 similarity_score: float = THRESHOLD, variant: str = "official", rounded: bool = True,
                 tokenize: Callable[[str], Sequence[str]] | None = None,
                 tag: Callable[[list[str]], Sequence[tuple[str, str]]] | None = None,
                 lemmatize: Callable[[str], str] | None = None, similarity: Callable[[str, str], float] | None = None,
                 spacy_model: str = SPACY_MODEL):
        from capeval.metrics.amber.annotations import FILES, load

        self.metrics = self._select(metrics)
        if variant not in VARIANTS:
            raise InputError(f"option amber.variant={variant!r}: expected one of {', '.join(VARIANTS)}")
        if not isinstance(rounded, bool):
            raise InputError(f"option amber.rounded={rounded!r}: expected true or false")
        if not annotations:
            from capeval.paths import data_home

            # where `capeval download amber` puts it
            downloaded = data_home() / "amber"
            if not all((downloaded / name).is_file() for name in FILES):
                raise InputError("amber needs AMBER's annotation folder: -O amber.annotations=DIR (Python: "
                                 "options={'amber': {'annotations': DIR}}) with annotations.json, relation.json, "
                                 "safe_words.txt (the data/ folder of junyangwang0410/AMBER), or `capeval download "
                                 "amber`")
            annotations = str(downloaded)
        self.data = load(annotations)
        self.threshold = float(similarity_score)
        self.variant = variant
        self.rounded = rounded
        self.tools = Tools(resolve(tokenize, "tokenize"), resolve(tag, "tag"), resolve(lemmatize, "lemmatize"),
                           resolve(similarity, "similarity"), spacy_model)
        # the signature names a tool given as "module:function"
        self._named = {k: v for k, v in (("tokenize", tokenize), ("tag", tag), ("lemmatize", lemmatize),
                                         ("similarity", similarity)) if isinstance(v, str)}
        if any(m in GENERATIVE for m in self.metrics):
            self.tools.load()  # a missing tagger or model: one line before any work

    def _kinds(self, ids: list[str]) -> list[tuple[str, int, dict[str, Any]]]:
        gen = any(m in GENERATIVE for m in self.metrics)
        dis = any(m in DISCRIMINATIVE for m in self.metrics)
        out = []
        for item in ids:
            amber_id, entry = self.data.entry(item)
            generative = entry["type"] == "generative"
            if generative and not gen:
                raise InputError(f"candidate {item!r}: AMBER id {amber_id} is a description (generative task); "
                                 "score it with -m amber, or -m amber-all for both kinds", item)
            if not generative and not dis:
                raise InputError(f"candidate {item!r}: AMBER id {amber_id} is a yes/no question "
                                 f"({entry['type']}); score it with -m amber-d, or -m amber-all for both kinds", item)
            out.append((item, amber_id, entry))
        return out

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, progress: bool | None = False, **_: Any) -> Report:
        """AMBER's figures of ``{AMBER id or image name: response}``."""
        cands = normalize_candidates(candidates)
        rows = self._kinds(list(cands))
        out: list[MetricResult] = []
        if any(m in GENERATIVE for m in self.metrics):
            out += self._generative([(item, entry, cands[item]) for item, _, entry in rows
                                     if entry["type"] == "generative"])
        if any(m in DISCRIMINATIVE for m in self.metrics):
            out += self._discriminative([(item, entry, cands[item]) for item, _, entry in rows
                                         if entry["type"] != "generative"])
        return Report(out)

    def _params(self, **more: Any) -> dict[str, Any]:
        return {"annotations": label(self.data.digest), **more}

    def _generative(self, rows: list[tuple[str, dict[str, Any], str]]) -> list[MetricResult]:
        lowercase = self.variant.startswith("lowercase")
        own_first = self.variant.endswith("own-word")
        similar = self.tools.similar(self.threshold)
        totals = Totals()
        per: dict[str, dict[str, float]] = {k: {} for k in ("chair", "cover", "hal", "cog")}
        hallucinated: dict[str, list[str]] = {}
        covered: dict[str, list[str]] = {}
        cognitive: dict[str, list[str]] = {}
        for item, entry, text in rows:
            j = judge(self.tools.nouns(text, lowercase), entry["truth"], entry["hallu"], self.data.association,
                      self.data.vocabulary, self.data.safe_words, similar, own_first)
            totals.add(j)
            per["chair"][item] = 100 * len(j.hallucinated) / len(j.nouns) if j.nouns else 0.0
            per["cover"][item] = 100 * sum(j.covered) / len(j.covered) if j.covered else math.nan
            per["hal"][item] = 100.0 if j.hallucinated else 0.0
            per["cog"][item] = 100 * sum(j.cognitive) / len(j.cognitive) if j.cognitive else math.nan
            hallucinated[item] = list(j.hallucinated)
            covered[item] = [w for w, c in zip(entry["truth"], j.covered) if c]
            cognitive[item] = [w for w, c in zip(entry["hallu"], j.cognitive) if c]
        system = totals.figures(self.rounded)
        extras = {"hallucinated": hallucinated, "covered": covered, "cognitive": cognitive,
                  "counts": {"hallucinated_nouns": totals.chair_score, "nouns": round(totals.chair_num),
                             "covered": totals.cover_score, "objects": round(totals.cover_num),
                             "clean_responses": totals.clean_score, "responses": totals.responses,
                             "cognitive": totals.cog_score, "hallu_objects": round(totals.cog_num)}}
        params = self._params(variant=self.variant, threshold=self.threshold, rounded=self.rounded, versions={**self.tools.versions(), **self._named})
        return [MetricResult(name, system[name[6:]], per[name[6:]], Signature.build(name, **params), extras)
                for name in GENERATIVE if name in self.metrics]

    def _discriminative(self, rows: list[tuple[str, dict[str, Any], str]]) -> list[MetricResult]:
        overall = disc.Counts()
        dims = {d: disc.Counts() for d in ("existence", *disc.ATTRIBUTE, "relation")}
        per: dict[str, dict[str, float]] = {k: {} for k in ("accuracy", "precision", "recall", "f1")}
        for item, entry, text in rows:
            truth = entry["truth"]
            overall.add(truth, text)
            dims[disc.dimension(entry["type"])].add(truth, text)
            right = 100.0 if disc.correct(truth, text) else 0.0
            per["accuracy"][item] = right
            per["precision"][item] = right if text == "No" else math.nan
            per["recall"][item] = right if truth == "no" else math.nan
            per["f1"][item] = math.nan
        system = disc.figures([overall])
        extras = {"dimensions": {
            "existence": disc.figures([dims["existence"]], eps=0.001),
            "attribute": disc.figures([dims[d] for d in disc.ATTRIBUTE]),
            **{d: disc.figures([dims[d]]) for d in (*disc.ATTRIBUTE, "relation")}},
            "questions": len(rows)}
        params = self._params()
        return [MetricResult(name, system[name[6:]], per[name[6:]], Signature.build(name, **params), extras)
                for name in DISCRIMINATIVE if name in self.metrics]

