"""CAPTURE's FACTUAL encoder inputs against capture-metric 0.1.13's own parser (issue 47, item 10).

The package (``CAPTURE.sample_to_parse_results`` -> FactualSceneGraph 0.7.3
``SceneGraphParser.parse`` -> ``_parse_batch``) cuts each caption's longest sentence by one token:
its length limit is counted without ``</s>``, the truncation with it
(:mod:`capeval.metrics.capture.parser_cut`). Both pipelines here load the same tiny random T5
and a sentencepiece tokenizer trained in the test, from one folder; ``model.generate`` is
replaced on both sides by a recorder that keeps each row's unpadded input ids and answers with
the row's number, so every sentence occurrence of every caption is traced to the exact ids its
encoder received. capeval's default must give the package's ids item by item;
``parser_cut="full"`` the previous inputs (every prompt whole up to 64 tokens), which differ.
The generation settings that reach ``generate`` are compared too.
"""

from __future__ import annotations

import contextlib
import io
import random

import pytest

from _reference import require_module, unavailable
from capeval.errors import InputError
from capeval.metrics.capture import wordnet as wn_mod
from capeval.metrics.capture.scorer import CaptureScore

PROMPT = "Generate Scene Graph: "
WORDS = ("a the of on in with and is are near under above behind beside holding wearing riding sitting standing "
         "man woman person child dog dogs cat horse bike car truck street road building tower clock sky tree trees "
         "shirt hat table chair cup glass window door red blue green white black tall small large wooden old young "
         "bright dark busy modern there two three several its their some very").split()
PUNCT = [".", ",", "!", "?", ";", ":", "'s", "(", ")", "-", '"', "..."]
RARE = ["zebra", "naïve", "café", "x-ray", "3D", "1990s", "Ω"]  # pieces, unknown characters, digits


def sp_corpus(rng: random.Random) -> list[str]:
    lines = []
    for _ in range(400):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.5:
            words.insert(rng.randrange(len(words) + 1), rng.choice(PUNCT))
        if rng.random() < 0.2:
            words.append(str(rng.randint(0, 999)))
        lines.append(PROMPT + " ".join(words))
    return lines


