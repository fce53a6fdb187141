"""spaCy's parse -> CoreNLP 3.6's *basic* Universal Dependencies (v1) for one caption.

spaCy's English pipelines label dependencies in the ClearNLP scheme (``prep``/``pobj``,
``attr``/``acomp``, ``poss``, ``prt``, ``relcl``, ...). SPICE read CoreNLP's UD v1, which
differs in structure, not only in names; this module rebuilds that structure:

===============================  ============================================================
spaCy (ClearNLP)                 CoreNLP UD v1 (basic)
===============================  ============================================================
``prep(h, p)`` + ``pobj(p, n)``  ``nmod(h, n)`` + ``case(n, p)`` (the noun heads the PP)
``agent(v, by)`` + ``pobj``      ``nmod(v, n)`` + ``case(n, by)`` (``nmod:agent`` later, when
                                 ``v`` has ``auxpass``)
``prep`` + ``pcomp`` (verb)      ``advcl``/``acl(h, c)`` + ``mark(c, p)``
``prep`` without an object       ``compound:prt`` (``RP``) or ``advmod``
be + ``acomp``/``attr``/PP       copula: the adjective / noun / PP noun heads, ``cop(x, be)``,
                                 the subject and every other dependent move to it (CoreNLP's
                                 head choice: ADJP, then NP, then PP)
there + be + ``attr``            ``expl`` + ``nsubj(be, n)`` (existentials keep ``be``)
``poss``                         ``nmod:poss``
``prt``                          ``compound:prt``
``relcl``                        ``acl:relcl`` (no referent resolution: SPICE's CoreNLP ran
                                 without extra dependencies)
``conj`` chains ``a, b and c``   every conjunct and the ``cc`` on the first conjunct
``compound`` chains              flat noun phrase: pre-modifiers on the last noun
``dative`` (noun)                ``iobj``
``attr``/``acomp``/``oprd``      ``xcomp`` (non-copular verbs)
``npadvmod``                     ``nmod:tmod`` (time words) / ``nmod:npmod`` (``dep``
                                 under a noun: a spaCy misparse in captions)
``relcl``/``intj``/``meta``/     ``acl:relcl`` / ``discourse`` / ``dep`` / ``advmod`` /
``quantmod``/``predet``          ``det:predet``
===============================  ============================================================

Tags: spaCy's ``tag_`` is the PTB tag set; lower-case ``NNP``/``NNPS`` (captions are
lower-cased) become ``NN``/``NNS``, and colour words that spaCy tagged as nouns in front
of a noun become adjectives (``amod``), as CoreNLP's tagger reads them.
"""

from __future__ import annotations

import re
from typing import Any

from capeval.metrics.spice.collapse import TWO_WORD_PREPS_REGULAR
from capeval.metrics.spice.depgraph import DepGraph, Node
from capeval.metrics.spice.lemma import Lemmatizer

