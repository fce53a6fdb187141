"""capeval.functional: each formula against a plain computation written here, edge cases, and
equality with the scorers that use it (CLIP-S / RefCLIP-S, BLEU, CIDEr-D, METEOR, EMScore)."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import capeval
from capeval import functional as F


def test_import_does_not_import_torch():
    code = "import sys, capeval.functional; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- CLIP-S family -----------------------------------------------------------------------------


def _cosines(seed: int, n: int = 50) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cos = rng.uniform(-1, 1, n)
    cos[:3] = [0.0, -0.0, 1.0]  # zeros of both signs and the maximum
    return cos


@pytest.mark.parametrize("w", [2.5, 2.0, 1.0])
def test_clip_s_is_w_times_clamped_cosine(w):
    cos = _cosines(0)
    out = F.clip_s(cos, w)
    assert out.shape == cos.shape
    assert [float(x) for x in out] == [w * max(float(c), 0.0) for c in cos]
    assert out.min() >= 0 and out.max() <= w
    assert float(F.clip_s(np.array([-0.3]), w)[0]) == 0.0  # single item, negative cosine
    assert float(F.clip_s(0.4, w)) == w * 0.4  # scalars too


def test_clip_s_keeps_float32():
    # the scorer's cosines are float32; w as a Python number must not widen them
    cos = _cosines(1).astype(np.float32)
    out = F.clip_s(cos, 2.5)
    assert out.dtype == np.float32
    assert np.array_equal(out, np.float32(2.5) * np.maximum(cos, np.float32(0)))


def test_positive_part_maps_negative_zero_and_nan_to_plus_zero():
    x = np.array([0.5, -0.5, -0.0, 0.0, np.nan, 1e-300])
    out = F.positive_part(x)
    assert [float(v) for v in out] == [max(0.0, float(v)) for v in x] == [0.5, 0.0, 0.0, 0.0, 0.0, 1e-300]
    assert not np.signbit(out).any()


def test_harmonic_mean_against_loop_and_zero_denominator():
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0, 2.5, 40), rng.uniform(0, 1, 40)
    a[:4] = [0.0, 0.0, 1.0, 0.7]
    b[:4] = [0.0, 0.5, 0.0, 0.7]
    with np.errstate(all="raise"):  # no 0/0 evaluated anywhere
        out = F.harmonic_mean(a, b)
    expect = [0.0 if x + y == 0 else 2 * x * y / (x + y) for x, y in zip(a, b)]
    assert [float(v) for v in out] == expect
    assert out[0] == 0.0 and out[1] == 0.0 and out[2] == 0.0 and out[3] == pytest.approx(0.7, abs=1e-15)
    assert np.all(out >= np.minimum(a, b) - 1e-15) and np.all(out <= np.maximum(a, b) + 1e-15)
    assert float(F.harmonic_mean([0.0], [0.0])[0]) == 0.0  # single item, both parts 0


@pytest.mark.parametrize("w", [2.5, 2.0])
def test_ref_clip_s_against_loop(w):
    cos_img, cos_ref = _cosines(3), _cosines(4)[::-1].copy()
    out = F.ref_clip_s(cos_img, cos_ref, w)
    for got, c, t in zip(out, cos_img, cos_ref):
        p, t = w * max(float(c), 0.0), max(float(t), 0.0)
        assert float(got) == pytest.approx(0.0 if p + t == 0 else 2 * p * t / (p + t), abs=1e-15)
    assert F.ref_clip_s([-0.2], [-0.4], w)[0] == 0.0  # both clamped -> 0, not NaN
    assert F.ref_clip_s([0.3], [-0.4], w)[0] == 0.0
    assert 0 <= out.min() and out.max() < w


def test_clip_functions_on_tensors():
    torch = pytest.importorskip("torch")
    cos, ref = _cosines(5), _cosines(6)
    tc, tr = torch.from_numpy(cos), torch.from_numpy(ref)
    assert isinstance(F.clip_s(tc, 2.5), torch.Tensor)
    assert np.array_equal(F.clip_s(tc, 2.5).numpy(), F.clip_s(cos, 2.5))
    assert np.array_equal(F.positive_part(tc).numpy(), F.positive_part(cos))
    assert np.array_equal(F.harmonic_mean(F.clip_s(tc), F.positive_part(tr)).numpy(),
                          F.harmonic_mean(F.clip_s(cos), F.positive_part(ref)))
    assert np.array_equal(F.ref_clip_s(tc, tr, 2.0).numpy(), F.ref_clip_s(cos, ref, 2.0))


def test_clip_scorer_equals_functional_item_by_item():
    torch = pytest.importorskip("torch")  # noqa: F841
    from PIL import Image

    from capeval.metrics.clip_score import PROMPT, ClipScore
    from capeval.models.clip.backbone import random_backbone
    from capeval.models.clip.embed import embed_images, embed_texts, l2_normalize

    rng = np.random.default_rng(7)
    ids = [f"im{k}" for k in range(6)]
    images = {i: Image.fromarray(rng.integers(0, 256, (40 + 3 * k, 36, 3), dtype=np.uint8)) for k, i in enumerate(ids)}
    words = ["a", "dog", "cat", "runs", "on", "the", "grass", "red", "car", "two", "people"]
    cands = {i: " ".join(rng.choice(words, 2 + k % 4)) for k, i in enumerate(ids)}
    refs = {i: [" ".join(rng.choice(words, 3 + j)) for j in range(1 + k % 3)] for k, i in enumerate(ids)}
    bb = random_backbone("tiny", seed=0)
    rep = ClipScore(metrics=("clip-s", "ref-clip-s"), backbone=bb).score(cands, refs, images=images)

    # embeddings as the scorer batches them (CPU float32 results can depend on the batch)
    img = l2_normalize(embed_images(bb, [images[i] for i in ids], 64))
    flat_refs = [PROMPT + r for i in ids for r in refs[i]]
    txt = l2_normalize(embed_texts(bb, [PROMPT + cands[i] for i in ids] + flat_refs, 256))
    cand, ref_txt = txt[: len(ids)], txt[len(ids) :]
    cos = np.sum(cand * img, axis=1)
    starts = np.cumsum([0] + [len(refs[i]) for i in ids])
    best = np.array([np.max(ref_txt[starts[k] : starts[k + 1]] @ cand[k]) for k in range(len(ids))], dtype=np.float64)
    clip = F.clip_s(cos, 2.5)
    ref = F.ref_clip_s(cos, best, 2.5)
    for k, i in enumerate(ids):
        assert rep["clip-s"].items[i] == float(clip[k])
        assert rep["ref-clip-s"].items[i] == float(ref[k])
        assert rep["ref-clip-s"].extras["ref_similarity"][i] == float(F.positive_part(best)[k])


# -- BLEU --------------------------------------------------------------------------------------


def _bleu_plain(testlen, reflen, guess, correct):
    """Geometric mean through logs, brevity penalty exp(1 - r/c): a different route to the formula."""
    out = []
    for n in range(1, len(guess) + 1):
        logs = [math.log((correct[k] + 1e-15) / (guess[k] + 1e-9)) for k in range(n)]
        out.append(math.exp(sum(logs) / n))
    c, r = testlen + 1e-15, reflen + 1e-9
    bp = math.exp(1 - r / c) if c < r else 1.0
    return [s * bp for s in out]


def test_bleu_from_stats_against_plain_formula():
    rng = np.random.default_rng(8)
    cases = [(4, 4, [4, 3, 2, 1], [4, 3, 2, 1]), (3, 5, [3, 2, 1, 0], [2, 1, 0, 0]), (0, 3, [0, 0, 0, 0], [0, 0, 0, 0]),
             (1, 1, [1, 0, 0, 0], [1, 0, 0, 0])]
    for _ in range(30):
        t = int(rng.integers(1, 20))
        guess = [max(0, t - k) for k in range(4)]
        cases.append((t, int(rng.integers(1, 20)), guess, [int(rng.integers(0, g + 1)) for g in guess]))
    for t, r, g, c in cases:
        got = F.bleu_from_stats(t, r, g, c)
        assert len(got) == 4 and all(0 <= s <= 1 for s in got)
        assert got == pytest.approx(_bleu_plain(t, r, g, c), rel=1e-12, abs=1e-300)
    assert F.bleu_from_stats(4, 4, [4, 3, 2, 1], [4, 3, 2, 1])[3] == pytest.approx(1.0, abs=1e-9)


def test_bleu_scorer_uses_bleu_from_stats():
    from capeval.metrics.bleu import Bleu, bleu_stats

    hyps = {"1": "a dog runs on the grass", "2": "two people", "3": "a red car"}
    refs = {"1": ["a dog is running on grass", "the dog runs"], "2": ["two people walk on the street"], "3": ["a car"]}
    rep = Bleu(tokenizer="none").score(hyps, refs)
    tot = [0, 0, [0] * 4, [0] * 4]
    for i, hyp in hyps.items():
        t, r, g, c = bleu_stats(hyp, refs[i])
        for n, s in enumerate(F.bleu_from_stats(t, r, g, c)):
            assert rep[f"bleu-{n + 1}"].items[i] == s
        tot[0] += t
        tot[1] += r
        tot[2] = [a + b for a, b in zip(tot[2], g)]
        tot[3] = [a + b for a, b in zip(tot[3], c)]
    for n, s in enumerate(F.bleu_from_stats(*tot)):
        assert rep[f"bleu-{n + 1}"].system == s


# -- CIDEr-D -----------------------------------------------------------------------------------


def _cider_plain(hyps, refs, n=4, sigma=6.0):
    """CIDEr-D with dictionaries, one pair at a time (Vedantam et al. 2015, pycocoevalcap's rules)."""

    def grams(s):
        w = s.split()
        return Counter(tuple(w[i : i + k]) for k in range(1, n + 1) for i in range(len(w) - k + 1))

    df = Counter()
    for rs in refs:
        df.update({g for r in rs for g in grams(r)})
    big_n = len(hyps)

    def vec(s):
        g = grams(s)
        v = [{} for _ in range(n)]
        for gram, tf in g.items():
            v[len(gram) - 1][gram] = tf * (math.log(big_n) - math.log(max(1.0, df[gram])))
        norms = [math.sqrt(sum(x * x for x in d.values())) for d in v]
        return v, norms, sum(tf for gram, tf in g.items() if len(gram) == 2)

    out = []
    for h, rs in zip(hyps, refs):
        vh, nh, lh = vec(h)
        total = [0.0] * n
        for r in rs:
            vr, nr, lr = vec(r)
            for k in range(n):
                val = sum(min(x, vr[k][g]) * vr[k][g] for g, x in vh[k].items() if g in vr[k])
                if nh[k] != 0 and nr[k] != 0:
                    val /= nh[k] * nr[k]
                total[k] += val * math.exp(-((lh - lr) ** 2) / (2 * sigma**2))
        out.append(sum(total) / n / len(rs) * 10.0)
    return out


def test_cider_d_against_plain_loop_and_scorer():
    rng = np.random.default_rng(9)
    words = ["a", "dog", "cat", "runs", "on", "the", "grass", "red", "car"]
    hyps = [" ".join(rng.choice(words, int(rng.integers(1, 8)))) for _ in range(12)]
    refs = [[" ".join(rng.choice(words, int(rng.integers(2, 9)))) for _ in range(int(rng.integers(1, 4)))]
            for _ in range(12)]
    hyps[0], refs[0] = refs[1][0], [refs[1][0]]  # an exact match
    hyps[1] = "zebra zebra"  # nothing in common with its references: 0
    got = F.cider_d(hyps, refs)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == (12,)
    assert got[1] == 0.0
    assert got.tolist() == pytest.approx(_cider_plain(hyps, refs), abs=1e-12)
    ids = [str(k) for k in range(12)]
    rep = capeval.load("cider-d", tokenizer="none").score(dict(zip(ids, hyps)), dict(zip(ids, refs)))
    assert [rep["cider-d"].items[i] for i in ids] == got.tolist()
    assert F.cider_d(["a dog"], [["a dog"]]).tolist() == [0.0]  # one item: log N = 0
    assert F.cider_d([], []).tolist() == []


# -- METEOR ------------------------------------------------------------------------------------


def test_meteor_from_stats_against_formula_and_stats_module():
    from capeval.metrics.meteor import stats as ms

    # hyp 6 words (2 function words), ref 7 words (3 function); exact: 3 content + 1 function
    # matched on each side, stem: 1 content each side; 3 chunks, 5 words matched each side
    v = [6, 7, 2, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 5, 5]
    line = " ".join(f"{x}.0" for x in v)
    d = 0.75
    p = (d * (3 * 1.0 + 1 * 0.6) + (1 - d) * 1 * 1.0) / (d * 4 + (1 - d) * 2)
    r = (d * (3 * 1.0 + 1 * 0.6) + (1 - d) * 1 * 1.0) / (d * 4 + (1 - d) * 3)
    fmean = p * r / (0.85 * p + 0.15 * r)
    expect = fmean * (1 - 0.6 * (3 / 5) ** 0.2)
    assert F.meteor_from_stats(line) == pytest.approx(expect, rel=1e-12)
    assert F.meteor_from_stats(v) == F.meteor_from_stats(line) == ms.segment_score(ms.MeteorStats.from_string(line))
    assert F.meteor_from_stats(ms.MeteorStats.from_string(line)) == F.meteor_from_stats(line)
    assert F.meteor_from_stats([0.0] * 23) == 0.0  # empty: undefined -> 0


# -- EMScore -----------------------------------------------------------------------------------


def _em_data(seed, n_items=4, d=8, n_refs=(1, 3, 2, 1)):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(seed)
    cand = [torch.randn(int(torch.randint(3, 9, (1,), generator=g)), d, generator=g) for _ in range(n_items)]
    frames = [torch.randn(int(torch.randint(1, 6, (1,), generator=g)), d, generator=g) for _ in range(n_items)]
    refs = [[torch.randn(int(torch.randint(3, 9, (1,), generator=g)), d, generator=g) for _ in range(n_refs[k])]
            for k in range(n_items)]
    c_idf = [torch.rand(c.shape[0], generator=g) for c in cand]
    r_idf = [[torch.rand(r.shape[0], generator=g) for r in rs] for rs in refs]
    return cand, frames, refs, c_idf, r_idf


def _em_direct(cand, frames, refs, c_idf, r_idf):
    """The scorer's own sequence of formulas calls (capeval.metrics.emscore.scorer), by hand."""
    import torch

    from capeval.metrics.emscore import formulas as em

    cand = [em.l2_normalize(c) for c in cand]
    frames = [em.l2_normalize(f) for f in frames]
    refs = [[em.l2_normalize(r) for r in rs] for rs in refs]
    tok, tm = em.pad_stack(cand)
    fr, fm = em.pad_stack(frames)
    m = em.video_match(tok, tm, em.pad_stack(c_idf)[0], fr, fm)
    vc = em.cosine(torch.stack([c[-1] for c in cand]), em.video_embedding(fr, fm))
    video = (m.P, m.R, m.F, vc, em.full_score(m.F, vc))
    pairs = [(k, j) for k, rs in enumerate(refs) for j in range(len(rs))]
    ct, cm = em.pad_stack([cand[k] for k, _ in pairs])
    rt, rm = em.pad_stack([refs[k][j] for k, j in pairs])
    t = em.text_match(ct, cm, em.pad_stack([c_idf[k] for k, _ in pairs])[0], rt, rm,
                      em.pad_stack([r_idf[k][j] for k, j in pairs])[0])
    rc = em.cosine(torch.stack([cand[k][-1] for k, _ in pairs]), torch.stack([refs[k][j][-1] for k, j in pairs]))
    grp = torch.tensor([k for k, _ in pairs])
    parts = [em.group_max(x, grp, len(cand)) for x in (t.P, t.R, t.F, rc)]
    ref = (*parts, em.full_score(parts[2], parts[3]))
    return video, ref


def test_emscore_from_embeddings_equals_formulas():
    torch = pytest.importorskip("torch")
    cand, frames, refs, c_idf, r_idf = _em_data(10)
    video, ref = _em_direct(cand, frames, refs, c_idf, r_idf)
    out = F.emscore_from_embeddings(cand, frames, refs, cand_idf=c_idf, ref_idf=r_idf)
    assert isinstance(out.score, torch.Tensor)
    for got, want in zip(out.video, video):
        assert torch.equal(got, want)
    for got, want in zip(out.refs, ref):
        assert torch.equal(got, want)
    assert torch.equal(out.score, (video[4] + ref[4]) / 2)
    # each part alone; numpy in -> numpy out
    only_v = F.emscore_from_embeddings([c.numpy() for c in cand], [f.numpy() for f in frames], cand_idf=c_idf)
    assert only_v.refs is None and isinstance(only_v.score, np.ndarray)
    assert np.array_equal(only_v.score, video[4].numpy())
    only_r = F.emscore_from_embeddings(cand, refs=refs, cand_idf=c_idf, ref_idf=r_idf)
    assert only_r.video is None and torch.equal(only_r.score, ref[4])


def test_emscore_uniform_idf_and_prenormalised_inputs():
    torch = pytest.importorskip("torch")
    from capeval.metrics.emscore import formulas as em

    cand, frames, refs, _, _ = _em_data(11)
    ones = [torch.ones(c.shape[0]) for c in cand]
    r_ones = [[torch.ones(r.shape[0]) for r in rs] for rs in refs]
    a = F.emscore_from_embeddings(cand, frames, refs)
    b = F.emscore_from_embeddings(cand, frames, refs, cand_idf=ones, ref_idf=r_ones)
    assert torch.equal(a.score, b.score)
    c = F.emscore_from_embeddings([em.l2_normalize(x) for x in cand], [em.l2_normalize(x) for x in frames],
                                  [[em.l2_normalize(x) for x in rs] for rs in refs], normalize=False)
    assert torch.equal(a.score, c.score)


def _em_loop_video(sim, idf, coarse):
    """EMScore's candidate-vs-video formulas on one similarity matrix, with Python floats."""
    w = [x / sum(idf) for x in idf]
    p = sum(wi * max(row) for wi, row in zip(w, sim))
    r = sum(max(col) for col in zip(*sim)) / len(sim[0])
    f = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return p, r, f, coarse, (f + coarse) / 2


def _em_loop_text(sim, ci, ri, coarse):
    wc, wr = [x / sum(ci) for x in ci], [x / sum(ri) for x in ri]
    p = sum(w * max(row) for w, row in zip(wc, sim))
    r = sum(w * max(col) for w, col in zip(wr, zip(*sim)))
    f = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return p, r, f, coarse


def test_emscore_from_similarities_against_loop_and_embeddings():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    n = 4
    lens = [3, 5, 1, 4]
    vsim = [rng.uniform(-1, 1, (lens[k], [2, 1, 4, 3][k])) for k in range(n)]
    vsim[2] = np.zeros((1, 4))  # P = R = 0: F = 0, not NaN
    vco = rng.uniform(-1, 1, n)
    n_refs = [2, 1, 1, 3]
    rsim = [[rng.uniform(-1, 1, (lens[k], int(rng.integers(1, 6)))) for _ in range(n_refs[k])] for k in range(n)]
    rco = [rng.uniform(-1, 1, n_refs[k]) for k in range(n)]
    ci = [rng.uniform(0.1, 2, lens[k]) for k in range(n)]
    ri = [[rng.uniform(0.1, 2, s.shape[1]) for s in rs] for rs in rsim]
    out = F.emscore_from_similarities(vsim, vco, rsim, rco, cand_idf=ci, ref_idf=ri)
    assert isinstance(out.score, np.ndarray) and out.score.dtype == np.float64
    for k in range(n):
        want_v = _em_loop_video(vsim[k].tolist(), ci[k].tolist(), float(vco[k]))
        assert [float(x[k]) for x in out.video] == pytest.approx(want_v, abs=1e-12)
        rows = [_em_loop_text(rsim[k][j].tolist(), ci[k].tolist(), ri[k][j].tolist(), float(rco[k][j]))
                for j in range(n_refs[k])]
        want_r = [max(row[q] for row in rows) for q in range(4)]  # element-wise max over references
        want_r.append((want_r[2] + want_r[3]) / 2)
        assert [float(x[k]) for x in out.refs] == pytest.approx(want_r, abs=1e-12)
        assert float(out.score[k]) == pytest.approx((want_v[4] + want_r[4]) / 2, abs=1e-12)
    assert out.video.f[2] == 0.0

    # the same items as embeddings (float64, so the two routes agree to rounding)
    cand, frames, refs, c_idf, r_idf = _em_data(13)
    cand = [c.double() for c in cand]
    frames = [f.double() for f in frames]
    refs = [[r.double() for r in rs] for rs in refs]
    c_idf = [w.double() for w in c_idf]
    r_idf = [[w.double() for w in ws] for ws in r_idf]
    emb = F.emscore_from_embeddings(cand, frames, refs, cand_idf=c_idf, ref_idf=r_idf)
    unit = [torch.nn.functional.normalize(c, dim=-1) for c in cand]
    fr = [torch.nn.functional.normalize(f, dim=-1) for f in frames]
    ru = [[torch.nn.functional.normalize(r, dim=-1) for r in rs] for rs in refs]
    video_emb = [torch.nn.functional.normalize(f.mean(0), dim=-1) for f in fr]
    sims = F.emscore_from_similarities(
        [u @ f.T for u, f in zip(unit, fr)], torch.stack([u[-1] @ v for u, v in zip(unit, video_emb)]),
        [[u @ r.T for r in rs] for u, rs in zip(unit, ru)], [[float(u[-1] @ r[-1]) for r in rs] for u, rs in zip(unit, ru)],
        cand_idf=c_idf, ref_idf=r_idf)
    for a, b in zip((*emb.video, *emb.refs, emb.score), (*sims.video, *sims.refs, sims.score)):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)


def test_emscore_single_item_and_bad_input():
    pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    tok = rng.normal(size=(4, 6)).astype(np.float32)
    out = F.emscore_from_embeddings([tok], [tok[:2]], [[tok]])
    assert out.score.shape == (1,)
    assert out.refs.precision[0] == pytest.approx(1.0, abs=1e-6) and out.refs.coarse[0] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError):
        F.emscore_from_embeddings([tok])
    with pytest.raises(ValueError):
        F.emscore_from_embeddings([tok], refs=[[]])
    with pytest.raises(ValueError):
        F.emscore_from_embeddings([tok], [tok], cand_idf=[np.ones(3)])
