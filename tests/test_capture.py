"""CAPTURE against the authors' package capture-metric 0.1.13 (on FactualSceneGraph 0.7.3).

- extraction: random FACTUAL outputs (cut-off tails, lone entities, quantities, ``of``
  attributes, plurals, stop words) through the package's ``sample_to_parse_results`` (its parser
  replaced by one returning those outputs through FactualSceneGraph's own
  ``graph_string_to_object``) and through capeval, compared as sets (the package's order is
  Python's set order);
- matching: capeval's parsed graphs of random captions fed to the package's ``compute_score``
  (``prev_gt_parsed``/``prev_cand_parsed``), per item, with a shared random float64
  Sentence-BERT (tests/capture_models.py), in three configurations (exact; exact+synonym;
  exact+synonym+soft) that each change some item's score;
- WordNet from Debian's wordnet-base files, offline.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from _reference import require_module, unavailable
from capeval.errors import InputError, ResourceError
from capeval.metrics.capture import wordnet as wn_mod
from capeval.metrics.capture.graphs import parse_caption
from capeval.metrics.capture.scorer import CaptureScore, stop_word_list

NOUNS = ["car", "cars", "automobile", "truck", "street", "road", "clock tower", "tower", "sky", "tree", "trees",
         "man", "men", "person", "horse", "bike", "bicycle", "building", "image", "background", "city street",
         "shirt", "hat", "glass", "cup", "dog", "cat"]
ATTRS = ["red", "blue", "big", "large", "bigger", "tall", "clear", "busy", "full of water", "wooden", "old",
         "young", "bright", "modern", "small"]
PREDS = ["on", "near", "v:ride", "ride", "riding", "wear", "in front of", "under", "with", "hold"]


@pytest.fixture(scope="module")
def wordnet_ready(tmp_path_factory):
    if wn_mod.source_dir() is None and not wn_mod._nltk_has_wordnet():
        unavailable("WordNet 3.0 (apt-get install wordnet-base wordnet-sense-index)")
    return wn_mod.ensure_wordnet(tmp_path_factory.mktemp("wn"))


@pytest.fixture(scope="module")
def package(wordnet_ready):
    import os

    os.environ.setdefault("RANK", "1")  # the package's __init__ downloads nltk data unless RANK != 0
    require_module("capture_metric", "pip install capture-metric==0.1.13 FactualSceneGraph sentence-transformers")
    from capture_metric import capture

    return capture


@pytest.fixture(scope="module")
def sbert(tmp_path_factory):
    require_module("sentence_transformers", "pip install sentence-transformers")
    from capture_models import tiny_sbert

    return tiny_sbert(tmp_path_factory.mktemp("sbert"))


def random_output(rng: random.Random) -> str:
    facts = []
    for _ in range(rng.randint(0, 6)):
        kind = rng.random()
        s = rng.choice(NOUNS)
        if kind < 0.15:
            facts.append(f"( {s} )")
        elif kind < 0.45:
            facts.append(f"( {s} , is , {rng.choice(ATTRS + ['2', '3'])} )")
        else:
            facts.append(f"( {s} , {rng.choice(PREDS)} , {rng.choice(NOUNS)} )")
    text = " , ".join(facts + facts[: rng.randint(0, 1)])  # sometimes a repeated fact
    if text and rng.random() < 0.2:
        text = text[: rng.randint(1, len(text))]  # cut off by the output length limit
    if rng.random() < 0.3:
        text = text.replace(" ", "")  # FACTUAL's unspaced form
    return text


class StubFactual:
    """The package's SceneGraphParser with its model replaced by fixed outputs per sentence."""

    def __init__(self, outputs: dict[str, str]):
        from factual_scene_graph.parser.scene_graph_parser import SceneGraphParser
        from factual_scene_graph.utils import clean_graph_string, space_out_symbols_in_graph

        self.outputs, self.real = outputs, SceneGraphParser.__new__(SceneGraphParser)
        self.clean = lambda t: clean_graph_string(space_out_symbols_in_graph(t))

    def parse(self, sentences, **_):  # the package's call: parse(sentences, beam_size=5, ...)
        return [self.real.graph_string_to_object(self.clean(self.outputs[s])) for s in sentences]

    def generate(self, sentences):  # capeval's FactualParser interface
        return [self.outputs[s] for s in sentences]