COPULAR = frozenset("be being been am are r is ai was were 'm m 're 's s `s art ar wase".split())
TIME_WORD = re.compile(
    r"(?i:(mon|tues|wednes|thurs|fri|satur|sun)days?|years?|months?|weeks?|days?|mornings?|evenings?"
    r"|nights?|january|february|march|april|may|june|july|august|september|october|november"
    r"|december|today|yesterday|tomorrow|spring|summer|fall|autumn|winter)"
)
COLOURS = frozenset("red blue green yellow black white pink purple brown gray grey orange tan beige maroon".split())
PUNCT_TAGS = frozenset([".", ",", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP"])
# what spaCy sometimes hangs under a preposition instead of pobj ("in pink": amod(in, pink))
LOOSE_OBJECTS = ("amod", "dobj", "attr", "acomp", "npadvmod", "nummod", "appos")
NOMINAL_MODS = frozenset(["amod", "compound", "nummod", "det", "nmod", "quantmod", "poss", "predet"])
RENAME = {
    "ROOT": "root", "relcl": "acl:relcl", "poss": "nmod:poss", "prt": "compound:prt", "intj": "discourse",
    "meta": "dep", "quantmod": "advmod", "predet": "det:predet", "preconj": "cc:preconj", "oprd": "xcomp",
    "attr": "xcomp", "acomp": "xcomp", "dative": "iobj", "pobj": "dep", "pcomp": "dep",
}


class Tree:
    """A mutable basic dependency tree over 1-based token indices (0 = no head)."""

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.head: dict[int, int] = {}
        self.rel: dict[int, str] = {}

    def kids(self, index: int, *rels: str) -> list[int]:
        """Dependents of ``index`` in index order (only those with a relation in ``rels``)."""
        return [d for d in sorted(self.head) if self.head[d] == index and (not rels or self.rel[d] in rels)]

    def attach(self, dep: int, head: int, rel: str | None = None) -> None:
        self.head[dep] = head
        if rel is not None:
            self.rel[dep] = rel

    def is_noun(self, index: int) -> bool:
        return self.nodes[index].tag.startswith("NN")

    def to_graph(self) -> DepGraph:
        graph = DepGraph(self.nodes[i] for i in sorted(self.nodes))
        for dep in sorted(self.head):
            if self.head[dep] == 0:
                graph.add_root(dep)
            else:
                graph.add_edge(self.head[dep], dep, self.rel[dep])
        return graph


def _retag(word: str, tag: str, dep: str, head_is_later_noun: bool, adjectives: frozenset[str]) -> tuple[str, str]:
    low = word.lower()
    if tag in ("NNP", "NNPS") and word == low:
        tag = "NN" if tag == "NNP" else "NNS"
    if tag in ("NN", "NNP") and head_is_later_noun and dep in ("compound", "nmod", "amod"):
        if low in COLOURS or low in adjectives:
            return "JJ", "amod"
    return tag, dep


def from_spacy(doc: Any, lemmatizer: Lemmatizer, adjectives: frozenset[str] = frozenset()) -> Tree:
    """Basic UD v1 tree of a spaCy ``Doc`` (one caption; several sentences are joined)."""
    tree = Tree()
    tokens = [t for t in doc if not (t.is_punct or t.tag_ in PUNCT_TAGS or t.is_space)]
    kept = {t.i for t in tokens}

    def real_head(tok: Any) -> Any:
        """The head, skipping punctuation (not a vertex in CoreNLP); ``None`` for a root."""
        head = tok.head
        while head.i != tok.i and head.i not in kept:
            if head.head.i == head.i:
                return None
            head = head.head
        return None if head.i == tok.i or tok.dep_ == "ROOT" else head

    for tok in tokens:
        head = real_head(tok)
        is_root = head is None
        later_noun = head is not None and head.i > tok.i and head.tag_.startswith("NN")
        tag, dep = _retag(tok.text, tok.tag_, tok.dep_, later_noun, adjectives)
        index = tok.i + 1
        tree.nodes[index] = Node(index, tok.text, lemmatizer.lemma(tok.text, tag), tag)
        tree.head[index] = 0 if head is None else head.i + 1
        tree.rel[index] = "ROOT" if is_root else dep
    if not tree.nodes:
        return tree
    _single_root(tree)
    _flatten_conjunctions(tree)
    _flatten_compounds(tree)
    _two_word_prepositions(tree)
    for prep in sorted(tree.head):
        if tree.rel[prep] in ("prep", "agent") or (tree.rel[prep] == "dative" and tree.kids(prep, "pobj", "pcomp")):
            _prepositional_phrase(tree, prep)
    _nominal_modifiers(tree)
    for verb in sorted(tree.head):
        if tree.nodes[verb].word.lower() in COPULAR and tree.rel[verb] not in ("aux", "auxpass", "cop"):
            _copula(tree, verb)
    _rename(tree)
    return tree


def _single_root(tree: Tree) -> None:
    """CoreNLP parses a caption into one tree: extra roots hang off the largest one."""
    roots = [i for i in sorted(tree.head) if tree.head[i] == 0]
    if len(roots) <= 1:
        return

    def size(root: int) -> int:
        return sum(1 for i in tree.head if _top(tree, i) == root)

    main = max(roots, key=lambda r: (size(r), -r))
    for r in roots:
        if r != main:
            tree.attach(r, main, "dep")


def _top(tree: Tree, index: int) -> int:
    seen = set()
    while tree.head[index] != 0 and index not in seen:
        seen.add(index)
        index = tree.head[index]
    return index


def _flatten_conjunctions(tree: Tree) -> None:
    """spaCy chains ``a -conj-> b -conj-> c``; UD attaches every conjunct (and cc) to ``a``."""
    for dep in sorted(tree.head):
        if tree.rel[dep] not in ("conj", "cc", "preconj"):
            continue
        first = tree.head[dep]
        while first and tree.rel[first] == "conj" and tree.head[first]:
            first = tree.head[first]
        if first != tree.head[dep]:
            tree.attach(dep, first)


def _flatten_compounds(tree: Tree) -> None:
    """A flat noun phrase: modifiers in front of a compound noun belong to the phrase head."""
    for dep in sorted(tree.head):
        head = tree.head[dep]
        if not head or tree.rel[dep] not in NOMINAL_MODS or head < dep:
            continue
        top = head
        while tree.rel[top] == "compound" and tree.head[top] > top and tree.is_noun(top):
            top = tree.head[top]
        if top != head and tree.is_noun(top):
            tree.attach(dep, top)


def _two_word_prepositions(tree: Tree) -> None:
    """``inside of X``: spaCy heads the phrase with ``inside``; CoreNLP's tree gives the
    noun both words as ``case`` markers, which its multi-word step then joins."""
    for first in sorted(tree.head):
        second = first + 1
        if second not in tree.head or tree.head[second] != first or tree.rel[second] != "prep":
            continue
        pair = f"{tree.nodes[first].word.lower()}_{tree.nodes[second].word.lower()}"
        objects = tree.kids(second, "pobj")
        if pair not in TWO_WORD_PREPS_REGULAR or not objects or tree.rel[first] not in ("prep", "advmod"):
            continue
        noun = objects[0]
        tree.attach(noun, tree.head[first], "nmod")
        for other in tree.kids(first) + tree.kids(second):
            if other not in (second, noun):
                tree.attach(other, noun)
        tree.attach(first, noun, "case")
        tree.attach(second, noun, "case")


def _nominal_modifiers(tree: Tree) -> None:
    """In front of a noun, CoreNLP names the relation after the modifier's tag."""
    for dep in sorted(tree.head):
        head, rel, tag = tree.head[dep], tree.rel[dep], tree.nodes[dep].tag
        if not head or head < dep or not tree.is_noun(head):
            continue
        if rel == "amod" and tag.startswith("NN"):
            tree.rel[dep] = "compound"
        elif rel == "compound" and tag.startswith("JJ"):
            tree.rel[dep] = "amod"


def _prepositional_phrase(tree: Tree, prep: int) -> None:
    """Make the object head the phrase: ``nmod(h, n)`` + ``case(n, prep)``."""
    head = tree.head[prep]
    objects = tree.kids(prep, "pobj") or [k for k in tree.kids(prep, *LOOSE_OBJECTS) if k > prep][:1]
    if objects:
        noun = objects[0]
        tree.attach(noun, head, "nmod")
        for other in tree.kids(prep):
            if other != noun and tree.rel[other] not in ("conj", "cc", "pobj"):
                tree.attach(other, noun)
        tree.attach(prep, noun, "case")
        return
    comps = tree.kids(prep, "pcomp")
    if comps:
        comp = comps[0]
        inner = tree.kids(comp, "pobj")
        if inner and tree.nodes[comp].tag in ("IN", "TO", "RP", "RB"):
            # "from behind the tree": both prepositions mark the noun
            noun = inner[0]
            tree.attach(noun, head, "nmod")
            tree.attach(comp, noun, "case")
            tree.attach(prep, noun, "case")
            return
        tree.attach(comp, head, "acl" if head and tree.is_noun(head) else "advcl")
        tree.attach(prep, comp, "mark")
        return
    tree.rel[prep] = "compound:prt" if tree.nodes[prep].tag == "RP" else "advmod"


def _copula(tree: Tree, verb: int) -> None:
    """Forms of *be* with a predicate become ``cop`` dependents of the predicate."""
    kids = tree.kids(verb)
    if any(tree.rel[k] == "expl" for k in kids):
        for k in kids:  # existential: "there is a dog" keeps "is" as the head
            if tree.rel[k] == "attr":
                tree.rel[k] = "nsubj"
        return
    pred = next((k for k in kids if tree.rel[k] == "acomp"), None)
    if pred is None:
        pred = next((k for k in kids if tree.rel[k] == "attr"), None)
    if pred is None:
        pred = next((k for k in kids if tree.rel[k] == "nmod" and tree.kids(k, "case")), None)
    if pred is None:
        return
    tree.attach(pred, tree.head[verb], tree.rel[verb])
    for k in kids:
        if k != pred:
            tree.attach(k, pred)
    tree.attach(verb, pred, "cop")


def _rename(tree: Tree) -> None:
    for dep in sorted(tree.head):
        rel = tree.rel[dep]
        if rel == "npadvmod":
            # under a noun this is almost always a spaCy misparse; "dep" keeps it out of the
            # rules (CoreNLP's nmod:npmod would turn into an "npmod" relation tuple)
            head = tree.head[dep]
            if TIME_WORD.fullmatch(tree.nodes[dep].word):
                rel = "nmod:tmod"
            else:
                rel = "dep" if head and tree.is_noun(head) else "nmod:npmod"
        elif rel == "nmod":
            head = tree.head[dep]
            if head and tree.nodes[dep].tag.startswith("NN") and tree.is_noun(head) and dep < head:
                rel = "compound"  # spaCy's noun-phrase-internal nmod ("a life vest")
        elif rel == "dative" and not tree.is_noun(dep) and tree.nodes[dep].tag not in ("PRP", "CD"):
            rel = "dep"
        else:
            rel = RENAME.get(rel, rel)
        tree.rel[dep] = rel
