"""ALOHa: the prompts against the official text, parsing / matching / score against the official
``metrics/aloha.py`` (fetched mirror, with stubs for its LLM, embedder and spaCy) and against an
independent transcription (always: brute-force assignment, hand-read parses), item by item and
exact; end to end through ``capeval score`` and a scripted 127.0.0.1 judge in tests/test_aloha_cli.py."""

from __future__ import annotations

import importlib.util
import itertools
import math
import random
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import _aloha_cases as cases
from capeval.errors import InputError
from capeval.metrics.aloha import core, prompts
from capeval.metrics.aloha.scorer import ALOHa

MIRROR = Path("/work/.mirror/DavidMChan+aloha/repo")
#: sha256 of the two system prompts and of the first three examples of each list, checked
#: against object_parser/prompts.py@7da6b90 (test_prompts_are_the_official_text)
SYSTEM_SHA = "74552b21ac7ee3e1455b2c566b3f1d068b2700fa26c90516809225d6396879e6"
EXAMPLES_SHA = "ec6b6710187f96f42e311cbd52f57cadbba4a4f5de86bc21fc21eb0a6c7f9737"


def _mirror_text(path: str) -> str:
    if not (MIRROR / "HEAD").exists() and not (MIRROR / "config").exists():
        pytest.skip("no DavidMChan/aloha mirror (fetch github:DavidMChan/aloha)")
    return subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout


def test_prompt_hashes_are_pinned():
    assert prompts.SYSTEM_SHA256 == SYSTEM_SHA and prompts.EXAMPLES_SHA256 == EXAMPLES_SHA
    chat = prompts.chat(prompts.candidate_turn("A cat."))
    assert [m["role"] for m in chat] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert chat[-1]["content"] == "Caption: A cat.\nObjects:" and chat[0]["content"] == prompts.SINGLE_SYSTEM
    chat = prompts.chat(prompts.references_turn(["A", "B"]))
    assert chat[-1]["content"] == "Captions:\n- A\n- B\nObjects:" and chat[0]["content"] == prompts.MULTI_SYSTEM


def test_prompts_are_the_official_text():
    ns: dict = {}
    exec(_mirror_text("src/aloha/object_parser/prompts.py"), ns)
    assert prompts.SINGLE_SYSTEM == ns["SINGLE_OBJECT_SYSTEM_PROMPT"]
    assert prompts.MULTI_SYSTEM == ns["MULTI_OBJECT_SYSTEM_PROMPT"]
    assert prompts.SINGLE_EXAMPLES == tuple(tuple(x) for x in ns["SINGLE_OBJECT_EXAMPLES"][:3])
    assert prompts.MULTI_EXAMPLES == tuple(tuple(x) for x in ns["MULTI_OBJECT_EXAMPLES"][:3])


# ------------------------------------------------------------------ the official code, stubbed
class _Parser:
    script: dict = {}

    def __init__(self, num_target_examples=None, num_reference_examples=None):
        assert (num_target_examples, num_reference_examples) == (3, 3)

    def extract_objects_single_caption(self, caption):
        return self.script[prompts.candidate_turn(caption)]

    def extract_objects_multiple_captions(self, captions):
        return self.script[prompts.references_turn(captions)]


class _Similarity:
    def __call__(self, targets, references):
        return cases.similarity(targets, references)


def _official(monkeypatch, tmp_path, aggregate):
    """``ALOHa`` of the mirror's metrics/aloha.py; its imports of the LLM clients, MPNet and the
    detector are stubs, spaCy's model is :class:`_aloha_cases.FakeNLP`, and ``set`` keeps the
    first-seen order (the official order varies with the string hash seed)."""
    src = _mirror_text("src/aloha/metrics/aloha.py")
    for name in ("aloha", "aloha.metrics", "aloha.object_parser", "aloha.string_similarity", "aloha.utils"):
        mod = types.ModuleType(name)
        mod.__path__ = []  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, mod)
    sys.modules["aloha.object_parser"].GPT35TurboObjectParser = _Parser  # type: ignore[attr-defined]
    sys.modules["aloha.object_parser"].ObjectParser = object  # type: ignore[attr-defined]
    sys.modules["aloha.string_similarity"].MPNetSimilarity = _Similarity  # type: ignore[attr-defined]
    sys.modules["aloha.string_similarity"].StringSimilarityMeasure = object  # type: ignore[attr-defined]
    sys.modules["aloha.utils"].COCO_OBJECTS = []  # type: ignore[attr-defined]
    base = types.ModuleType("aloha.metrics.base")
    base.Metric = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aloha.metrics.base", base)
    import spacy

    monkeypatch.setattr(spacy, "load", lambda name: cases.FakeNLP())
    path = tmp_path / "official_aloha.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("_official_aloha", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.set = lambda xs: dict.fromkeys(xs)  # ordered; list(...) of it is the first-seen order
    return module.ALOHa(object_parser=_Parser, similarity_measure=_Similarity, num_reference_examples=3,
                        num_target_examples=3, similarity_aggregate_method=aggregate)


