"""SPICE 1.0's ``SpiceParser.parseAnnotation`` patterns on an enhanced graph -> proposed tuples.

Each Semgrex pattern of the Java class is a loop here, run in the same order and
enumerating matches in Semgrex's order (nodes in :meth:`DepGraph.topological` order, the
constraints of a pattern left to right over edges in Java order). Tuples are lists of
lemmas (trimmed, lower-cased) as in ``ProposedTuples``:

1. subject-predicate-object ``[subj, obj, pred]`` (``>nsubj`` + ``>dobj|iobj|nmod:*``,
   no ``cop``); the predicate is the verb lemma plus its particle (``pick up``; a bare
   `` up`` with a leading space under *be*) plus the preposition of an ``nmod:<prep>``
   (``ride on``, ``sit in front of``); ``nmod:poss``/``nmod:agent`` add no preposition;
2. ``acl`` (reduced relatives, "a man riding a horse"): ``[noun, obj, pred]``;
3. subject-predicate pairs without an object and copulas: ``[subj, pred]`` (dropped for
   *be*), or ``[subj, pred, prep]`` when the predicate has a ``case`` marker ("a woman is
   in the house" -> ``[woman, house, in]``; ``mwe`` words extend it: ``in front of``);
4. ``amod`` -> ``[noun, adj]``; predicative adjectives with a subject -> ``[subj, adj]``;
5. noun ``nmod:<prep>`` -> ``[noun, mod, prep]`` (not ``poss``/``agent``);
6. ``nmod:poss`` -> ``[owner, thing, have]``; passive agents -> ``[agent, patient, verb]``;
7. numbers on plural nouns (``nummod`` before the noun, else the ``det:qmod`` word) ->
   ``[noun, number]``, through the three plural patterns of ``resolvePlurals``;
8. noun compounds -> ``[head, modifier]``, and both nouns are not listed as objects;
9. conjunction propagation: a no-op in the jar (it compares a ``String`` with an
   ``IndexedWord``), kept as one here;
10. every other noun -> ``[noun]``.

Duplicates are kept (the scene graph merges them), e.g. "a man is tall" gives
``[man, tall]`` twice (copula pair and predicative adjective).
"""

from __future__ import annotations

import re

from capeval.metrics.spice.depgraph import DepGraph, Node, rel_is

NOUN = re.compile(r"NNP?S?")
PLURAL = re.compile(r"NNP?S")
VERB = re.compile(r"V.*")
ADJ = re.compile(r"J.*")
OBJ_OR_NMOD = re.compile(r"iobj|dobj|nmod:.*")
DOT_OBJ = re.compile(r".obj")
NMOD_NOT_AGENT = re.compile(r"nmod:((?!agent).)*$")
OBJ_OR_ANY_NMOD = re.compile(r".obj|nmod.*")

Tuple = list[str]


def _lemma(node: Node) -> str:
    return node.lemma.strip().lower()