@pytest.fixture(scope="module")
def factual_dir(tmp_path_factory):
    """A tiny random T5 and a T5 tokenizer on a sentencepiece model trained here, in one folder
    (read by the package's SceneGraphParser and by capeval's FactualParser alike)."""
    spm = require_module("sentencepiece", "pip install sentencepiece")
    tf = require_module("transformers", "the FACTUAL parser runs through transformers")
    import torch

    root = tmp_path_factory.mktemp("factual")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sp_corpus(random.Random(0))), model_writer=model,
                                   vocab_size=120, hard_vocab_limit=False, model_type="unigram",
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0,
                                   num_threads=1, minloglevel=2)
    (root / "sp").mkdir()
    (root / "sp" / "spiece.model").write_bytes(model.getvalue())
    tok = tf.T5Tokenizer.from_pretrained(str(root / "sp"), extra_ids=0)
    folder = root / "tiny-factual"
    tok.save_pretrained(str(folder))
    torch.manual_seed(0)
    cfg = tf.T5Config(vocab_size=len(tok), d_model=8, d_kv=4, d_ff=8, num_layers=1, num_decoder_layers=1,
                      num_heads=2, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    tf.T5ForConditionalGeneration(cfg).save_pretrained(str(folder))
    return folder


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


def split(text: str) -> list[str]:
    """The sentence splitter of both sides (nltk's Punkt data is not needed for this check)."""
    return text.split(" | ") if text else []


def random_sentence(rng: random.Random) -> str:
    kind = rng.random()
    n = 1 if kind < 0.15 else rng.randint(2, 9) if kind < 0.6 else rng.randint(10, 30) if kind < 0.85 \
        else rng.randint(31, 80)  # the long ones pass 64 tokens
    words = [rng.choice(WORDS + RARE if rng.random() < 0.1 else WORDS) for _ in range(n)]
    for _ in range(rng.randint(0, 3) if n > 3 else 0):
        words.insert(rng.randrange(len(words) + 1), rng.choice(PUNCT))
    text = " ".join(words) + rng.choice([".", ".", ".", "", "!", "?", " .", "...", "\"."])
    return rng.choice(["", " ", "  "]) + text + rng.choice(["", " "])  # stray spaces: both sides strip


def random_captions(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    pool: list[str] = []  # sentences shared between captions (each caption may cut them differently)
    texts: dict[str, None] = {}
    while len(texts) < n:
        k = rng.choice([1, 1, 1, 2, 2, 3, 4, 6]) if rng.random() > 0.03 else rng.randint(33, 70)  # > 32: chunks
        sents = []
        for _ in range(k):
            if pool and rng.random() < 0.2:
                sents.append(rng.choice(pool))
            else:
                sents.append(random_sentence(rng))
                pool.append(sents[-1])
            if rng.random() < 0.1:
                sents.append(sents[-1])  # a repeated sentence: ties for the longest
        texts.setdefault(" | ".join(sents))
    return list(texts)


class Recorder:
    """Stands in for ``model.generate``: keeps each row's unpadded input ids and the call's
    keyword arguments, and answers row k with the text ``k``."""

    def __init__(self, tokenizer):
        self.tok, self.rows, self.kwargs = tokenizer, [], []

    def __call__(self, input_ids, attention_mask=None, **kwargs):
        import torch

        assert attention_mask is not None
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            n = sum(mask)
            assert mask == [1] * n + [0] * (len(mask) - n) and set(ids[n:]) <= {self.tok.pad_token_id}  # right padding
            self.rows.append(ids[:n])
        self.kwargs.append({k: v for k, v in kwargs.items() if k in ("num_beams", "max_length", "early_stopping")})
        first = len(self.rows) - len(input_ids)
        answers = [[0, *self.tok.encode(str(first + k), add_special_tokens=False), 1] for k in range(len(input_ids))]
        width = max(map(len, answers))
        return torch.tensor([a + [0] * (width - len(a)) for a in answers])


def package_parser(package, folder, monkeypatch):
    """capture-metric's CAPTURE with its own SceneGraphParser on ``folder``; transformers 5 has no
    ``as_target_tokenizer`` (FactualSceneGraph 0.7.3 calls it): a no-op there, as it is for T5."""
    from factual_scene_graph.parser.scene_graph_parser import SceneGraphParser

    cap = package.CAPTURE(soft_matching=False)
    cap.parser = SceneGraphParser(str(folder), device="cpu")
    if not hasattr(cap.parser.tokenizer, "as_target_tokenizer"):
        monkeypatch.setattr(cap.parser.tokenizer, "as_target_tokenizer", contextlib.nullcontext, raising=False)
    monkeypatch.setattr(package, "sent_tokenize", split)
    monkeypatch.setattr(cap, "get_all_lemmatized_nouns", lambda text: [])
    return cap


def package_rows(package, folder, monkeypatch, texts):
    """For each text, the encoder ids of each of its sentence occurrences in the package (it
    parses the captions one after another, each caption's sentences in order)."""
    cap = package_parser(package, folder, monkeypatch)
    rec = Recorder(cap.parser.tokenizer)
    monkeypatch.setattr(cap.parser.model, "generate", rec)
    out, at = {}, 0
    for text in texts:
        cap.sample_to_parse_results((0, text))
        k = len(split(text))
        out[text] = rec.rows[at: at + k]
        at += k
    assert at == len(rec.rows)
    return out, rec


def capeval_rows(folder, monkeypatch, texts, **options):
    """The same for capeval's CaptureScore.parse (which parses distinct sentences once, across
    captions): each occurrence's row is found through the number the recorder answered."""
    import capeval.metrics.capture.scorer as scorer_mod

    ours = CaptureScore(parser_model=str(folder), soft_matching=False, sentences=split,
                        nouns=lambda text, lem: [], **options)
    rec = Recorder(ours.parser.tokenizer)
    monkeypatch.setattr(ours.parser.model, "generate", rec)
    seen: list[list[str]] = []
    real_parse = scorer_mod.parse_caption
    monkeypatch.setattr(scorer_mod, "parse_caption", lambda outputs, *a: (seen.append(list(outputs)),
                                                                           real_parse(outputs, *a))[1])
    ours.parse(texts)
    assert len(seen) == len(texts)
    out = {}
    for text, outputs in zip(texts, seen):
        assert len(outputs) == len(split(text))
        out[text] = [rec.rows[int(o)] for o in outputs]
    return out, rec, ours


def tokens(folder):
    import transformers as tf

    return tf.AutoTokenizer.from_pretrained(str(folder))


def test_default_encoder_inputs_are_the_packages(package, factual_dir, monkeypatch):
    texts = random_captions(0, 160)
    theirs, their_rec = package_rows(package, factual_dir, monkeypatch, texts)
    ours, our_rec, scorer = capeval_rows(factual_dir, monkeypatch, texts)
    tok = tokens(factual_dir)
    stats = {"occurrences": 0, "cut_differs": 0, "past_64": 0, "whole": 0}
    for text in texts:
        assert len(ours[text]) == len(theirs[text])
        for mine, pkg, sentence in zip(ours[text], theirs[text], split(text)):
            assert mine == pkg, (text, sentence)  # item by item: the exact encoder ids
            full = tok(PROMPT + sentence.strip(), max_length=64, truncation=True)["input_ids"]
            stats["occurrences"] += 1
            stats["cut_differs"] += full != pkg
            stats["past_64"] += len(tok.encode(PROMPT + sentence.strip(), add_special_tokens=False)) >= 64
            stats["whole"] += full == pkg
    # the inputs cover the cases: cut, whole, past the 64-token limit, and chunks past 32 sentences
    assert stats["cut_differs"] > 100 and stats["whole"] > 100 and stats["past_64"] > 20, stats
    assert any(len(split(t)) > 32 for t in texts)
    assert len(our_rec.rows) < len(their_rec.rows)  # each distinct (sentence, cut) generated once
    # the generation settings that reach generate are the package's
    assert {tuple(sorted(k.items())) for k in our_rec.kwargs} == {tuple(sorted(k.items())) for k in their_rec.kwargs} \
        == {(("early_stopping", True), ("max_length", 128), ("num_beams", 5))}
    sig = str(scorer.signature())
    assert "parser_cut:package" in sig


def test_full_option_gives_every_sentence_whole(package, factual_dir, monkeypatch):
    texts = random_captions(1, 60)
    ours, _, scorer = capeval_rows(factual_dir, monkeypatch, texts, parser_cut="full")
    theirs, _ = package_rows(package, factual_dir, monkeypatch, texts)
    tok = tokens(factual_dir)
    differs = 0
    for text in texts:
        for mine, pkg, sentence in zip(ours[text], theirs[text], split(text)):
            assert mine == tok(PROMPT + sentence.strip(), max_length=64, truncation=True)["input_ids"]
            differs += mine != pkg
    assert differs > 30
    assert "parser_cut:full" in str(scorer.signature())


def test_bad_parser_cut_is_one_line(wordnet_ready, monkeypatch):
    class Stub:
        def generate(self, sentences):
            return ["( cat )"] * len(sentences)

    kw = dict(soft_matching=False, sentences=split, nouns=lambda text, lem: [])
    with pytest.raises(InputError, match="capture option parser_cut='cut': expected one of package, full") as exc:
        CaptureScore(parser=Stub(), parser_cut="cut", **kw)
    assert "\n" not in str(exc.value)
    with pytest.raises(InputError, match="parser_cut='package': needs the FACTUAL parser"):
        CaptureScore(parser=Stub(), parser_cut="package", **kw)
    assert "parser_cut:n/a" in str(CaptureScore(parser=Stub(), **kw).signature())
    assert "parser_cut:full" in str(CaptureScore(parser=Stub(), parser_cut="full", **kw).signature())
    # refused before any model is looked for (the model folder does not exist)
    with pytest.raises(InputError, match="parser_cut=True"):
        CaptureScore.preflight({"parser_cut": True, "parser_model": "/no/such/model", "sentences": split,
                                "nouns": kw["nouns"]})
    from capeval.options import validate_options

    assert validate_options(["capture"], {"capture": {"parser_cut": "full"}}) == {"capture": {"parser_cut": "full"}}
    with pytest.raises(InputError, match="capture.parser_cut"):
        validate_options(["capture"], {"capture": {"parser_cut": 1}})
