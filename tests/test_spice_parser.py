"""SPICE's scene-graph parser without Java: graph orders, CoreNLP collapsing, the enhancer,
SPICE's rules, lemmas, and captions end to end through spaCy.

Oracles: the Java sources (SpiceParser.java, SemanticGraphEnhancer.java,
SimplePronounResolution.java, CoreNLP 3.6's UniversalEnglishGrammaticalStructure /
SemanticGraph / Semgrex); the rule tests run on hand-built graphs in CoreNLP's collapsed
UD v1 form, so they check the rules independently of spaCy. The end-to-end tests need
spaCy and an English model (the ``spice`` extra) and expect the tuples SPICE's patterns
give on CoreNLP's parse of each caption.
"""

from __future__ import annotations

import sys

import pytest

from capeval.errors import MissingDependencyError
from capeval.metrics.spice.collapse import collapse
from capeval.metrics.spice.depgraph import DepGraph, Node, java_order
from capeval.metrics.spice.enhance import enhance, quantificational_modifiers, resolve_pronouns
from capeval.metrics.spice.lemma import Lemmatizer
from capeval.metrics.spice.parser import KNOWN_DIFFERENCES, PARSER_VERSION, SceneGraphParser
from capeval.metrics.spice.rules import proposed_tuples

from _reference import require_module, unavailable


def graph(tokens: str, edges: str, root: int) -> DepGraph:
    """``tokens``: "word/TAG[/lemma] ..." (1-based); ``edges``: "rel gov dep, ..."."""
    nodes = []
    for i, item in enumerate(tokens.split(), start=1):
        word, tag, *lemma = item.split("/")
        nodes.append(Node(i, word, lemma[0] if lemma else word, tag))
    g = DepGraph(nodes)
    for edge in filter(None, (e.strip() for e in edges.split(","))):
        rel, gov, dep = edge.split()
        g.add_edge(int(gov), int(dep), rel)
    g.add_root(root)
    return g


def tuples(g: DepGraph) -> list[list[str]]:
    return proposed_tuples(enhance(g))


# -- graph orders -------------------------------------------------------------------------
def test_java_hash_order_wraps_at_capacity() -> None:
    assert java_order([5, 2, 9]) == [2, 5, 9]
    assert java_order([3, 17], 16) == [17, 3]  # IndexedWord hash = index; bucket = index & 15


RIDING = graph("a/DT man/NN riding/VBG/ride a/DT horse/NN on/IN the/DT beach/NN",
               "det 2 1, acl 2 3, dobj 3 5, det 5 4, nmod:on 3 8, case 8 6, det 8 7", root=2)


def test_semgrex_visits_nodes_in_reverse_postorder() -> None:
    g = graph("a/DT man/NN riding/VBG/ride a/DT horse/NN on/IN the/DT beach/NN",
              "det 2 1, acl 2 3, dobj 3 5, det 5 4, nmod:on 3 8, case 8 6, det 8 7", root=2)
    assert g.topological() == [2, 3, 8, 7, 6, 5, 4, 1]
    g.add_edge(8, 2, "dep")  # a cycle: Semgrex falls back to the vertex set's order
    assert g.topological() == [1, 2, 3, 4, 5, 6, 7, 8]


def test_parent_is_first_node_on_a_path_to_the_root() -> None:
    g = graph("a/DT man/NN riding/VBG/ride a/DT horse/NN", "det 2 1, acl 2 3, dobj 3 5, det 5 4, dep 2 5", 2)
    assert g.parent(5) == 2 and g.parent(4) == 5 and g.parent(2) is None


# -- SPICE's rules on CoreNLP-shaped graphs ------------------------------------------------
def test_acl_and_preposition_predicates() -> None:
    g = graph("a/DT man/NN riding/VBG/ride a/DT horse/NN on/IN the/DT beach/NN",
              "det 2 1, acl 2 3, dobj 3 5, det 5 4, nmod:on 3 8, case 8 6, det 8 7", root=2)
    assert tuples(g) == [["man", "horse", "ride"], ["man", "beach", "ride on"],
                         ["man"], ["beach"], ["horse"]]


