"""SPICE after parsing: concepts, scene graphs (merging), tuple matching, categories, P/R/F,
the ``spice`` scorer with a stand-in parser, and ``spice-java``'s plumbing.

Oracles: SPICE 1.0's own unit tests (SpiceUnitTest.java), values printed by its Java
classes, and a harness that feeds the same handmade tuples to the jar's ``SceneGraph`` /
``SpiceStats`` (CoreNLP's two graph classes replaced by small stand-ins, as CoreNLP is not
needed after parsing). The end-to-end comparison with the official jar needs CoreNLP 3.6.0
and skips (with the reason) where it is absent.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from capeval.errors import InputError, ResourceError
from capeval.metrics.spice.graph import SceneGraph, build_graph, synset_key
from capeval.metrics.spice.java import SpiceJava, java_major, missing_files, spice_home
from capeval.metrics.spice.scorer import Spice
from capeval.metrics.spice.tuples import (
    Concept,
    Evaluation,
    count_matches,
    evaluate,
    macro_average,
    tuples_equal,
    tuples_similar,
)

from _reference import require_javac, require_module

# a tiny synonym table: word -> synset ids (what METEOR's WordNet tables give, made up)
SYN = {
    "car": {1, 2}, "auto": {1, 3}, "automobile": {1}, "street": {20}, "road": {20, 21}, "man": {30, 31},
    "guy": {31}, "dog": {40}, "puppy": {41}, "red": {50, 51}, "crimson": {51}, "blue": {60}, "azure": {60},
    "big": {70}, "large": {70, 71}, "on": {80}, "ride": {90}, "sit_on": {91}, "bike": {100, 101},
    "bicycle": {100, 102}, "wheel": {101}, "motorcycle": {102}, "black": {110}, "dark": {110, 111},
    "sky": {120},
}


def syn(key: str) -> frozenset:
    return frozenset(SYN.get(key, ()))


def graph(*tuples: list[str], merge: bool = True) -> SceneGraph:
    return build_graph([list(tuples)], syn, merge)


def readable(g: SceneGraph) -> set[tuple[str, ...]]:
    return set(g.readable())


def concept(word: str, *ids: int) -> Concept:
    return Concept(word, ids)


# --------------------------------------------------------------------------- SpiceUnitTest.java


def test_semantic_concept_as_spice_unit_test() -> None:
    blue, also_blue, not_blue = concept("blue", 1), concept("blue", 1), concept("blue", 2)
    azure, red, color = concept("azure", 1), concept("red", 2), concept("color", 1, 2, 3)
    dog, cat = concept("dog", 10), concept("cat", 11)
    assert blue == also_blue and blue != not_blue and blue != azure and blue != red and blue != color
    assert red != color
    assert blue.similar_to(also_blue) and blue.similar_to(not_blue) and blue.similar_to(azure)
    assert not blue.similar_to(red) and blue.similar_to(color) and red.similar_to(color)
    dog_cat = concept("dog", 10)
    assert not dog_cat.merge(dog) and dog_cat == dog
    assert dog_cat.merge(cat)
    assert dog_cat.words == {"dog", "cat"} and dog_cat.synsets == {10, 11}


def test_semantic_tuple_as_spice_unit_test() -> None:
    dog, blue, also_blue = concept("dog", 10), concept("blue", 1), concept("blue", 1)
    azure, red, cat = concept("azure", 1), concept("red", 2), concept("cat", 11)
    blue_dog = (dog, blue)
    assert tuples_equal(blue_dog, (dog, blue)) and tuples_equal(blue_dog, (dog, also_blue))
    assert not tuples_equal(blue_dog, (dog, azure)) and not tuples_equal(blue_dog, (dog, red))
    assert not tuples_equal(blue_dog, (cat, blue))
    assert tuples_similar(blue_dog, (dog, also_blue)) and tuples_similar(blue_dog, (dog, azure))
    assert not tuples_similar(blue_dog, (dog, red)) and not tuples_similar(blue_dog, (cat, blue))
    assert not tuples_similar((dog,), blue_dog)  # different sizes never match
    red_dog = (concept("dog", 10), concept("red", 2))
    for mine, other in zip(red_dog, blue_dog):  # SemanticTuple.merge
        mine.merge(other)
    assert red_dog[0].words == {"dog"} and red_dog[0].synsets == {10}
    assert red_dog[1].words == {"blue", "red"} and red_dog[1].synsets == {1, 2}


BUS_CANDIDATE = [["bus"], ["bus", "red"], ["bus", "street", "on"], ["bus", "double-decker"], ["street"], ["bus"],
                 ["bus", "double-decker"], ["bus", "street", "on"], ["bus"]]
BUS_REFERENCE = [["bus"], ["bus", "red"], ["bus", "double-decker"], ["street"], ["bus", "street", "on"]]


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("wordnet", [False, True])
def test_tuple_set_as_spice_unit_test(merge: bool, wordnet: bool) -> None:
    """testTupleSet: duplicates collapse; all 5 candidate tuples match exactly."""
    lookup = syn
    if wordnet:
        from capeval.metrics.spice.wordnet import WordNetSynsets

        require_module("pycocoevalcap", "pycocoevalcap==1.2 holds METEOR 1.5's WordNet tables (test extra)")
        lookup = WordNetSynsets()
    cand = build_graph([BUS_CANDIDATE], lookup, merge).tuples()
    ref = build_graph([BUS_REFERENCE], lookup, merge).tuples()
    assert count_matches(cand, ref, synonyms=False) == len(cand) == 5


def test_scene_graph_demo_as_spice_prints_it() -> None:
    """SceneGraph.main's demo (its ``automobile near building`` has object and predicate
    swapped, kept), with the tuples SPICE 1.0 prints for it, merging on and off."""
    from capeval.metrics.spice.wordnet import WordNetSynsets

    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds METEOR 1.5's WordNet tables (test extra)")
    demo = [["horse"], ["horse", "stone-gray"], ["horse", "stone-grey"], ["horse", "building", "in front of"],
            ["building", "car", "behind"], ["motorcar", "blue"], ["auto"], ["automobile", "near", "building"],
            ["car", "close", "construction"]]
    car = "auto/automobile/car/motorcar"
    assert readable(build_graph([demo], WordNetSynsets())) == {
        (car,), (car, "blue"), (car, "building/construction", "close/near"), ("building",),
        ("building", "behind", car), ("close/near",), ("horse",), ("horse", "in front of", "building"),
        ("horse", "stone-gray/stone-grey")}
    assert readable(build_graph([demo], WordNetSynsets(), merge_similar=False)) == {
        ("auto",), ("automobile",), ("automobile", "building", "near"), ("building",), ("building", "behind", "car"),
        ("car",), ("car", "construction", "close"), ("close",), ("horse",), ("horse", "in front of", "building"),
        ("horse", "stone-gray"), ("horse", "stone-grey"), ("motorcar",), ("motorcar", "blue"), ("near",)}


# --------------------------------------------------------------------------- graph building


def test_objects_merge_into_the_most_similar_node() -> None:
    g = graph(["car"], ["street"], ["auto"])  # auto shares synset 1 with car
    assert readable(g) == {("auto/car",), ("street",)}
    # Jaccard decides between candidates: road {20,21} vs street {20}: 1/2; a shared word counts 1
    g = graph(["street"], ["car"], ["road"], ["car", "red"])
    assert readable(g) == {("road/street",), ("car",), ("car", "red")}
    g = graph(["man"], ["guy"], merge=False)
    assert readable(g) == {("man",), ("guy",)}


def test_most_similar_node_wins_and_first_wins_ties() -> None:
    table = {"a": {1, 2}, "b": {3, 4}, "c": {2, 3, 4}, "d": {9}, "g": {8}, "e": {9, 8}, "f": {9, 8}}
    lookup = lambda k: frozenset(table.get(k, ()))
    g = build_graph([[["a"], ["b"], ["c"]]], lookup)  # c: 1/4 with a, 2/3 with b
    assert readable(g) == {("a",), ("b/c",)}
    # e is equally similar to d and g (1/2): the first node in insertion order takes it
    g = build_graph([[["d"], ["x"], ["g"], ["e"]]], lookup)
    assert readable(g) == {("d/e",), ("g",), ("x",)}
    # an equal concept is returned as is, even when an earlier node is as similar
    g = build_graph([[["e"], ["f"]]], lookup, merge_similar=False)
    assert [n.obj.text() for n in g.nodes] == ["e", "f"]
    assert g.add_object("f") is g.nodes[1]


def test_attributes_merge_dedupe_and_first_similar_wins() -> None:
    g = graph(["sky", "black"], ["sky", "blue"], ["sky", "dark"], ["sky", "black"])
    # dark is similar to black only here; a repeated attribute is not added twice
    assert readable(g) == {("sky",), ("sky", "black/dark"), ("sky", "blue")}
    g = graph(["dog", "red"], ["dog", "crimson"], merge=False)
    assert readable(g) == {("dog",), ("dog", "red"), ("dog", "crimson")}
    g = graph(["dog", "red"], ["dog", "red"], merge=False)
    assert len(g.tuples()) == 2


def test_relations_be_prefix_duplicates_and_merging() -> None:
    g = graph(["man", "street", "be on"], ["man", "street", "on"], ["guy", "road", "ride"])
    # "be on" -> "on" (a duplicate); guy joins man, road joins street; ride is not similar to on
    assert readable(g) == {("guy/man",), ("road/street",), ("guy/man", "on", "road/street"),
                           ("guy/man", "ride", "road/street")}
    g = graph(["man", "bike", "sit on"], ["man", "bike", "sit_on"])  # the key maps spaces to "_"
    assert readable(g) == {("man",), ("bike",), ("man", "sit on/sit_on", "bike")}
    # the object may merge into the subject's node: a relation from a node to itself
    g = graph(["car", "auto", "on"])
    assert readable(g) == {("auto/car",), ("auto/car", "on", "auto/car")}
    # "be" alone keeps its word (only a leading "be " is removed)
    assert ("dog", "be", "man") in readable(graph(["dog", "man", "be"]))


def test_reference_captions_share_one_graph_and_other_sizes_are_ignored() -> None:
    g = build_graph([[["car"], ["car", "red"]], [["auto", "crimson"]], [[], ["x", "y", "z", "w"]]], syn)
    assert readable(g) == {("auto/car",), ("auto/car", "crimson/red")}
    assert synset_key("  Sit On ") == "sit_on"


# --------------------------------------------------------------------------- matching and statistics


def test_non_exclusive_matching_can_push_recall_and_f1_above_one() -> None:
    """Two candidate objects match the one merged reference object: SPICE counts both."""
    cand = graph(["motorcycle"], ["wheel"]).tuples()
    ref = build_graph([[["bicycle"]], [["bike"]]], syn).tuples()
    ev = evaluate(cand, ref)["All"]
    assert (ev.tp, ev.fp, ev.fn, ev.pr, ev.re) == (2, 0, -1, 1.0, 2.0)
    assert ev.f == pytest.approx(4 / 3)


def test_synonym_and_exact_matching() -> None:
    cand = graph(["car", "red"], ["dog"]).tuples()
    ref = graph(["automobile", "crimson"], ["puppy"]).tuples()
    assert count_matches(cand, ref, synonyms=True) == 2  # (car), (car, red); dog/puppy share nothing
    assert count_matches(cand, ref, synonyms=False) == 0
    assert count_matches(cand, graph(["car", "red"]).tuples(), synonyms=False) == 2


def test_empty_graphs_follow_spice_rules() -> None:
    some = graph(["dog", "two"]).tuples()
    ev = evaluate([], some)  # empty candidate: P 0, R 0, F 0
    assert (ev["All"].f, ev["All"].pr, ev["All"].re, ev["All"].fn) == (0.0, 0.0, 0.0, 2)
    assert ev["Cardinality"].f == 0.0 and math.isnan(ev["Color"].f)
    ev = evaluate(some, [])  # empty references: "All" is 0, every category NaN
    assert (ev["All"].f, ev["All"].pr, ev["All"].re, ev["All"].fp) == (0.0, 0.0, 0.0, 2)
    assert all(math.isnan(ev[k].f) and math.isnan(ev[k].pr) and math.isnan(ev[k].re) for k in ev if k != "All")
    ev = evaluate([], [])
    assert ev["All"].to_dict() == {"tp": 0, "fp": 0, "fn": 0, "f": 0.0, "pr": 0.0, "re": 0.0, "numImages": 1}


def test_categories_count_color_size() -> None:
    cand = graph(["dog", "two"], ["car", "red"], ["dog", "big"], ["man", "car", "ride"]).tuples()
    ref = graph(["dog", "two"], ["car", "crimson"], ["car", "red"], ["dog", "large"], ["man", "car", "ride"]).tuples()
    ev = evaluate(cand, ref)
    # the reference's car has one merged attribute "crimson/red": in no colour category
    assert (ev["Color"].tp, ev["Color"].fp, ev["Color"].fn) == (0, 1, 0) and math.isnan(ev["Color"].f)
    assert (ev["Cardinality"].tp, ev["Cardinality"].f) == (1, 1.0)
    assert (ev["Size"].tp, ev["Size"].fp, ev["Size"].fn) == (1, 0, 0)  # big ~ large (a shared synset)
    assert (ev["Object"].tp, ev["Relation"].tp, ev["Attribute"].tp) == (3, 1, 3)
    assert ev["All"].tp == 7 and ev["All"].f == pytest.approx(1.0)


def test_macro_average_skips_nan_items() -> None:
    a = Evaluation.of_counts(2, 4, 1, allow_nan=True)  # P .5 R .25
    b = Evaluation.of_counts(3, 0, 0, allow_nan=True)  # NaN
    c = Evaluation.of_counts(1, 1, 1, allow_nan=True)
    avg = macro_average([a, b, c])
    assert avg.num_images == 2 and (avg.tp, avg.fp, avg.fn) == (2, 4, 3)
    assert avg.f == (a.f + c.f) / 2 and avg.pr == (0.5 + 1.0) / 2
    assert math.isnan(macro_average([b]).f) and macro_average([b]).num_images == 0
    assert a.f == 2.0 * (0.5 * 0.25) / (0.5 + 0.25)


# --------------------------------------------------------------------------- the scorer


class DictParser:
    """Stands in for the spaCy parser: tokenised caption -> proposed tuples; counts calls."""

    version = "test"

    def __init__(self, table: dict[str, list[list[str]]]):
        self.table = table
        self.seen: list[str] = []

    def parse_many(self, captions: list[str]) -> list[list[tuple[str, ...]]]:
        self.seen.extend(captions)
        return [[tuple(t) for t in self.table.get(c, [])] for c in captions]


PARSES = {
    "a red car on the street": [["car"], ["car", "red"], ["street"], ["car", "street", "on"]],
    "an auto on a road": [["auto"], ["road"], ["auto", "road", "on"]],
    "a crimson automobile": [["automobile"], ["automobile", "crimson"]],
    "two dogs": [["dog"], ["dog", "two"]],
    "a puppy": [["puppy"]],
}


def test_spice_scorer_end_to_end_with_a_stand_in_parser() -> None:
    parser = DictParser(PARSES)
    scorer = Spice(parser=parser, synonyms=syn)
    cands = {"a": "A red car on the street.", "b": "Two dogs", "c": "  "}
    refs = {"a": ["An auto on a road", "a crimson automobile"], "b": ["a puppy", "A puppy!"], "c": ["two dogs"]}
    res = scorer.score(cands, refs)["spice"]
    # each distinct tokenised caption is parsed once; blank ones are not parsed
    assert sorted(parser.seen) == sorted(set(parser.seen)) and "" not in parser.seen
    expect = {}
    for i, cand in (("a", "a red car on the street"), ("b", "two dogs"), ("c", "")):
        ref_tuples = [PARSES.get(r.lower().strip(".!"), []) for r in refs[i]]
        expect[i] = evaluate(graph(*PARSES.get(cand, [])).tuples(), build_graph(ref_tuples, syn).tuples())
    assert dict(res.items) == {i: e["All"].f for i, e in expect.items()}
    assert res.items["a"] == 1.0 and res.items["c"] == 0.0
    assert res.system == sum(res.items.values()) / 3
    assert res.extras["scores"]["b"]["Cardinality"]["fp"] == 1 and math.isnan(res.extras["scores"]["b"]["Cardinality"]["f"])
    assert res.extras["precision"]["b"] == 0.0 and set(res.extras["averages"]) == {
        "All", "Object", "Attribute", "Relation", "Cardinality", "Color", "Size"}
    assert res.extras["averages"]["All"]["numImages"] == 3
    sig = str(res.signature)
    assert "metric:spice" in sig and "parser:DictParser-test" in sig and "synsets:yes" in sig and "merge:yes" in sig
    assert "tok:ptb" in sig and "synonyms:custom" in sig
    # chunks and forked workers change nothing
    split = Spice(parser=DictParser(PARSES), synonyms=syn, chunk_size=1, workers=2).score(cands, refs)["spice"]
    assert split.to_json() == res.to_json()
    # -noSynsets: exact matching and no merging
    strict = Spice(parser=DictParser(PARSES), synonyms=syn, synsets=False).score(cands, refs)["spice"]
    assert strict.items["a"] < 1.0 and "merge:no" in str(strict.signature)


def test_spice_scorer_rejects_bad_parsers() -> None:
    with pytest.raises(InputError, match="parse_many"):
        Spice(parser=object(), synonyms=syn)

    class Short(DictParser):
        def parse_many(self, captions):
            return []

    with pytest.raises(InputError, match="returned 0 results"):
        Spice(parser=Short({}), synonyms=syn).score({"x": "a dog"}, {"x": ["a dog"]})


# --------------------------------------------------------------------------- against SPICE's Java classes

# CoreNLP's graph classes, reduced to what SPICE's SceneGraph calls (vertices and edges in
# insertion order); IndexedWord only has to exist for SemanticConcept to link.
_STUBS = {
    "edu/stanford/nlp/util/MapFactory.java": """package edu.stanford.nlp.util;