def corpus(seed: int, n: int):
    rng = random.Random(seed)
    outputs, texts, nouns = {}, [], {}
    for i in range(n):
        sents = [f"sentence {i}.{k}" for k in range(rng.randint(1, 3))]
        outputs.update({s: random_output(rng) for s in sents})
        text = " | ".join(sents)
        texts.append(text)
        nouns[text] = [w for w in rng.sample(NOUNS, rng.randint(3, len(NOUNS)))]
    return outputs, texts, nouns


def lemma_nouns(nouns, lemmatize):
    # the package's get_all_lemmatized_nouns lemmatises single tokens: multi-word nouns count by their words
    return [lemmatize(p, "n") for w in nouns for p in w.split()]


def test_stop_words_are_the_packages(package):
    from capture_metric.stop_words import stop_words_list

    assert stop_word_list() == frozenset(stop_words_list) and len(stop_words_list) == 317


def test_extraction_matches_package(package, monkeypatch):
    from nltk.stem import WordNetLemmatizer

    outputs, texts, nouns = corpus(1, 200)
    wnl = WordNetLemmatizer()
    lem = lambda w, p: wnl.lemmatize(w, pos=p)  # noqa: E731
    cap = package.CAPTURE(soft_matching=False)
    cap.parser = StubFactual(outputs)
    monkeypatch.setattr(package, "sent_tokenize", lambda t: t.split(" | "))
    monkeypatch.setattr(cap, "get_all_lemmatized_nouns", lambda t: lemma_nouns(nouns[t], lem))
    checked = {"attributes": 0, "relations": 0, "dropped": 0}
    for text in texts:
        _, objs, attrs, rels = cap.sample_to_parse_results((0, text))
        sents = text.split(" | ")
        o, a, r = parse_caption([outputs[s] for s in sents], lemma_nouns(nouns[text], lem), lem, set(stop_word_list()))
        assert (set(o), {k: set(v) for k, v in a.items()}, set(r)) == (set(objs), dict(attrs), set(rels)), text
        assert len(o) == len(set(o)) and len(r) == len(set(r))
        checked["attributes"] += bool(a)
        checked["relations"] += bool(r)
    assert checked["attributes"] > 50 and checked["relations"] > 50


def random_items(seed: int, n: int, scorer: CaptureScore, outputs: dict[str, str], texts: list[str]):
    rng = random.Random(seed)
    parsed = scorer.parse(texts)
    items = {}
    for i in range(n):
        items[f"i{i}"] = (parsed[rng.choice(texts)], [parsed[rng.choice(texts)] for _ in range(rng.randint(1, 3))])
    return items


@pytest.mark.parametrize("synonym,soft", [(False, False), (True, False), (True, True)])
def test_matching_matches_package_per_item(package, sbert, monkeypatch, synonym, soft):
    outputs, texts, nouns = corpus(2, 80)
    ours = CaptureScore(parser=StubFactual(outputs), sbert=sbert, synonym_matching=synonym, soft_matching=soft,
                        sentences=lambda t: t.split(" | "), nouns=lambda t, lem: lemma_nouns(nouns[t], lem))
    items = random_items(3, 120, ours, outputs, texts)
    cap = package.CAPTURE(soft_matching=False, synonym_matching=synonym)
    cap.soft_matching, cap.text_encoder = soft, sbert
    gts = {k: [ref for ref in refs] for k, (_, refs) in items.items()}
    res = {k: [cand] for k, (cand, _) in items.items()}
    dummy_gts = {k: ["x"] * len(v) for k, v in gts.items()}
    score, scores, details = package.CAPTURE.compute_score(cap, dummy_gts, {k: ["x"] for k in res}, prev_gt_parsed=gts,
                                                           prev_cand_parsed=res, return_parse_results=True)
    mine = [ours.score_parsed(refs, cand)[0] for cand, refs in items.values()]
    assert len(scores) == len(mine) == 120
    assert max(abs(a - b) for a, b in zip(mine, scores)) < 1e-9
    assert sum(mine) / len(mine) == pytest.approx(score, abs=1e-12)


