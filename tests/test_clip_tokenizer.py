"""CLIP BPE tokenizer.

On the real ``bpe_simple_vocab_16e6.txt.gz`` (from the installed ``clip-anytorch`` package,
see ``_upstream.py``): ids equal OpenAI's own ``simple_tokenizer`` (+ ``clip.tokenize``'s
truncation) and transformers' ``CLIPTokenizer`` built from the same vocabulary, on a few
dozen hard captions and on all 40,460 Flickr8k captions; ``from_openai`` == ``from_hf``;
the signature's tokenizer hash covers the id table. On a small learned vocabulary: parity
with transformers, OpenAI's file layout, cleaning, truncation that keeps [EOT].
"""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from _reference import require_module
from _upstream import openai_tokenize, real_vocab, simple_tokenizer, simple_tokenizer_module

from capeval.models.clip.tokenizer import (
    EOT,
    SOT,
    ClipTokenizer,
    bytes_to_unicode,
    clean,
    find_vocab,
    train_bpe,
    write_vocab,
)

CORPUS = [
    "A photo depicts a dog running on the grass.",
    "Two cats are sleeping next to each other; the orange cat isn't awake.",
    "A man's bike leans on the wall, and they're watching the 2 dogs play.",
    "Children play football on the sandy beach while the sun sets.",
] * 3

TRICKY = [
    "A photo depicts a dog.",
    "  Leading and trailing   spaces\tand\nnewlines  ",
    "UPPER case MiXeD",
    "it's they're we've I'm you'll he'd don't",
    "numbers 12345 and 3.14 and 1,000,000",
    "punctuation!!! ... ?!? -- (brackets) [x] {y}",
    "émigré café naïve Zürich",
    "日本語のテキスト と 中文",
    "emoji 🐶🐱 and symbols © ® ™ €",
    "hyphen-ated words and under_scores",
    "a" * 40,
    "'quoted' \"double\" `tick`",
]


