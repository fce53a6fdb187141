"""MID (Kim et al. 2022) against independent references.

Reference 1 (always runs): the definition of point-wise mutual information of Gaussians,
``PMI(x; y) = log N(z; mu_z, S_z) - log N(x; mu_x, S_x) - log N(y; mu_y, S_y)``, evaluated by
``scipy.stats.multivariate_normal.logpdf`` in float64 (a different route from capeval's
log-det + Mahalanobis form); the system score by a numpy transcription of the official
expectation (``np.linalg.slogdet``, ``np.linalg.solve``).
Reference 2 (opt-in, ``CAPEVAL_MID_SRC`` = a naver-ai/mid.metric checkout): the official
``metrics/mid.py`` ``_compute_pmi`` (needs torchmetrics) on the same float64 features.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from capeval import registry  # noqa: E402
from capeval.errors import InputError  # noqa: E402
from capeval.metrics.mid import Mid, gaussian_pmi  # noqa: E402
from capeval.models.clip.backbone import random_backbone  # noqa: E402
from _reference import unavailable  # noqa: E402


def _stats():
    try:
        from scipy import stats
    except ImportError:
        unavailable("scipy not installed (the MID reference uses scipy.stats)")
    return stats


def _sets(seed, n=60, m=25, dx=3, dy=4):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(n, dy))
    x = y[:, :dx] * 0.7 + rng.normal(size=(n, dx)) * 0.5  # correlated, as matching pairs are
    x0 = rng.normal(size=(m, dx))
    x0[: m // 2] = y[: m // 2, :dx] * 0.7 + 0.3 * x0[: m // 2]
    return x, y, x0, y[:m].copy()


def _ref_items(x, y, x0, y0):
    st = _stats()
    z, z0 = np.hstack([x, y]), np.hstack([x0, y0])
    lp = [st.multivariate_normal(a.mean(0), np.cov(a, rowvar=False, ddof=1)).logpdf(b)
          for a, b in ((z, z0), (x, x0), (y, y0))]
    return lp[0] - lp[1] - lp[2]


def _ref_system(x, y, x0, y0):
    z, z0 = np.hstack([x, y]), np.hstack([x0, y0])
    m = len(x0)
    cov = {k: np.cov(a, rowvar=False, ddof=1) for k, a in (("x", x), ("y", y), ("z", z))}
    mi = (np.linalg.slogdet(cov["x"])[1] + np.linalg.slogdet(cov["y"])[1] - np.linalg.slogdet(cov["z"])[1]) / 2

    def tr(s, c, mu):
        d = c - mu
        return np.trace(np.linalg.solve(s, d.T @ d / (m - 1)))

    return mi + (tr(cov["x"], x0, x.mean(0)) + y.shape[1] - tr(cov["z"], z0, z.mean(0))) / 2


@pytest.mark.parametrize("seed", range(4))
def test_items_are_the_gaussian_pmi_and_system_the_official_expectation(seed):
    x, y, x0, y0 = _sets(seed)
    items, system = gaussian_pmi(x, y, x0)  # y0 defaults to y[:M], the official pairing
    np.testing.assert_allclose(items, _ref_items(x, y, x0, y0), rtol=1e-9, atol=1e-9)
    assert system == pytest.approx(_ref_system(x, y, x0, y0), rel=1e-9, abs=1e-9)
    assert items[: len(x0) // 2].mean() > items[len(x0) // 2:].mean()  # matching pairs score higher


def test_explicit_conditions_eps_and_limit():
    x, y, x0, _ = _sets(9, n=80)
    y0 = np.random.default_rng(1).normal(size=(len(x0), y.shape[1]))
    items, _ = gaussian_pmi(x, y, x0, y0)
    np.testing.assert_allclose(items, _ref_items(x, y, x0, y0), rtol=1e-9, atol=1e-9)
    # limit keeps the first rows of the real set (the official x[:-excess]); cut_candidates=False
    # keeps every candidate (the scorer's reference=all)
    lim, _ = gaussian_pmi(x, y, x0, y0, limit=50, cut_candidates=False)
    np.testing.assert_allclose(lim, _ref_items(x[:50], y[:50], x0, y0), rtol=1e-9, atol=1e-9)
    # eps enters the inverse only (official robust_inv), not the log-determinants
    eps = 0.05
    got, _ = gaussian_pmi(x, y, x0, y0, eps=eps)
    z, z0 = np.hstack([x, y]), np.hstack([x0, y0])
    mi = sum(sgn * np.linalg.slogdet(np.cov(a, rowvar=False))[1] for sgn, a in ((1, x), (1, y), (-1, z))) / 2

    def d2(a, b):
        s = np.cov(a, rowvar=False) + eps * np.eye(a.shape[1])
        d = b - a.mean(0)
        return np.einsum("ij,ij->i", d, np.linalg.solve(s, d.T).T)

    np.testing.assert_allclose(got, mi + (d2(x, x0) + d2(y, y0) - d2(z, z0)) / 2, rtol=1e-9, atol=1e-9)


def test_limit_cuts_candidates_as_the_official_code():
    """naver-ai/mid.metric _compute_pmi: excess = N - limit > 0 keeps x[:limit], y[:limit] and
    drops the last `excess` candidates (x0[:-excess]); the system score covers the rest alone."""
    x, y, x0, _ = _sets(4, n=300, m=300)
    items, system = gaussian_pmi(x, y, x0, limit=100)
    assert items.shape == (100,)
    np.testing.assert_allclose(items, _ref_items(x[:100], y[:100], x0[:100], y[:100]), rtol=1e-9, atol=1e-9)
    assert system == pytest.approx(_ref_system(x[:100], y[:100], x0[:100], y[:100]), rel=1e-9, abs=1e-9)
    items, _ = gaussian_pmi(x, y, x0[:250], limit=100)  # M != N: still x0[:-excess], 250 - 200
    np.testing.assert_allclose(items, _ref_items(x[:100], y[:100], x0[:50], y[:50]), rtol=1e-9, atol=1e-9)


def test_scorer_refuses_more_items_than_limit(monkeypatch):
    """The scorer never leaves items unscored: more items than limit is a one-line error, before
    any image is embedded; limit >= items scores every item."""
    bb = random_backbone("tiny", seed=7)
    cands, refs, imgs = _items(40)
    import capeval.models.clip.embed as embed

    scorer = registry.get("mid").build(backbone=bb, limit=39)
    with monkeypatch.context() as m:
        m.setattr(embed, "embed_usable_images", lambda *a, **k: pytest.fail("embedded before refusing"))
        with pytest.raises(InputError, match=r"mid: 40 items exceed limit=39: .* raise -O mid\.limit to 40") as err:
            scorer.score(cands, refs, images=imgs)
    assert "\n" not in str(err.value)
    res = registry.get("mid").build(backbone=bb, limit=40).score(cands, refs, images=imgs)["mid"]
    assert len(res.items) == 40
    # reference=all: 80 real pairs, the first 60 kept, all 40 candidates scored
    full = registry.get("mid").build(backbone=bb, reference="all", limit=60).score(cands, refs, images=imgs)["mid"]
    assert len(full.items) == 40 and full.extras["estimation_pairs"] == 60


def test_benchmarks_larger_than_the_cap_fit_mid_on_all_pairs():
    from capeval.bench._common import MID_ALL_PAIRS
    from capeval.bench.flickr8k import Flickr8kCF
    from capeval.bench.foil import Foil
    import inspect

    assert MID_ALL_PAIRS["mid"]["limit"] == 10**9  # the declared maximum of mid.limit
    from capeval.ranges import check_option

    check_option("mid", "limit", MID_ALL_PAIRS["mid"]["limit"])
    for bench in (Flickr8kCF, Foil):
        source = inspect.getsource(bench.load)
        assert "metric_options=MID_ALL_PAIRS" in source or "metric_options={**MID_ALL_PAIRS" in source


def test_too_few_pairs_and_bad_options_are_one_line_errors():
    x, y, x0, _ = _sets(0, n=7, m=5)
    with pytest.raises(InputError, match="needs more than 7 real"):
        gaussian_pmi(x, y, x0)
    bb = random_backbone("tiny", seed=3)
    for kw, word in (({"eps": -1.0}, "eps"), ({"limit": 0}, "limit"), ({"reference": "best"}, "reference"),
                     ({"eps": float("nan")}, "eps"), ({"limit": 2.5}, "limit")):
        with pytest.raises(InputError, match=rf"mid option {word}|option mid\.{word}=.* out of range") as err:
            Mid(backbone=bb, **kw)
        assert "\n" not in str(err.value)


def _items(n):
    from PIL import Image

    rng = np.random.default_rng(5)
    words = "a dog cat man woman red blue ball runs sits on the grass street table".split()
    imgs = {f"i{k}": Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)) for k in range(n)}
    cap = lambda: " ".join(rng.choice(words, size=6))  # noqa: E731
    return {i: cap() for i in imgs}, {i: [cap(), cap()] for i in imgs}, imgs


@pytest.mark.parametrize("reference", ["first", "all"])
def test_scorer_end_to_end_matches_manual_features(reference):
    bb = random_backbone("tiny", seed=7)  # 16-d features: 32-d joint, so 40 items suffice
    cands, refs, imgs = _items(40)
    rep = registry.get("mid").build(backbone=bb, reference=reference).score(cands, refs, images=imgs)
    ids = list(cands)

    def feats(t):
        return torch.nn.functional.normalize(t.float(), dim=-1).double().numpy()

    with torch.no_grad():
        img = feats(bb.encode_images(torch.stack([bb.load_image(imgs[i]) for i in ids])))
        enc = lambda ts: feats(bb.encode_texts(bb.tokenize(ts)[0]))  # noqa: E731
        x0 = enc([cands[i] for i in ids])
        real = [refs[i][:1] if reference == "first" else refs[i] for i in ids]
        x = enc([r for rs in real for r in rs])
    y = np.repeat(img, [len(r) for r in real], axis=0)
    exp = _ref_items(x, y, x0, img)
    res = rep["mid"]
    np.testing.assert_allclose([res.items[i] for i in ids], exp, rtol=1e-4, atol=1e-4)
    sig = str(res.signature)
    for part in (f"reference:{reference}", "eps:0.0", "limit:30000", "dtype:float64", "items=40"):
        assert part in sig
    with pytest.raises(InputError, match="needs more than 32"):
        registry.get("mid").build(backbone=bb).score(dict(list(cands.items())[:20]),
                                                     {i: refs[i] for i in list(cands)[:20]}, images=imgs)
    with pytest.raises(InputError, match="mid needs references"):
        registry.get("mid").build(backbone=bb).score(cands, images=imgs)


def test_registry_entry():
    spec = registry.get("mid")
    assert spec.needs == {"images", "references"} and spec.direction == "higher"
    assert spec.range == (-float("inf"), float("inf")) and not spec.in_all


def test_official_compute_pmi_same_features():
    src = os.environ.get("CAPEVAL_MID_SRC")
    if not src:
        pytest.skip("set CAPEVAL_MID_SRC to a naver-ai/mid.metric checkout to compare with its metrics/mid.py")
    pytest.importorskip("torchmetrics")
    spec = importlib.util.spec_from_file_location("_official_mid", Path(src) / "metrics" / "mid.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_official_mid"] = mod
    spec.loader.exec_module(mod)
    for seed in range(3):
        x, y, x0, _ = _sets(seed, n=60, m=60)  # the official pairs x0[k] with y[k]
        t = [torch.from_numpy(a) for a in (x, y, x0)]
        items, system = gaussian_pmi(x, y, x0)
        official_items = mod._compute_pmi(*t, reduction=False).numpy()
        official_system = float(mod._compute_pmi(*t, reduction=True))
        np.testing.assert_allclose(items, official_items, rtol=1e-9, atol=1e-9)
        assert system == pytest.approx(official_system, rel=1e-9, abs=1e-9)
    # limit below N: the official cuts the real pairs and the candidates alike
    x, y, x0, _ = _sets(4, n=300, m=300)
    t = [torch.from_numpy(a) for a in (x, y, x0)]
    items, system = gaussian_pmi(x, y, x0, limit=100)
    np.testing.assert_allclose(items, mod._compute_pmi(*t, limit=100, reduction=False).numpy(), rtol=1e-9, atol=1e-9)
    assert system == pytest.approx(float(mod._compute_pmi(*t, limit=100, reduction=True)), rel=1e-9, abs=1e-9)


def test_declared_ranges_are_checked_before_any_model_is_built():
    from capeval.options import check_options

    for opts, word in (({"eps": -1.0}, "mid.eps"), ({"limit": 0}, "mid.limit"), ({"eps": float("nan")}, "mid.eps")):
        with pytest.raises(InputError, match=rf"option {word}=.* out of range"):
            check_options("mid", {"mid": opts})
    with pytest.raises(InputError, match=r"option polos\.batch_size=0 out of range: batch_size must be an integer in \[1, 4096\]"):
        check_options("polos", {"polos": {"batch_size": 0}})
    assert check_options("mid", {"mid": {"eps": 5e-4, "limit": 100}})[1] == {"mid": {"eps": 5e-4, "limit": 100}}
