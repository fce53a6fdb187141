"""Basic UD v1 -> CoreNLP 3.6's *collapsed, CC-processed* dependencies (what SPICE reads).

The steps CoreNLP's ``UniversalEnglishGrammaticalStructure.collapseDependencies`` runs
(without extra dependencies: SPICE's ``depparse.extradependencies`` setting never reached
the ``parse`` annotator it used), in its order:

1. passive subjects: ``nsubj`` of a verb with ``auxpass`` becomes ``nsubjpass``;
2. multi-word prepositions (CoreNLP's own lists, including the two entries that never
   match because of a leading space, `` depending_on`` and `` prior_to``): ``next to``,
   ``out of``, ``in front of``, ``on top of``, ... become ``case`` + ``mwe`` on the noun;
3. case-marked relations: ``nmod`` -> ``nmod:<prep>`` (``nmod:in_front_of`` for a
   multi-word one; ``nmod:agent`` for ``by`` under a verb with ``auxpass``), also
   ``acl:<prep>`` / ``advcl:<prep>``;
4. ``conj`` -> ``conj:<cc word>`` (``and``, ``or``, ``but``; ``negcc`` for "but not"...);
5. CC processing: every conjunct gets its first conjunct's incoming relations (except
   ``case``), and verbal/adjectival conjuncts without a subject get its subject.

Not reproduced (rare in captions): expansion of coordinated prepositions ("to and from")
and of coordinated PPs, which copy nodes.
"""

from __future__ import annotations

from capeval.metrics.spice.depgraph import DepGraph, rel_is

TWO_WORD_PREPS_REGULAR = (
    "across_from along_with alongside_of apart_from as_for as_from as_of as_per as_to aside_from based_on "
    "close_by close_to contrary_to compared_to compared_with _depending_on except_for exclusive_of far_from "
    "followed_by inside_of irrespective_of next_to near_to off_of out_of outside_of owing_to preliminary_to "
    "preparatory_to previous_to _prior_to pursuant_to regardless_of subsequent_to thanks_to together_with"
).split()
TWO_WORD_PREPS_COMPLEX = (
    "apart_from as_from aside_from away_from close_by close_to contrary_to far_from next_to near_to out_of "
    "outside_of pursuant_to regardless_of together_with"
).split()
THREE_WORD_PREPS = (
    "by_means_of in_accordance_with in_addition_to in_case_of in_front_of in_lieu_of in_place_of "
    "in_spite_of on_account_of on_behalf_of on_top_of with_regard_to with_respect_to"
).split()
CLAUSE_RELATIONS = frozenset(["conj", "xcomp", "ccomp", "acl", "advcl", "acl:relcl", "parataxis", "appos", "list"])
SUBJECTS = frozenset(["nsubj", "nsubjpass", "csubj", "csubjpass"])
NMOD_LIKE = rel_is("nmod", "advcl", "acl")


def collapse(graph: DepGraph) -> DepGraph:
    """Run CoreNLP's collapsing + CC processing on ``graph`` in place; returns it."""
    if not graph.roots:
        return graph
    correct_passive_subjects(graph)
    multiword_prepositions(graph)
    case_marked_relations(graph)
    conjunction_relations(graph)
    propagate_conjuncts(graph)
    return graph


def correct_passive_subjects(graph: DepGraph) -> None:
    for gov in graph.topological():
        if graph.has_child(gov, rel_is("auxpass")):
            for dep in graph.children(gov, rel_is("nsubj", "csubj")):
                rel = "nsubjpass" if "nsubj" in graph.relations(gov, dep) else "csubjpass"
                graph.remove_edge(gov, dep, rel[:-4])
                graph.add_edge(gov, dep, rel)


# -- multi-word prepositions ---------------------------------------------------------------
def _ngrams(graph: DepGraph, n: int) -> dict[str, list[int]]:
    """word_word(_word) over consecutive vertices -> indices of the first word."""
    words = graph.sorted_vertices()
    found: dict[str, list[int]] = {}
    for i in range(n - 1, len(words)):
        key = "_".join(graph.nodes[w].word.lower() for w in words[i - n + 1 : i + 1])
        found.setdefault(key, []).append(words[i - n + 1])
    return found


def _make_mwe(graph: DepGraph, gov: int, rel: str, words: list[int]) -> None:
    """``rel(gov, w1)`` + ``mwe(w1, w2..)``, each word detached from its parent first."""
    head = None
    for word in words:
        parent = graph.parent(word)
        if parent is not None:
            graph.remove_edge(parent, word)
        if head is None:
            graph.add_edge(gov, word, rel)
            head = word
        else:
            graph.add_edge(head, word, "mwe")