@pytest.fixture(scope="module")
def vocab_dir(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab"), train_bpe(CORPUS, 150, min_count=1))


def test_parity_with_transformers_clip_tokenizer(vocab_dir):
    transformers = pytest.importorskip("transformers")
    hf = transformers.CLIPTokenizer.from_pretrained(str(vocab_dir))
    ours = ClipTokenizer.from_hf(vocab_dir)
    for text in TRICKY + CORPUS:
        expected = hf(text)["input_ids"]
        got, n = ours.encode_batch([text])
        assert got[0] == expected, text
        assert n == 0


def test_openai_gz_layout_gives_the_same_ids(vocab_dir, tmp_path):
    merges = (vocab_dir / "merges.txt").read_text(encoding="utf-8").split("\n")[1:]
    path = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write('"bpe_simple_vocab_16e6.txt#version: 0.2\n' + "\n".join(merges))
    a = ClipTokenizer.from_path(path)
    b = ClipTokenizer.from_path(vocab_dir)
    assert a.encoder == b.encoder
    assert a.encode_batch(TRICKY) == b.encode_batch(TRICKY)


def test_cleaning_matches_clip():
    assert clean("  Hello &amp;amp; World  ") == "hello & world"  # html.unescape twice
    assert clean("caf\u00c3\u00a9") == "café"  # ftfy repairs mojibake
    assert clean("a\t\tb\n c") == "a b c"


def test_truncation_keeps_first_77_and_eot(vocab_dir):
    tok = ClipTokenizer.from_hf(vocab_dir)
    long_text = " ".join(["zq"] * 200)
    ids, n = tok.encode_batch([long_text, "short one"])
    assert n == 1
    assert len(ids[0]) == 77 and ids[0][0] == tok.sot_id and ids[0][-1] == tok.eot_id
    full = [tok.sot_id, *tok.encode(long_text), tok.eot_id]
    assert ids[0][:76] == full[:76]  # first 77 kept, the last overwritten with EOT
    # exactly 77 tokens is not truncated
    body = tok.encode(long_text)[:75]
    text75 = tok.decode(body)
    ids75, n75 = tok.encode_batch([text75])
    assert len(ids75[0]) == 77 and n75 == 0
    assert ids[1][-1] == tok.eot_id and len(ids[1]) < 77


def test_special_tokens_in_text(vocab_dir):
    tok = ClipTokenizer.from_hf(vocab_dir)
    assert tok.encode("<|endoftext|>") == [tok.eot_id]


# -- the real vocabulary ------------------------------------------------------------------

REAL_CAPTIONS = [
    # the ids the issue quotes, and punctuation
    "a photo of a cat",
    "!",
    "A photo depicts a dog.",
    "Hello, world!!! What?! No... (brackets) [x] {y} <z>",
    "50% off: $3.99 #1 @home ~tilde ^caret |pipe \\ back-slash / slash",
    "'quoted' \"double\" `tick` a-b_c",
    "email test@example.com and http://x.y/z?q=1&r=2",
    # digits
    "numbers 12345 and 3.14 and 1,000,000",
    "2 dogs and 10 cats in 2019; 7th place",
    # accents and other scripts
    "émigré café naïve Zürich",
    "Crème brûlée à la française, São Paulo, Łódź, Ærø",
    "ß straße İstanbul Ǆ",
    "日本語のテキスト と 中文",
    "Москва зимой и ελληνικά και مرحبا",
    # emoji and symbols
    "emoji 🐶🐱 and symbols © ® ™ € £ ¥ ° ± ×",
    "👍🏽 thumbs up, family 👨‍👩‍👧 (zwj)",
    # HTML entities (unescaped twice, as CLIP does)
    "Tom &amp; Jerry",
    "it&#39;s a dog",
    "&lt;b&gt;bold&lt;/b&gt; &quot;quoted&quot;&nbsp;text",
    "double &amp;amp; escaped &amp;#39;s",
    "&#x1F436; dog &#28; control",
    # mojibake and compatibility characters (ftfy repairs / normalises them)
    "caf\u00c3\u00a9 and don\u00e2\u20ac\u2122t stop",
    "ﬁne ligature, ＦＵＬＬ width, Ⅻ roman",
    # contractions and case
    "it's they're we've I'm you'll he'd don't",
    "IT'S THEY'RE WE'VE I'M YOU'LL HE'D DON'T",
    "the dog's ball and rock'n'roll",
    "UPPER case MiXeD CamelCaseWords",
    # whitespace and control characters
    "  Leading and trailing   spaces\tand\nnewlines  ",
    "a\u00a0b\u2003c zero\u200bwidth \x1c\x1dcontrol",
    "",
    "   ",
    # special tokens written in the text
    "<|endoftext|> in text <|startoftext|>",
    # truncation: 75 word tokens fit exactly (77 with SOT/EOT), 76 do not
    "a " * 75,
    "a " * 76,
    "x" * 600,
    "A man in a red shirt is riding a bicycle down a busy street while people watch. " * 6,
]


@pytest.fixture(scope="module")
def real():
    return ClipTokenizer.from_openai(real_vocab())


def test_known_ids_of_the_real_vocabulary(real):
    assert real.encode("a photo of a cat") == [320, 1125, 539, 320, 2368]
    assert real.encode("!") == [256]
    assert real.encoder["!"] == 0 and real.encoder["a</w>"] == 320
    assert (real.sot_id, real.eot_id) == (49406, 49407)
    assert len(real.encoder) == 49408


def test_byte_table_and_id_table_are_openais(real):
    upstream = simple_tokenizer_module().bytes_to_unicode()
    assert list(bytes_to_unicode().items()) == list(upstream.items())  # the order is part of the vocabulary
    st = simple_tokenizer()
    assert real.encoder == st.encoder
    assert real.ranks == st.bpe_ranks


def test_real_vocabulary_ids_equal_openai_simple_tokenizer(real):
    expected = openai_tokenize(REAL_CAPTIONS)
    got, n_truncated = real.encode_batch(REAL_CAPTIONS)
    for text, g, e in zip(REAL_CAPTIONS, got, expected):
        assert g == e, repr(text)
    st = simple_tokenizer()
    assert n_truncated == sum(len(st.encode(t)) + 2 > 77 for t in REAL_CAPTIONS) == 3
    assert [len(x) for x in got[-4:]] == [77, 77, 77, 77]  # 75 words fit exactly, the other three are cut
    assert got[REAL_CAPTIONS.index("a " * 75)] == [49406] + [320] * 75 + [49407]


def _hf_from_simple_tokenizer(directory):
    """transformers' CLIPTokenizer on OpenAI's own encoder and merges (written here, not by capeval)."""
    transformers = require_module("transformers", "transformers' CLIPTokenizer is the second independent reference")
    st = simple_tokenizer()
    merges = sorted(st.bpe_ranks, key=st.bpe_ranks.__getitem__)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.json").write_text(json.dumps(st.encoder, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n",
                                          encoding="utf-8")
    return transformers.CLIPTokenizer.from_pretrained(str(directory))


def test_real_vocabulary_ids_equal_transformers(real, tmp_path):
    hf = _hf_from_simple_tokenizer(tmp_path / "hf")
    up = simple_tokenizer_module()
    # transformers' CLIPTokenizer skips ftfy and html.unescape (it only NFC-normalises, collapses
    # whitespace and lower-cases), so it gets OpenAI's cleaned text; the cleaning itself is
    # compared with simple_tokenizer above.
    compared_raw = 0
    for text in REAL_CAPTIONS:
        cleaned = up.whitespace_clean(up.basic_clean(text)).lower()
        got = real.encode_batch([text])[0][0]
        assert got == hf(cleaned, truncation=True, max_length=77)["input_ids"], repr(text)
        if cleaned == up.whitespace_clean(text).lower():  # cleaning changed nothing but whitespace
            assert got == hf(text, truncation=True, max_length=77)["input_ids"], repr(text)
            compared_raw += 1
    assert compared_raw >= 20


