"""compare's systems after the first reuse its reference work (issue 47 item 2).

Within one comparison (:func:`capeval.significance.keep.sharing`) the text metrics' pass of a
later system takes the first system's tokenised references and corpus ``GramIndex``
(:mod:`capeval.metrics.text_share`) when the tokenizer, corpus order, chunks, ids and reference
texts are the same, and tokenises only its own candidates. Checked here:

- the shared path is taken: for two systems the references go through the PTB tokenizer once
  and the corpus index is counted once (counted calls);
- every result equals scoring each system alone (``capeval.score``, the path the rest of the
  suite checks against pycocoevalcap), and the whole comparison equals the one without sharing,
  to the last bit: BLEU-4, METEOR and CIDEr-D together, ``cider-d.tokenizer=none``, small
  chunks, forked workers, and a memory budget too small for every chunk's tokens;
- passes that must not share do not: different references, a different chunk size, a
  different tokenizer.
"""

from __future__ import annotations

import contextlib
import random

import pytest

import capeval
from capeval.metrics import ngrams, text
from capeval.metrics.bleu import Bleu
from capeval.metrics.cider import CiderD
from capeval.significance import keep
from capeval.significance.compare import compare

WORDS = "a the man woman dog cat red blue sits runs on in with near park street ball frisbee".split()
# PTB-relevant text: punctuation, quotes, contractions, a final period that depends on what follows
ODD = ["Mr. Smith's dog.", "\"a\" cat -- runs!", "it's 3:30 p.m.", "U.S. flag , waves", "can't (stop) ."]


def _data(n: int, seed: int = 7) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    rng = random.Random(seed)

    def caption() -> str:
        words = rng.choices(WORDS, k=rng.randint(1, 10))
        if rng.random() < 0.3:
            words.insert(rng.randint(0, len(words)), rng.choice(ODD))
        return " ".join(words)

    refs = {f"i{k}": [caption() for _ in range(rng.randint(1, 5))] for k in range(n)}
    a = {i: caption() for i in refs}
    b = {i: (rs[0] if k % 4 == 0 else caption()) for k, (i, rs) in enumerate(refs.items())}  # some equal a reference
    c = {i: ("" if k % 5 == 0 else caption()) for k, i in enumerate(refs)}
    return {"A": a, "B": b, "C": c}, refs


@contextlib.contextmanager
def _counting(monkeypatch: pytest.MonkeyPatch):
    """Counts of captions through the PTB tokenizer and of corpus-index parts, in this process."""
    import capeval.tokenize as tok

    counts = {"ptb": 0, "parts": 0}
    ptb, part = tok.ptb_tokenize_batch, ngrams.GramIndex.part

    def counted_ptb(texts, *args, **kwargs):
        texts = list(texts)
        counts["ptb"] += len(texts)
        return ptb(texts, *args, **kwargs)

    def counted_part(self, refs, **kwargs):
        counts["parts"] += len(refs)
        return part(self, refs, **kwargs)

    with monkeypatch.context() as m:  # undone on leaving: counters do not nest
        m.setattr(tok, "ptb_tokenize_batch", counted_ptb)
        m.setattr(ngrams.GramIndex, "part", counted_part)
        yield counts


@contextlib.contextmanager
def _no_sharing(*args, **kwargs):
    yield None


def _compare_both_ways(monkeypatch, systems, refs, metrics, options=None, samples=40):
    """(compare with sharing, its reports), and compare without (sharing replaced by nothing)."""
    shared_reports: dict = {}
    out = compare(systems, refs, metrics, samples=samples, options=options, reports=shared_reports)
    with monkeypatch.context() as m:
        m.setattr(keep, "sharing", _no_sharing)
        plain = compare(systems, refs, metrics, samples=samples, options=options)
    return out, shared_reports, plain