def _move_children(graph: DepGraph, src: int, dst: int) -> None:
    for dep, rel in graph.out_edges_sorted(src):
        graph.remove_edge(src, dep, rel)
        graph.add_edge(dst, dep, rel)


def multiword_prepositions(graph: DepGraph) -> None:
    bigrams, trigrams = _ngrams(graph, 2), _ngrams(graph, 3)
    for gram in TWO_WORD_PREPS_REGULAR:
        for i in bigrams.get(gram, ()):
            w1, w2 = i, i + 1
            if w1 not in graph or w2 not in graph:
                continue
            gov = next((g for g in graph.topological()
                        if w1 in graph.children(g, rel_is("case", "advmod")) and graph.is_leaf(w1)
                        and w2 in graph.children(g, rel_is("case")) and graph.is_leaf(w2)), None)
            if gov is not None:
                _make_mwe(graph, gov, "case", [w1, w2])
    for gram in TWO_WORD_PREPS_COMPLEX:
        for i in bigrams.get(gram, ()):
            _complex_two_word(graph, i, i + 1)
    for gram in THREE_WORD_PREPS:
        for i in trigrams.get(gram, ()):
            _three_word(graph, i, i + 1, i + 2)


def _complex_two_word(graph: DepGraph, w1: int, w2: int) -> None:
    """``advmod(gov, next)`` + ``nmod(next, n)`` + ``case(n, to)`` -> ``nmod(gov, n)`` + mwe."""
    if w1 not in graph or w2 not in graph:
        return
    gov2 = next((n for n in graph.children(w1, rel_is("nmod"))
                 if w2 in graph.children(n, rel_is("case")) and graph.is_leaf(w2)), None)
    if gov2 is None:
        return
    if w1 in graph.roots:
        graph.remove_edge(w1, gov2, "nmod")
        graph.remove_root(w1)
        graph.add_root(gov2)
    else:
        parents = graph.in_edges(w1)
        gov = parents[0][0] if parents else graph.parent(w1)
        graph.remove_edge(w1, gov2, "nmod")
        if gov is None:
            return
        rel = "nmod"
        if graph.has_child(w1, rel_is("cop")):
            up = graph.relations(gov, w1)
            if up and up[0] in CLAUSE_RELATIONS:
                rel = up[0]
        graph.add_edge(gov, gov2, rel)
    _move_children(graph, w1, gov2)
    _make_mwe(graph, gov2, "case", [w1, w2])


def _three_word(graph: DepGraph, w1: int, w2: int, w3: int) -> None:
    """``case(front, in)`` + ``nmod(front, n)`` + ``case(n, of)`` -> ``case(n, in)`` + mwe."""
    if w1 not in graph or w2 not in graph or w3 not in graph:
        return
    if not (w1 in graph.children(w2, rel_is("case")) and graph.is_leaf(w1)):
        return
    found = next(((n, r) for n, r in graph.out_edges(w2) if r in ("nmod", "acl", "advcl")
                  and w3 in graph.children(n, rel_is("case", "mark")) and graph.is_leaf(w3)), None)
    if found is None:
        return
    gov2, inner = found
    marker = "case"
    if w2 in graph.roots:
        graph.remove_edge(w2, gov2, inner)
        graph.remove_root(w2)
        graph.add_root(gov2)
    else:
        parents = graph.in_edges(w2)
        gov = parents[0][0] if parents else graph.parent(w2)
        graph.remove_edge(w2, gov2, inner)
        if gov is None:
            return
        rel = graph.relations(gov, w2)[0]
        if rel == "nmod" and inner in ("acl", "advcl"):
            rel, marker = inner, "mark"
        graph.add_edge(gov, gov2, rel)
    _move_children(graph, w2, gov2)
    _make_mwe(graph, gov2, marker, [w1, w2, w3])


# -- relation names ------------------------------------------------------------------------
def _marked(rel: str, name: str) -> str:
    base = rel.split(":", 1)[0]
    return f"{base}:{name}" if base in ("nmod", "advcl", "acl") else rel


