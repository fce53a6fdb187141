"""capeval.tokenize.ptb_tokenize* must equal pycocoevalcap 1.2's PTBTokenizer (Java).

The Java reference runs once per distinct input (one JVM call per batch, exactly as
pycocoevalcap does) and its output is cached under pytest's cache directory keyed by
the sha256 of the inputs, so reruns are fast.  Java and pycocoevalcap are test-only
dependencies: without them the comparisons are skipped (and fail under ``CI=true``), the
pure-Python tests still run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from _reference import require_java, require_module
from capeval.tokenize import PUNCTUATIONS, ptb_tokenize, ptb_tokenize_batch, ptb_tokens

# Sentences of the benchmark data on which the Python tokenizer is known to differ from
# Java, with the reason.  Everything else must match exactly.  (Currently none.)
KNOWN_MISMATCHES: dict[str, str] = {}


# --------------------------------------------------------------------------- helpers
def _java_batch(config: pytest.Config, name: str, sentences: list[str]) -> list[str]:
    """pycocoevalcap's PTBTokenizer on ``sentences`` (one call, in order), cached on disk."""
    require_java()
    key = hashlib.sha256(json.dumps(sentences).encode("utf-8")).hexdigest()
    path = Path(config.cache.mkdir("ptb_tokenizer")) / f"{name}-{key[:20]}.json"
    if path.exists():
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("sha256") == key:
            return cached["tokens"]
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    res = PTBTokenizer().tokenize({i: [{"caption": s}] for i, s in enumerate(sentences)})
    tokens = [res[i][0] for i in range(len(sentences))]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"sha256": key, "tokens": tokens}), encoding="utf-8")
    tmp.replace(path)
    return tokens