def test_subject_predicate_object_and_particles() -> None:
    g = graph("a/DT man/NN is/VBZ/be picking/VBG/pick up/RP a/DT ball/NN",
              "det 2 1, nsubj 4 2, aux 4 3, compound:prt 4 5, dobj 4 7, det 7 6", root=4)
    assert tuples(g)[0] == ["man", "ball", "pick up"]
    # under "be" the particle keeps the separator: " up" (String.format("%s %s", "", ...))
    g = graph("kids/NNS/kid are/VBP/be up/RP trees/NNS/tree", "nsubj 2 1, compound:prt 2 3, dobj 2 4", root=2)
    assert tuples(g)[0] == ["kid", "tree", " up"]


def test_poss_and_agent_objects_add_no_preposition() -> None:
    g = graph("dogs/NNS/dog chased/VBD/chase cats/NNS/cat", "nsubj 2 1, nmod:poss 2 3, nmod:agent 2 3", root=2)
    assert tuples(g)[:2] == [["dog", "cat", "chase"], ["dog", "cat", "chase"]]


def test_copula_with_case_marker_and_mwe() -> None:
    g = graph("a/DT boy/NN is/VBZ/be in/IN front/NN of/IN a/DT house/NN",
              "det 2 1, nsubj 8 2, cop 8 3, case 8 4, mwe 4 5, mwe 4 6, det 8 7", root=8)
    assert tuples(g) == [["boy", "house", "in front of"], ["house"], ["front"], ["boy"]]


def test_copula_predicates() -> None:
    tall = graph("a/DT man/NN is/VBZ/be tall/JJ", "det 2 1, nsubj 4 2, cop 4 3", root=4)
    assert tuples(tall) == [["man", "tall"], ["man", "tall"], ["man"]]  # COPULAR + ADJ_PRED
    rider = graph("the/DT man/NN is/VBZ/be a/DT rider/NN", "det 2 1, nsubj 5 2, cop 5 3, det 5 4", root=5)
    assert tuples(rider) == [["man", "rider"], ["rider"], ["man"]]
    there = graph("there/EX is/VBZ/be a/DT dog/NN", "expl 2 1, nsubj 2 4, det 4 3", root=2)
    assert tuples(there) == [["dog"]]  # predicate "be": no pair


def test_subject_predicate_pair() -> None:
    g = graph("a/DT woman/NN is/VBZ/be smiling/VBG/smile", "det 2 1, nsubj 4 2, aux 4 3", root=4)
    assert tuples(g) == [["woman", "smile"], ["woman"]]


def test_noun_modifiers_possession_and_agent() -> None:
    hat = graph("the/DT man/NN 's/POS hat/NN", "det 2 1, nmod:poss 4 2, case 2 3", root=4)
    assert tuples(hat) == [["man", "hat", "have"], ["hat"], ["man"]]
    chased = graph("a/DT dog/NN is/VBZ/be chased/VBN/chase by/IN a/DT cat/NN",
                   "det 2 1, nsubjpass 4 2, auxpass 4 3, nmod:agent 4 7, case 7 5, det 7 6", root=4)
    assert tuples(chased) == [["cat", "dog", "chase"], ["cat"], ["dog"]]
    when = graph("a/DT dog/NN at/IN night/NN today/NN", "det 2 1, nmod:at 2 4, case 4 3, nmod:tmod 2 5", root=2)
    assert tuples(when)[:2] == [["dog", "night", "at"], ["dog", "today", "tmod"]]  # PP_MOD takes any nmod:*


def test_compounds_are_attributes_not_objects() -> None:
    g = graph("a/DT red/JJ desk/NN chair/NN", "det 4 1, amod 4 2, compound 4 3", root=4)
    assert tuples(g) == [["chair", "red"], ["chair", "desk"]]
    assert tuples(graph("a/DT tennis/NN racket/NN", "det 3 1, compound 3 2", root=3)) == [["racket", "tennis"]]


def test_numbers_on_plurals() -> None:
    two = graph("two/CD dogs/NNS/dog", "nummod 2 1", root=2)
    assert tuples(two) == [["dog", "two"], ["dog"]]
    chase = graph("two/CD dogs/NNS/dog chase/VBP three/CD cats/NNS/cat",
                  "nummod 2 1, nsubj 3 2, dobj 3 5, nummod 5 4", root=3)
    assert tuples(chase) == [["dog", "cat", "chase"], ["dog", "two"], ["cat", "three"], ["cat"], ["dog"]]
    number = graph("jerseys/NNS/jersey 5/CD", "nummod 1 2", root=1)
    assert tuples(number) == [["jersey"]]  # "number 5": the number must come first
    one = graph("one/CD dog/NN", "nummod 2 1", root=2)
    assert tuples(one) == [["dog"]]  # singular nouns get no number


