"""EMScore math: IDF edge cases and parity of the vectorised functions with a plain loop version.

The loop version below is written from the reference code's definitions (ShiYaya/emscore
``get_idf_dict``, ``vid_greedy_cos``, ``refs_greedy_cos``, ``EMScorer.score``) with Python
floats, one caption / video / reference at a time, so it shares nothing with the tensors code.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pytest

torch = pytest.importorskip("torch")

from capeval.metrics.emscore import formulas as em  # noqa: E402

SOT, EOT = 49406, 49407


# -- the loop reference ----------------------------------------------------------------------


def loop_idf(corpus_ids, context_length):
    """The reference's IDF dict: sets of *padded* id lists, EOT = mean of all entries."""
    counts = Counter()
    for ids in corpus_ids:
        padded = list(ids) + [0] * (context_length - len(ids))
        counts.update(set(padded))
    n = len(corpus_ids)
    table = defaultdict(lambda: math.log(n + 1))
    for t, c in counts.items():
        table[t] = math.log((n + 1) / (c + 1))
    table[max(table.keys())] = sum(table.values()) / len(table)
    return table


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def unit(v):
    n = math.sqrt(dot(v, v))
    return [x / n for x in v]


def weights_of(ids, table):
    w = [table[t] for t in ids]
    if sum(w) <= 0:  # capeval's documented fallback (the reference gives NaN)
        w = [1.0] * len(ids)
    s = sum(w)
    return [x / s for x in w]


def f1(p, r):
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def loop_video(tok, ids, frames, table):
    """P, R, F, coarse of one caption (token vectors, ids) against one video (frame vectors)."""
    tok = [unit(t) for t in tok]
    frames = [unit(f) for f in frames]
    w = weights_of(ids, table)
    p = sum(w[i] * max(dot(tok[i], f) for f in frames) for i in range(len(tok)))
    r = sum(max(dot(t, f) for t in tok) for f in frames) / len(frames)
    mean = [sum(f[d] for f in frames) / len(frames) for d in range(len(frames[0]))]
    coarse = dot(tok[-1], unit(mean))  # the [EOT] vector is the last one
    return p, r, f1(p, r), coarse


def loop_text(ctok, cids, rtok, rids, table):
    ctok = [unit(t) for t in ctok]
    rtok = [unit(t) for t in rtok]
    wc, wr = weights_of(cids, table), weights_of(rids, table)
    p = sum(wc[i] * max(dot(ctok[i], y) for y in rtok) for i in range(len(ctok)))
    r = sum(wr[j] * max(dot(x, rtok[j]) for x in ctok) for j in range(len(rtok)))
    return p, r, f1(p, r), dot(ctok[-1], rtok[-1])


def loop_refs(ctok, cids, refs, table):
    """Element-wise max over references of P, R, F and coarse (EMScorer.score)."""
    rows = [loop_text(ctok, cids, rt, ri, table) for rt, ri in refs]
    return tuple(max(row[k] for row in rows) for k in range(4))


# -- random data ----------------------------------------------------------------------------


def random_sentence(rng, context_length, max_len=None):
    n = rng.randint(1, (max_len or context_length) - 2)
    body = [rng.choice([0, 1, 2, 3, 5, 8, 13, 21, 34, 400, 40000]) for _ in range(n)]
    return [SOT] + body + [EOT]


def vectors(rng, n, d, ties=False):
    out = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(n)]
    if ties and n > 2:
        out[1] = list(out[0])  # identical rows -> tied maxima
    return out


def as_batch(rows, dim):
    """Python rows -> padded tensors exactly as the scorer feeds the functions."""
    tensors = [em.l2_normalize(torch.tensor(r, dtype=torch.float32)) for r in rows]
    return em.pad_stack(tensors)


def idf_rows(id_rows, idf):
    return em.pad_stack([torch.tensor(idf.weights(ids), dtype=torch.float32) for ids in id_rows])[0]


# -- IDF --------------------------------------------------------------------------------------


def test_idf_matches_reference_dict_on_random_corpora():
    rng = random.Random(0)
    for trial in range(20):
        ctx = 12
        corpus = [random_sentence(rng, ctx) for _ in range(rng.randint(1, 9))]
        # make some sentences fill the context exactly: they contain no padding
        if trial % 2:
            corpus.append([SOT] + [7] * (ctx - 2) + [EOT])
        ref = loop_idf(corpus, ctx)
        mine = em.compute_idf(corpus, eot_id=EOT, context_length=ctx)
        for t in set(ref) | {99999, 12345}:
            assert mine.weights([t])[0] == pytest.approx(ref[t], abs=1e-12), t