def test_each_stage_changes_scores(package, sbert):
    outputs, texts, nouns = corpus(2, 80)
    runs = []
    for synonym, soft in ((False, False), (True, False), (True, True)):
        s = CaptureScore(parser=StubFactual(outputs), sbert=sbert, synonym_matching=synonym, soft_matching=soft,
                         sentences=lambda t: t.split(" | "), nouns=lambda t, lem: lemma_nouns(nouns[t], lem))
        runs.append([s.score_parsed(refs, cand)[0] for cand, refs in random_items(3, 120, s, outputs, texts).values()])
    assert sum(b > a + 1e-9 for a, b in zip(runs[0], runs[1])) >= 10  # synonyms add matches
    assert sum(abs(b - a) > 1e-9 for a, b in zip(runs[1], runs[2])) >= 10  # soft matching changes scores


def test_score_report(wordnet_ready, sbert):
    outputs = {"a red car on the road.": "( car , is , red ) , ( car , on , road )",
               "an automobile on a street.": "( automobile , on , street )"}
    s = CaptureScore(parser=StubFactual(outputs), sbert=sbert, sentences=lambda t: [t],
                     nouns=lambda t, lem: [lem(w, "n") for w in ("car", "road", "automobile", "street")])
    rep = s.score({"x": "a red car on the road."}, {"x": ["an automobile on a street."]})
    res = rep["capture"]
    assert 0 < res.items["x"] <= 1 and res.system == res.items["x"]
    assert "sbert" in str(res.signature) and res.extras["parts"]["x"]["object_recall"] > 0.5


def test_bad_options_and_missing_data(wordnet_ready, sbert, monkeypatch):
    with pytest.raises(InputError, match="alpha \\+ beta must be 1"):
        CaptureScore(parser=StubFactual({}), sbert=sbert, alpha=0.7, beta=0.5, sentences=str.split, nouns=lambda t, f: [])
    import nltk

    monkeypatch.setattr(nltk.data, "find", lambda p: (_ for _ in ()).throw(LookupError(p)))
    with pytest.raises(ResourceError, match="python -m nltk.downloader punkt_tab averaged_perceptron_tagger_eng"):
        CaptureScore(parser=StubFactual({}), sbert=sbert)


def test_wordnet_from_debian_files(tmp_path, monkeypatch):
    """nltk's reader on Debian's wordnet-base + wordnet-sense-index files, nltk's own copy hidden."""
    if wn_mod.source_dir() is None:
        unavailable("Debian's WordNet files (apt-get install wordnet-base wordnet-sense-index)")
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = wn_mod.build_corpus(wn_mod.source_dir(), tmp_path / "nltk_data")
    monkeypatch.setattr("nltk.data.path", [str(root)])
    reader = WordNetCorpusReader(str(root / "corpora" / "wordnet"), None)
    assert reader.get_version() == "3.0"
    assert reader.synset("dog.n.01").lexname() == "noun.animal"  # lexnames in WordNet's order
    assert reader.synset("run.v.01").lexname() == "verb.motion"
    assert "automobile" in {lem.name() for s in reader.synsets("car") for lem in s.lemmas()}
    assert reader.morphy("churches", "n") == "church" and reader.morphy("geese", "n") == "goose"  # noun.exc


def test_wordnet_missing_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(wn_mod, "_nltk_has_wordnet", lambda: False)
    monkeypatch.setattr(wn_mod, "DEBIAN_DIR", str(tmp_path / "none"))
    monkeypatch.delenv("CAPEVAL_WORDNET", raising=False)
    with pytest.raises(ResourceError, match="apt-get install wordnet-base") as exc:
        wn_mod.ensure_wordnet(tmp_path)
    assert "\n" not in str(exc.value)


def test_missing_factual_model_is_one_line_before_loading(tmp_path):
    opts = {"parser_model": str(tmp_path / "no-such-model"), "sentences": str.split, "nouns": lambda t, f: []}
    with pytest.raises(ResourceError, match="capture: the FACTUAL model .* `capeval download factual`") as exc:
        CaptureScore.preflight(opts)
    assert "\n" not in str(exc.value)