def test_conjunction_propagation_never_fires() -> None:
    # NOUN_CONJ compares a String with an IndexedWord in the jar: coordinated nouns get no
    # copies of each other's relations from it (CC processing already shares governors)
    g = graph("two/CD men/NNS/man and/CC a/DT woman/NN", "nummod 2 1, cc 2 3, conj:and 2 5, det 5 4", root=2)
    assert tuples(g) == [["man", "two"], ["man"], ["woman"]]


# -- CoreNLP collapsing ---------------------------------------------------------------------
def rels(g: DepGraph) -> set[str]:
    return {f"{r}({g.nodes[a].word},{g.nodes[b].word})" for a, b, r in g.edges()}


def test_three_word_preposition() -> None:
    g = graph("a/DT boy/NN in/IN front/NN of/IN a/DT house/NN",
              "det 2 1, nmod 2 4, case 4 3, nmod 4 7, case 7 5, det 7 6", root=2)
    assert rels(collapse(g)) == {"det(boy,a)", "nmod:in_front_of(boy,house)", "case(house,in)", "mwe(in,front)",
                                 "mwe(in,of)", "det(house,a)"}


def test_two_word_prepositions() -> None:
    g = graph("dog/NN sitting/VBG next/RB to/TO cat/NN", "acl 1 2, advmod 2 3, nmod 3 5, case 5 4", root=1)
    assert "nmod:next_to(sitting,cat)" in rels(collapse(g))
    # CoreNLP's list spells " depending_on" with a leading space: never a multi-word preposition
    g = graph("price/NN depending/VBG on/IN size/NN", "nmod 1 4, case 4 2, case 4 3", root=1)
    assert "mwe(depending,on)" not in rels(collapse(g))


def test_agent_needs_a_passive_auxiliary() -> None:
    reduced = graph("dog/NN chased/VBN by/IN cat/NN", "acl 1 2, nmod 2 4, case 4 3", root=1)
    assert "nmod:by(chased,cat)" in rels(collapse(reduced))
    passive = graph("dog/NN is/VBZ chased/VBN by/IN cat/NN", "nsubj 3 1, auxpass 3 2, nmod 3 5, case 5 4", root=3)
    assert {"nmod:agent(chased,cat)", "nsubjpass(chased,dog)"} <= rels(collapse(passive))


def test_cc_processing_shares_governors_and_subjects() -> None:
    g = graph("man/NN and/CC woman/NN ride/VBP horses/NNS and/CC smile/VBP",
              "nsubj 4 1, cc 1 2, conj 1 3, dobj 4 5, cc 4 6, conj 4 7", root=4)
    assert {"conj:and(man,woman)", "nsubj(ride,woman)", "conj:and(ride,smile)", "nsubj(smile,man)"} <= rels(collapse(g))


# -- the enhancer ---------------------------------------------------------------------------
def test_quantificational_modifier_keeps_the_quantity_noun() -> None:
    g = graph("a/DT lot/NN of/IN people/NNS", "det 2 1, nmod:of 2 4, case 4 3", root=2)
    quantificational_modifiers(g)
    assert g.roots == [4] and rels(g) == {"det:qmod(people,a)", "mwe(a,lot)", "mwe(a,of)"}
    g = graph("a/DT lot/NN of/IN people/NNS", "det 2 1, nmod:of 2 4, case 4 3", root=2)
    assert tuples(g) == [["people", "a"], ["people"], ["lot"]]


def test_partitive_numbers() -> None:
    g = graph("two/CD of/IN the/DT dogs/NNS/dog run/VBP", "nsubj 5 1, nmod:of 1 4, case 4 2, det 4 3", root=5)
    assert ["dog", "two"] in tuples(g)