def _random_items(seed: int, n: int):
    rng = random.Random(seed)
    cands, refs, dets, script = {}, {}, {}, {}
    for k in range(n):
        i = f"item{k}"
        cands[i] = f"caption {k}"
        refs[i] = [f"reference {k} a", f"reference {k} b"][: rng.randint(1, 2)]
        script[prompts.candidate_turn(cands[i])] = cases.answer(rng)
        script[prompts.references_turn(refs[i])] = cases.answer(rng)
        d = cases.detections(rng)
        if d is not None:
            dets[i] = d
    return cands, refs, dets, script


@pytest.mark.parametrize("aggregate", ["min", "mean"])
def test_scores_match_the_official_code_item_by_item(monkeypatch, tmp_path, aggregate):
    cands, refs, dets, script = _random_items(7 if aggregate == "min" else 8, 300)
    _Parser.script = script
    official = _official(monkeypatch, tmp_path, aggregate)
    ours = ALOHa(backend=cases.ScriptedBackend(script), embedder=cases.encode, spacy_model=cases.FakeNLP(),
                 cache=None, aggregate=aggregate, no_objects="error")
    with_dets = {i: dets.get(i, []) for i in cands}
    got = ours.score(cands, refs)["aloha"]
    ours_d = ALOHa(backend=cases.ScriptedBackend(script), embedder=cases.encode, spacy_model=cases.FakeNLP(),
                   cache=None, aggregate=aggregate, detections=with_dets).score(cands, refs)["aloha"]
    n_inf = n_scored = 0
    for res, use_dets in ((got, False), (ours_d, True)):
        for i in cands:
            score, info = official(cands[i], refs[i], None, with_dets[i] if use_dets else None)
            assert res.extras["candidate_objects"][i] == info["target_objects"], i
            assert res.extras["reference_objects"][i] == info["reference_objects"], i
            if score == -math.inf:
                assert i not in res.items and i in res.extras["errors"] and info["matches"] is None
                n_inf += 1
                continue
            n_scored += 1
            assert res.items[i] == score, i  # exact
            assert res.extras["matches"][i] == info["matches"], i
    assert n_inf > 5 and n_scored > 300  # both paths exercised
    negatives = [v for v in got.items.values() if v < 0]
    assert negatives  # negative cosines reach the score


# ------------------------------------------------------------------ independent transcription
PARSES = [  # (answer, reference_mode, slots), read by hand from _parse_objects_from_llm_response
    ("- cat\n- table", False, [["cat"], ["table"]]),
    ("- cat (possibly)\n- possibly dog\n- hat", False, [["hat"]]),
    ("- cat (possibly)\n- big dog", True, [["cat"], ["cat"], ["big dog"], ["dog"]]),
    ("  - cat\n  - dog", False, [["cat"]]),  # only the whole answer is stripped
    ("- a\n-b\n- cup or jug\n- Bowl, Plate", False, [["a"], ["cup", "jug"], ["bowl", "plate"]]),  # "-b": 2 chars
    ("- shirt (white)\n- ()\n* x", False, [["shirt"], []]),
    ("- red OR blue", False, [["red or blue"]]),
    ("", False, []),
]


@pytest.mark.parametrize("answer,reference_mode,slots", PARSES)
def test_parsing_by_hand(answer, reference_mode, slots):
    assert core.parse_objects(answer, reference_mode, cases.fake_root) == slots