public class MapFactory<K, V> {
  public static <K, V> MapFactory<K, V> hashMapFactory() { return new MapFactory<K, V>(); }
}
""",
    "edu/stanford/nlp/ling/IndexedWord.java": """package edu.stanford.nlp.ling;
public class IndexedWord { public String lemma() { return ""; } }
""",
    "edu/stanford/nlp/graph/DirectedMultiGraph.java": """package edu.stanford.nlp.graph;
import edu.stanford.nlp.util.MapFactory;
import java.util.*;
public class DirectedMultiGraph<V, E> {
  private final LinkedHashMap<V, LinkedHashMap<V, List<E>>> out = new LinkedHashMap<>();
  public DirectedMultiGraph(MapFactory<?, ?> a, MapFactory<?, ?> b) {}
  public boolean addVertex(V v) {
    if (out.containsKey(v)) return false;
    out.put(v, new LinkedHashMap<V, List<E>>());
    return true;
  }
  public void add(V s, V t, E e) {
    addVertex(s); addVertex(t);
    out.get(s).computeIfAbsent(t, k -> new ArrayList<E>()).add(e);
  }
  public Set<V> getAllVertices() { return new LinkedHashSet<V>(out.keySet()); }
  public List<E> getAllEdges() {
    List<E> all = new ArrayList<E>();
    for (Map<V, List<E>> m : out.values()) for (List<E> es : m.values()) all.addAll(es);
    return all;
  }
}
""",
    # stdin: {"merge", "synsets", "items": [{"test": [tuple...], "refs": [[tuple...]...]}]}
    # stdout: SpiceStats' JSON (detailed, all six categories), as the jar writes it
    "GraphHarness.java": """import edu.anu.spice.*;