def test_idf_edge_cases_by_hand():
    ctx = 77
    a = [SOT, 10, 11, EOT]
    b = [SOT, 10, 12, EOT]
    idf = em.compute_idf([a, b, a], eot_id=EOT, context_length=ctx)  # duplicates count: N = 3
    assert idf.n_docs == 3
    assert idf.weights([SOT])[0] == 0.0  # in every sentence
    assert idf.weights([0])[0] == 0.0  # padding: every sentence is shorter than 77
    assert idf.weights([10])[0] == pytest.approx(0.0)
    assert idf.weights([11])[0] == pytest.approx(math.log(4 / 3))
    assert idf.weights([12])[0] == pytest.approx(math.log(4 / 2))
    assert idf.weights([777])[0] == pytest.approx(math.log(4))  # unseen
    # EOT: plain mean over the table's entries {0, SOT, 10, 11, 12, EOT(=0 before the fix)}
    expected = (0 + 0 + 0 + math.log(4 / 3) + math.log(2) + 0) / 6
    assert idf.weights([EOT])[0] == pytest.approx(expected)


def test_idf_padding_only_for_short_sentences_and_bang_shares_it():
    ctx = 6
    full = [SOT, 1, 2, 3, 4, EOT]  # exactly ctx tokens: no padding id in its set
    short = [SOT, 1, EOT]
    idf = em.compute_idf([full, short], eot_id=EOT, context_length=ctx)
    assert idf.weights([0])[0] == pytest.approx(math.log(3 / 2))  # df(pad) = 1
    # CLIP's id 0 is also the token "!": it gets the padding's value, as in the reference
    bang = em.compute_idf([[SOT, 0, EOT]], eot_id=EOT, context_length=ctx)
    assert bang.weights([0])[0] == 0.0


def test_idf_single_sentence_corpus_is_all_zero_and_uniform_fallback():
    s = [SOT, 5, 6, EOT]
    idf = em.compute_idf([s], eot_id=EOT)
    assert idf.weights(s) == [0.0, 0.0, 0.0, 0.0]
    tok = torch.nn.functional.normalize(torch.randn(1, 4, 8), dim=-1)
    frames = torch.nn.functional.normalize(torch.randn(1, 3, 8), dim=-1)
    m = em.video_match(tok, torch.ones(1, 4, dtype=torch.bool), torch.zeros(1, 4), frames)
    assert bool(m.zero_idf[0]) and torch.isfinite(m.P).all()
    # uniform fallback = plain mean of the per-token maxima
    assert float(m.P[0]) == pytest.approx(float((tok[0] @ frames[0].T).max(dim=1).values.mean()), abs=1e-6)


def test_idf_uniform_and_empty_corpus():
    assert em.Idf.uniform().weights([SOT, 3, EOT, 0]) == [1.0] * 4
    with pytest.raises(ValueError):
        em.compute_idf([], eot_id=EOT)


