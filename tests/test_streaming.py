"""Chunked (streamed) scoring of the text metrics equals one-chunk scoring bit for bit.

The coco metrics are computed chunk by chunk (``chunk_size``), optionally in forked
workers (``workers``), with system scores from merged sufficient statistics and CIDEr-D's
document frequencies counted over all references first. Nothing may depend on where the
chunk boundaries fall: every item score, system score and extra must be identical.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from _reference import SHARED_DATA, require_module, unavailable

import capeval
from capeval.metrics.meteor.fast_align import sum_stats, to_stats
from capeval.metrics.meteor.stats import add_totals, compute, corpus_score
from capeval.metrics.ngrams import GramIndex, NgramTable
from capeval.tokenize import ptb_tokenize_batch

COCO = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d")
NO_METEOR = "bleu,rouge-l,cider-d"

WORDS = "a the dog dogs cat man woman runs running sits on in grass red ball two of and is with".split()
ODD = ["", "!!!", "...", ", ;", "dog", "Dog.", "a a a a a", "U.S. The", "don't stop", "1,000 cats", "(a) [b]", "t."]


def _random_set(seed: int, n: int) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Captions with the edge cases: empty and punctuation-only candidates, single tokens,
    duplicate candidates and references, 1 to 6 references per item."""
    rng = random.Random(seed)

    def caption() -> str:
        if rng.random() < 0.2:
            return rng.choice(ODD)
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) + rng.choice(["", ".", " .", "!"])

    cands: dict[str, str] = {}
    refs: dict[str, list[str]] = {}
    for i in range(n):
        key = f"item{i}"
        cands[key] = caption() if i % 9 else "a dog runs on the grass"  # repeated candidate
        rs = [caption() for _ in range(rng.randint(1, 6))]
        rs = [r if r.strip() else "a dog" for r in rs]  # references may not be blank
        if i % 5 == 0:
            rs.append(rs[0])  # duplicate reference
        refs[key] = rs
    return cands, refs


def _assert_same(a: capeval.Report, b: capeval.Report, names=COCO) -> None:
    for m in names:
        x, y = a[m], b[m]
        assert x.system == y.system or (np.isnan(x.system) and np.isnan(y.system)), m
        assert list(x.items) == list(y.items), m
        bad = [k for k in x.items if x.items[k] != y.items[k]]
        assert not bad, f"{m}: {len(bad)} items differ, e.g. {bad[0]}: {x.items[bad[0]]!r} != {y.items[bad[0]]!r}"
        assert dict(x.extras) == dict(y.extras), m
        assert str(x.signature) == str(y.signature), m


@pytest.fixture(scope="module")
def random_set():
    return _random_set(0, 60)


@pytest.fixture(scope="module")
def one_chunk(random_set):
    cands, refs = random_set
    return capeval.Evaluator("coco", chunk_size=10_000, workers=1).score(cands, refs)


@pytest.mark.parametrize("size", [1, 7, 59, 60, 61, 1000])
def test_chunk_sizes_equal_one_chunk(random_set, one_chunk, size):
    cands, refs = random_set
    _assert_same(capeval.Evaluator("coco", chunk_size=size, workers=1).score(cands, refs), one_chunk)


def test_workers_equal_one_process(random_set, one_chunk):
    cands, refs = random_set
    _assert_same(capeval.Evaluator("coco", chunk_size=7, workers=2).score(cands, refs), one_chunk)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_untokenised_and_single_metrics(seed):
    """tokenizer='none', and each metric alone (its own pass) equal to the joint pass."""
    cands, refs = _random_set(seed, 40)
    opts = {"tokenizer": "none"}
    whole = capeval.Evaluator(NO_METEOR, chunk_size=100, workers=1, options={"bleu": opts, "rouge-l": opts, "cider-d": opts})
    reference = whole.score(cands, refs)
    for size in (1, 3, 39):
        ev = capeval.Evaluator(NO_METEOR, chunk_size=size, workers=1, options={"bleu": opts, "rouge-l": opts, "cider-d": opts})
        _assert_same(ev.score(cands, refs), reference, ("bleu-1", "bleu-4", "rouge-l", "cider-d"))
    for m in ("bleu-4", "rouge-l", "cider-d"):
        alone = capeval.load(m, tokenizer="none", chunk_size=4).score(cands, refs)
        _assert_same(alone, reference, (m,))