def _brute(target_slots, reference_slots, aggregate="min"):
    """Every combination, every injective assignment (itertools.permutations): the best total
    similarity, then its min (or mean) of matched similarities; max over combinations."""
    # _flatten read by hand: a slot without alternatives ends the slots taken (it and all after it)
    target_slots = list(itertools.takewhile(bool, target_slots))
    reference_slots = list(itertools.takewhile(bool, reference_slots))
    if not target_slots or not reference_slots:
        return -math.inf
    best = -math.inf
    for t in itertools.product(*target_slots):
        t = list(dict.fromkeys(t))
        for r in itertools.product(*reference_slots):
            r = list(dict.fromkeys(r))
            sim = cases.similarity(t, r).astype(np.float64)
            k = min(len(t), len(r))
            top, vals = -math.inf, None
            if len(t) <= len(r):
                for cols in itertools.permutations(range(len(r)), len(t)):
                    v = [sim[i, c] for i, c in enumerate(cols)]
                    if sum(v) > top + 1e-12:
                        top, vals = sum(v), v
            else:
                for rows in itertools.permutations(range(len(t)), len(r)):
                    v = [sim[rw, c] for c, rw in enumerate(rows)]
                    if sum(v) > top + 1e-12:
                        top, vals = sum(v), v
            assert vals is not None and len(vals) == k
            score = min(vals) if aggregate == "min" else float(np.mean(vals))
            best = max(best, score)
    return best


def test_scores_match_an_independent_transcription():
    rng = random.Random(3)
    n = 0
    for _ in range(400):
        t = core.parse_objects(cases.answer(rng), False, cases.fake_root)
        r = core.parse_objects(cases.answer(rng), True, cases.fake_root)
        if sum(len(s) for s in t) > 6 or len(r) > 8:
            continue
        for aggregate in ("min", "mean"):
            want = _brute(t, r, aggregate)
            got, matches = core.best(t, r, cases.similarity, aggregate)
            if want == -math.inf:
                assert got == -math.inf and matches is None
            else:
                assert got == pytest.approx(want, abs=1e-12 if aggregate == "min" else 1e-7)
                n += 1
    assert n > 300


def test_quirk_options():
    sim = cases.similarity
    # more candidate objects than reference objects: the official score ignores the unmatched one
    s, m = core.alohao(["dog", "cat", "tree"], ["dog"], sim)
    assert s == 1.0 or s == pytest.approx(1.0)
    assert [x["ref_word"] for x in m].count(None) == 2
    s0, _ = core.alohao(["dog", "cat", "tree"], ["dog"], sim, unmatched="zero")
    assert s0 == 0.0
    # no candidate object: -inf officially; the branch values on request
    assert core.best([], [["dog"]], sim) == (-math.inf, None)
    assert core.no_combination_score([], [["dog"]], sim) == (0.0, [])
    assert core.no_combination_score([], [["dog"]], sim, aggregate="mean") == (1.0, [])
    assert core.no_combination_score([["cat"]], [], sim)[0] == 0.0


def test_no_objects_items_are_errors_or_branch_values():
    script = {prompts.candidate_turn("empty"): "Nothing here.", prompts.references_turn(["r"]): "- dog",
              prompts.candidate_turn("a dog"): "- dog"}
    kw = dict(embedder=cases.encode, spacy_model=cases.FakeNLP(), cache=None)
    res = ALOHa(backend=cases.ScriptedBackend(script), **kw).score({"a": "empty", "b": "a dog"},
                                                                    {"a": ["r"], "b": ["r"]})["aloha"]
    assert "a" in res.extras["errors"] and "-inf" in res.extras["errors"]["a"]["error"] and res.skipped == ("a",)
    assert res.items["b"] == pytest.approx(1.0) and res.system == res.items["b"]
    assert res.extras["hallucinated"]["b"] == [] or res.items["b"] < 1.0
    res = ALOHa(backend=cases.ScriptedBackend(script), no_objects="branch", **kw).score(
        {"a": "empty"}, {"a": ["r"]})["aloha"]
    assert res.items["a"] == 0.0
    # clean (issue 47 item 8): no object, no hallucination (the official branch's comment): the top score,
    # never ranked as the most hallucinated; no reference object still scores the branch's 0.0
    script[prompts.references_turn(["nothing"])] = "No objects."
    res = ALOHa(backend=cases.ScriptedBackend(script), no_objects="clean", **kw).score(
        {"a": "empty", "b": "a dog", "c": "a dog"}, {"a": ["r"], "b": ["r"], "c": ["nothing"]})["aloha"]
    assert res.items["a"] == 1.0 and res.items["c"] == 0.0 and res.items["b"] == pytest.approx(1.0)
    assert core.no_combination_score([], [["dog"]], cases.similarity, clean=True) == (1.0, [])
    assert "no_objects:clean" in str(res.signature)