class Proposer:
    """Collects ``ProposedTuples`` for one graph (call :meth:`run`)."""

    def __init__(self, graph: DepGraph) -> None:
        self.g = graph
        self.order = graph.topological()
        self.tuples: list[Tuple] = []

    # -- helpers -----------------------------------------------------------------------
    def tagged(self, index: int, pattern: re.Pattern[str]) -> bool:
        return pattern.fullmatch(self.g.tag(index)) is not None

    def add(self, *parts: int | str) -> None:
        self.tuples.append([_lemma(self.g.nodes[p]) if isinstance(p, int) else p for p in parts])

    def predicate(self, pred: int) -> str:
        """``getPredicate``: the lemma, with the first particle appended."""
        node = self.g.nodes[pred]
        part = self.g.child(pred, "compound:prt")
        if part is None:
            return node.lemma
        return f"{'' if node.lemma == 'be' else node.lemma} {self.g.nodes[part].word}"

    def objects(self, pred: int) -> list[tuple[int, str]]:
        return [(o, r) for o, r in self.g.out_edges(pred) if OBJ_OR_NMOD.fullmatch(r) and self.tagged(o, NOUN)]

    def with_preposition(self, predicate: str, rel: str) -> str:
        if rel.startswith("nmod:") and rel not in ("nmod:poss", "nmod:agent"):
            return predicate + rel.replace("nmod:", " ").replace("_", " ")
        return predicate

    # -- the patterns ------------------------------------------------------------------
    def run(self) -> list[Tuple]:
        g = self.g
        for pred in self.order:  # SUBJ_PRED_OBJ_TRIPLET
            for subj in g.children(pred, rel_is("nsubj")):
                if not self.tagged(subj, NOUN):
                    continue
                for obj, rel in self.objects(pred):
                    if not g.has_child(pred, rel_is("cop")):
                        self.add(subj, obj, self.with_preposition(self.predicate(pred), rel))
        for subj in self.order:  # ACL
            for pred in g.children(subj, rel_is("acl")):
                if self.tagged(pred, VERB):
                    for obj, rel in self.objects(pred):
                        self.add(subj, obj, self.with_preposition(self.predicate(pred), rel))
        self.subject_predicate()
        for obj in self.order:  # ADJ_MOD
            for adj in g.children(obj, rel_is("amod")):
                self.add(obj, adj)
        for adj in self.order:  # ADJ_PRED
            if self.tagged(adj, ADJ):
                for obj in g.children(adj, rel_is("nsubj")):
                    self.add(obj, adj)
        for gov in self.order:  # PP_MOD
            if self.tagged(gov, NOUN):
                for mod, rel in g.out_edges(gov):
                    prep = rel.replace("nmod:", "").replace("_", " ")
                    if rel.startswith("nmod:") and prep not in ("poss", "agent"):
                        self.add(gov, mod, prep)
        for gov in self.order:  # POSS
            if self.tagged(gov, NOUN):
                for mod in g.children(gov, rel_is("nmod:poss")):
                    if self.tagged(mod, NOUN):
                        self.add(mod, gov, "have")
        for pred in self.order:  # AGENT
            if self.tagged(pred, VERB):
                for subj in g.children(pred, rel_is("nmod:agent")):
                    for obj in g.children(pred, rel_is("nsubjpass")):
                        if self.tagged(subj, NOUN) and self.tagged(obj, NOUN):
                            self.add(subj, obj, self.predicate(pred))
        self.plurals()
        compounds = self.compounds()
        # NOUN_CONJ: the jar compares a String with an IndexedWord, so nothing is ever added
        for word in self.order:  # NOUN
            if self.tagged(word, NOUN) and word not in compounds:
                self.add(word)
        return self.tuples

    def subject_predicate(self) -> None:
        """SUBJ_PRED_PAIR then COPULAR, with the case-marker branch."""
        g = self.g
        matches = []
        for pred in self.order:
            if g.has_child(pred, rel_is("cop")) or self.objects(pred):
                continue
            matches += [(pred, s) for s in g.children(pred, rel_is("nsubj")) if self.tagged(s, NOUN)]
        for pred in self.order:
            cops = g.children(pred, rel_is("cop"))
            matches += [(pred, s) for s in g.children(pred, rel_is("nsubj")) if self.tagged(s, NOUN) for _ in cops]
        for pred, subj in matches:
            marker = g.child(pred, "case")
            if marker is not None:
                prep = g.nodes[marker].word
                for extra in g.children_set(marker, "mwe"):
                    prep += " " + g.nodes[extra].word
                self.add(subj, pred, prep)
            elif g.nodes[pred].lemma != "be":
                self.add(subj, pred)

    def number(self, word: int) -> None:
        """``checkForNumericAttribute``."""
        num = self.g.child(word, "nummod")
        if num is not None:
            if num < word:  # not "number 5"
                self.add(word, num)
            return
        qmod = self.g.child(word, "det:qmod")
        if qmod is not None:
            self.add(word, qmod)

    def plurals(self) -> None:
        g = self.g
        for pred in self.order:  # PLURAL_SUBJECT_OBJECT: first match per predicate
            match = next(((s, o) for s in g.children(pred, rel_is("nsubj")) if self.tagged(s, PLURAL)
                          for o in self.plural_objects(pred)), None)
            if match is not None:
                self.number(match[0])
                self.number(match[1])
        for subj in self.order:  # PLURAL_SUBJECT
            if not self.tagged(subj, PLURAL):
                continue
            if subj in g.roots or any(not self.plural_objects(p) for p, r in g.in_edges(subj) if r == "nsubj"):
                self.number(subj)
        for word in self.order:  # PLURAL_OTHER
            if not self.tagged(word, PLURAL) or word in g.roots:
                continue
            if any(r == "nsubj" for _, r in g.in_edges(word)):
                continue
            if any(OBJ_OR_ANY_NMOD.fullmatch(r) and any(self.tagged(s, PLURAL) for s in g.children(p, rel_is("nsubj")))
                   for p, r in g.in_edges(word)):
                continue
            self.number(word)

    def plural_objects(self, pred: int) -> list[int]:
        """Plural ``.obj`` dependents, then plural non-agent ``nmod`` dependents with a case marker."""
        g = self.g
        first = [o for o, r in g.out_edges(pred) if DOT_OBJ.fullmatch(r) and self.tagged(o, PLURAL)]
        second = [o for o, r in g.out_edges(pred) if NMOD_NOT_AGENT.fullmatch(r) and self.tagged(o, PLURAL)
                  and g.has_child(o, rel_is("case"))]
        return first + second

    def compounds(self) -> set[int]:
        g = self.g
        seen: set[int] = set()
        for tail in self.order:  # COMPOUND_NOUN
            if self.tagged(tail, NOUN):
                for head in g.children(tail, rel_is("compound")):
                    if self.tagged(head, NOUN):
                        seen.update((tail, head))
                        self.add(tail, head)
        return seen


def proposed_tuples(graph: DepGraph) -> list[Tuple]:
    """SPICE's proposed tuples for one enhanced, collapsed CC-processed graph."""
    return Proposer(graph).run()
