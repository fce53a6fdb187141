"""capeval.bench.statistics against scipy on random data with ties; bootstrap and paired test behaviour."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from capeval.bench import statistics as stats

scipy_stats = pytest.importorskip("scipy.stats")


def _close(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or bool(np.isclose(a, b, rtol=1e-10, atol=1e-12))


def _random_pairs(rng: np.random.Generator, count: int):
    for t in range(count):
        n = int(rng.integers(2, 120))
        x = rng.integers(0, int(rng.integers(1, 6)), n).astype(float)  # few levels: many ties
        y = rng.integers(0, int(rng.integers(1, 100)), n).astype(float)
        if t % 3 == 0:
            y = rng.normal(size=n)
        if t % 4 == 0:
            x, y = y, x
        yield x, y


@pytest.mark.parametrize("variant", ["b", "c"])
def test_kendall_matches_scipy_with_ties(variant: str) -> None:
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, y in _random_pairs(rng, 300):
            ours = stats.kendall_tau(x, y, variant)
            ref = scipy_stats.kendalltau(x, y, variant=variant)[0]
            assert _close(ours, ref), (variant, x.tolist(), y.tolist(), ours, ref)


def test_kendall_many_levels_path_matches_scipy() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=3000)
    y = np.round(rng.normal(size=3000) + 0.3 * x, 1)  # > 48 levels, with ties
    for v in "bc":
        assert _close(stats.kendall_tau(x, y, v), scipy_stats.kendalltau(x, y, variant=v)[0])


def test_kendall_ranks_on_resamples_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    x = np.round(rng.random(500), 2)
    y = rng.integers(1, 5, 500).astype(float)
    k = stats.KendallRanks(x, y)
    for _ in range(20):
        rows = rng.integers(0, 500, 500)
        tb, tc = k(rows)
        assert _close(tb, scipy_stats.kendalltau(x[rows], y[rows], variant="b")[0])
        assert _close(tc, scipy_stats.kendalltau(x[rows], y[rows], variant="c")[0])


def test_kendall_is_fast_on_cf_size() -> None:
    rng = np.random.default_rng(4)
    x = rng.random(47830)
    y = rng.integers(0, 12, 47830) / 11
    stats.kendall_taus(x, y)
    tb, tc = stats.kendall_taus(x, y)
    assert _close(tb, scipy_stats.kendalltau(x, y)[0])


def test_kendall_degenerate() -> None:
    assert np.isnan(stats.kendall_tau([1.0], [2.0]))
    assert np.isnan(stats.kendall_tau([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        stats.kendall_tau([1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        stats.kendall_tau([1, 2], [1, 2], variant="a")


def test_spearman_pearson_match_scipy() -> None:
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, y in _random_pairs(rng, 200):
            assert _close(stats.spearman(x, y), scipy_stats.spearmanr(x, y)[0])
            if np.ptp(x) > 0 and np.ptp(y) > 0:
                assert _close(stats.pearson(x, y), scipy_stats.pearsonr(x, y)[0])
            else:
                assert np.isnan(stats.pearson(x, y))


def test_rankdata_matches_scipy() -> None:
    v = np.array([3.0, 1.0, 3.0, 2.0, 2.0, 2.0, 5.0])
    assert np.allclose(stats.rankdata(v), scipy_stats.rankdata(v))


def test_pairwise_accuracy_tie_rules() -> None:
    a = np.array([1.0, 2.0, 3.0, 1.0])
    b = np.array([0.0, 2.0, 4.0, 1.0])
    label = np.array([0, 0, 1, 1])
    # pair 0 correct, pair 1 tie (label a), pair 2 correct, pair 3 tie (label b)
    assert stats.pairwise_accuracy(a, b, label, ties="second") == 0.75
    assert stats.pairwise_accuracy(a, b, label, ties="half") == 0.75
    assert stats.pairwise_accuracy(a, b, label, ties="wrong") == 0.5


def test_bootstrap_is_seeded_and_covers_estimate() -> None:
    rng = np.random.default_rng(6)
    x = rng.normal(size=400)
    y = x + rng.normal(size=400)

    def stat(units):
        return stats.pearson(x[units], y[units])

    ci1 = stats.bootstrap(stat, 400, n_resamples=300, seed=7)
    ci2 = stats.bootstrap(stat, 400, n_resamples=300, seed=7)
    assert ci1 == ci2
    assert ci1[0] < stats.pearson(x, y) < ci1[1]
    assert stats.bootstrap(stat, 400, n_resamples=300, seed=8) != ci1


def test_stratified_resampling_keeps_strata_sizes() -> None:
    strata = np.array([0] * 5 + [1] * 3)
    idx = stats.resample_indices(8, 50, seed=0, strata=strata)
    assert idx.shape == (50, 8)
    assert (strata[idx] == np.array([0] * 5 + [1] * 3)).all()


def test_paired_bootstrap_detects_a_better_metric() -> None:
    rng = np.random.default_rng(9)
    human = rng.normal(size=600)
    good = human + 0.5 * rng.normal(size=600)
    bad = human + 3.0 * rng.normal(size=600)
    t = stats.paired_bootstrap(
        lambda u: stats.kendall_tau(good[u], human[u]),
        lambda u: stats.kendall_tau(bad[u], human[u]),
        600,
        n_resamples=300,
        seed=1,
    )
    assert t.delta > 0 and t.ci_low > 0 and t.p_value < 0.01
    same = stats.paired_bootstrap(
        lambda u: stats.kendall_tau(good[u], human[u]),
        lambda u: stats.kendall_tau(good[u], human[u]),
        600,
        n_resamples=100,
        seed=1,
    )
    assert same.delta == 0 and same.p_value == 1.0