def test_fitted_cider_is_chunk_independent(random_set):
    cands, refs = random_set
    corpus = _random_set(7, 30)[1]
    a = capeval.load("cider-d", chunk_size=1000).fit(corpus).score(cands, refs)
    b = capeval.load("cider-d", chunk_size=3).fit(corpus).score(cands, refs)
    _assert_same(a, b, ("cider-d",))
    assert "fitted" in str(a["cider-d"].signature)


def test_unfitted_cider_equals_fit_on_own_references(random_set):
    cands, refs = random_set
    a = capeval.load("cider-d", chunk_size=5).score(cands, refs)["cider-d"]
    b = capeval.load("cider-d").fit(refs).score(cands, refs)["cider-d"]
    assert dict(a.items) == dict(b.items) and a.system == b.system


def test_gram_index_counts_items_with_the_ngram():
    rng = random.Random(4)
    refs = [[" ".join(rng.choice(WORDS[:6]) for _ in range(rng.randint(0, 7))) for _ in range(rng.randint(1, 4))]
            for _ in range(50)]
    index = GramIndex(4)
    for a in range(0, 50, 13):
        index.add_part(index.part(refs[a : a + 13]))
    assert index.n_docs == 50
    table = NgramTable(["a the dog x", "dogs dogs"], [["a"], ["the"]], 4)
    expected = []
    for text in table.gram_texts():
        gram = text.split()
        k = len(gram)
        expected.append(sum(any(gram == r.split()[j : j + k] for r in rs for j in range(len(r.split()))) for rs in refs))
    assert index.df_of(table).tolist() == [float(x) for x in expected]


def test_tokenize_in_pieces_with_following_context():
    texts = ["A cat sat on the mat, t.", "The dog :)", "", "  ", "fig.", "3 dogs", "U.S.", "The end", "I.", "A b"]
    whole = ptb_tokenize_batch(texts)
    for cut in range(1, len(texts)):
        assert ptb_tokenize_batch(texts[:cut], following=texts[cut:]) + ptb_tokenize_batch(texts[cut:]) == whole


def test_meteor_totals_are_exact_in_any_grouping():
    rng = random.Random(5)
    tuples = []
    for _ in range(200):
        tl, rl = rng.randint(0, 12), rng.randint(1, 12)
        c1 = [rng.randint(0, 3) for _ in range(4)]
        c2 = [rng.randint(0, 3) for _ in range(4)]
        perfect = rng.random() < 0.2
        if perfect:  # every word matched in one chunk
            c1, c2 = [tl, 0, 0, 0], [rl, 0, 0, 0]
        tuples.append((tl, rl, rng.randint(0, 2), rng.randint(0, 2), c1, c2, [0] * 4, [0] * 4,
                       1 if perfect else rng.randint(0, 5)))
    expected = corpus_score([to_stats(t) for t in tuples])
    for step in (1, 7, 200):
        parts = [sum_stats(tuples[a : a + step]) for a in range(0, len(tuples), step)]
        assert compute(add_totals(parts)).score == expected


def test_cider_equals_pycocoevalcap_bit_for_bit(random_set):
    """CIDEr-D sums in pycocoevalcap's order (and squares with pow), so item scores are equal."""
    scorer_mod = require_module("pycocoevalcap.cider.cider_scorer", "pycocoevalcap is the CIDEr-D reference")
    cands, refs = random_set
    ids = list(cands)
    hyps = ptb_tokenize_batch([cands[i] for i in ids])
    flat = ptb_tokenize_batch([r for i in ids for r in refs[i]])
    tok_refs, pos = {}, 0
    for i in ids:
        tok_refs[i] = flat[pos : pos + len(refs[i])]
        pos += len(refs[i])
    ref = scorer_mod.CiderScorer(n=4, sigma=6.0)
    for i, h in zip(ids, hyps):
        ref += (h, tok_refs[i])
    system, items = ref.compute_score()
    ours = capeval.load("cider-d", chunk_size=9).score(cands, refs)["cider-d"]
    assert [ours.items[i] for i in ids] == list(items)
    assert ours.system == system