def test_from_openai_and_from_hf_give_identical_ids(real, tmp_path):
    _hf_from_simple_tokenizer(tmp_path / "upstream")  # OpenAI's table, written from simple_tokenizer
    ours = write_vocab(tmp_path / "ours", real.merges)  # OpenAI's construction, written by capeval
    for folder in (tmp_path / "upstream", ours):
        hf_layout = ClipTokenizer.from_hf(folder)
        assert hf_layout.encoder == real.encoder
        assert hf_layout.encode_batch(REAL_CAPTIONS) == real.encode_batch(REAL_CAPTIONS)
        assert hf_layout.fingerprint() == real.fingerprint()


def test_hf_export_carries_the_real_ids(real, tmp_path):
    """``export_hf`` writes the tokenizer's own id table: transformers then sees OpenAI's ids."""
    transformers = require_module("transformers", "the Hugging Face export is read back with transformers")
    from capeval.models.clip.backbone import random_backbone
    from capeval.models.clip.export_hf import export_hf

    bb = random_backbone("tiny", seed=0, tokenizer_dir=real_vocab())
    folder = export_hf(bb, tmp_path / "export")
    hf = transformers.CLIPTokenizer.from_pretrained(str(folder))
    texts = ["a photo of a cat", "A photo depicts two dogs!", "x " * 100]
    assert [hf(t, truncation=True, max_length=77)["input_ids"] for t in texts] == bb.tokenize(texts)[0]
    assert bb.tokenize(["!"])[0] == [[49406, 256, 49407]]


def _flickr8k_captions(root):
    with open(root / "flickr8k" / "Flickr8k.token.txt", encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()]


def test_all_flickr8k_captions_equal_openai_simple_tokenizer(real, shared_data):
    captions = _flickr8k_captions(shared_data)
    assert len(captions) == 40460
    got, _ = real.encode_batch(captions)
    expected = openai_tokenize(captions)
    bad = [c for c, g, e in zip(captions, got, expected) if g != e]
    assert not bad, f"{len(bad)} captions differ, e.g. {bad[:3]}"


def _byte_sorted_tokenizer(tok):
    """The pre-fix construction: base tokens sorted by byte value, same merges."""
    base = [c for _, c in sorted(bytes_to_unicode().items())]
    vocab = [*base, *(b + "</w>" for b in base), *("".join(m) for m in tok.merges), SOT, EOT]
    return ClipTokenizer({t: i for i, t in enumerate(vocab)}, tok.merges, 77, "byte-sorted")


def test_signature_covers_the_id_table(real):
    from capeval.models.clip.backbone import ClipBackbone
    from capeval.models.clip.model import build_model
    from capeval.models.clip.preprocess import Preprocess

    old = _byte_sorted_tokenizer(real)
    assert old.merges == real.merges and old.encode("a photo") != real.encode("a photo")
    model = build_model("tiny", None, seed=0)
    info = {"arch": "tiny", "sha256": "x"}
    a = ClipBackbone(model, real, Preprocess(32), "b", "cpu", info)
    b = ClipBackbone(model, old, Preprocess(32), "b", "cpu", info)
    again = ClipBackbone(model, ClipTokenizer.from_openai(real_vocab()), Preprocess(32), "b", "cpu", info)
    assert a.signature["tokenizer"] != b.signature["tokenizer"]
    assert a.signature_hash != b.signature_hash
    assert a.signature == again.signature
    # the scorer's signature string changes too
    import capeval

    sig_a = capeval.load("clip-s", backbone=a).signature("clip-s")
    sig_b = capeval.load("clip-s", backbone=b).signature("clip-s")
    assert str(sig_a) != str(sig_b)


# -- where the vocabulary is found ----------------------------------------------------------


def test_vocab_under_capeval_checkpoints_is_found_where_info_reports_it(tmp_path, monkeypatch, capsys):
    from capeval.cli.main import main

    monkeypatch.delenv("CAPEVAL_CLIP_VOCAB", raising=False)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path / "elsewhere"))
    assert main(["info", "--checkpoints"]) == 0
    entry = json.loads(capsys.readouterr().out)["entries"]["clip-vocab"]
    assert entry["present"] is False
    target = tmp_path / "elsewhere" / "bpe_simple_vocab_16e6.txt.gz"
    assert entry["path"] == str(target)
    shutil.copyfile(real_vocab(), target.parent.mkdir(parents=True) or target)
    assert main(["info", "--checkpoints"]) == 0
    entry = json.loads(capsys.readouterr().out)["entries"]["clip-vocab"]
    assert entry["present"] is True
    assert find_vocab() == target == type(target)(entry["path"])
