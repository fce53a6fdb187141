"""CAPTURE (Dong et al. 2024, "Benchmarking and Improving Detail Image Caption"), as the
authors' package capture-metric 0.1.13 computes it.

Pipeline per caption (candidate and each reference): nltk ``sent_tokenize``; each sentence
through the FACTUAL parser (``lizhuang144/flan-t5-base-VG-factual-sg``, beam 5, output 128 -
the same :class:`~capeval.metrics.hice.factual.FactualParser` as HICE-S, each caption's longest
sentence cut by one token as FactualSceneGraph 0.7.3's ``_parse_batch`` cuts it:
:mod:`capeval.metrics.capture.parser_cut`, option ``parser_cut``); objects, attributes
and relations (:mod:`capeval.metrics.capture.graphs`) filtered by the package's stop-word list
and the caption's nouns (nltk ``word_tokenize`` + ``pos_tag``); then the exact / WordNet-synonym /
Sentence-BERT (``sentence-transformers/all-mpnet-base-v2``) matching and the weighted F-score
(:mod:`capeval.metrics.capture.matching`). Item score: mean over references; system: mean of items.
Range [0, 1]; higher is better.

Needs nltk's ``punkt_tab`` and ``averaged_perceptron_tagger_eng`` data (``python -m
nltk.downloader punkt_tab averaged_perceptron_tagger_eng``) and WordNet 3.0
(:mod:`capeval.metrics.capture.wordnet`: Debian's ``wordnet-base`` works offline).
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from capeval.errors import InputError, ResourceError
from capeval.io.inputs import prepare_text_inputs
from capeval.metrics.capture.graphs import Parsed, parse_caption
from capeval.metrics.capture.matching import Matcher
from capeval.metrics.capture.parser_cut import PARSER_CUTS, package_input_lens
from capeval.progress import make_progress
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

SBERT = "sentence-transformers/all-mpnet-base-v2"
VERSION = "1"  # bump when graphs / matching change
NLTK_DATA = (("tokenizers/punkt_tab", "punkt_tab"), ("taggers/averaged_perceptron_tagger_eng",
                                                      "averaged_perceptron_tagger_eng"))


@lru_cache(maxsize=1)
def stop_word_list() -> frozenset[str]:
    """capture-metric 0.1.13's ``stop_words_list`` (317 words; ``stop_words.py``)."""
    text = resources.files("capeval").joinpath("data/capture/stop_words.txt").read_text(encoding="utf-8")
    return frozenset(w for w in text.splitlines() if w)


def check_nltk_data() -> None:
    """One-line :class:`ResourceError` naming the nltk packages that are missing."""
    import nltk

    missing = []
    for path, package in NLTK_DATA:
        try:
            nltk.data.find(path)
        except LookupError:
            missing.append(package)
    if missing:
        raise ResourceError(f"capture: nltk data {', '.join(missing)} not on this machine: run once online "
                            f"`python -m nltk.downloader {' '.join(missing)}`")


def nltk_sentences(text: str) -> list[str]:
    """nltk's Punkt sentences (the package's ``sent_tokenize``)."""
    import nltk

    return nltk.sent_tokenize(text)


def nltk_nouns(text: str, lemmatize: Callable[[str, str], str]) -> list[str]:
    """Lemmas of the tokens nltk's tagger tags ``NN*`` (the package's ``get_all_lemmatized_nouns``)."""
    import nltk

    return [lemmatize(tok, "n") for tok, tag in nltk.pos_tag(nltk.word_tokenize(text)) if tag.startswith("NN")]


def load_sbert(name: str, device: str, revision: str | None = None) -> Any:
    """``SentenceTransformer(name)`` (a hub name or folder); a one-line error when absent."""
    from capeval._optional import require

    st = require("sentence_transformers", extra="capture", purpose="capture")
    try:
        return st.SentenceTransformer(name, device=device, revision=revision)
    except OSError:
        raise ResourceError(f"capture: the Sentence-BERT model {name} is not on this machine: download it once "
                            "online (it is then read from the Hugging Face cache) or give a folder") from None