@pytest.fixture(scope="module")
def expert():
    if not (SHARED_DATA / "flickr8k" / "ExpertAnnotations.txt").exists():
        unavailable(f"Flickr8k-Expert data not found under {SHARED_DATA}")
    from capeval.bench.flickr8k import expert_pairs

    _, cands, refs = expert_pairs(SHARED_DATA)
    return cands, refs


def test_flickr8k_expert_chunked_equals_unchunked(expert):
    cands, refs = expert
    whole = capeval.Evaluator("coco-ngram", chunk_size=100_000, workers=1).score(cands, refs)
    chunked = capeval.Evaluator("coco-ngram", chunk_size=777, workers=2).score(cands, refs)
    _assert_same(chunked, whole)
    assert len(whole["meteor"].items) == 5664


def test_empty_sentences_in_small_chunks():
    """Chunks whose candidates and references are all empty after tokenisation (no n-grams)."""
    cands = {"a": "!!!", "b": "a dog", "c": "", "d": "..."}
    refs = {"a": ["..."], "b": ["a dog runs", "!"], "c": ["; ;"], "d": ["a cat"]}
    whole = capeval.Evaluator("coco", chunk_size=100, workers=1).score(cands, refs)
    _assert_same(capeval.Evaluator("coco", chunk_size=1, workers=1).score(cands, refs), whole)
    assert whole["cider-d"].items["a"] == 0.0 and whole["bleu-1"].items["c"] < 1e-9


@pytest.mark.parametrize("budget", [None, 0, 700])
def test_caption_files_are_read_once_and_spill_past_the_budget(tmp_path, monkeypatch, capsys, budget):
    """A streamed job parses each input file once (the pass that checks them keeps the
    items: in memory, or past ``HOLD_CHARS`` characters in temporary files), and gives the
    per-item files of the same items read whole (JSON)."""
    import csv
    import json

    from capeval.cli.main import main
    from capeval.io import text_stream

    if budget is not None:
        monkeypatch.setattr(text_stream, "HOLD_CHARS", budget)
    cands, refs = _random_set(7, 300)
    (tmp_path / "c.json").write_text(json.dumps(cands), encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(refs), encoding="utf-8")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n"
                                              for i, c in cands.items()), encoding="utf-8")
    with open(tmp_path / "r.csv", "w", encoding="utf-8", newline="") as f:  # one row per reference
        w = csv.writer(f)
        w.writerow(["image_id", "reference"])
        w.writerows([i, r] for i, rs in refs.items() for r in rs)
    reads: list[str] = []
    real = text_stream.record_values

    def counted(records, kind, path, unit):
        reads.append(path.name)
        return real(records, kind, path, unit)

    monkeypatch.setattr(text_stream, "record_values", counted)
    stream = text_stream.stream_caption_files(tmp_path / "c.jsonl", tmp_path / "r.csv")
    assert stream is not None
    expected = [(i, c, refs[i]) for i, c in cands.items()]
    for _ in range(2):  # any number of passes, from what the first read kept
        assert [(i, r) for i, _, r in stream.items(False)] == [(i, r) for i, _, r in expected]
        assert list(stream.items()) == expected
    assert reads == ["c.jsonl", "r.csv"]
    out = {}
    for name, args in (("json", ["-c", "c.json", "-r", "r.json"]), ("stream", ["-c", "c.jsonl", "-r", "r.csv"])):
        monkeypatch.chdir(tmp_path)
        assert main(["score", "-q", "-m", NO_METEOR, *args, "--per-item", f"{name}.items"]) == 0
        out[name] = (json.loads(capsys.readouterr().out)["results"], (tmp_path / f"{name}.items").read_text())
    assert reads == ["c.jsonl", "r.csv"] * 2  # the CLI's streamed job read each file once too
    assert out["stream"] == out["json"]
