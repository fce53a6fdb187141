"""A comparison's later systems scored in the first system's pass, on joint n-gram tables (issue 47).

- ``NgramTable.view``: a table of several candidate lists for the same references, read as the
  table of one of them, gives every CIDEr-D score and BLEU statistic of that list's own table,
  bit for bit (random captions with empty candidates, one-word captions, repeats, candidates
  equal to a reference or to each other).
- The corpus pass's (item, n-gram) pairs (``GramIndex.part(pairs=True)``) index the references
  exactly as the scoring pass's chunk statistics did (``ReferenceSets`` against
  ``CiderResampling.prepare`` from chunks with pairs: the same arrays, the same digest).
- ``capeval.compare`` scores the later systems in the first pass (no pass of their own), and its
  output equals the one with a pass per system and the former implementation
  (``benchmarks/_compare_before.py``, which rescored every resample) bit for bit; a system whose
  ids come in another order gets a pass of its own; the scores of the first pass are handed
  only to the very scorers that computed them.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

import capeval
from capeval.metrics import workers
from capeval.metrics.bleu import table_bleu_stats
from capeval.metrics.cider import cider_table_scores
from capeval.metrics.ngrams import GramIndex
from capeval.metrics.text import TextChunk
from capeval.metrics.text_share import SharedReferences
from capeval.significance import keep
from capeval.significance.cider_arrays import chunk_statistics, table_ids
from capeval.significance.run_groups import item_sets
from capeval.significance.compare import compare
from capeval.significance.reference_sets import ReferenceSets, _df_pairs, _pairs_digest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import _compare_before as before  # noqa: E402
from test_compare_fast import _assert_same, _quiet, _random_set  # noqa: E402

WORDS = "a man dog the on in red ball runs sits is of park two grass".split()


def _lists(n: int, seed: int) -> tuple[list[list[str]], list[list[str]]]:
    """Three tokenised candidate lists and the references of ``n`` items, with the edge cases."""
    rng = random.Random(seed)
    sentence = lambda k: " ".join(rng.choices(WORDS, k=k))  # noqa: E731
    refs = [[sentence(rng.randint(1, 12)) for _ in range(rng.randint(1, 5))] for _ in range(n)]
    a = [sentence(rng.randint(1, 9)) for _ in range(n)]
    b = [("" if i % 7 == 0 else refs[i][0] if i % 5 == 0 else a[i] if i % 3 == 0 else sentence(1) if i % 4 == 0
          else " ".join([rng.choice(WORDS)] * rng.randint(2, 6))) for i in range(n)]
    c = [a[(i + 1) % n] for i in range(n)]  # another item's candidate: shared sentences, other references
    return [a, b, c], refs


def _corpus(refs: list[list[str]], pairs: bool = False, parts: int = 1) -> GramIndex:
    corpus = GramIndex(4)
    step = -(-len(refs) // parts)
    for at in range(0, len(refs), step):
        corpus.add_part(corpus.part(refs[at:at + step], pairs=pairs))
    return corpus


@pytest.mark.parametrize("seed", range(6))
def test_views_score_as_tables_of_their_own(seed):
    lists, refs = _lists(40, seed)
    corpus = _corpus(refs)
    pieces = TextChunk.joint(lists, refs)
    for hyps, piece in zip(lists, pieces):
        own = TextChunk(hyps, refs).table(4)
        view = piece.table(4)
        assert view is piece.table(4)  # cached per chunk
        _, df_own = table_ids(own, corpus)
        _, df_view = table_ids(view, corpus)
        got = cider_table_scores(view, df_view, corpus.n_docs)
        want = cider_table_scores(own, df_own, corpus.n_docs)
        assert got.tobytes() == want.tobytes()
        for x, y in zip(table_bleu_stats(view), table_bleu_stats(own)):
            assert np.array_equal(np.asarray(x), np.asarray(y))
        # the statistics of the resampling: the same length penalties and, per hit, the same
        # n-gram and counts (the sentences are numbered in the joint table, not in its own)
        gid_v, _ = table_ids(view, corpus)
        gid_o, _ = table_ids(own, corpus)
        sv = chunk_statistics(view, gid_v, corpus.n_ids(), 6.0)
        so = chunk_statistics(own, gid_o, corpus.n_ids(), 6.0)
        assert sv.factor.tobytes() == so.factor.tobytes()
        for s in (sv, so):
            assert len(s.hit_h) == len(s.hit_r)
        assert [(int(sv.ent_gid[h]), int(sv.ent_tf[h]), int(sv.ent_tf[r]), int(k)) for h, r, k in
                zip(sv.hit_h, sv.hit_r, sv.hit_slot)] == \
               [(int(so.ent_gid[h]), int(so.ent_tf[h]), int(so.ent_tf[r]), int(k)) for h, r, k in
                zip(so.hit_h, so.hit_r, so.hit_slot)]
        assert sorted(zip(sv.df_item.tolist(), sv.df_gid.tolist())) == sorted(zip(so.df_item.tolist(),
                                                                                  so.df_gid.tolist()))
    # the views share the table's sentences and entries: one token, the same arrays
    tokens = {chunk_statistics(p.table(4), table_ids(p.table(4), corpus)[0], corpus.n_ids(), 6.0).table_token
              for p in pieces}
    assert len(tokens) == 1


def test_a_view_takes_one_candidate_per_item():
    lists, refs = _lists(10, 1)
    table = TextChunk([h for hyps in lists for h in hyps], refs).table(4)
    with pytest.raises(ValueError, match="one candidate per item"):
        table.view(0, 9)
    with pytest.raises(ValueError, match="one candidate per item"):
        table.view(25, 35)
    with pytest.raises(ValueError, match="2 candidates for 10 items"):
        TextChunk.joint([lists[0], lists[1][:2]], refs)


@pytest.mark.parametrize("parts", [1, 3, 7])
def test_corpus_pairs_index_the_references_as_the_chunks_did(parts):
    lists, refs = _lists(50, 9)
    corpus = _corpus(refs, pairs=True, parts=parts)
    assert corpus.keeps_pairs
    step = -(-len(refs) // parts)
    chunks = []
    for at in range(0, len(refs), step):
        table = TextChunk(lists[0][at:at + step], refs[at:at + step]).table(4)
        gid, _ = table_ids(table, corpus)
        chunks.append(chunk_statistics(table, gid, corpus.n_ids(), 6.0))
    item, gid = _df_pairs(chunks, len(refs))
    n_ids = max([c.n_ids for c in chunks] + [int(gid.max()) + 1])
    want = (n_ids,) + item_sets(item, gid, n_ids)
    sets = ReferenceSets(corpus)
    got = sets.get()
    assert got[0] == want[0]
    for x, y in zip(got[1:], want[1:]):
        assert np.array_equal(x, y)
    assert sets.get() is got  # built once
    assert sets.digest() == _pairs_digest(chunks)
    assert corpus.reference_pairs() == []  # let go once indexed
    # the document frequencies do not depend on keeping the pairs
    assert np.array_equal(corpus.df_by_id(), _corpus(refs, parts=parts).df_by_id())


def test_parts_with_and_without_pairs_are_not_mixed():
    _, refs = _lists(10, 2)
    corpus = GramIndex(4)
    corpus.add_part(corpus.part(refs[:5], pairs=True))
    with pytest.raises(ValueError, match="mixed"):
        corpus.add_part(corpus.part(refs[5:]))
    with pytest.raises(ValueError, match="kept no"):
        ReferenceSets(_corpus(refs))


def _passes(monkeypatch) -> list[int]:
    """The number of items of every pass of forked (or in-process) scoring, in order."""
    seen: list[int] = []
    real = workers.map_tasks

    def counted(job, tasks, n_workers, recycle=None, meanwhile=None):
        seen.append(n_workers)
        return real(job, tasks, n_workers, recycle, meanwhile)

    monkeypatch.setattr(workers, "map_tasks", counted)
    return seen


@pytest.mark.parametrize("options", [None, {"cider-d": {"workers": 2, "chunk_size": 16}}])
def test_later_systems_scored_in_the_first_pass(monkeypatch, options):
    systems, refs = _random_set(70, 61)
    metrics = ["bleu-4", "cider-d"]
    passes = _passes(monkeypatch)
    reports: dict = {}
    new = _quiet(compare, systems, refs, metrics, samples=30, options=options, reports=reports)
    assert len(passes) == 2  # the corpus pass and the scoring pass of the first system only
    for name, cands in systems.items():  # each system's report is the one of scoring it alone
        alone = _quiet(capeval.score, cands, refs, metrics, options=options)
        for m in metrics:
            assert reports[name][m].items == alone[m].items and reports[name][m].system == alone[m].system
    passes.clear()
    monkeypatch.setattr(keep, "score_ahead", lambda candidates: None)
    own = _quiet(compare, systems, refs, metrics, samples=30, options=options)
    assert len(passes) == 2 + len(systems) - 1  # then a scoring pass per later system
    assert own == new
    monkeypatch.undo()
    _assert_same(_quiet(before.compare, systems, refs, metrics, samples=30, options=options), new)


def test_a_system_in_another_order_gets_a_pass_of_its_own(monkeypatch):
    systems, refs = _random_set(40, 62)
    shuffled = dict(reversed(list(systems["B"].items())))
    three = {"A": systems["A"], "B": shuffled, "D": systems["D"]}
    passes = _passes(monkeypatch)
    new = _quiet(compare, three, refs, "cider-d", samples=30)
    # A's corpus and scoring passes (D scored there), then B's own: another order, other chunks
    assert len(passes) == 4
    monkeypatch.undo()
    _assert_same(_quiet(before.compare, three, refs, "cider-d", samples=30), new)


def test_first_pass_results_go_to_the_scorers_that_computed_them_only():
    entry = SharedReferences(("ptb", 4, ((0, 2),)), ["0", "1"], [["a"], ["b"]])
    mine, other = object(), object()
    entry.ahead = [((mine,), ["x", "y"], [["parts"]])]
    assert entry.take_ahead([other], ["x", "y"]) is None
    assert entry.take_ahead([mine], ["x", "z"]) is None
    assert entry.take_ahead([mine], ["x", "y"]) == [["parts"]]
    assert entry.take_ahead([mine], ["x", "y"]) is None  # handed over once


def test_later_candidates_tokenised_with_their_context():
    """A caption's PTB tokens may depend on the captions after it (an abbreviation at its end, a
    capital after it): a later system's candidates are tokenised in the first pass with their
    own following candidates, across chunk boundaries, as their own pass tokenises them."""
    rng = random.Random(5)
    # each of these ends differently when the next caption is the one after it (pycocoevalcap's
    # Java tokenizer; tests/test_ptb_tokenizer.py) than at the end of the input
    runs = [["a man ends with t.", "A cat"], ["see fig.", "5"], ["a smile :)", "", "a dog"]]
    refs = {str(i): [" ".join(rng.choices(WORDS, k=4)) + " t" for _ in range(3)] for i in range(30)}
    systems = {}
    for name in "ABC":
        texts: list[str] = []
        while len(texts) < 30:
            texts += rng.choice(runs)
        systems[name] = {str(i): t for i, t in enumerate(texts[:30])}
    options = {"cider-d": {"chunk_size": 4}, "bleu-4": {"chunk_size": 4}}
    reports: dict = {}
    _quiet(compare, systems, refs, ["bleu-4", "cider-d"], samples=10, options=options, reports=reports)
    for name, cands in systems.items():
        alone = _quiet(capeval.score, cands, refs, ["bleu-4", "cider-d"], options=options)
        assert reports[name]["cider-d"].items == alone["cider-d"].items, name
        assert reports[name]["bleu-4"].system == alone["bleu-4"].system, name


@pytest.mark.parametrize("n, seed", [(1, 1), (17, 2), (60, 3)])
def test_hits_are_the_pairs_found_in_the_reference_cached_per_view(n, seed):
    """NgramTable.hits (used by the CIDEr-D scorer and the resampling's statistics alike) is
    pairs() masked to the candidate n-grams found in the reference, per table and per view."""
    lists, refs = _lists(n, seed)
    joint = TextChunk([h for hyps in lists for h in hyps], refs).table(4)
    for lo in (0, n, 2 * n):
        view = joint.view(lo, lo + n)
        own = TextChunk(lists[lo // n], refs).table(4)
        for table in (view, own):
            h_slot, h_ent, r_ent = table.pairs()
            hit = r_ent >= 0
            got = table.hits()
            assert all(np.array_equal(g, e) for g, e in zip(got, (h_slot[hit], h_ent[hit], r_ent[hit])))
            assert table.hits() is got