class CaptureScore(ScorerBase):
    """CAPTURE; item range [0, 1], higher is better. Options as ``CAPTURE(...)`` of the package."""

    produces: ClassVar[tuple[str, ...]] = ("capture",)

    def __init__(self, metrics: Sequence[str] | None = None, parser: Any = "factual", parser_model: str | None = None,
                 sbert: Any = SBERT, sbert_revision: str | None = None, alpha: float = 0.5, beta: float = 0.5,
                 gamma: float = 0.2, synonym_matching: bool = True, soft_matching: bool = True,
                 stop_words: bool = True, eps: float = 1e-6, batch_size: int = 64, device: str = "cpu",
                 sentences: Callable[[str], list[str]] | None = None,
                 nouns: Callable[[str, Callable[[str, str], str]], list[str]] | None = None,
                 checkpoint_dir: str | os.PathLike[str] | None = None, parser_cut: str | None = None):
        self.metrics = self._select(metrics)
        if abs(alpha + beta - 1.0) > 1e-12:  # the package asserts alpha + beta == 1
            raise InputError(f"capture options alpha={alpha!r}, beta={beta!r}: alpha + beta must be 1")
        from capeval.metrics.capture.wordnet import ensure_wordnet

        self.wordnet = ensure_wordnet()
        if sentences is None or nouns is None:
            check_nltk_data()
        self.sentences, self.nouns = sentences or nltk_sentences, nouns or nltk_nouns
        self.stop_words = set(stop_word_list() if stop_words else ())
        self.use_stop_words, self.batch_size = bool(stop_words), int(batch_size)
        self.parser_cut = self._check_cut(parser_cut, parser)  # before any model loads
        if isinstance(parser, str):
            if parser.strip().lower() != "factual":
                raise InputError(f"capture option parser={parser!r}: use factual or a parser object")
            from capeval.metrics.hice.factual import DEFAULT_CHECKPOINT, FactualParser

            parser = FactualParser(parser_model or DEFAULT_CHECKPOINT, device=device, checkpoint_dir=checkpoint_dir)
        self.parser = parser
        self.sbert_name = sbert if isinstance(sbert, str) else getattr(sbert, "name_or_path", type(sbert).__name__)
        self.sbert = (load_sbert(sbert, device, sbert_revision) if isinstance(sbert, str) else sbert) \
            if soft_matching else None
        self._emb: dict[str, np.ndarray] = {}
        self.matcher = Matcher(alpha, beta, gamma, bool(synonym_matching), bool(soft_matching), eps, self.encode)
        from nltk.stem import WordNetLemmatizer

        self._wnl = WordNetLemmatizer()

    @staticmethod
    def _check_cut(cut: str | None, parser: Any) -> str:
        """``parser_cut``: ``package`` (the default for the FACTUAL parser), ``full``, or ``n/a``
        (the default for a parser object that is not a FactualParser: it gets sentences whole).
        ``parser`` is the option as given (``"factual"``) or the parser object."""
        from capeval.metrics.hice.factual import FactualParser

        factual = isinstance(parser, (str, FactualParser))  # a string other than factual is refused later
        if cut is None:
            return "package" if factual else "n/a"
        value = cut.strip().lower() if isinstance(cut, str) else cut
        if value not in PARSER_CUTS:
            raise InputError(f"capture option parser_cut={cut!r}: expected one of {', '.join(PARSER_CUTS)} "
                             "(package: each caption's longest sentence cut by one token as capture-metric 0.1.13 "
                             "cuts it; full: every sentence whole)")
        if value == "package" and not factual:
            raise InputError(f"capture option parser_cut='package': needs the FACTUAL parser's tokenizer; the parser "
                             f"object {type(parser).__name__} gets its sentences whole (use parser_cut='full')")
        return value

    @classmethod
    def preflight(cls, options: Mapping[str, Any]) -> None:
        """Before any model loads: nltk's data and the default FACTUAL model must be on this machine."""
        parser = options.get("parser", "factual")
        cls._check_cut(options.get("parser_cut"), parser)
        if options.get("sentences") is None or options.get("nouns") is None:
            check_nltk_data()
        if isinstance(parser, str) and parser.strip().lower() == "factual":
            from capeval.metrics.hice.factual import DEFAULT_CHECKPOINT, check_available

            name = options.get("parser_model") or DEFAULT_CHECKPOINT
            try:
                check_available(name, options.get("checkpoint_dir"))
            except ResourceError:
                raise ResourceError(f"capture: the FACTUAL model {name} is not on this machine: run `capeval download "
                                    "factual` once online, or give -O capture.parser_model=FOLDER") from None

    def lemmatize(self, word: str, pos: str) -> str:
        """nltk's WordNet lemma of ``word`` as part of speech ``pos`` (``n`` or ``a``)."""
        return self._wnl.lemmatize(word, pos=pos)

    def encode(self, phrases: list[str]) -> np.ndarray:
        """L2-normalised Sentence-BERT embeddings (each distinct phrase encoded once per scorer)."""
        todo = [p for p in dict.fromkeys(phrases) if p not in self._emb]
        if todo:
            feats = np.asarray(self.sbert.encode(todo, batch_size=self.batch_size, show_progress_bar=False))
            feats = feats / np.sqrt(np.sum(feats ** 2, axis=1, keepdims=True))
            self._emb.update(zip(todo, feats))
        return np.stack([self._emb[p] for p in phrases])

    def parse(self, texts: Sequence[str]) -> dict[str, Parsed]:
        """CAPTURE's elements of each distinct text (sentences parsed together, each once)."""
        split = {t: self.sentences(t) for t in dict.fromkeys(texts)}
        if self.parser_cut != "package":
            unique = list(dict.fromkeys(s for v in split.values() for s in v))
            outputs = dict(zip(unique, self.parser.generate(unique))) if unique else {}
            return {t: parse_caption([outputs[s] for s in sents], self.nouns(t, self.lemmatize), self.lemmatize,
                                     self.stop_words) for t, sents in split.items()}
        # the package parses each caption's sentences in one call: its cut depends on the caption
        lens = {t: package_input_lens(self.parser.tokenizer, sents, self.parser.max_input_len)
                for t, sents in split.items()}
        keys = list(dict.fromkeys((s, n) for t, sents in split.items() for s, n in zip(sents, lens[t])))
        got = self.parser.generate([s for s, _ in keys], input_lens=[n for _, n in keys]) if keys else []
        cut_outputs = dict(zip(keys, got))
        return {t: parse_caption([cut_outputs[(s, n)] for s, n in zip(sents, lens[t])], self.nouns(t, self.lemmatize),
                                 self.lemmatize, self.stop_words) for t, sents in split.items()}

    def prefetch(self, graphs: Sequence[Parsed]) -> None:
        """Embed every element of ``graphs`` that soft matching may compare, in batches of
        ``batch_size`` (each distinct phrase once per scorer: the speed-up over the package,
        which re-embeds the unmatched phrases of every caption pair)."""
        if self.matcher.soft_matching:
            phrases = [p for g in graphs for p in (*g[0], *(a for v in g[1].values() for a in v),
                                                    *(" ".join(r) for r in g[2]))]
            if phrases:
                self.encode(phrases)

    def score_parsed(self, refs: Sequence[Parsed], cand: Parsed) -> tuple[float, list[tuple[float, ...]]]:
        """Item score (mean CAPTURE over references) and each reference's full F-score tuple."""
        rows = [self.matcher.f_scores(r, cand) for r in refs]
        return float(np.mean([r[0] for r in rows])), rows

    def signature(self) -> Signature:
        """Parser, its input cut, Sentence-BERT model and weights digest, weights, stages, eps, WordNet."""
        from capeval.metrics.hice.factual import weights_fingerprint

        params: dict[str, Any] = dict(self.parser.signature_fields()) if hasattr(self.parser, "signature_fields") \
            else {"parser": type(self.parser).__name__}
        m = self.matcher
        params.update({"sbert": self.sbert_name if m.soft_matching else "none",
                       "sbert_sha256": weights_fingerprint(self.sbert)[:16] if m.soft_matching else "none",
                       "weights": f"{m.alpha:g},{m.beta:g},{m.gamma:g}", "eps": f"{m.eps:g}",
                       "stages": "exact" + ("+synonym" if m.synonym_matching else "") + ("+soft" if m.soft_matching else ""),
                       "stop_words": self.use_stop_words, "wordnet": "3.0", "parser_cut": self.parser_cut,
                       "capture_version": VERSION})
        return Signature.build("capture", **params)

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}``."""
        cands, refs = prepare_text_inputs(candidates, references, needs_references=True)
        ids = list(cands)
        parsed = self.parse([cands[i] for i in ids] + [r for i in ids for r in refs[i]])
        items: dict[str, float] = {}
        parts: dict[str, dict[str, float]] = {}
        names = ("object_precision", "object_recall", "object_f1", "attribute_precision", "attribute_recall",
                 "attribute_f1", "relation_precision", "relation_recall", "relation_f1")
        self.prefetch(list(parsed.values()))
        with make_progress(len(ids), "capture", progress) as bar:
            for i in ids:
                items[i], rows = self.score_parsed([parsed[r] for r in refs[i]], parsed[cands[i]])
                parts[i] = {n: float(np.mean([row[k + 1] for row in rows])) for k, n in enumerate(names)}
                bar.update(1)
        extras = {"parts": parts, "wordnet_source": self.wordnet}
        return Report([MetricResult("capture", float(np.mean(list(items.values()))), items, self.signature(), extras)])
