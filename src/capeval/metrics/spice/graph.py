"""SPICE 1.0 scene graphs built from parsed tuples, with SPICE's concept merging.

The parser (:mod:`.parser`) turns a caption into *proposed tuples* of lemmas: ``[obj]``,
``[obj, attribute]`` or ``[subject, object, predicate]``. :class:`SceneGraph` adds them one
by one as SPICE's ``SceneGraph.addTuple`` does; all reference captions of an item go into
one graph (``SpiceParser.parseCaptions`` with chunks), the candidate into its own.

With ``merge_similar`` (SPICE's default; ``-noSynsets`` turns it off together with synonym
matching):

- a new object joins the existing node that is most similar to it (a shared word counts
  1, else the Jaccard index of the synsets; the first node wins ties, the node must score
  above 0), unless a node with an equal concept exists;
- a new attribute joins the first attribute of its node that it is similar to (shares a
  word or a synset);
- a new relation joins the first relation between the same two nodes whose predicate it
  is similar to.

Without it, only equal concepts are shared. "First" means insertion order here. The Java
iterates hash sets and maps keyed by identity hash codes there, so its choice between two
equally good candidates (rare: a word similar to two concepts that are not similar to
each other) can change from run to run; insertion order is one of the orders it can take.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet

from capeval.metrics.meteor.normalize import java_lower, java_trim
from capeval.metrics.spice.tuples import Concept, SemanticTuple

#: word -> synset ids, for a key already normalised by :func:`synset_key`
SynsetLookup = Callable[[str], AbstractSet[int]]

_LEADING_BE = re.compile(r"^be ")


def synset_key(word: str) -> str:
    """``SceneGraph.getSynSets``' lookup key: trimmed, lower-cased, spaces -> underscores."""
    return java_lower(java_trim(word)).replace(" ", "_")


class Node:
    """``SceneGraphNode``: an object concept and its attribute concepts."""

    __slots__ = ("obj", "attributes")

    def __init__(self, obj: Concept):
        self.obj = obj
        self.attributes: list[Concept] = []

    def has_attribute(self, concept: Concept) -> bool:
        return any(concept == a for a in self.attributes)

    def add_attribute(self, concept: Concept) -> bool:
        """Add unless an equal attribute is there (``addAttribute``)."""
        if self.has_attribute(concept):
            return False
        self.attributes.append(concept)
        return True

    def merge_attribute(self, concept: Concept) -> bool:
        """``mergeAttribute``: nothing if equal to one, into the first similar one, else added."""
        if self.has_attribute(concept):
            return False
        for a in self.attributes:
            if concept.similar_to(a):
                a.merge(concept)
                return True
        self.attributes.append(concept)
        return True

    def __repr__(self) -> str:
        attrs = ", ".join(a.text() for a in self.attributes)
        return f"Node({self.obj.text()!r}{', [' + attrs + ']' if attrs else ''})"


class Relation:
    """``SceneGraphRelation``: a predicate concept from one node to another."""

    __slots__ = ("source", "target", "predicate")

    def __init__(self, source: Node, target: Node, predicate: Concept):
        self.source = source
        self.target = target
        self.predicate = predicate

    def same_nodes(self, other: "Relation") -> bool:
        # SceneGraphNode.equals compares attribute *sets* whose elements have identity-based
        # hash codes, so two distinct nodes are equal only in degenerate cases: identity.
        return self.source is other.source and self.target is other.target

    def __repr__(self) -> str:
        return f"Relation({self.source.obj.text()!r}, {self.predicate.text()!r}, {self.target.obj.text()!r})"


