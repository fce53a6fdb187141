"""capeval.reward's token-id rewards against capeval.Reward on words and against pycocoevalcap itself.

Ids are written as words ("w17"); a caption ends at its first pad or eos. Oracles: capeval.Reward
(CIDEr-D fitted on the same references), pycocoevalcap 1.2's CiderScorer with the document
frequencies of the training references (its own compute_doc_freq over them, N = their items)
and its BleuScorer (option "closest", per-sentence list).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from capeval.errors import InputError

torch = pytest.importorskip("torch")

PAD, EOS, UNSEEN = 0, 99, 5000  # ids >= UNSEEN are in no reference


def _references(seed: int, items: int = 12, offset: int = 0) -> list[list[list[int]]]:
    rng = np.random.default_rng(seed)
    refs = [[(rng.integers(1, 25, size=rng.integers(1, 13)) + offset).tolist() for _ in range(rng.integers(1, 6))]
            for _ in range(items)]
    refs[0].append([7 + offset, 8 + offset] * 4)  # repeated n-grams inside one reference
    refs[1][0] = [3 + offset, 3 + offset, 3 + offset, 4 + offset, 3 + offset, 3 + offset]
    refs[2] = [[11 + offset]]  # one one-token reference
    return refs


def _batch(refs: list[list[list[int]]], seed: int, group: int = 4, t: int = 16, offset: int = 0):
    """GRPO groups of `group` samples per item, with every edge case in some rows."""
    rng = np.random.default_rng(seed)
    n_items = len(refs)
    items = np.repeat(np.arange(n_items), group)
    b = len(items)
    cand = rng.integers(1, 27, size=(b, t)) + offset
    lengths = rng.integers(0, t + 1, size=b)
    for r in range(b):
        cand[r, lengths[r]:] = PAD
        if rng.random() < 0.3 and lengths[r] < t:  # junk after the first pad: ignored
            cand[r, lengths[r] + 1:] = rng.integers(1, 27, size=t - lengths[r] - 1) + offset
    cand[0] = PAD  # empty caption
    cand[1, 1:] = PAD  # one-token caption
    cand[2, :] = UNSEEN + offset  # one unseen token repeated: no n-gram in any reference
    cand[3, :6] = [UNSEEN + 1, UNSEEN + 2, UNSEEN + 1, UNSEEN + 2, UNSEEN + 1, EOS]
    cand[3, 6:] = 5 + offset  # after eos: ignored
    ref = refs[items[4]][0][: t]
    cand[4, :] = PAD
    cand[4, : len(ref)] = ref  # a copy of a reference
    cand[5, :8] = [3 + offset, 3 + offset, 3 + offset, 3 + offset, 4 + offset, 3 + offset, 3 + offset, EOS]
    cand[6, :3] = [EOS, 5 + offset, 6 + offset]  # eos first: empty
    return torch.tensor(cand), torch.tensor(items)


def _words(ids: list[int]) -> str:
    out = []
    for x in ids:
        if x in (PAD, EOS):
            break
        out.append(f"w{x}")
    return " ".join(out)


def _word_refs(refs):
    return [[_words(r) for r in item] for item in refs]


def _pycoco_cider(word_refs, cands_words, items):
    from pycocoevalcap.cider.cider_scorer import CiderScorer, cook_refs, cook_test

    corpus = CiderScorer(n=4, sigma=6.0)
    for item in word_refs:
        corpus += (None, item)
    corpus.compute_doc_freq()  # df over the training references, as pycocoevalcap counts it
    out = []
    for c, i in zip(cands_words, items):
        one = CiderScorer(n=4, sigma=6.0)
        one.document_frequency = corpus.document_frequency
        # compute_cider takes N = len(crefs) and scores zip(ctest, crefs): the corpus' N, one caption
        one.crefs = [cook_refs(word_refs[i])] + [None] * (len(word_refs) - 1)
        one.ctest = [cook_test(c)]
        out.append(one.compute_cider()[0])
    return np.array(out)


@pytest.fixture(scope="module")
def case():
    refs = _references(0)
    cand, items = _batch(refs, 1)
    words = [_words(c) for c in cand.tolist()]
    wrefs = _word_refs(refs)
    from capeval.reward import Reward

    reward = Reward({"cider-d": 1.0}, fit=wrefs).scores(words, [wrefs[i] for i in items.tolist()])["cider-d"]
    return refs, cand, items, words, wrefs, reward


def test_cider_tokens_equal_reward_on_words_and_pycocoevalcap(case):
    pytest.importorskip("pycocoevalcap")
    from capeval.reward import CiderDTokens

    refs, cand, items, words, wrefs, reward = case
    oracle = _pycoco_cider(wrefs, words, items.tolist())
    assert reward.tolist() == oracle.tolist()  # the two oracles agree bit for bit
    got = CiderDTokens(refs, pad_id=PAD, eos_id=EOS).table(cand, items)
    assert got.dtype == torch.float64 and got.shape == (len(items),)
    diff = np.abs(got.numpy() - reward)
    print(f"CiderDTokens float64 vs Reward on words: max |diff| = {diff.max():.3g} over {len(diff)} captions")
    peer = np.abs(got.numpy() - oracle).max()
    print(f"CiderDTokens float64 vs pycocoevalcap CiderScorer (training df): max |diff| = {peer:.3g}")
    assert diff.max() == 0.0 and peer == 0.0
    assert got[0] == 0 and got[2] == 0 and got[6] == 0 and got[4] > 1  # empty, unseen, eos-first; a reference copy
    got32 = CiderDTokens(refs, pad_id=PAD, eos_id=EOS, dtype="float32").table(cand, items)
    diff32 = np.abs(got32.double().numpy() - reward)
    print(f"CiderDTokens float32 vs Reward on words: max |diff| = {diff32.max():.3g}")
    assert got32.dtype == torch.float32 and diff32.max() <= 1e-5


def test_cider_tokens_more_batches_exact():
    """Other seeds, a longer T, n=3/sigma=4 and a vocabulary above the lookup table's reach."""
    from capeval.reward import CiderDTokens, Reward

    for seed, offset, n, sigma in ((2, 0, 4, 6.0), (3, 10**7, 4, 6.0), (4, 0, 3, 4.0)):
        refs = _references(seed, items=8, offset=offset)
        cand, items = _batch(refs, seed + 100, group=3, t=24, offset=offset)
        wrefs = _word_refs(refs)
        words = [_words(c) for c in cand.tolist()]
        want = Reward({"cider-d": 1.0}, fit=wrefs, options={"cider-d": {"n": n, "sigma": sigma}}).scores(
            words, [wrefs[i] for i in items.tolist()])["cider-d"]
        scorer = CiderDTokens(refs, pad_id=PAD, n=n, sigma=sigma, eos_id=EOS)
        got = scorer.table(cand, items)
        assert ("code_table" in scorer.tables("cpu")) == (offset == 0)
        assert got.numpy().tolist() == want.tolist(), (seed, np.abs(got.numpy() - want).max())
        chunked = CiderDTokens(refs, pad_id=PAD, n=n, sigma=sigma, eos_id=EOS, max_elements=1024).table(cand, items)
        assert chunked.tolist() == got.tolist()  # chunks of rows: the same numbers
        shuffled = torch.randperm(len(items), generator=torch.Generator().manual_seed(seed))
        assert scorer.table(cand[shuffled], items[shuffled]).tolist() == got[shuffled].tolist()