def test_pronouns_resolve_to_the_first_noun_from_the_root() -> None:
    g = graph("a/DT man/NN with/IN his/PRP$ dog/NN", "det 2 1, nmod:with 2 5, case 5 3, nmod:poss 5 4", root=2)
    assert resolve_pronouns(g) == {4: 2}
    assert tuples(g) == [["man", "dog", "with"], ["man", "dog", "have"], ["man"], ["dog"]]
    first = graph("it/PRP is/VBZ a/DT dog/NN", "nsubj 4 1, cop 4 2, det 4 3", root=4)
    assert resolve_pronouns(first) == {}  # the first token is never resolved
    later = graph("he/DT sees/VBZ it/PRP near/IN dogs/NNS", "nsubj 2 1, dobj 2 3, nmod:near 2 5, case 5 4", root=2)
    assert resolve_pronouns(later) == {}  # singular "it": the plural noun does not qualify


# -- lemmas ---------------------------------------------------------------------------------
LEMMAS = Lemmatizer(
    {"verb": {"running": ["run"], "ran": ["run"]}, "noun": {"men": ["man"], "children": ["child"]}},
    {"verb": {"ride", "rid", "run", "hop", "hope", "sit", "look", "play", "agree", "speed"},
     "noun": {"bus", "house", "shoe", "hero"}},
)


@pytest.mark.parametrize("word,tag,lemma", [
    ("riding", "VBG", "ride"), ("rides", "VBZ", "ride"), ("hoping", "VBG", "hope"), ("running", "VBG", "run"),
    ("ran", "VBD", "run"), ("looked", "VBD", "look"), ("agreed", "VBD", "agree"), ("speed", "VB", "speed"), ("playing", "VBG", "play"), ("is", "VBZ", "be"),
    ("men", "NNS", "man"), ("children", "NNS", "child"), ("jeans", "NNS", "jeans"), ("shorts", "NNS", "shorts"),
    ("buses", "NNS", "bus"), ("houses", "NNS", "house"), ("shoes", "NNS", "shoe"), ("puppies", "NNS", "puppy"),
    ("t-shirts", "NNS", "t-shirt"), ("older", "JJR", "older"), ("glasses", "NN", "glasses"), ("an", "DT", "a"),
    ("him", "PRP", "he"), ("Dogs", "NNPS", "Dogs"),
])
def test_corenlp_style_lemmas(word: str, tag: str, lemma: str) -> None:
    assert LEMMAS.lemma(word, tag) == lemma


# -- captions end to end (spaCy) -----------------------------------------------------------
@pytest.fixture(scope="module")
def parser() -> SceneGraphParser:
    require_module("spacy", "SPICE's scene-graph parser (the spice extra)")
    p = SceneGraphParser()
    try:
        p._load()
    except MissingDependencyError as exc:
        unavailable(str(exc))
    return p


CAPTIONS = {
    "a man riding a horse on the beach": [["man", "horse", "ride"], ["man", "beach", "ride on"], ["man"], ["beach"],
                                          ["horse"]],
    "two dogs": [["dog", "two"], ["dog"]],
    "a tennis racket": [["racket", "tennis"]],
    "a cat sitting in a chair": [["cat", "chair", "sit in"], ["cat"], ["chair"]],
    "the man 's hat": [["man", "hat", "have"], ["hat"], ["man"]],
    "a man is tall": [["man", "tall"], ["man", "tall"], ["man"]],
    "a lot of people": [["people", "a"], ["people"], ["lot"]],
    "a woman is in the house": [["woman", "house", "in"], ["house"], ["woman"]],
    "a man is riding a horse": [["man", "horse", "ride"], ["horse"], ["man"]],
    "a woman is smiling": [["woman", "smile"], ["woman"]],
    "the man is a rider": [["man", "rider"], ["rider"], ["man"]],
    "a red desk chair": [["chair", "red"], ["chair", "desk"]],
    "a dog chased by a cat": [["dog", "cat", "chase by"], ["dog"], ["cat"]],  # no auxpass: nmod:by
    "a boy in front of a house": [["boy", "house", "in front of"], ["boy"], ["house"], ["front"]],
    "a cat on top of a table": [["cat", "table", "on top of"], ["cat"], ["table"], ["top"]],
    "two men and a woman": [["man", "two"], ["man"], ["woman"]],
    "a dog is chased by a cat": [["cat", "dog", "chase"], ["cat"], ["dog"]],
    "a man and his dog are sitting on a bench": [["man", "bench", "sit on"], ["dog", "bench", "sit on"],
                                                 ["man", "dog", "have"], ["man"], ["dog"], ["bench"]],
    "a boy jumping out of the water": [["boy", "water", "jump out of"], ["water"], ["boy"]],
    "a man is picking up a ball": [["man", "ball", "pick up"], ["ball"], ["man"]],
}


