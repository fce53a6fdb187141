"""CLIP BPE tokenizer: parity with transformers' CLIPTokenizer on the same (small) vocabulary,
OpenAI's file layout, cleaning, and truncation that keeps [EOT]."""

from __future__ import annotations

import gzip

import pytest

from capeval.clip.tokenizer import ClipTokenizer, clean, train_bpe, write_vocab

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