def test_cider_tokens_exact_through_the_lookup_tables_overflow(case, monkeypatch):
    """One slot per key in the n-gram ids' direct-mapped table: many ids come from its overflow; same numbers."""
    from capeval.reward import CiderDTokens, token_index

    real, built = token_index.hash_table, []

    def crowded(keys, slots_per_key=4):
        built.append(real(keys, slots_per_key=1))
        return built[-1]

    monkeypatch.setattr(token_index, "hash_table", crowded)
    refs, cand, items, words, wrefs, reward = case
    got = CiderDTokens(refs, pad_id=PAD, eos_id=EOS).table(cand, items)
    assert sum(len(t["over_keys"]) for t in built) > 10
    assert got.numpy().tolist() == reward.tolist()


def test_lookup_table_finds_what_a_binary_search_finds():
    """token_grams.find through the direct-mapped table vs numpy's searchsorted, present and absent keys."""
    from capeval.reward import token_grams, token_index

    rng = np.random.default_rng(5)
    keys = np.unique(rng.integers(0, 10**12, size=5000))
    queries = np.concatenate([keys[rng.integers(0, len(keys), size=3000)], rng.integers(0, 10**12, size=3000)])
    j = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    want = np.where(keys[j] == queries, j, -1)
    mask = rng.random(len(queries)) < 0.8
    for slots in (1, 4):
        hashed = {k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v
                  for k, v in token_index.hash_table(keys, slots_per_key=slots).items()}
        got = token_grams.find(torch.as_tensor(keys), torch.as_tensor(queries), torch.as_tensor(mask), hashed)
        assert got.tolist() == np.where(mask, want, -1).tolist()