def case_marked_relations(graph: DepGraph) -> None:
    """``nmod`` + ``case`` marker(s) -> ``nmod:<marker>`` (CoreNLP's four passes, in order)."""
    for gov in graph.topological():  # passive agent
        if not graph.has_child(gov, rel_is("auxpass")):
            continue
        for mod, rel in graph.out_edges(gov):
            if rel == "nmod" and any(graph.nodes[c].word.lower() == "by" for c in graph.children(mod, rel_is("case"))):
                graph.set_rel(gov, mod, "nmod", "nmod:agent")
    for size in (3, 2, 1):
        previous: list[int] = []
        for gov in graph.topological():
            for mod, rel in graph.out_edges(gov):
                if not NMOD_LIKE(rel):
                    continue
                for c1 in graph.children(mod, rel_is("case")):
                    extra = graph.children(c1, rel_is("mwe"))
                    if size == 1:
                        groups = [[c1]]
                    elif size == 2:
                        groups = [[c1, c2] for c2 in extra]
                    else:
                        groups = [[c1, c2, c3] for c2 in extra for c3 in extra if c3 != c2]
                    for markers in groups:
                        markers = sorted(markers)
                        if markers == previous:
                            continue
                        current = graph.relations(gov, mod)[0]
                        graph.set_rel(gov, mod, current, _marked(current, _join(graph, gov, mod, markers)))
                        previous = markers


def _join(graph: DepGraph, gov: int, mod: int, markers: list[int]) -> str:
    """Adjacent markers joined with ``_`` (a non-adjacent run adds an extra edge, as in Java)."""
    name, last = "", 0
    for cm in markers:
        word = graph.nodes[cm].word
        if last == 0 or cm == last + 1:
            name = f"{name}_{word}" if name else word
        else:
            current = graph.relations(gov, mod)[0]
            graph.add_edge(gov, mod, _marked(current, name.lower()))
            name = word
        last = cm
    return name.lower()


def _conj_value(graph: DepGraph, cc: int) -> str:
    word = graph.nodes[cc].word
    low = word.lower()
    prev = graph.nodes.get(cc - 1)
    if low == "not" and prev is not None and prev.word.lower() == "but":
        return "conj:negcc"
    nxt = graph.nodes.get(cc + 1)
    if nxt is None:
        return f"conj:{word}"
    second = nxt.word.lower()
    if low == "but" and second in ("rather", "also"):
        low = "negcc" if second == "rather" else "and"
    elif (low, second) in (("if", "not"), ("instead", "of"), ("rather", "than")):
        low = "negcc"
    elif low == "as" and second == "well":
        low = "and"
    elif low == "not" and second == "to":
        third = graph.nodes.get(cc + 2)
        if third is not None and third.word.lower() == "mention":
            low = "and"
    return f"conj:{low}"


def conjunction_relations(graph: DepGraph) -> None:
    """``conj`` -> ``conj:<cc>`` for governors that have a ``cc`` dependent."""
    for gov in graph.topological():
        conjuncts = graph.children(gov, lambda r: r == "conj" or r.startswith("conj:"))
        for cc in graph.children(gov, rel_is("cc")):
            for dep in conjuncts:
                current = graph.relations(gov, dep)[0]
                if current == "conj" or dep > cc:
                    graph.set_rel(gov, dep, current, _conj_value(graph, cc))


def propagate_conjuncts(graph: DepGraph) -> None:
    """CoreNLP's ``treatCC``: shared governors and subjects of coordinated words."""
    incoming = {v: sorted(graph.in_edges(v)) for v in graph.nodes}
    subject: dict[int, tuple[int, str]] = {}
    passive_aux: set[int] = set()
    relcl_heads: set[int] = set()
    edges = list(graph.edges())
    for gov, dep, rel in edges:
        if rel == "auxpass":
            passive_aux.add(gov)
        if rel in SUBJECTS and gov not in subject:
            subject[gov] = (dep, rel)
        if rel == "acl:relcl":
            relcl_heads.add(gov)
    for gov, dep, rel in edges:
        if not rel.startswith("conj:"):
            continue
        for new_gov, new_rel in incoming.get(gov, ()):
            if new_gov == dep or new_rel == "case":
                continue
            if gov in relcl_heads and dep in relcl_heads and new_rel in ("dobj", "nsubj"):
                continue
            graph.add_edge(new_gov, dep, new_rel)
        tag = graph.nodes[dep].tag
        if gov in subject and tag.startswith(("VB", "JJ")) and dep not in subject:
            subj, srel = subject[gov]
            active = tag in ("VB", "VBZ", "VBP") or tag.startswith("JJ")
            if srel == "nsubjpass" and active:
                srel = "nsubj"
            elif srel == "csubjpass" and active:
                srel = "csubj"
            elif srel in ("nsubj", "csubj") and dep in passive_aux:
                srel += "pass"
            graph.add_edge(dep, subj, srel)
