"""The scene-graph parser as a reusable component: CaptionGraph, capeval.scene_graphs and
``capeval scene-graph`` (HICE-S builds its phrases from these)."""

from __future__ import annotations

import json

import pytest

import capeval
from capeval.cli.main import main
from capeval.errors import MissingDependencyError
from capeval.metrics.spice.caption_graph import CaptionGraph

from _reference import require_module, unavailable


def test_regrouping_follows_spice_tuple_order() -> None:
    # SPICE's relation tuples are (subject, object, predicate); people read (s, p, o)
    g = CaptionGraph.from_tuples("x", [("man",), ("man", "tall"), ("man", "horse", "ride"), ("man", "tall"),
                                       ("dog",), ("horse", "brown")])
    assert g.objects == ("man", "horse", "dog")
    assert g.attributes == (("man", "tall"), ("horse", "brown"))
    assert g.relations == (("man", "ride", "horse"),)
    assert len(g.tuples) == 6  # kept as proposed, duplicates included (SPICE's graph merges them)
    assert g.phrases() == ["man ride horse", "tall man", "brown horse", "dog"]
    assert g.phrases("none") == ["man ride horse", "tall man", "brown horse"]
    assert g.phrases("all")[-3:] == ["man", "horse", "dog"]
    assert g.to_dict()["relations"] == [["man", "ride", "horse"]]
    with pytest.raises(ValueError):
        g.phrases("some")
    with pytest.raises(ValueError, match="length 4"):
        CaptionGraph.from_tuples("bad", [("a", "b", "c", "d")])


def test_empty_graph() -> None:
    g = CaptionGraph.from_tuples("", [])
    assert (g.objects, g.attributes, g.relations, g.phrases()) == ((), (), (), [])
    assert "objects:    -" in g.describe()


@pytest.fixture(scope="module")
def parser():
    require_module("spacy", "SPICE's scene-graph parser (the spice extra)")
    p = capeval.scene_graph_parser()
    try:
        p._load()
    except MissingDependencyError as exc:
        unavailable(str(exc))
    return p


def test_api_on_raw_captions(parser) -> None:
    # raw text: PTB tokenisation (lower case, punctuation removed) happens first
    g1, g2 = parser.scene_graphs(["A man riding a horse on the beach.", "The man's hat"])
    assert g1.relations == (("man", "ride", "horse"), ("man", "ride on", "beach"))
    assert set(g1.objects) == {"man", "horse", "beach"}
    assert g2.relations == (("man", "have", "hat"),)
    assert capeval.scene_graphs("two dogs")[0].attributes == (("dog", "two"),)
    assert any(line.startswith("nmod:on(") for line in parser.explain("a man riding a horse on the beach"))
    assert parser.explain("   ") == []


def test_cli_prints_graphs_and_dependencies(parser, capsys) -> None:
    assert main(["scene-graph", "a man is tall", "--json", "--explain"]) == 0
    record = json.loads(capsys.readouterr().out.strip())
    assert record["attributes"] == [["man", "tall"]]
    assert any(d.startswith("nsubj(") for d in record["dependencies"])
    assert main(["scene-graph", "a cat sitting in a chair"]) == 0
    out = capsys.readouterr().out
    assert "cat -sit in-> chair" in out


def test_cli_bad_input(capsys) -> None:
    assert main(["scene-graph"]) == 2
    assert "give captions" in capsys.readouterr().err
    assert main(["scene-graph", "a dog", "  "]) == 2
    assert "caption 2 is empty" in capsys.readouterr().err


def test_docs_table_lists_every_known_difference() -> None:
    from pathlib import Path

    from capeval.metrics.spice.parser import KNOWN_DIFFERENCES

    text = (Path(__file__).resolve().parents[1] / "docs" / "spice.md").read_text(encoding="utf-8")
    for what, example, happens in KNOWN_DIFFERENCES:
        assert f"| {what} | `{example}` | {happens} |" in text, example