def _same_as_alone(reports, systems, refs, metrics, options=None) -> None:
    for name, cands in systems.items():
        alone = capeval.score(cands, refs, metrics, options=options)
        for m in reports[name]:
            got, want = reports[name][m], alone[m]
            assert got.system == want.system, (name, m)
            assert got.items == want.items, (name, m)
            assert got.signature == want.signature, (name, m)


def test_references_tokenised_and_counted_once(monkeypatch):
    systems, refs = _data(40)
    two = {k: systems[k] for k in ("A", "B")}
    n_refs = sum(map(len, refs.values()))
    with _counting(monkeypatch) as counts:
        compare(two, refs, "cider-d", samples=20)
    # each system's candidates once, the references once (not once per system)
    assert counts["ptb"] == 2 * len(refs) + n_refs
    assert counts["parts"] == len(refs)
    with _counting(monkeypatch) as counts, monkeypatch.context() as m:
        m.setattr(keep, "sharing", _no_sharing)
        compare(two, refs, "cider-d", samples=20)
    assert counts["ptb"] == 2 * (len(refs) + n_refs)  # the normal path: everything per system
    assert counts["parts"] == 2 * len(refs)


def test_three_metrics_bit_for_bit(monkeypatch):
    systems, refs = _data(30, seed=3)
    systems = {k: systems[k] for k in ("B", "C")}
    metrics = ["bleu-4", "meteor", "cider-d"]
    with _counting(monkeypatch) as counts:
        out, reports, plain = _compare_both_ways(monkeypatch, systems, refs, metrics)
    n_refs = sum(map(len, refs.values()))
    # the shared run: 2 systems' candidates, the references once; then the plain run: all twice
    assert counts["ptb"] == 2 * len(refs) + n_refs + 2 * (len(refs) + n_refs)
    assert out == plain
    _same_as_alone(reports, systems, refs, metrics)


def test_tokenizer_none_bit_for_bit(monkeypatch):
    systems, refs = _data(30, seed=4)
    options = {"cider-d": {"tokenizer": "none"}}
    metrics = ["bleu-4", "cider-d"]
    with _counting(monkeypatch) as counts:
        out, reports, plain = _compare_both_ways(monkeypatch, systems, refs, metrics, options)
    assert counts["parts"] == len(refs) + 3 * len(refs)  # CIDEr-D's pass (tokenizer none) shares too
    assert out == plain
    _same_as_alone(reports, systems, refs, metrics, options)


@pytest.mark.parametrize("options", [
    {"cider-d": {"chunk_size": 7}},
    {"cider-d": {"chunk_size": 9, "workers": 2}},
])
def test_chunks_and_workers_bit_for_bit(monkeypatch, options):
    systems, refs = _data(45, seed=5)
    out, reports, plain = _compare_both_ways(monkeypatch, systems, refs, "cider-d", options)
    assert out == plain
    _same_as_alone(reports, systems, refs, "cider-d", options)