def test_bleu_tokens_equal_pycocoevalcap_per_sentence(case):
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.bleu.bleu_scorer import BleuScorer

    from capeval.reward import BleuTokens

    refs, cand, items, words, wrefs, _ = case
    scorer = BleuScorer(n=4)
    for c, i in zip(words, items.tolist()):
        scorer += (c, wrefs[i])
    _, per_sentence = scorer.compute_score(option="closest")
    want = np.array(per_sentence).T
    got = BleuTokens(refs, pad_id=PAD, eos_id=EOS).table(cand, items)
    assert got.shape == (len(items), 4)
    rel = np.abs(got.numpy() - want) / np.maximum(np.abs(want), np.finfo(float).tiny)
    print(f"BleuTokens vs pycocoevalcap Bleu per sentence: max relative diff = {rel.max():.3g}")
    assert rel.max() <= 1e-14  # the ** (1/k) and exp are torch's: within an ulp or two of libm's
    assert got[4, 0] > 0.99 and got[2].abs().max() < 1e-3  # a reference copy; no shared n-gram


def test_bad_input_is_one_line():
    from capeval.reward import BleuTokens, CiderDTokens

    refs = _references(0)
    for kwargs, pattern in (({"n": 0}, "n must be an integer in"), ({"sigma": 0.0}, "sigma"),
                            ({"max_elements": 10}, "max_elements"), ({"dtype": "float16"}, "dtype"),
                            ({"eos_id": 1.5}, "eos_id"), ({"check_items": 1}, "check_items")):
        with pytest.raises(InputError, match=pattern):
            CiderDTokens(refs, **kwargs)
    for bad, pattern in (([], "no items"), ([[]], r"references\[0\] must be a non-empty"),
                         ([[[1, 2]], [[]]], r"references\[1\]\[0\] is empty"),
                         ([[[1, 0, 2]]], r"references\[0\]\[0\] holds pad_id 0"),
                         ([[[1, -2]]], "negative"), ([["a dog"]], "list of token ids"),
                         ({0: [[1]]}, "must be a list")):
        with pytest.raises(InputError, match=pattern):
            BleuTokens(bad)
    scorer = CiderDTokens(refs, pad_id=PAD)
    with pytest.raises(InputError, match=r"items\[1\] = 12 is not an item index"):
        scorer.table(torch.ones(2, 3, dtype=torch.long), torch.tensor([0, 12]))
    with pytest.raises(InputError, match="2 items for 3 candidates"):
        scorer.table(torch.ones(3, 3, dtype=torch.long), torch.tensor([0, 1]))
    with pytest.raises(InputError, match=r"\[B, T\] tensor"):
        scorer.table(torch.ones(3, dtype=torch.long), torch.tensor([0, 1, 2]))
    with pytest.raises(InputError, match="integer token ids"):
        scorer.table(torch.ones(1, 3), torch.tensor([0]))