import edu.cmu.meteor.aligner.SynonymDictionary;
import edu.cmu.meteor.util.Constants;
import java.io.*;
import java.net.URL;
import java.util.*;
import org.json.simple.*;
import org.json.simple.parser.JSONParser;
public class GraphHarness {
  public static void main(String[] args) throws Exception {
    JSONObject in = (JSONObject) new JSONParser().parse(new InputStreamReader(System.in, "UTF-8"));
    boolean merge = (Boolean) in.get("merge"), synsets = (Boolean) in.get("synsets");
    String base = Constants.DEFAULT_SYN_DIR_URL.toString();
    SynonymDictionary syn = new SynonymDictionary(new URL(base + "/english.exceptions"),
        new URL(base + "/english.synsets"), new URL(base + "/english.relations"));
    Map<String, TupleFilter> filters = new HashMap<String, TupleFilter>();
    filters.put("Object", TupleFilter.objectFilter);
    filters.put("Attribute", TupleFilter.attributeFilter);
    filters.put("Relation", TupleFilter.relationFilter);
    filters.put("Cardinality", TupleFilter.cardinalityFilter);
    filters.put("Color", TupleFilter.colorFilter);
    filters.put("Size", TupleFilter.sizeFilter);
    SpiceStats stats = new SpiceStats(filters, true);
    int id = 0;
    for (Object o : (JSONArray) in.get("items")) {
      JSONObject item = (JSONObject) o;
      SceneGraph test = new SceneGraph(syn, merge), ref = new SceneGraph(syn, merge);
      for (Object t : (JSONArray) item.get("test")) test.addTuple(strings(t));
      for (Object cap : (JSONArray) item.get("refs")) for (Object t : (JSONArray) cap) ref.addTuple(strings(t));
      stats.score(id++, test, ref, synsets);
    }
    Writer w = new OutputStreamWriter(System.out, "UTF-8");
    w.write(stats.toJSONString());
    w.flush();
  }
  static ArrayList<String> strings(Object a) {
    ArrayList<String> out = new ArrayList<String>();
    for (Object s : (JSONArray) a) out.add((String) s);
    return out;
  }
}
""",
}


def _spice_lib() -> Path:
    require_javac()
    home = spice_home()
    if not (home / "spice-1.0.jar").is_file():
        pytest.fail(f"pycocoevalcap is installed but {home / 'spice-1.0.jar'} is missing")
    return home


@pytest.fixture(scope="module")
def graph_harness(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``java -cp ... GraphHarness`` compiled against the jar's classes."""
    home = _spice_lib()
    src = tmp_path_factory.mktemp("spice-harness")
    for name, text in _STUBS.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text, encoding="utf-8")
    jars = [home / "spice-1.0.jar"] + [home / "lib" / j for j in ("Meteor-1.5.jar", "json-simple-1.1.1.jar",
                                                                 "guava-19.0.jar")]
    cp = os.pathsep.join(map(str, jars))
    subprocess.run(["javac", "-nowarn", "-d", str(src / "out"), "-cp", cp, *_STUBS], cwd=src, check=True,
                   capture_output=True)
    return ["java", "-cp", os.pathsep.join([str(src / "out"), cp]), "GraphHarness"]