@pytest.mark.parametrize("caption", list(CAPTIONS))
def test_captions(parser: SceneGraphParser, caption: str) -> None:
    assert [list(t) for t in parser.parse(caption)] == CAPTIONS[caption]


@pytest.mark.xfail(reason="spaCy's small model reads 'splashes' as a plural noun; CoreNLP's PCFG parser "
                          "finds the verb", strict=True)
def test_caption_spacy_misparses(parser: SceneGraphParser) -> None:
    found = [list(t) for t in parser.parse("a female in a black bikini splashes in the water")]
    assert ["female", "water", "splash in"] in found


@pytest.mark.xfail(reason="spaCy parses 'make snowboard jumps' as a clause (ccomp); CoreNLP reads a noun "
                          "compound object", strict=True)
def test_caption_spacy_misparses_compound(parser: SceneGraphParser) -> None:
    found = [list(t) for t in parser.parse("three people make snowboard jumps")]
    assert ["people", "jump", "make"] in found and ["jump", "snowboard"] in found


def test_parse_many_parses_each_caption_once(parser: SceneGraphParser, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = SceneGraphParser()
    fresh._nlp, fresh._lemmatizer, fresh._adjectives = parser._nlp, parser._lemmatizer, parser._adjectives
    seen: list[str] = []
    real_pipe = fresh._nlp.pipe

    def counting_pipe(docs, **kw):  # type: ignore[no-untyped-def]
        docs = list(docs)
        seen.extend(d.text for d in docs)
        return real_pipe(docs, **kw)

    monkeypatch.setattr(fresh._nlp, "pipe", counting_pipe)
    out = fresh.parse_many(["two dogs", "a tennis racket", "two dogs", ""])
    assert out[0] == out[2] == [("dog", "two"), ("dog",)] and out[3] == []
    assert sorted(seen) == ["a tennis racket", "two dogs"]
    fresh.parse_many(["two dogs"])
    assert len(seen) == 2  # cached


def test_raw_captions_can_be_ptb_tokenised(parser: SceneGraphParser) -> None:
    raw = SceneGraphParser(tokenize=True)
    raw._nlp, raw._lemmatizer, raw._adjectives = parser._nlp, parser._lemmatizer, parser._adjectives
    assert raw.parse("The man's hat.") == parser.parse("the man 's hat")


def test_missing_model_and_missing_spacy(monkeypatch: pytest.MonkeyPatch) -> None:
    require_module("spacy", "SPICE's scene-graph parser (the spice extra)")
    with pytest.raises(MissingDependencyError, match="no_such_model"):
        SceneGraphParser("no_such_model").parse("a dog")
    import capeval.metrics.spice.parser as parser_module

    import capeval.models.spacy_pipelines as pipelines

    monkeypatch.setattr(parser_module, "_LOADED", {})  # pipelines are kept per process
    monkeypatch.setattr(pipelines, "_LOADED", {})
    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(MissingDependencyError, match=r"spice"):
        SceneGraphParser().parse("a dog")


def test_spacy_import_leaves_torch_importable() -> None:
    """spaCy is imported with torch hidden (thinc would import it for nothing); torch must
    stay importable afterwards."""
    import subprocess

    code = ("import sys; from capeval.metrics.spice.parser import SceneGraphParser as P; p = P(); p._load(); "
            "assert 'torch' not in sys.modules; import importlib.util as u; "
            "assert u.find_spec('torch') is None or __import__('torch').ones(1).sum() == 1; print(p.parse('two dogs'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "('dog', 'two')" in out.stdout


def test_parser_pickles_without_its_model(parser: SceneGraphParser) -> None:
    import pickle

    parser.parse("two dogs")
    copy = pickle.loads(pickle.dumps(parser))
    assert copy._nlp is None and not copy._cache and copy.spacy_model == parser.spacy_model
    assert copy.parse("two dogs") == parser.parse("two dogs")


def test_signature_and_known_differences() -> None:
    fields = SceneGraphParser().signature_fields()
    assert fields["parser"] == f"spacy-{PARSER_VERSION}" and fields["spacy_model"] == "en_core_web_sm"
    assert KNOWN_DIFFERENCES and all(len(row) == 3 and all(row) for row in KNOWN_DIFFERENCES)