def test_empty_shapes():
    from capeval.reward import BleuTokens, CiderDTokens

    refs = _references(0)
    cider, bleu = CiderDTokens(refs), BleuTokens(refs)
    assert cider.table(torch.zeros(0, 5, dtype=torch.long), torch.zeros(0, dtype=torch.long)).shape == (0,)
    assert bleu.table(torch.zeros(0, 5, dtype=torch.long), torch.zeros(0, dtype=torch.long)).shape == (0, 4)
    assert cider.table(torch.zeros(2, 0, dtype=torch.long), torch.tensor([0, 1])).tolist() == [0.0, 0.0]


def test_group_baseline():
    from capeval.reward import group_baseline

    r = torch.tensor([1.0, 2.0, 6.0, 3.0, 5.0, 7.0])
    assert group_baseline(r, 3).tolist() == [-2.0, -1.0, 3.0, -2.0, 0.0, 2.0]
    assert group_baseline(r, 3, mode="loo").tolist() == [-3.0, -1.5, 4.5, -3.0, 0.0, 3.0]
    items = torch.tensor([9, 4, 9, 4, 9, 4])  # interleaved groups {1, 6, 5} and {2, 3, 7}
    assert group_baseline(r, items=items).tolist() == [-3.0, -2.0, 2.0, -1.0, 1.0, 3.0]
    assert group_baseline(r, items=items, mode="loo").tolist() == [-4.5, -3.0, 3.0, -1.5, 1.5, 4.5]
    assert group_baseline(r, items=torch.arange(6), mode="loo").tolist() == [0.0] * 6
    assert group_baseline(r, 3, mode="greedy", greedy=torch.tensor([2.0, 4.0])).tolist() == [-1, 0, 4, -1, 1, 3]
    assert group_baseline(r, mode="greedy", greedy=r).tolist() == [0.0] * 6
    for kwargs, pattern in (({"group_size": 4}, "groups of 4"), ({"group_size": 0}, "group_size"),
                            ({}, "one of group_size"), ({"group_size": 3, "mode": "max"}, "mode"),
                            ({"group_size": 3, "mode": "greedy"}, "needs greedy"),
                            ({"group_size": 3, "greedy": r}, "greedy= is used by")):
        with pytest.raises(InputError, match=pattern):
            group_baseline(r, **kwargs)


def test_import_stays_light():
    code = ("import sys, capeval, capeval.reward; assert 'torch' not in sys.modules, 'torch imported'; "
            "assert set(capeval.reward._LAZY) == {'CiderDTokens', 'BleuTokens', 'group_baseline'}")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu(case):
    from capeval.reward import BleuTokens, CiderDTokens

    refs, cand, items, *_ = case
    for cls in (CiderDTokens, BleuTokens):
        scorer = cls(refs, pad_id=PAD, eos_id=EOS)
        cpu = scorer.table(cand, items)
        gpu = scorer.table(cand.cuda(), items.cuda())
        assert gpu.device.type == "cuda"
        diff = (gpu.cpu() - cpu).abs().max().item()
        print(f"{cls.__name__} CUDA vs CPU float64: max |diff| = {diff:.3g}")
        assert diff <= 1e-12


@pytest.mark.slow
def test_compiled_equals_eager(case):
    from capeval.reward import CiderDTokens

    refs, cand, items, *_ = case
    scorer = CiderDTokens(refs, pad_id=PAD, eos_id=EOS, check_items=False)
    eager = scorer.table(cand, items)
    compiled = torch.compile(scorer.table, fullgraph=False)
    got = compiled(cand, items)
    assert (got - eager).abs().max().item() <= 1e-12