def _random_items(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    objects = ("man guy person woman lady boy kid dog puppy cat car auto automobile motorcar street road building "
               "construction horse ball grass field shirt men people bus autobus water beach bicycle bike wheel").split()
    attrs = ("red crimson blue azure two three big large small little young old white black dark light tall short "
             "stone-gray stone-grey").split()
    rels = ["on", "in", "sit on", "be on", "ride", "hold", "near", "next to", "in front of", "wear", "play with",
            "be in", "stand on", "walk along", "have", "be", "run"]

    def caption() -> list[list[str]]:
        out = []
        for _ in range(rng.randint(0, 7)):
            k = rng.random()
            if k < 0.35:
                out.append([rng.choice(objects)])
            elif k < 0.7:
                out.append([rng.choice(objects), rng.choice(attrs)])
            else:
                out.append([rng.choice(objects), rng.choice(objects), rng.choice(rels)])
        return out

    return [{"test": caption(), "refs": [caption() for _ in range(rng.randint(0, 5))]} for _ in range(n)]


def _nan_to_none(d: dict) -> dict:
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in d.items()}


@pytest.mark.parametrize(("merge", "synsets"), [(True, True), (False, False), (True, False), (False, True)])
def test_graphs_and_scores_equal_spice_java_classes(graph_harness: list[str], merge: bool, synsets: bool) -> None:
    """Random tuples through SPICE 1.0's SceneGraph/TupleSet/SpiceStats and through ours:
    the same tuples (after merging) and bit-identical scores in every category."""
    from capeval.metrics.spice.wordnet import WordNetSynsets

    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds METEOR 1.5's WordNet tables (test extra)")
    lookup = WordNetSynsets()
    items = _random_items(1234, 300) + [
        {"test": [["motorcycle"], ["wheel"]], "refs": [[["bicycle"]], [["bike"]]]},
        {"test": BUS_CANDIDATE, "refs": [BUS_REFERENCE]},
    ]
    payload = json.dumps({"merge": merge, "synsets": synsets, "items": items})
    java = json.loads(subprocess.run(graph_harness, input=payload, capture_output=True, text=True, check=True).stdout)

    def bag(tuples: list[list[str]]) -> Counter:
        return Counter(tuple(frozenset(c.split("/")) for c in t) for t in tuples)

    for item, out in zip(items, java):
        cand, ref = build_graph([item["test"]], lookup, merge), build_graph(item["refs"], lookup, merge)
        assert bag([t["tuple"] for t in out["test_tuples"]]) == bag([c.text() for c in t] for t in cand.tuples())
        assert bag([t["tuple"] for t in out["ref_tuples"]]) == bag([c.text() for c in t] for t in ref.tuples())
        mine = evaluate(cand.tuples(), ref.tuples(), synsets)
        assert {k: _nan_to_none(e.to_dict()) for k, e in mine.items()} == out["scores"], item
        assert {k: _nan_to_none(Evaluation.from_dict(d).to_dict()) for k, d in out["scores"].items()} == out["scores"]
    if merge and synsets:  # the quirk above, as the jar computes it
        assert java[-2]["scores"]["All"]["re"] == 2.0 and java[-2]["scores"]["All"]["fn"] == -1