class SceneGraph:
    """SPICE's ``SceneGraph``: nodes (objects with attributes) and relations between them.

    ``synsets`` maps a normalised word (:func:`synset_key`) to its WordNet synset ids as
    METEOR 1.5's ``SynonymDictionary`` gives them (``getSynSets`` + ``getStemSynSets``);
    see :class:`capeval.metrics.spice.wordnet.WordNetSynsets`.
    """

    def __init__(self, synsets: SynsetLookup, merge_similar: bool = True):
        self.synsets = synsets
        self.merge_similar = merge_similar
        self.nodes: list[Node] = []
        self.relations: list[Relation] = []

    # -- building ---------------------------------------------------------------
    def concept(self, word: str) -> Concept:
        """A one-word concept with the word's synsets."""
        return Concept(word, self.synsets(synset_key(word)))

    def add_tuple(self, proposed: Sequence[str]) -> None:
        """``addTuple``: ``[obj]``, ``[obj, attribute]`` or ``[subject, object, predicate]``;
        other lengths are ignored, as in SPICE."""
        if len(proposed) == 1:
            self.add_object(proposed[0])
        elif len(proposed) == 2:
            self.add_attribute(proposed[0], proposed[1])
        elif len(proposed) == 3:
            self.add_relation(proposed[0], proposed[1], proposed[2])

    def add_object(self, word: str) -> Node:
        return self.node_for(self.concept(word))

    def add_attribute(self, obj: str, attribute: str) -> None:
        node = self.node_for(self.concept(obj))
        concept = self.concept(attribute)
        if self.merge_similar:
            node.merge_attribute(concept)
        else:
            node.add_attribute(concept)

    def add_relation(self, subject: str, obj: str, predicate: str) -> bool:
        """``addRelation``: the subject's node, then the object's (which may merge into the
        subject's), then the predicate without a leading ``"be "``. False for a duplicate."""
        source = self.node_for(self.concept(subject))
        target = self.node_for(self.concept(obj))
        new = Relation(source, target, self.concept(_LEADING_BE.sub("", predicate, count=1)))
        for r in self.relations:
            if new.same_nodes(r) and new.predicate == r.predicate:
                return False
        if self.merge_similar:
            for r in self.relations:
                if new.same_nodes(r) and new.predicate.similar_to(r.predicate):
                    r.predicate.merge(new.predicate)
                    return True
        self.relations.append(new)
        return True

    def node_for(self, concept: Concept) -> Node:
        """``getOrAddNode``: the node with an equal concept, else (merging) the most similar
        node, which absorbs the concept, else a new node."""
        best: Node | None = None
        best_sim = 0.0
        for node in self.nodes:
            if concept == node.obj:
                return node
            sim = concept.similarity(node.obj)
            if sim > best_sim:
                best_sim, best = sim, node
        if self.merge_similar and best is not None:
            best.obj.merge(concept)
            return best
        node = Node(concept)
        self.nodes.append(node)
        return node

    # -- reading ----------------------------------------------------------------
    def tuples(self) -> list[SemanticTuple]:
        """The graph's tuples as ``new TupleSet(graph)`` lists them: each object, its
        attributes, then every relation ``(source, predicate, target)``."""
        out: list[SemanticTuple] = []
        for node in self.nodes:
            out.append((node.obj,))
            out.extend((node.obj, a) for a in node.attributes)
        out.extend((r.source.obj, r.predicate, r.target.obj) for r in self.relations)
        return out

    def readable(self) -> list[tuple[str, ...]]:
        """:meth:`tuples` as word strings (concept words sorted and joined by ``/``)."""
        return [tuple(c.text() for c in t) for t in self.tuples()]

    def __repr__(self) -> str:
        return f"SceneGraph({len(self.nodes)} nodes, {len(self.relations)} relations)"


def build_graph(captions: Iterable[Sequence[Sequence[str]]], synsets: SynsetLookup,
                merge_similar: bool = True) -> SceneGraph:
    """One graph from the proposed tuples of one or more captions, added in order.

    Reference captions of an item share one graph (``SpiceParser.parseCaptions(refs, chunks)``);
    a candidate gets its own.
    """
    graph = SceneGraph(synsets, merge_similar)
    for proposed in captions:
        for t in proposed:
            graph.add_tuple(t)
    return graph
