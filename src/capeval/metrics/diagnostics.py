"""Caption-quality diagnostics of PAC-S++ (Sarto et al. 2024, Sec. 5.5 and Table 9): the numbers
that reveal reward hacking in SCST (repetitions, captions cut off mid-phrase).

Candidate-only: no references, no images. Captions are PTB-tokenised, lower-cased and
stripped of punctuation (as every capeval text metric; ``tokenize=False`` splits on
whitespace instead). With ``w_1 ... w_L`` the words of one caption:

- ``rep-n`` (n = 1..4): ``#n-grams - #distinct n-grams = max(L-n+1, 0) - |{(w_i..w_i+n-1)}|``
  per caption; system = mean over captions. Range [0, inf), lower is better. The journal
  calls it "the average number of repeated n-grams"; aimagelab/pacscore (the authors'
  released code: ``compute_metrics.py``, ``evaluation/``) has no implementation, so this
  is the definition, e.g. ``a dog and a dog`` has rep-1 = 5 - 3 = 2, rep-2 = 4 - 3 = 1.
- ``incorrect``: 100 when the last word cannot end an English sentence, else 0; system =
  mean, i.e. the percentage of such captions (Table 9's "%Incorrect"). Decided from the
  spaCy POS tag (``en_core_web_sm``, the spice extra) of the last word tagged in its
  caption: prepositions and subordinating conjunctions (``IN``), ``to`` (``TO``),
  coordinating conjunctions (``CC``), determiners (``DT``, ``PDT``, ``WDT``) and
  possessive determiners (``PRP$``, ``WP$``). An empty caption counts as incorrect.
  Range [0, 100], lower is better.
- ``length``: words per caption; system = mean. ``vocab``: system = number of distinct
  words over all captions (a corpus size, not a mean); items = distinct words of each caption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from capeval.errors import InputError
from capeval.io.inputs import normalize_candidates
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

#: PTB tags of a last word that leaves a caption unfinished (see the module docs)
BAD_LAST_TAGS = frozenset({"IN", "TO", "CC", "DT", "PDT", "WDT", "PRP$", "WP$"})
DEFAULT_SPACY_MODEL = "en_core_web_sm"



def repeated_ngrams(words: Sequence[str], n: int) -> int:
    """Number of n-grams minus number of distinct n-grams of one word sequence (>= 0)."""
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(grams) - len(set(grams))


def load_tagger(name: str = DEFAULT_SPACY_MODEL) -> Any:
    """A spaCy pipeline with its tagger (parser, NER, lemmatizer excluded), loaded once per process."""
    from capeval.models.spacy_pipelines import load_pipeline

    return load_pipeline(name, "the 'incorrect' diagnostic (POS tags)",
                         exclude=["ner", "parser", "lemmatizer", "senter"])


def last_word_tags(captions: Sequence[Sequence[str]], spacy_model: str = DEFAULT_SPACY_MODEL,
                   batch_size: int = 256) -> list[str | None]:
    """PTB tag of the last word of each pre-tokenised caption, tagged in context (None: empty)."""
    from spacy.tokens import Doc

    nlp = load_tagger(spacy_model)
    out: list[str | None] = [None] * len(captions)
    todo = [k for k, words in enumerate(captions) if words]
    docs = (Doc(nlp.vocab, words=list(captions[k])) for k in todo)
    for k, doc in zip(todo, nlp.pipe(docs, batch_size=batch_size)):
        out[k] = doc[-1].tag_
    return out


class Diagnostics(ScorerBase):
    """rep-1..4, incorrect, length, vocab: caption-quality diagnostics (see the module docs)."""

    produces: ClassVar[tuple[str, ...]] = ("rep-1", "rep-2", "rep-3", "rep-4", "incorrect", "length", "vocab")

    def __init__(self, metrics: Sequence[str] | None = None, tokenize: bool = True,
                 spacy_model: str = DEFAULT_SPACY_MODEL, batch_size: int = 256):
        self.metrics = self._select(metrics)
        self.tokenize = tokenize
        self.spacy_model = spacy_model
        self.batch_size = batch_size
        if "incorrect" in self.metrics:
            load_tagger(spacy_model)  # at build time, so that a missing model fails before scoring

    def words(self, captions: Sequence[str]) -> list[list[str]]:
        """The words each diagnostic counts (PTB-tokenised or whitespace-split)."""
        if self.tokenize:
            from capeval.tokenize import ptb_tokenize_batch

            return [t.split() for t in ptb_tokenize_batch(captions)]
        return [c.lower().split() for c in captions]

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, progress: bool | None = False, **_: Any) -> Report:
        """Diagnostics of ``{id: caption}``; ``references`` are accepted and ignored."""
        cands = normalize_candidates(candidates)
        ids = list(cands)
        words = self.words([cands[i] for i in ids])
        sig = {"tok": "ptb" if self.tokenize else "whitespace"}
        results: list[MetricResult] = []
        for m in self.metrics:
            if m.startswith("rep-"):
                n = int(m[4:])
                items = [float(repeated_ngrams(w, n)) for w in words]
                results.append(_mean_result(m, ids, items, Signature.build(m, n=n, **sig)))
            elif m == "length":
                results.append(_mean_result(m, ids, [float(len(w)) for w in words], Signature.build(m, **sig)))
            elif m == "vocab":
                items = dict(zip(ids, (float(len(set(w))) for w in words)))
                total = len({x for w in words for x in w})
                results.append(MetricResult(m, float(total), items, Signature.build(m, **sig)))
            elif m == "incorrect":
                tags = last_word_tags(words, self.spacy_model, self.batch_size)
                items = [0.0 if t is not None and t not in BAD_LAST_TAGS else 100.0 for t in tags]
                extras = {"last_tag": {i: (t or "") for i, t in zip(ids, tags)}}
                sig_m = Signature.build(m, spacy_model=self.spacy_model, tags="+".join(sorted(BAD_LAST_TAGS)), **sig)
                results.append(_mean_result(m, ids, items, sig_m, extras))
            else:  # pragma: no cover - _select refuses anything else
                raise InputError(f"unknown diagnostic {m!r}")
        return Report(results)


def _mean_result(metric: str, ids: list[str], items: list[float], sig: Signature,
                 extras: Mapping[str, Any] | None = None) -> MetricResult:
    return MetricResult(metric, sum(items) / len(items), dict(zip(ids, items)), sig, extras or {})