# --------------------------------------------------------------------------- spice-java


def _fake_java(tmp_path: Path, version: str) -> str:
    exe = tmp_path / f"java-{version}"
    exe.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2020-01-01' >&2\n")
    exe.chmod(0o755)
    return str(exe)


def _fake_spice_dir(tmp_path: Path, corenlp: bool = True) -> Path:
    home = tmp_path / "spice"
    (home / "lib").mkdir(parents=True)
    names = ["spice-1.0.jar", "lib/Meteor-1.5.jar"]
    if corenlp:
        names += ["lib/stanford-corenlp-3.6.0.jar", "lib/stanford-corenlp-3.6.0-models.jar"]
    for n in names:
        (home / n).write_bytes(b"")
    return home


def test_spice_java_checks_what_it_needs(tmp_path: Path) -> None:
    java = _fake_java(tmp_path, "1.8.0_312")
    assert java_major(java) == 8 and java_major(_fake_java(tmp_path, "17.0.15")) == 17
    with pytest.raises(ResourceError, match=r"not on the PATH.*`spice`"):
        SpiceJava(java=str(tmp_path / "no-such-java"), spice_dir=str(_fake_spice_dir(tmp_path)))
    bare = _fake_spice_dir(tmp_path / "bare", corenlp=False)
    with pytest.raises(ResourceError, match=r"stanford-corenlp-3\.6\.0\.jar.*capeval download spice.*`spice`") as err:
        SpiceJava(java=java, spice_dir=str(bare))
    assert "\n" not in str(err.value)
    assert len(missing_files(bare)) == 2