# -- matching parity ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_video_match_equals_loop(seed):
    rng = random.Random(seed)
    d, ctx = 16, 20
    n = 7
    id_rows = [random_sentence(rng, ctx) for _ in range(n)]
    corpus = [random_sentence(rng, ctx) for _ in range(5)] if seed % 2 else id_rows
    table = loop_idf(corpus, ctx)
    idf = em.compute_idf(corpus, eot_id=EOT, context_length=ctx)
    tok_rows = [vectors(rng, len(ids), d, ties=True) for ids in id_rows]
    n_frames = [rng.randint(1, 6) for _ in range(n)]  # different T: exercises frame padding
    frame_rows = [vectors(rng, t, d, ties=True) for t in n_frames]

    tok, tmask = as_batch(tok_rows, d)
    frames, fmask = as_batch(frame_rows, d)
    m = em.video_match(tok, tmask, idf_rows(id_rows, idf), frames, fmask)
    vid = em.video_embedding(frames, fmask)
    eot = torch.stack([tok[k, len(id_rows[k]) - 1] for k in range(n)])
    coarse = em.cosine(eot, vid)
    for k in range(n):
        p, r, f, c = loop_video(tok_rows[k], id_rows[k], frame_rows[k], table)
        assert float(m.P[k]) == pytest.approx(p, abs=1e-6)
        assert float(m.R[k]) == pytest.approx(r, abs=1e-6)
        assert float(m.F[k]) == pytest.approx(f, abs=1e-6)
        assert float(coarse[k]) == pytest.approx(c, abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_text_match_with_several_references_equals_loop(seed):
    rng = random.Random(100 + seed)
    d, ctx = 16, 24
    n = 5
    cand_ids = [random_sentence(rng, ctx) for _ in range(n)]
    ref_ids = [[random_sentence(rng, ctx) for _ in range(rng.randint(1, 4))] for _ in range(n)]
    if seed == 0:
        ref_ids[0].append(list(cand_ids[0]))  # a reference equal (in ids) to the candidate
    corpus = [r for refs in ref_ids for r in refs]
    table = loop_idf(corpus, ctx)
    idf = em.compute_idf(corpus, eot_id=EOT, context_length=ctx)
    cand_vecs = [vectors(rng, len(ids), d, ties=True) for ids in cand_ids]
    ref_vecs = [[vectors(rng, len(ids), d) for ids in refs] for refs in ref_ids]

    # flatten (candidate, reference) pairs as the scorer does
    groups, c_rows, c_ids, r_rows, r_ids = [], [], [], [], []
    for k in range(n):
        for rv, ri in zip(ref_vecs[k], ref_ids[k]):
            groups.append(k)
            c_rows.append(cand_vecs[k])
            c_ids.append(cand_ids[k])
            r_rows.append(rv)
            r_ids.append(ri)
    ct, cm = as_batch(c_rows, d)
    rt, rm = as_batch(r_rows, d)
    m = em.text_match(ct, cm, idf_rows(c_ids, idf), rt, rm, idf_rows(r_ids, idf))
    c_eot = torch.stack([ct[k, len(c_ids[k]) - 1] for k in range(len(c_ids))])
    r_eot = torch.stack([rt[k, len(r_ids[k]) - 1] for k in range(len(r_ids))])
    coarse = em.cosine(c_eot, r_eot)
    g = torch.tensor(groups)
    got = [em.group_max(x, g, n) for x in (m.P, m.R, m.F, coarse)]
    for k in range(n):
        want = loop_refs(cand_vecs[k], cand_ids[k], list(zip(ref_vecs[k], ref_ids[k])), table)
        for name, x, y in zip("PRFC", got, want):
            assert float(x[k]) == pytest.approx(y, abs=1e-6), (name, k)


def test_full_and_combined_scores_follow_the_reference_averaging():
    # EMScorer averages figr and cogr of both parts before (F + cogr)/2: same as averaging the fulls
    fv, cv, fr, cr = torch.tensor([0.3]), torch.tensor([0.25]), torch.tensor([0.8]), torch.tensor([0.9])
    combined_ref = ((fv + fr) / 2 + (cv + cr) / 2) / 2
    assert torch.allclose((em.full_score(fv, cv) + em.full_score(fr, cr)) / 2, combined_ref)


def test_f_measure_zero_denominator_is_zero():
    p = torch.tensor([0.5, 0.0, -0.25])
    r = torch.tensor([0.5, 0.0, 0.25])
    f = em.f_measure(p, r)
    assert f.tolist() == [0.5, 0.0, 0.0]


def test_padding_quirk_of_the_reference_is_flagged():
    """The reference zeroes padded similarities before the max: max(0, .) for short rows.

    Emulate its batched computation; wherever it differs from the real-position max, capeval's
    ``negative_max`` flag is set.
    """
    torch.manual_seed(0)
    b, lmax, t, d = 16, 9, 4, 8
    lengths = torch.randint(2, lmax + 1, (b,))
    lengths[0] = lmax
    tmask = torch.arange(lmax).unsqueeze(0) < lengths.unsqueeze(1)
    tok = torch.nn.functional.normalize(torch.randn(b, lmax, d), dim=-1) * tmask.unsqueeze(-1)
    frames = torch.nn.functional.normalize(torch.randn(b, t, d), dim=-1)
    idf = torch.rand(b, lmax) * tmask
    mine = em.video_match(tok, tmask, idf, frames)
    # the reference's arithmetic, line by line in spirit: sim * mask, max, normalised idf
    sim = torch.bmm(tok, frames.transpose(1, 2)) * tmask.unsqueeze(2).float()
    wp = sim.max(dim=2).values
    wr = sim.max(dim=1).values
    p_ref = (wp * (idf / idf.sum(dim=1, keepdim=True))).sum(dim=1)
    r_ref = wr.sum(dim=1) / t
    differs = ~torch.isclose(r_ref, mine.R, atol=1e-6) | ~torch.isclose(p_ref, mine.P, atol=1e-6)
    assert bool(differs.any())  # random vectors do produce the quirk
    assert bool((mine.negative_max | ~differs).all())  # every difference is flagged
    assert torch.allclose(p_ref[~mine.negative_max], mine.P[~mine.negative_max], atol=1e-6)
    assert torch.allclose(r_ref[~mine.negative_max], mine.R[~mine.negative_max], atol=1e-6)


def test_group_max_and_any():
    v = torch.tensor([0.1, 0.7, -0.2, 0.3, 0.3])
    g = torch.tensor([0, 0, 1, 2, 2])
    assert em.group_max(v, g, 3).tolist() == pytest.approx([0.7, -0.2, 0.3])
    assert em.group_any(torch.tensor([False, True, False, False, False]), g, 3).tolist() == [True, False, False]