def test_too_many_objects_is_an_error_item_before_spacy():
    many = "\n".join(f"- thing{k}" for k in range(50))
    script = {prompts.candidate_turn("c"): "- dog", prompts.references_turn(["r"]): many,
              prompts.candidate_turn("d"): "- dog", prompts.references_turn(["s"]): "- dog"}
    looked_at: list[str] = []

    class CountingNLP(cases.FakeNLP):
        def __call__(self, text):
            looked_at.append(text)
            return super().__call__(text)

    kw = dict(embedder=cases.encode, spacy_model=CountingNLP(), cache=None)
    res = ALOHa(backend=cases.ScriptedBackend(script), max_objects=49, **kw).score(
        {"a": "c", "b": "d"}, {"a": ["r"], "b": ["s"]}, skip_bad_items=True)["aloha"]
    assert "lists 50 objects, over max_objects=49" in res.extras["errors"]["a"]["error"] and res.skipped == ("a",)
    assert not any(t.startswith("thing") for t in looked_at)  # refused before spaCy parsed any of them
    assert res.items["b"] == pytest.approx(1.0) and "max_objects:49" in str(res.signature)
    assert core.count_alternatives(many, True) == 50 and core.count_alternatives("- a, b or c", False) == 3


@pytest.mark.parametrize("kw,msg", [
    ({"aggregate": "max"}, "aloha option aggregate"),
    ({"unmatched": "drop"}, "aloha option unmatched"),
    ({"min_object_length": -1}, "min_object_length"),
    ({"max_objects": 0}, "max_objects"),
    ({"no_objects": "ignore"}, "aloha option no_objects"),
    ({"threshold": 2.0}, "threshold"),
    ({"concurrency": 0}, "concurrency"),
    ({"backend": "transformers"}, "aloha option backend"),
    ({"detections": {"a": "dog"}}, "entry 'a'"),
])
def test_bad_options_are_one_line(kw, msg):
    with pytest.raises(InputError) as exc:
        ALOHa(**{"embedder": cases.encode, "cache": None, "base_url": "http://127.0.0.1:9/v1", **kw})
    assert msg in str(exc.value) and "\n" not in str(exc.value)


def test_missing_detections_entry_names_the_item():
    script = {prompts.candidate_turn("c"): "- dog", prompts.references_turn(["r"]): "- dog"}
    scorer = ALOHa(backend=cases.ScriptedBackend(script), embedder=cases.encode, spacy_model=cases.FakeNLP(),
                   cache=None, detections={"x": ["dog"]})
    with pytest.raises(InputError, match="item 'a': no entry in the detections"):
        scorer.score({"a": "c"}, {"a": ["r"]})


def test_too_many_combinations_is_an_error_item():
    many = "\n".join(f"- a{k}, b{k}, c{k}" for k in range(8))  # 3**8 candidate combinations
    script = {prompts.candidate_turn("c"): many, prompts.references_turn(["r"]): "- dog"}
    kw = dict(embedder=cases.encode, spacy_model=cases.FakeNLP(), cache=None)
    res = ALOHa(backend=cases.ScriptedBackend(script), max_combinations=1000, **kw).score({"a": "c"}, {"a": ["r"]},
                                                                                       skip_bad_items=True)["aloha"]
    assert "6561 object combinations" in res.extras["errors"]["a"]["error"] and res.skipped == ("a",)
    assert core.count_combinations([["a", "b"], [], ["c"]]) == 2
    assert core.count_combinations([["a", "b"], [], ["c"]], "skip") == 2 * 1
    assert core.count_combinations([[], ["c"]]) == 0
