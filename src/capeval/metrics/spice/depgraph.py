"""A small dependency graph with the iteration orders of CoreNLP 3.6's ``SemanticGraph``.

SPICE reads CoreNLP's collapsed, CC-processed dependencies and walks them with Semgrex.
Which tuples come out, and in which order, depends on how Java iterates that graph:

- vertices and children live in ``java.util.HashMap``s keyed by ``IndexedWord``, whose
  hash is the token index (1-based) for a one-sentence caption, so iteration goes by
  ``index & (capacity - 1)`` (:func:`java_order`), which is ascending index unless an index
  reaches the table capacity (children of a node: capacity 16, so indices >= 16 wrap);
- ``SemgrexMatcher.find`` visits nodes in a topological order (a reverse post-order DFS,
  :meth:`DepGraph.topological`), or in vertex-set order when the graph has a cycle;
- ``getParent`` is the first node on a path to a root (:meth:`DepGraph.parent`).

Nodes are token indices; edges are ``(governor, dependent, relation)`` with CoreNLP's
relation names (``nsubj``, ``nmod:on``, ``conj:and``, ``compound:prt``, ...); several
edges between the same pair are allowed, as in CoreNLP's ``DirectedMultiGraph``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

Rel = str
RelTest = Callable[[Rel], bool]


@dataclass
class Node:
    """One token: 1-based ``index``, surface ``word``, ``lemma`` (CoreNLP style) and PTB ``tag``."""

    index: int
    word: str
    lemma: str
    tag: str

    def __repr__(self) -> str:  # compact, for test failure messages
        return f"{self.word}-{self.index}/{self.tag}"


def java_capacity(n: int, minimum: int = 16) -> int:
    """Table size of a ``java.util.HashMap`` holding ``n`` keys (load factor 0.75)."""
    cap = minimum
    while n > cap * 0.75:
        cap *= 2
    return cap


def java_order(indices: Iterable[int], capacity: int | None = None) -> list[int]:
    """``indices`` in the order a Java ``HashMap``/``HashSet`` of ``IndexedWord`` iterates them.

    ``IndexedWord.hashCode`` is the token index for sentence 0 (no document id), so the
    bucket is ``index & (capacity - 1)``; ties (rare) are broken by index.
    """
    items = sorted(set(indices))
    cap = capacity if capacity is not None else java_capacity(len(items))
    if not items or items[-1] < cap:
        return items  # every index is its own bucket: ascending order
    return sorted(items, key=lambda i: (i & (cap - 1), i))


def rel_is(*names: str) -> RelTest:
    """A relation test matching any of ``names`` exactly (Semgrex ``>name``)."""
    wanted = frozenset(names)
    return lambda rel: rel in wanted


class DepGraph:
    """Dependency graph over :class:`Node` s, mutable like CoreNLP's ``SemanticGraph``."""

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        self.nodes: dict[int, Node] = {}
        self._out: dict[int, dict[int, list[Rel]]] = {}
        self._in: dict[int, dict[int, list[Rel]]] = {}
        self.roots: list[int] = []
        self._ordered: dict[int, tuple[tuple[int, Rel], ...]] = {}  # out_edges cache, cleared on change
        self._topo: list[int] | None = None
        for node in nodes:
            self.add_node(node)

    # -- construction ----------------------------------------------------------------
    def _changed(self) -> None:
        self._ordered.clear()
        self._topo = None

    def add_node(self, node: Node) -> None:
        self._changed()
        self.nodes[node.index] = node
        self._out.setdefault(node.index, {})
        self._in.setdefault(node.index, {})

    def add_root(self, index: int) -> None:
        self._changed()
        if index not in self.roots:
            self.roots.append(index)

    def remove_root(self, index: int) -> None:
        self._changed()
        if index in self.roots:
            self.roots.remove(index)

    def add_edge(self, gov: int, dep: int, rel: Rel) -> None:
        """Add ``gov -rel-> dep`` (a second edge between the same pair is kept, as in Java)."""
        self._changed()
        self._out[gov].setdefault(dep, []).append(rel)
        self._in[dep].setdefault(gov, []).append(rel)

    def remove_edge(self, gov: int, dep: int, rel: Rel | None = None) -> bool:
        """Remove one ``gov -> dep`` edge (the first one, or the first with ``rel``)."""
        rels = self._out.get(gov, {}).get(dep)
        if not rels:
            return False
        which = rels.index(rel) if rel is not None and rel in rels else (0 if rel is None else -1)
        if which < 0:
            return False
        self._changed()
        removed = rels.pop(which)
        if not rels:
            del self._out[gov][dep]
        back = self._in[dep][gov]
        back.remove(removed)
        if not back:
            del self._in[dep][gov]
        return True

    def set_rel(self, gov: int, dep: int, old: Rel, new: Rel) -> None:
        """Rename one edge in place (keeps its position, like ``SemanticGraphEdge.setRelation``)."""
        self._changed()
        rels = self._out[gov][dep]
        rels[rels.index(old)] = new
        back = self._in[dep][gov]
        back[back.index(old)] = new

    # -- queries ---------------------------------------------------------------------
    def __contains__(self, index: object) -> bool:
        return index in self.nodes

    def tag(self, index: int) -> str:
        return self.nodes[index].tag

    def out_edges(self, gov: int) -> tuple[tuple[int, Rel], ...]:
        """Outgoing ``(dependent, relation)`` pairs in Java iteration order."""
        found = self._ordered.get(gov)
        if found is None:
            targets = self._out.get(gov, {})
            order = java_order(targets, java_capacity(len(targets)))
            found = self._ordered[gov] = tuple((dep, rel) for dep in order for rel in targets[dep])
        return found

    def in_edges(self, dep: int) -> list[tuple[int, Rel]]:
        """Incoming ``(governor, relation)`` pairs in Java iteration order."""
        sources = self._in.get(dep, {})
        order = java_order(sources, java_capacity(len(sources)))
        return [(gov, rel) for gov in order for rel in sources[gov]]

    def in_edges_sorted(self, dep: int) -> list[tuple[int, Rel]]:
        """Incoming edges sorted by governor index, then relation (``getIncomingEdgesSorted``)."""
        return sorted(self.in_edges(dep))

    def out_edges_sorted(self, gov: int) -> list[tuple[int, Rel]]:
        """Outgoing edges sorted by dependent index, then relation (``getOutEdgesSorted``)."""
        return sorted(self.out_edges(gov))

    def children(self, gov: int, test: RelTest | None = None) -> list[int]:
        """Dependents of ``gov`` (optionally only over edges whose relation passes ``test``)."""
        return [dep for dep, rel in self.out_edges(gov) if test is None or test(rel)]

    def children_set(self, gov: int, rel: Rel) -> list[int]:
        """``getChildrenWithReln``: a ``HashSet`` of the dependents over ``rel`` (capacity 16)."""
        return java_order(self.children(gov, rel_is(rel)), 16)

    def child(self, gov: int, rel: Rel) -> int | None:
        """``getChildWithReln``: the first dependent over ``rel``, or ``None``."""
        for dep, r in self.out_edges(gov):
            if r == rel:
                return dep
        return None

    def has_child(self, gov: int, test: RelTest) -> bool:
        return any(test(rel) for _, rel in self.out_edges(gov))

    def relations(self, gov: int, dep: int) -> list[Rel]:
        return list(self._out.get(gov, {}).get(dep, ()))

    def is_leaf(self, index: int) -> bool:
        return not self._out.get(index)

    def vertices(self) -> list[int]:
        """The vertex set in Java ``HashMap`` order."""
        return java_order(self.nodes)

    def sorted_vertices(self) -> list[int]:
        return sorted(self.nodes)

    def first_root(self) -> int | None:
        """``getFirstRoot``: the first root in ``HashSet`` order."""
        return java_order(self.roots)[0] if self.roots else None

    def edges(self) -> Iterator[tuple[int, int, Rel]]:
        """All edges, governors and dependents in Java order."""
        for gov in self.vertices():
            for dep, rel in self.out_edges(gov):
                yield gov, dep, rel

    # -- paths -----------------------------------------------------------------------
    def parent(self, index: int) -> int | None:
        """``getParent``: the first node on a path from ``index`` to a root (``None`` for a
        root, or when no root can be reached). Parents are tried in index order."""
        if index in self.roots:
            return None
        path = self._path_to_root(index, [index])
        return path[0] if path else None

    def _path_to_root(self, index: int, used: list[int]) -> list[int] | None:
        parents = [p for p in sorted(self._in.get(index, {})) if p not in used]
        for par in parents:
            if par in self.roots:
                return [par]
            rest = self._path_to_root(par, used + [par])
            if rest is not None:
                return [par] + rest
        return None

    def topological(self) -> list[int]:
        """Semgrex's node order: reverse post-order DFS, or the vertex order on a cycle."""
        if self._topo is None:
            self._topo = self._topological()
        return list(self._topo)

    def _topological(self) -> list[int]:
        result: list[int] = []
        temporary: set[int] = set()
        permanent: set[int] = set()

        def visit(v: int) -> bool:
            temporary.add(v)
            for dep, _ in self.out_edges(v):
                if dep in permanent:
                    continue
                if dep in temporary or not visit(dep):
                    return False
            result.append(v)
            permanent.add(v)
            return True

        for vertex in self.vertices():
            if vertex not in temporary and not visit(vertex):
                return self.vertices()
        return result[::-1]

    def describe(self) -> list[str]:
        """``rel(gov-i, dep-j)`` lines sorted by dependent, for debugging and tests."""
        lines = [f"root(ROOT-0, {self.nodes[r].word}-{r})" for r in sorted(self.roots)]
        edges = sorted(self.edges(), key=lambda e: (e[1], e[0]))
        lines += [f"{rel}({self.nodes[g].word}-{g}, {self.nodes[d].word}-{d})" for g, d, rel in edges]
        return lines
