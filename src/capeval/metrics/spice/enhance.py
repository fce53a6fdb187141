"""The four steps of Stanford's scene-graph ``SemanticGraphEnhancer`` that SPICE 1.0 runs.

``SpiceParser.parseAnnotation`` calls, on every collapsed CC-processed graph:

1. :func:`quantificational_modifiers` - "a lot of people", "lots of dogs", "two of the
   men": the quantity words become a ``det:qmod`` multi-word expression under the noun,
   which takes over their place in the sentence (``det:qmod(people, a)``, ``mwe(a, lot)``,
   ``mwe(a, of)``). The quantity noun ("lot") stays a vertex, so SPICE still lists it as an
   object; ``checkForNumericAttribute`` later reads the ``det:qmod`` word ("a", "lots").
2. :func:`collapse_compounds` and 3. :func:`collapse_particles` - in the enhancer these
   only store the joined compound on the node (``CompoundLemmaAnnotation``), which SPICE
   never reads, so they leave tuples unchanged; here they return that annotation.
4. :func:`resolve_pronouns` - the scene-graph parser's Hobbs-like rule: every pronoun
   (``PRP``/``PRP$``, not the first word) with a governor is replaced by the first noun
   of a breadth-first search from the root (singular nouns only for singular pronouns),
   when that noun comes earlier; the pronoun's edges move to the noun ("a man and his dog"
   gives ``nmod:poss(dog, man)``).

``resolvePlurals`` (copies of plural nodes) is the step SPICE leaves out.
"""

from __future__ import annotations

import re

from capeval.metrics.spice.depgraph import DepGraph, rel_is

QUANT_NOUNS = re.compile(
    r"(?i:lot|assortment|number|couple|bunch|handful|litany|sheaf|slew|dozen|series|variety|multitude|wad"
    r"|clutch|wave|mountain|array|spate|string|ton|range|plethora|heap|sort|form|kind|type|version|bit|pair"
    r"|triple|total)"
)
QUANT_PLURALS = re.compile(
    r"(?i:lots|many|several|plenty|tons|dozens|multitudes|mountains|loads|pairs|tens|hundreds|thousands"
    r"|millions|billions|trillions|[0-9]+s)"
)
QUANT_PARTITIVES = re.compile(
    r"(?i:some|all|both|neither|everyone|nobody|one|two|three|four|five|six|seven|eight|nine|ten|hundred"
    r"|thousand|million|billion|trillion|[0-9]+)"
)
ARTICLE = re.compile(r"(?i:an?)")
OF = re.compile(r"(?i:of)")
NOUN_OR_PRONOUN = re.compile(r"NN.*|PRP.*")
NOUN_TAG = re.compile(r"NN.*")
PRONOUN_TAG = re.compile(r"PRP.*")
QMOD = "det:qmod"
# dcoref's Dictionaries.singularPronouns (matched case-sensitively on the word)
SINGULAR_PRONOUNS = frozenset(
    "i me myself mine my yourself he him himself his she her herself hers it itself its one oneself one's".split()
)


def enhance(graph: DepGraph) -> DepGraph:
    """SPICE's enhancer calls, in its order (in place; returns ``graph``)."""
    quantificational_modifiers(graph)
    collapse_compounds(graph)
    collapse_particles(graph)
    resolve_pronouns(graph)
    return graph


def _copy(graph: DepGraph) -> DepGraph:
    snapshot = DepGraph(graph.nodes.values())
    for gov, dep, rel in graph.edges():
        snapshot.add_edge(gov, dep, rel)
    for root in graph.roots:
        snapshot.add_root(root)
    return snapshot


def _word(graph: DepGraph, index: int, pattern: re.Pattern[str]) -> bool:
    return pattern.fullmatch(graph.nodes[index].word) is not None


def _of_objects(graph: DepGraph, w: int, tags: re.Pattern[str]) -> list[tuple[int, int]]:
    """``(gov, of)`` for ``w >/nmod.*/ (gov >case of)`` with ``w`` right before ``of``."""
    found = []
    for gov, rel in graph.out_edges(w):
        if rel.startswith("nmod") and tags.fullmatch(graph.tag(gov)):
            for of in graph.children(gov, rel_is("case")):
                if _word(graph, of, OF) and of == w + 1:
                    found.append((gov, of))
    return found