def test_spice_java_commands(tmp_path: Path) -> None:
    home = _fake_spice_dir(tmp_path)
    old = SpiceJava(java=_fake_java(tmp_path, "1.8.0_312"), spice_dir=str(home), cache_dir=str(tmp_path / "c"))
    cmd = old.command(Path("in.json"), Path("out.json"), Path("Driver.java"))
    assert cmd[1:] == ["-jar", "-Xmx8G", str(home / "spice-1.0.jar"), "in.json", "-cache", str(tmp_path / "c"),
                       "-out", "out.json", "-subset", "-silent"]
    new = SpiceJava(java=_fake_java(tmp_path, "17.0.15"), spice_dir=str(home), workers=3)
    cmd = new.command(Path("in.json"), Path("out.json"), Path("Driver.java"))
    assert cmd[1] == "-Xmx8G" and cmd[4:] == ["Driver.java", "in.json", "out.json", "", "3"]


def test_spice_java_driver_compiles_against_the_jar(tmp_path: Path) -> None:
    from capeval.metrics.spice.java import DRIVER_SOURCE

    home = _spice_lib()
    (tmp_path / "SpiceJsonDriver.java").write_text(DRIVER_SOURCE, encoding="utf-8")
    cp = os.pathsep.join([str(home / "spice-1.0.jar"), str(home / "lib" / "*")])
    proc = subprocess.run(["javac", "-nowarn", "-d", str(tmp_path), "-cp", cp, "SpiceJsonDriver.java"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_spice_java_reads_the_jars_json(graph_harness: list[str], tmp_path: Path) -> None:
    """SpiceStats' JSON (here from the harness: the same writer) -> the same result as ``spice``."""
    from capeval.metrics.spice.scorer import result_from_evaluations
    from capeval.metrics.spice.wordnet import WordNetSynsets

    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds METEOR 1.5's WordNet tables (test extra)")
    items = _random_items(7, 20)
    out = json.loads(subprocess.run(graph_harness, input=json.dumps({"merge": True, "synsets": True, "items": items}),
                                    capture_output=True, text=True, check=True).stdout)
    scorer = SpiceJava(java=_fake_java(tmp_path, "17.0.15"), spice_dir=str(_fake_spice_dir(tmp_path)))
    ids = [f"i{k}" for k in range(len(items))]
    got = scorer.results_from_json(ids, [{"image_id": o["image_id"], "scores": o["scores"]} for o in out[::-1]],
                                   [["r"] * 5] * len(items))
    lookup = WordNetSynsets()
    per_item = [evaluate(build_graph([it["test"]], lookup).tuples(), build_graph(it["refs"], lookup).tuples())
                for it in items]
    want = result_from_evaluations("spice", ids, per_item, got.signature)
    assert dict(got.items) == dict(want.items) and got.system == want.system
    assert json.dumps(got.to_dict()["extras"]) == json.dumps(want.to_dict()["extras"])
    assert "metric:spice-java" in str(got.signature) and "nrefs:5" in str(got.signature)


# CoreNLP 3.6.0's proposed tuples for captions, through SpiceParser.loadTuples (protected)
_TUPLE_DUMP = """import edu.anu.spice.SpiceParser;
import java.io.*;
import java.util.*;
import org.json.simple.JSONArray;
import org.json.simple.JSONObject;
import org.json.simple.parser.JSONParser;
public class TupleDump {
  static class Parser extends SpiceParser {
    Parser() { super(null, 1, true); }
    Map<String, ArrayList<ArrayList<String>>> tuples(List<String> captions) { return loadTuples(captions); }
  }
  public static void main(String[] args) throws Exception {
    List<String> captions = new ArrayList<String>();
    try (Reader in = new InputStreamReader(new FileInputStream(args[0]), "UTF-8")) {
      for (Object o : (JSONArray) new JSONParser().parse(in)) captions.add((String) o);
    }
    JSONObject out = new JSONObject();
    out.putAll(new Parser().tuples(captions));
    try (Writer w = new OutputStreamWriter(new FileOutputStream(args[1]), "UTF-8")) { w.write(out.toJSONString()); }
  }
}
"""

PARITY_CANDIDATES = {
    "1": "Two brown dogs are running on the green grass.",
    "2": "A man in a red shirt rides a bike down the street",
    "3": "a little girl sitting on a bench next to her mother",
    "4": "",
}
PARITY_REFERENCES = {
    "1": ["Two dogs run across a grassy field.", "A pair of brown dogs playing in the grass", "dogs outside"],
    "2": ["A cyclist in red on a city road.", "A man riding his bicycle along a street."],
    "3": ["A small girl and a woman sit on a wooden bench.", "A mother and her daughter on a park bench"],
    "4": ["A black cat sleeps on a big sofa."],
}


def test_spice_java_parity_after_parsing(tmp_path: Path) -> None:
    """The official jar end to end, and our graphs/matching on the tuples CoreNLP proposed
    for the same (tokenised) captions: equal in every score of every category."""
    from capeval.metrics.spice.wordnet import WordNetSynsets
    from capeval.metrics.text import tokenize_span

    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("the official SPICE parity test needs java and javac on the PATH")
    try:
        home = spice_home()
    except ResourceError as exc:
        pytest.skip(f"the official SPICE parity test needs pycocoevalcap 1.2: {exc}")
    missing = missing_files(home)
    if missing:
        pytest.skip(f"the official SPICE parity test needs Stanford CoreNLP 3.6.0, absent here ({', '.join(missing)}); "
                    "`capeval download spice` fetches it")
    res = SpiceJava(workers=2).score(PARITY_CANDIDATES, PARITY_REFERENCES)["spice-java"]
    ids = list(PARITY_CANDIDATES)
    hyps, refs = tokenize_span("ptb", ids, PARITY_CANDIDATES, PARITY_REFERENCES, 0, len(ids))
    (tmp_path / "TupleDump.java").write_text(_TUPLE_DUMP, encoding="utf-8")
    cp = os.pathsep.join([str(home / "spice-1.0.jar"), str(home / "lib" / "*")])
    subprocess.run(["javac", "-nowarn", "-d", str(tmp_path), "-cp", cp, "TupleDump.java"], cwd=tmp_path, check=True)
    captions = [c for c in hyps + [r for rs in refs for r in rs] if c.strip()]
    (tmp_path / "captions.json").write_text(json.dumps(captions), encoding="utf-8")
    subprocess.run(["java", "-cp", os.pathsep.join([str(tmp_path), cp]), "TupleDump", "captions.json", "tuples.json"],
                   cwd=tmp_path, check=True, capture_output=True)
    corenlp = json.loads((tmp_path / "tuples.json").read_text(encoding="utf-8"))
    mine = Spice(parser=DictParser(corenlp), synonyms=WordNetSynsets()).score(PARITY_CANDIDATES, PARITY_REFERENCES)
    mine = mine["spice"]
    assert dict(mine.items) == dict(res.items) and mine.system == res.system
    assert json.dumps(mine.to_dict()["extras"]) == json.dumps(res.to_dict()["extras"])


def test_download_corenlp_extracts_and_checks_the_two_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The archive step offline (a file:// URL): both jars land in lib/ only when both check out."""
    import zipfile

    from capeval.metrics.spice import java as spice_java

    def archive(name: str, models_entry: str) -> str:
        jars = {}
        for j, entry in zip(spice_java.CORENLP_JARS, ("edu/stanford/nlp/pipeline/StanfordCoreNLP.class", models_entry)):
            jar = tmp_path / f"{name}-{j.filename}"
            with zipfile.ZipFile(jar, "w") as z:
                z.writestr(entry, b"x")
            jars[j.member] = jar
        path = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(path, "w") as z:
            for member, jar in jars.items():
                z.write(jar, member)
        return path.as_uri()

    home = _fake_spice_dir(tmp_path, corenlp=False)
    monkeypatch.setattr(spice_java, "CORENLP_ZIP_URLS", (archive("bad", "nothing/here"),))
    with pytest.raises(ResourceError, match="does not contain"):
        spice_java.download_corenlp(home)
    assert missing_files(home) == [str(home / "lib" / j.filename) for j in spice_java.CORENLP_JARS]
    monkeypatch.setattr(spice_java, "CORENLP_ZIP_URLS", (archive("good", spice_java.CORENLP_JARS[1].required_entry),))
    paths = spice_java.download_corenlp(home)
    assert missing_files(home) == [] and all(p.parent == home / "lib" for p in paths)
    assert spice_java.download_corenlp(home) == paths  # present and readable: kept
    assert sorted(p.name for p in (home / "lib").iterdir()) == sorted(
        ["Meteor-1.5.jar", "stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar"])