def test_budget_past_some_chunks(monkeypatch):
    """Chunks past the memory budget keep no tokens: their references are tokenised again."""
    systems, refs = _data(40, seed=6)
    options = {"cider-d": {"chunk_size": 8}}
    chars = sum(len(c) for c in systems["A"].values()) + sum(len(r) for rs in refs.values() for r in rs)
    monkeypatch.setattr(text, "KEEP_TOKENS_CHARS", chars // 2)  # about half the chunks' tokens kept
    n_refs = sum(map(len, refs.values()))
    with _counting(monkeypatch) as alone:
        with keep.keeping():
            capeval.score(systems["A"], refs, "cider-d", options=options)
    with _counting(monkeypatch) as counts:
        out, reports, plain = _compare_both_ways(monkeypatch, systems, refs, "cider-d", options)
    assert out == plain
    _same_as_alone(reports, systems, refs, "cider-d", options)
    with _counting(monkeypatch) as shared_run:
        compare(systems, refs, "cider-d", samples=40, options=options)
    assert shared_run["parts"] == len(refs)
    # systems B and C are scored in A's pass (joint tables): their candidates only, the references
    # past the budget being tokenised again once, for the three systems
    assert shared_run["ptb"] - alone["ptb"] == 2 * len(refs)
    assert counts["ptb"] - shared_run["ptb"] == alone["ptb"] * 3  # without sharing: each as alone
    with _counting(monkeypatch) as own_passes, monkeypatch.context() as m:
        m.setattr(keep, "score_ahead", lambda candidates: None)  # each later system in a pass of its own
        assert compare(systems, refs, "cider-d", samples=40, options=options) == out
    later = own_passes["ptb"] - alone["ptb"]  # what systems B and C tokenised
    assert 2 * len(refs) < later < 2 * (len(refs) + n_refs)  # their candidates and some references, not all


def _pass(scorer, cands, refs):
    with keep.keeping():
        return scorer.score(cands, refs)


@pytest.mark.parametrize("change", ["references", "chunks", "tokenizer", "order"])
def test_no_sharing_when_the_work_differs(monkeypatch, change):
    systems, refs = _data(25, seed=8)
    a, b = systems["A"], systems["B"]
    other_refs = dict(refs)
    second = CiderD()
    if change == "references":
        first_id = next(iter(refs))
        other_refs[first_id] = refs[first_id][:-1] + [refs[first_id][-1] + " extra"]
    elif change == "chunks":
        second = CiderD(chunk_size=6)
    elif change == "tokenizer":
        second = CiderD(tokenizer="none")
    else:  # the same texts in another order are other chunks and other tokenisation contexts
        other_refs = dict(reversed(list(refs.items())))
        b = {i: b[i] for i in other_refs}
    alone = second.score(b, other_refs)
    with _counting(monkeypatch) as counts, keep.sharing() as store:
        _pass(CiderD(), a, refs)
        got = _pass(second, b, other_refs)
    assert counts["parts"] == len(refs) + len(other_refs)  # the second pass counted its own corpus
    assert len(store) == 2
    assert got["cider-d"].items == alone["cider-d"].items
    assert got["cider-d"].system == alone["cider-d"].system


def test_shared_across_scorers_of_the_same_corpus(monkeypatch):
    """BLEU-4 with CIDEr-D, then CIDEr-D alone: the same corpus order, chunks and references."""
    systems, refs = _data(25, seed=9)
    with _counting(monkeypatch) as counts, keep.sharing() as store:
        with keep.keeping():
            text.score_text([Bleu(), CiderD()], systems["A"], refs)
        got = _pass(CiderD(), systems["B"], refs)
    assert counts["parts"] == len(refs) and len(store) == 1
    alone = CiderD().score(systems["B"], refs)
    assert got["cider-d"].items == alone["cider-d"].items and got["cider-d"].system == alone["cider-d"].system


def test_shared_references_are_not_sent_to_the_workers(monkeypatch):
    """A later system scored in a pass of its own (where the first system's pass did not score it:
    see test_joint_tables.py): its scoring tasks name the chunk whose tokenised references they take from
    the shared entry (a forked worker has it from the parent) instead of carrying the tokens:
    what crosses to a worker is its candidates and an index; the results are unchanged."""
    from capeval.metrics import workers

    systems, refs = _data(36, seed=8)
    options = {"cider-d": {"chunk_size": 9, "workers": 2}}
    sent: list[tuple] = []
    real = workers.map_tasks

    def recording(job, tasks, n_workers, recycle=None, meanwhile=None):
        def seen():
            for task in tasks:
                sent.append(task)
                yield task
        return real(job, seen(), n_workers, recycle, meanwhile)

    monkeypatch.setattr(workers, "map_tasks", recording)
    # later systems in passes of their own (not scored in the first system's pass, on joint tables)
    monkeypatch.setattr(keep, "score_ahead", lambda candidates: None)
    out, reports, plain = _compare_both_ways(monkeypatch, systems, refs, "cider-d", options)
    later = [t for t in sent if len(t) == 3]
    assert later and all(isinstance(t[2], int) for t in later)
    assert out == plain
    _same_as_alone(reports, systems, refs, "cider-d", options)


def test_later_systems_keep_no_reference_pairs_and_are_matched_by_the_index(monkeypatch):
    """The first system's CIDEr-D chunks keep the references' (item, n-gram) pairs (the
    resamples' df are built from them); a later system scored on the shared corpus index keeps
    none (the same pairs) and is matched by the index's token and its chunks' items; chunks of
    another index, or cut differently, are not matched; the resampling refuses to be built
    from chunks without pairs."""
    import dataclasses

    from capeval.significance.cider_resample import CiderResampling
    from capeval.significance.compare import _statistics

    systems, refs = _data(30, seed=11)
    shared: dict = {}
    with keep.sharing():
        a, _ = _statistics("A", systems["A"], refs, ["cider-d"], None, shared=shared)
        b, _ = _statistics("B", systems["B"], refs, ["cider-d"], None, shared=shared)
    common = shared["cider-d"]
    ca, cb = a["cider-d"].chunks, b["cider-d"].chunks
    assert all(c.df_item is not None and c.df_gid is not None for c in ca)
    assert all(c.df_item is None and c.df_gid is None for c in cb)
    assert {c.refs_token for c in ca + cb} == {common.refs_token} and common.refs_token
    assert b["cider-d"].shared is common and common.same_references(cb)
    other = [dataclasses.replace(c, refs_token="another index") for c in cb]
    assert not common.same_references(other)
    assert not common.same_references(cb[:-1])
    with pytest.raises(ValueError, match="without the references"):
        CiderResampling(30, cb)
    # without sharing, every system keeps its pairs and is matched by their digest (as before)
    shared = {}
    a, _ = _statistics("A", systems["A"], refs, ["cider-d"], None, shared=shared)
    b, _ = _statistics("B", systems["B"], refs, ["cider-d"], None, shared=shared)
    assert all(c.df_item is not None for c in b["cider-d"].chunks) and b["cider-d"].shared is shared["cider-d"]


def test_inputs_checked_once_then_copied(monkeypatch):
    """compare checks the candidates and references once and hands them to every system's pass
    marked as checked: normalising them again copies them (lists too, so a pass cannot change
    another's) without checking again, and the reference-count check passes them; unmarked
    inputs are checked as always, and a checked candidates mapping is checked again where empty
    captions are refused."""
    from capeval.errors import InputError
    from capeval.io import inputs

    refs = inputs.CheckedReferences(inputs.normalize_references({"a": ["x y", "z"], "b": "w"}))
    cands = inputs.CheckedCandidates(inputs.normalize_candidates({"a": "x", "b": ""}))
    calls = []
    monkeypatch.setattr(inputs, "max_references", lambda: calls.append(1) or 10)
    again = inputs.normalize_references(refs)
    assert again == {"a": ["x y", "z"], "b": ["w"]} and type(again) is dict and not calls
    again["a"].append("changed")
    assert refs["a"] == ["x y", "z"]
    inputs.check_reference_counts(refs)
    assert not calls
    assert inputs.normalize_candidates(cands) == {"a": "x", "b": ""}
    with pytest.raises(InputError, match="empty"):
        inputs.normalize_candidates(cands, allow_empty=False)
    plain = {"a": ["x y"] * 11}
    with pytest.raises(InputError, match="more than the 10"):
        inputs.normalize_references(plain)
    assert calls
    # the comparison itself gives what it gave with every input checked in every pass
    systems, data_refs = _data(25, seed=5)
    two = {k: systems[k] for k in ("A", "B")}
    marked = compare(two, data_refs, "bleu-4,cider-d", samples=30)
    monkeypatch.undo()
    with monkeypatch.context() as m:
        import capeval.significance.compare as cmp_module

        m.setattr(cmp_module, "CheckedCandidates", dict)  # plain dicts: checked again in every pass
        m.setattr(cmp_module, "CheckedReferences", dict)
        unmarked = compare(two, data_refs, "bleu-4,cider-d", samples=30)
    assert marked == unmarked