def _quantifier_matches(graph: DepGraph, kind: int) -> list[tuple[int, int, int, int | None]]:
    """First match per quantity word, in Semgrex order: ``(gov, w_quant, w_of, w_article)``."""
    matches = []
    for w in graph.topological():
        if kind == 1 and _word(graph, w, QUANT_NOUNS):
            arts = [a for a in graph.children(w, rel_is("det")) if _word(graph, a, ARTICLE)]
            hits = [(gov, w, of, art) for art in arts for gov, of in _of_objects(graph, w, NOUN_OR_PRONOUN)]
        elif kind == 2 and _word(graph, w, QUANT_PLURALS):
            hits = [(gov, w, of, None) for gov, of in _of_objects(graph, w, NOUN_OR_PRONOUN)]
        elif kind == 3 and _word(graph, w, QUANT_PARTITIVES):
            hits = [(gov, w, of, None) for gov, of in _of_objects(graph, w, NOUN_TAG)
                    if any(d == of + 1 and (d in graph.children(gov, rel_is("det")))
                           for d in graph.children(gov))]
            hits += [(gov, w, of, None) for gov, of in _of_objects(graph, w, PRONOUN_TAG)]
        else:
            continue
        if hits:
            matches.append(hits[0])
    return matches


def quantificational_modifiers(graph: DepGraph) -> None:
    """Promote the noun of "a lot of X" / "lots of X" / "two of the X" over its quantifier."""
    for kind in (1, 2, 3):
        for gov, quant, of, article in _quantifier_matches(_copy(graph), kind):
            if quant in graph.roots:
                graph.remove_root(quant)
                graph.add_root(gov)
            else:
                parent = graph.parent(quant)
                if parent is None:
                    return  # as in the enhancer: give up on the whole step
                rel = graph.relations(parent, quant)[0]
                graph.remove_edge(parent, quant, rel)
                graph.add_edge(parent, gov, rel)
            graph.remove_edge(quant, gov)
            if kind == 1:
                words = [article, quant, of] + [c for c in graph.children(quant, rel_is("amod")) if c < quant]
            else:
                words = [quant, of] + [c for c in graph.children(quant) if c < quant]
            _multiword(graph, gov, sorted(set(w for w in words if w is not None)))


def _multiword(graph: DepGraph, gov: int, words: list[int]) -> None:
    """``det:qmod(gov, w1)`` + ``mwe(w1, w_k)``; every word loses all its incoming edges."""
    if not graph.roots or not words:
        return
    for k, word in enumerate(words):
        for parent, rel in graph.in_edges(word):
            graph.remove_edge(parent, word, rel)
        if k == 0:
            graph.add_edge(gov, word, QMOD)
        else:
            graph.add_edge(words[0], word, "mwe")


def _joined(graph: DepGraph, rel: str, contiguous: bool) -> dict[int, str]:
    joined = {}
    for word in graph.vertices():
        parts = graph.children(word, rel_is(rel))
        if not parts:
            continue
        group = sorted([word] + parts)
        if contiguous:
            ok = all(b == a + 1 for a, b in zip(group, group[1:])) and group[-1] <= word
        else:
            ok = group[0] >= word
        if ok:
            joined[word] = " ".join(graph.nodes[i].lemma or graph.nodes[i].word for i in group)
    return joined


def collapse_compounds(graph: DepGraph) -> dict[int, str]:
    """``CompoundLemmaAnnotation`` of compound heads ("tennis racket"); no effect on tuples."""
    return _joined(graph, "compound", contiguous=True)


def collapse_particles(graph: DepGraph) -> dict[int, str]:
    """``CompoundLemmaAnnotation`` of verbs with particles ("pick up"); no effect on tuples."""
    return _joined(graph, "compound:prt", contiguous=False)


def _antecedent(graph: DepGraph, start: int | None, singular: bool) -> int | None:
    """Breadth-first search from ``start`` for the first (singular) noun."""
    while start is not None:
        queue, seen = [start], set()
        while queue:
            current = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            tag = graph.tag(current)
            if tag in ("NN", "NNP") or (not singular and tag in ("NNS", "NNPS")):
                return current
            queue.extend(sorted(graph.children(current)))
        start = graph.parent(start)
    return None


def resolve_pronouns(graph: DepGraph) -> dict[int, int]:
    """Replace resolvable pronouns by their antecedent noun; returns ``{pronoun: noun}``."""
    pairs: dict[int, int] = {}
    root = graph.first_root()
    for token in graph.sorted_vertices():
        if token <= 1 or not graph.tag(token).startswith("PRP") or graph.parent(token) is None:
            continue
        singular = graph.nodes[token].word in SINGULAR_PRONOUNS
        noun = _antecedent(graph, root, singular)
        if noun is not None and noun < token:
            pairs[token] = noun
    for pronoun, mention in sorted(pairs.items()):
        if pronoun in graph.roots:
            graph.remove_root(pronoun)
            graph.add_root(mention)
        else:
            for gov, rel in graph.in_edges_sorted(pronoun):
                graph.remove_edge(gov, pronoun, rel)
                graph.add_edge(gov, mention, rel)
        for dep, rel in graph.out_edges_sorted(pronoun):
            graph.remove_edge(pronoun, dep, rel)
            graph.add_edge(mention, dep, rel)
    return pairs