def _load_sources(root: Path) -> dict[str, list[str]]:
    """Every caption of the benchmark data, per source, in file order."""
    out: dict[str, list[str]] = {}
    flickr: dict[str, str] = {}
    with open(root / "flickr8k" / "Flickr8k.token.txt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                cid, text = line.rstrip("\n").split("\t", 1)
                flickr[cid] = text
    out["flickr8k/Flickr8k.token.txt"] = list(flickr.values())
    for fname in ("CrowdFlowerAnnotations.txt", "ExpertAnnotations.txt"):
        cands = []
        with open(root / "flickr8k" / fname, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    cid = line.split("\t")[1]
                    cands.append(flickr[cid])      # KeyError = broken data, fail loudly
        out["flickr8k/" + fname + " (candidates)"] = cands
    pascal = json.loads((root / "pascal50s" / "pascal_50s.json").read_text(encoding="utf-8"))
    sents = []
    for cat in sorted(pascal):
        for row in pascal[cat]:
            sents.extend(row["captions"])
            sents.extend(row["references"])
    out["pascal50s/pascal_50s.json"] = sents
    scipy_io = require_module("scipy.io", "scipy reads pascal50S.mat (test extra)")
    mat = scipy_io.loadmat(str(root / "pascal50s" / "pascal50S.mat"))
    sents = []
    for entry in mat["train_sent_final"].ravel():
        for s in entry["sentences"].ravel():
            for x in getattr(s, "ravel", lambda: [s])():
                sents.append(str(x))
    out["pascal50s/pascal50S.mat"] = sents
    with open(root / "thumb" / "mscoco_THumB-1.0.jsonl", encoding="utf-8") as f:
        out["thumb/mscoco_THumB-1.0.jsonl (hyp)"] = [json.loads(l)["hyp"] for l in f if l.strip()]
    refs = []
    with open(root / "thumb" / "mscoco_references.json", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                refs.extend(json.loads(line)["refs"])
    out["thumb/mscoco_references.json"] = refs
    return out


@pytest.fixture(scope="session")
def benchmark_sentences(shared_data: Path) -> dict[str, list[str]]:
    return _load_sources(shared_data)


@pytest.fixture(scope="session")
def java_reference(pytestconfig, benchmark_sentences):
    """(sentences, java outputs): one pycocoevalcap call over all sources concatenated."""
    names = [n for n in benchmark_sentences if "(candidates)" not in n]
    sentences = [s for n in names for s in benchmark_sentences[n]]
    return sentences, _java_batch(pytestconfig, "corpus", sentences)


# --------------------------------------------------------------------------- corpus
def test_source_sizes(benchmark_sentences):
    sizes = {k: len(v) for k, v in benchmark_sentences.items()}
    assert sizes["flickr8k/Flickr8k.token.txt"] == 40460
    assert sizes["flickr8k/CrowdFlowerAnnotations.txt (candidates)"] == 47830
    assert sizes["flickr8k/ExpertAnnotations.txt (candidates)"] == 5822
    assert sizes["pascal50s/pascal_50s.json"] == 4 * 1000 * 7
    assert sizes["pascal50s/pascal50S.mat"] > 45000
    assert sizes["thumb/mscoco_THumB-1.0.jsonl (hyp)"] == 2500
    assert sizes["thumb/mscoco_references.json"] == 2000


def test_every_benchmark_sentence_matches_java(java_reference, benchmark_sentences):
    sentences, expected = java_reference
    got = ptb_tokenize_batch(sentences)
    assert len(got) == len(expected) == len(sentences)
    mismatches = {s: (e, g) for s, e, g in zip(sentences, expected, got)
                  if e != g and s not in KNOWN_MISMATCHES}
    report = "\n".join(f"{s!r}\n  java:   {e!r}\n  python: {g!r}" for s, (e, g) in list(mismatches.items())[:20])
    assert not mismatches, f"{len(mismatches)} sentences differ from Java:\n{report}"
    # the CrowdFlower / Expert candidates are Flickr8k captions: covered above
    covered = set(sentences)
    for name, sents in benchmark_sentences.items():
        assert covered.issuperset(sents), name


def test_isolated_equals_batch_on_corpus(java_reference):
    """ptb_tokenize (caption alone, end of input after it) differs from the batch result
    only where the next caption changes the scanner's look-ahead (on this corpus: a
    final "t." before a capitalised "A ..." caption, and a final ":)"); each such
    difference is reproduced by tokenizing the caption together with its successor."""
    sentences, expected = java_reference
    differing = 0
    for i, (s, e) in enumerate(zip(sentences, expected)):
        if ptb_tokenize(s) != e:
            differing += 1
            nxt = sentences[i + 1 : i + 2]
            assert nxt and ptb_tokenize_batch([s] + nxt)[0] == e, s
    assert differing < 20


# --------------------------------------------------------------------------- edge cases
EDGE_CASES = [
    "",
    "   ",
    ".",
    "...",
    ". , ! ? ; : - -- ...",
    "?!",
    "\u2026",
    "A dog runs.",
    "a dog runs",
    "A DOG RUNS ON THE GRASS .",
    "caf\u00e9 na\u00efve Zo\u00eb r\u00e9sum\u00e9 \u00fcber \u65e5\u672c",
    "cafe\u0301 (combining accent)",
    "\u201cquoted\u201d \u2018single\u2019 don\u2019t it\u2019s",
    "a dash \u2013 and \u2014 em dash \u2015 bar",
    "tabs\tbetween\twords",
    "line\nbreak inside a caption",
    "windows\r\nline break",
    "non\u00a0breaking space",
    "emoji \U0001F600 and replacement \ufffd char",
    "&amp; &lt; &gt; &quot;x&quot; &apos;s &nbsp; &mdash; &#39; &eacute;",
    "salt & pepper, R&D, AT&T, Q&A",
    "1,000 people 3.14 pie .5 1.5.6 10:30 12:30. 1/2 1 1/2 2-3 -5 +5 $5 US$ #1 5% 1990s '90s",
    "555-1234 (555) 555-1234",
    "mr. smith mrs. jones dr. who st. louis u.s. army U.S. The a.m. p.m. e.g. i.e., etc.",
    "Mr. Smith met Dr. Who in the U.S. The end",
    "the end etc.",
    "fig. 5 no. 5 no. x",
    "don't can't won't isn't ain't I'm you're he's it'd we've they'll CAN'T",
    "cannot gonna wanna gotta lemme gimme 'tis 'twas y'all o'clock rock'n'roll",
    "the dog's toy the dogs' toys James's hat",
    "well-known x-ray co-op pro- anti-war e-mail re-enter 3-d ----- - --",
    "and/or a/b 1/2/2003 24/7 w/ w/o",
    "(a) [b] {c} <d> << >> <b>bold</b> (in parentheses)",
    '"quote" \'single\' ``latex\'\' `tick \' \'\' `',
    "wait... what.... ok..... . . . ..",
    "http://www.google.com www.foo.com foo.com a@b.com @user #tag",
    "smile :) :-) ;) :D :( :P",
    "hello!!! what?! \u00a1hola! \u00bfque?",
    "*** ** * \\* _ __ @@ ## ~ ^ | = + \u00a9 \u00ae \u2122 \u00b0 \u00d7",
    "\u00bd cup \u00bc \u00be \u00a2 \u00a3 \u20ac \u00a5",
    "a man in a S.C.U.B.A. suit near a T.V.",
    "end with a ha t.",
    "x\u00b2 H\u2082O",
    "0x7f ctrl\x01chars\x7f",
    "soft\u00adhyphen",
    " leading and trailing spaces ",
    " ".join(["word"] * 10000),
]


# Characters Java reads as a line break.  pycocoevalcap only replaces "\n", so with
# any of these a caption would split in two and shift every later caption by one line
# (a pycocoevalcap bug we do not reproduce: ptb_tokenize treats them as spaces).  The
# Java side of the comparison therefore gets them as spaces too.
_JAVA_LINE_BREAKS = str.maketrans({c: " " for c in "\r\x0b\x0c\u2028\u2029"})


@pytest.fixture(scope="session")
def edge_java(pytestconfig):
    # a neutral lower-case caption after each case keeps the look-ahead simple
    batch = []
    for s in EDGE_CASES:
        batch.extend([s, "x"])
    java_in = [s.translate(_JAVA_LINE_BREAKS) for s in batch]
    return batch, _java_batch(pytestconfig, "edge", java_in)


def test_edge_cases_match_java(edge_java):
    batch, expected = edge_java
    got = ptb_tokenize_batch(batch)
    bad = [(s, e, g) for s, e, g in zip(batch, expected, got) if e != g]
    assert not bad, "\n".join(f"{s[:80]!r}: java {e[:80]!r} python {g[:80]!r}" for s, e, g in bad)


@pytest.mark.parametrize("caption", ["we went to the U.S.", "smile :)", "the end etc.",
                                     "end with a ha t.", "it's"])
def test_isolated_caption_matches_single_java_call(pytestconfig, caption):
    """A caption alone (end of input right after it) — what ptb_tokenize models."""
    assert ptb_tokenize(caption) == _java_batch(pytestconfig, "single", [caption])[0]


def test_batch_context_matches_java(pytestconfig):
    """The next caption can change the end of the previous one in pycocoevalcap."""
    batch = ["he lives in the U.S.", "The dog", "ends with t.", "A cat", "ends with t.", "a cat",
             "ends with t.", "", "fig.", "5", "fig.", " 5", "I like pie etc.", "<b> tag",
             "smile :)", "", "last :)"]
    assert ptb_tokenize_batch(batch) == _java_batch(pytestconfig, "context", batch)


# --------------------------------------------------------------------------- generated
_NOT_IN_CAPTION = {0x0A, 0x0D, 0x0B, 0x0C, 0x85, 0x2028, 0x2029}


def test_every_bmp_character_matches_java(pytestconfig):
    """Each BMP character alone, between letters and between digits (checks the
    generated character classes in capeval/tokenize/_tables.py)."""
    lines = []
    for c in range(1, 0x10000):
        if c in _NOT_IN_CAPTION or 0xD800 <= c <= 0xDFFF:
            continue
        ch = chr(c)
        lines.extend([ch, "a" + ch + "a", "1" + ch + "1"])
    expected = _java_batch(pytestconfig, "bmp", lines)
    got = ptb_tokenize_batch(lines)
    bad = [(l, e, g) for l, e, g in zip(lines, expected, got) if e != g]
    assert not bad, f"{len(bad)} differ, e.g. " + "; ".join(f"{ascii(l)}: {e!r} vs {g!r}" for l, e, g in bad[:10])


def test_supplementary_characters_match_java(pytestconfig):
    """Characters outside the BMP (the tables cover the BMP only; Java sees surrogate
    pairs): every 61st supplementary code point plus emoji, math letters and CJK, alone,
    between letters and between digits."""
    codes = list(range(0x10000, 0x110000, 61)) + [0x1F600, 0x1F1FA, 0x1D400, 0x1D7CE, 0x20000]
    lines = []
    for c in codes:
        ch = chr(c)
        lines.extend([ch, "a" + ch + "a", "1" + ch + "1"])
    expected = _java_batch(pytestconfig, "astral", lines)
    got = ptb_tokenize_batch(lines)
    bad = [(l, e, g) for l, e, g in zip(lines, expected, got) if e != g]
    assert not bad, f"{len(bad)} differ, e.g. " + "; ".join(f"{ascii(l)}: {e!r} vs {g!r}" for l, e, g in bad[:10])


_FRAGMENTS = (
    "a A I x t dog The the U.S. u.s U.S Mr. St. Dr. etc. e.g. i.e. a.m. fig. no. Inc. Jan. Ph.D. "
    "don't can't won't it's dog's dogs' o'clock 's ' '' `` ` \" \u201c \u201d \u2018 \u2019 ( ) [ ] { } "
    "< > <b> </b> <a href='x'> &amp; & &lt; &quot; &nbsp; &#39; - -- --- \u2014 \u2013 ... .. . , ; : "
    "? ! ?! / \\ * # @ $ % ^ + = _ ~ | 1 10 1,000 3.14 .5 1/2 12:30 555-1234 (555) 1990s '90s -5 "
    "\u00bd \u20ac \u00a3 caf\u00e9 \u65e5\u672c \u00b2 x-ray and/or w/ http://x.com/a www.a.org "
    "a@b.com @me #tag AT&T cannot gonna 'tis y'all rock'n'roll :) ;-) :D ^_^ c++ f# 1ab.c "
    "\u00a0 \u00ad \u2026 O'o cont'd"
).split(" ")


def _generated_captions(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 8)
        parts = [rng.choice(_FRAGMENTS) + rng.choice(["", " ", " ", " ", "  ", "\t"]) for _ in range(k)]
        out.append("".join(parts))
    return out


def test_generated_tricky_captions_match_java(pytestconfig):
    """Random concatenations of tricky fragments (fixed seed), one Java batch."""
    batch = _generated_captions(4000, seed=20240611)
    expected = _java_batch(pytestconfig, "generated", batch)
    got = ptb_tokenize_batch(batch)
    bad = [(s, e, g) for s, e, g in zip(batch, expected, got) if e != g]
    assert not bad, "\n".join(f"{s!r}: java {e!r} python {g!r}" for s, e, g in bad[:20])


# --------------------------------------------------------------------------- pure python
def test_simple_examples():
    assert ptb_tokenize("A dog runs.") == "a dog runs"
    assert ptb_tokenize("") == ""
    assert ptb_tokenize(". , !") == ""
    assert ptb_tokenize("Don't stop") == "do n't stop"
    assert ptb_tokenize("the dog's (big) toy") == "the dog 's -lrb- big -rrb- toy"
    assert ptb_tokenize("Mr. Smith") == "mr. smith"
    assert ptb_tokenize("1 1/2 cups") == "1\u00a01/2 cups"
    assert ptb_tokens("Hello, world.") == ["Hello", ",", "world", "."]


def test_internal_line_breaks_become_spaces():
    for brk in ("\n", "\r", "\r\n", "\x0b", "\x0c", "\u2028", "\u2029"):
        assert ptb_tokenize(f"a{brk}dog") == "a dog"
    assert ptb_tokenize_batch(["a\ndog", "b"]) == ["a dog", "b"]


def test_punctuation_list_is_pycocoevalcaps():
    assert PUNCTUATIONS == {"''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-",
                            ".", "?", "!", ",", ":", "-", "--", "...", ";"}


def test_batch_is_list_and_handles_generators():
    out = ptb_tokenize_batch(s for s in ["A bee.", "C d!"])
    assert out == ["a bee", "c d"]
    assert ptb_tokenize_batch([]) == []


def test_long_caption_is_linear():
    text = " ".join(["a", "dog's", "U.S.", "x-ray", "1,000"] * 4000)
    out = ptb_tokenize(text)
    assert out.count("dog") == 4000 and out.count("'s") == 4000
