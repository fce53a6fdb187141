"""capeval compare from one scoring pass (issue 47 items 2 and 3).

- The p-values, bootstrap means, intervals and differences equal the former implementation's
  (``benchmarks/_compare_before.py``, which rescored the whole CIDEr-D table per resample) bit
  for bit, on random systems (identical captions, empty candidates, no overlap at all, repeated
  words), for both CIDEr-D kernels (numpy, numba) and the squares computed per block.
- The vectorised BLEU/METEOR aggregates equal the per-row formulas with ``==``.
- One scoring pass per system: no second tokenisation, no second METEOR run; draws and the
  baseline's resample scores made once for all systems.
- ``-O cider-d.tokenizer=none`` / ``-O bleu-4.tokenizer=none`` work (they were "rebuilt ...
  differs from its score").
- Too few items: one warning line, ``too_few_items`` in the JSON, no star, no shading.
- Progress lines as ``capeval bench`` (off a terminal), none with ``-q``.
"""

from __future__ import annotations

import functools
import json
import math
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import capeval
from capeval.significance import cider_resample, cider_squares
from capeval.significance.compare import MIN_ITEMS, compare

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _compare_before as before  # noqa: E402
from _reference import require_module  # noqa: E402

WORDS = "a the man woman dog cat red blue sits runs on in with near park street ball frisbee".split()


def _random_set(n: int, seed: int) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """Systems A (random words), B (reference words, repeats), C (= A: identical captions), D
    (empty candidates and words no reference has) on ``n`` items with 1 to 5 references each."""
    rng = random.Random(seed)
    refs = {}
    for i in range(n):
        rs = [" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 5))]
        if rng.random() < 0.2:  # a word repeated: counts above 1 (and rare counts)
            rs[0] = " ".join([rng.choice(WORDS)] * rng.randint(2, 9) + rs[0].split())
        refs[str(i)] = rs
    a = {str(i): " ".join(rng.choices(WORDS, k=rng.randint(1, 9))) for i in range(n)}
    b = {}
    for i in range(n):
        words = " ".join(refs[str(i)]).split()
        b[str(i)] = " ".join(rng.choice(words) for _ in range(rng.randint(1, 10)))
    d = {str(i): ("" if i % 3 == 0 else "zzz qqq xyzzy" if i % 3 == 1 else a[str(i)]) for i in range(n)}
    return {"A": a, "B": b, "C": dict(a), "D": d}, refs


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _spy_groups(monkeypatch) -> list:
    """The resampling groups each comparison builds from now on, collected in the list returned."""
    made = []
    real = cider_resample._groups

    def groups(resampling, systems):
        out = real(resampling, systems)
        made.extend(out)
        return out

    monkeypatch.setattr(cider_resample, "_groups", groups)
    return made


def _assert_same(old: dict, new: dict) -> None:
    """Every field of the former result equals the new one (==, so to the last bit)."""
    assert list(old["systems"]) == list(new["systems"])
    for name, metrics in old["systems"].items():
        for metric, row in metrics.items():
            for key, value in row.items():
                assert new["systems"][name][metric][key] == value, (name, metric, key, value,
                                                                    new["systems"][name][metric][key])
    assert old["signatures"] == new["signatures"]


def _assert_definition(got: np.ndarray, counts: np.ndarray, cands: dict, refs: dict, n_ord: int = 4,
                       sigma: float = 6.0) -> None:
    """Every drawn item's score on each resample (``got``, rows of ``counts``) is the definition's:
    cider_table_scores on the whole table with the resample's df, bit for bit."""
    from capeval.metrics.bleu import Bleu
    from capeval.metrics.cider import cider_table_scores
    from capeval.metrics.ngrams import NgramTable

    hyps, toks = Bleu().tokenize(list(cands), cands, refs)
    table = NgramTable(hyps, toks, n_ord)
    item, gram = table.item_grams()
    for c, row in zip(counts, got):
        df = np.bincount(gram, weights=c[item], minlength=int(table.n_grams))
        want = cider_table_scores(table, df, len(cands), sigma)
        drawn = c > 0
        assert np.array_equal(row[drawn], want[drawn])


@functools.lru_cache(maxsize=None)
def _former_cider(n: int, seed: int, samples: int) -> dict:
    """The former implementation's CIDEr-D comparison of :func:`_random_set` (computed once per
    module and shared by the kernels' cases: it does not depend on the kernel)."""
    systems, refs = _random_set(n, seed)
    return _quiet(before.compare, systems, refs, "cider-d", samples=samples, seed=seed)


def _kernels() -> list:
    out = ["numpy", "numpy-rare"]
    try:
        import numba  # noqa: F401
    except ImportError:
        return out
    return out + ["numba", "numba-rare"]


@pytest.mark.parametrize("n, seed", [(1, 0), (2, 1), (3, 2), (7, 3), (40, 4),
                                     pytest.param(120, 5, marks=pytest.mark.slow)])
def test_bootstrap_equals_the_former_implementation_bit_for_bit(n, seed):
    systems, refs = _random_set(n, seed)
    # METEOR in three of the cases: each of its constructions (one per system and run) checks
    # its index, a third of a second, where the rest of a small case costs less
    metrics = "bleu-1,bleu-4,cider-d,rouge-l" + (",meteor" if n in (1, 7, 40) else "")
    samples = 70  # a full block of 64 draws and a part of the next
    old = _quiet(before.compare, systems, refs, metrics, samples=samples, seed=seed)
    new = _quiet(compare, systems, refs, metrics, samples=samples, seed=seed)
    _assert_same(old, new)
    # the baseline's bootstrap mean and interval: the former code's, with the roles swapped
    base = new["systems"]["A"]["cider-d"]
    swapped = _quiet(before.compare, {"C": systems["C"], "A": systems["A"]}, refs, "cider-d", samples=samples,
                     seed=seed)["systems"]["A"]["cider-d"]
    assert (base["mean"], base["ci"]) == (swapped["mean"], swapped["ci"])


def test_blocks_drawn_ahead_on_a_second_thread_equal_the_former_implementation(monkeypatch):
    """From _DRAW_AHEAD_ITEMS items the next block is drawn while the current one is scored: the
    same draws in the same order (one generator, one draw at a time), so the same results."""
    from capeval.significance import paired

    monkeypatch.setattr(paired, "_DRAW_AHEAD_ITEMS", 0)
    drawn_ahead = []
    real = paired._drawn_ahead
    monkeypatch.setattr(paired, "_drawn_ahead", lambda draw, starts: drawn_ahead.append(1) or real(draw, starts))
    systems, refs = _random_set(40, 4)
    old = _quiet(before.compare, systems, refs, "bleu-4,cider-d", samples=200, seed=9)
    new = _quiet(compare, systems, refs, "bleu-4,cider-d", samples=200, seed=9)
    assert drawn_ahead
    _assert_same(old, new)


@pytest.mark.parametrize("n, seed", [(2, 6), (40, 7), (150, 8)])
def test_randomisation_equals_the_former_implementation_bit_for_bit(n, seed):
    systems, refs = _random_set(n, seed)
    old = _quiet(before.compare, systems, refs, "bleu-4,cider-d,rouge-l", method="ar", samples=200, seed=seed)
    new = _quiet(compare, systems, refs, "bleu-4,cider-d,rouge-l", method="ar", samples=200, seed=seed)
    _assert_same(old, new)


@pytest.mark.parametrize("kernel", _kernels())
@pytest.mark.parametrize("n, seed", [(1, 10), (5, 11), (64, 12), (160, 13)])
def test_cider_kernels_equal_the_former_rescoring(monkeypatch, kernel, n, seed):
    """Both CIDEr-D kernels, with squares from the tables or computed per block ("rare": no
    count but 1 gets a table row), against one full rescoring of the table per resample."""
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0 if kernel.startswith("numba") else 1 << 62)
    if kernel.endswith("rare"):
        monkeypatch.setattr(cider_squares, "_ROW_FACTOR", math.inf)
    systems, refs = _random_set(n, seed)
    old = _former_cider(n, seed, 70)
    new = _quiet(compare, systems, refs, "cider-d", samples=70, seed=seed)
    _assert_same(old, new)


def test_cider_sigma_equals_the_former_implementation_and_n_is_no_longer_refused():
    from capeval.errors import InputError

    systems, refs = _random_set(50, 21)
    opts = {"cider-d": {"sigma": 2.5}}
    _assert_same(_quiet(before.compare, systems, refs, "cider-d", samples=70, options=opts),
                 _quiet(compare, systems, refs, "cider-d", samples=70, options=opts))
    # the former code built 4-gram tables whatever n was, and refused
    with pytest.raises(InputError, match="differs from its score"):
        _quiet(before.compare, systems, refs, "cider-d", samples=70, options={"cider-d": {"n": 2}})
    out = _quiet(compare, systems, refs, "cider-d", samples=70, options={"cider-d": {"n": 2}})
    assert out["systems"]["B"]["cider-d"]["score"] == capeval.score(systems["B"], refs, "cider-d",
                                                                    options={"cider-d": {"n": 2}})["cider-d"].system


@pytest.mark.parametrize("kernel", _kernels()[::2])
@pytest.mark.parametrize("n_ord, sigma, chunk", [(4, 6.0, 16), (1, 6.0, 2048), (2, 3.0, 7), (6, 6.0, 64),
                                                 (9, 6.0, 32)])
def test_resampled_cider_equals_a_full_rescoring_per_resample(monkeypatch, kernel, n_ord, sigma, chunk):
    """Item scores of every drawn item on a resample: those of cider_table_scores on the whole
    table with the resample's df (the definition), bit for bit, whatever the chunking and the
    number of orders (9: numpy's mean over 8 or more values is pairwise)."""
    from capeval.significance.compare import _statistics

    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0 if kernel.startswith("numba") else 1 << 62)
    systems, refs = _random_set(90, 30 + n_ord)
    cands = systems["B"]
    opts = {"cider-d": {"chunk_size": chunk, "n": n_ord, "sigma": sigma}}
    stats, _ = _quiet(_statistics, "B", cands, refs, ["cider-d"], opts)
    rng = np.random.default_rng(3)
    counts = np.stack([np.bincount(rng.choice(90, 90), minlength=90) for _ in range(7)]).astype(np.float64)
    _assert_definition(stats["cider-d"].item_scores(counts), counts, cands, refs, n_ord, sigma)


def test_multiplicities_above_a_byte_and_below(monkeypatch):
    """The compiled df kernel reads a block's multiplicities as bytes when none is above 255 and
    as int32 otherwise (an item drawn 260 times of 300): both give the definition's item scores
    (cider_table_scores on the whole table with the resample's df), bit for bit."""
    require_module("numba", "numba compiles the resampling kernels (the fast extra)")
    from capeval.significance.compare import _statistics

    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    monkeypatch.setattr(cider_resample, "_built_kernels", lambda work: None)  # numba's JIT, not a built module
    n = 300
    systems, refs = _random_set(n, 61)
    cands = systems["B"]
    stats, _ = _quiet(_statistics, "B", cands, refs, ["cider-d"], {"cider-d": {"chunk_size": 64}})
    stat = stats["cider-d"]
    rng = np.random.default_rng(8)
    heavy = np.zeros(n)
    heavy[7] = 260.0
    heavy += np.bincount(rng.choice(n, n - 260), minlength=n)
    light = np.stack([np.bincount(rng.choice(n, n), minlength=n) for _ in range(3)]).astype(np.float64)
    read = []
    real = cider_resample.CiderResampling.transposed_counts
    monkeypatch.setattr(cider_resample.CiderResampling, "transposed_counts",
                        lambda self, counts: read.append(real(self, counts).dtype) or real(self, counts))
    for counts in (heavy[None, :], light):
        _assert_definition(stat.item_scores(counts), counts, cands, refs)
    assert read == [np.dtype(np.int32), np.dtype(np.uint8)]


def test_tables_released_once_grouped_and_a_late_system_refused():
    """The systems' n-gram tables are let go once the groups are built (a third of the memory at
    100,000 items); a system registered after that is refused in one line, not rescored wrongly."""
    from capeval.significance.compare import _statistics
    from capeval.significance.statistics import cider_statistic

    systems, refs = _random_set(40, 62)
    shared: dict = {}
    stats = {k: _quiet(_statistics, k, systems[k], refs, ["cider-d"], None, shared=shared)[0]["cider-d"]
             for k in "AB"}
    kept_a = list(stats["A"].chunks)
    assert kept_a and all(c is not None for c in kept_a)
    stats["A"].resampled(np.ones((2, 40)))
    assert stats["A"].chunks is None and stats["B"].chunks is None
    late = cider_statistic(list(kept_a), stats["A"].items, None)
    late.shared = shared["cider-d"]
    with pytest.raises(ValueError, match="registered after the resampling began"):
        late.resampled(np.ones((2, 40)))


def test_statistics_from_forked_and_replaced_workers(monkeypatch):
    """The scoring pass in worker processes, replaced every two chunks (a pool forks the new ones
    from its own thread): every chunk's statistics still come back (they were missing with a
    context variable: 'operands could not be broadcast' at 40,000 items)."""
    from capeval.metrics import text

    monkeypatch.setattr(text, "RECYCLE_ITEMS", 32)
    systems, refs = _random_set(128, 45)
    systems = {k: systems[k] for k in "AB"}
    opts = {"bleu": {"workers": 2, "chunk_size": 16}, "cider-d": {"workers": 2, "chunk_size": 16}}
    old = _quiet(before.compare, systems, refs, "bleu-4,cider-d", samples=40, options=opts)
    new = _quiet(compare, systems, refs, "bleu-4,cider-d", samples=40, options=opts)
    _assert_same(old, new)


def test_vectorised_bleu_and_meteor_aggregates_equal_the_per_row_formulas():
    from capeval.functional import bleu_from_stats
    from capeval.metrics.meteor.stats import MeteorStats, compute
    from capeval.significance.statistics import bleu_scores, meteor_scores

    rng = np.random.default_rng(0)
    for _ in range(20):
        k = 257
        guess = rng.integers(0, 60, (k, 4))
        sums = np.column_stack([rng.integers(0, 80, k), rng.integers(0, 80, k), guess,
                                np.minimum(guess, rng.integers(0, 60, (k, 4)))]).astype(np.float64)
        sums[:5] = 0  # empty resamples
        for order in (1, 2, 3, 4):
            want = np.array([bleu_from_stats(s[0], s[1], s[2:6].tolist(), s[6:10].tolist())[order - 1] for s in sums])
            assert np.array_equal(bleu_scores(sums, order), want)
        m = rng.integers(0, 40, (k, 23)).astype(np.float64)
        m[:3] = 0  # nothing matched: NaN precision and recall, score 0
        m[3, 4:20] = 0
        m[3, 20:] = [1, 0, 0]
        m[4, :] = [4, 4, 0, 0, 4, 4, 0, 0] + [0] * 12 + [1, 4, 4]  # perfect: no fragmentation
        want = np.array([compute(MeteorStats.from_string(" ".join(repr(float(v)) for v in s))).score for s in m])
        assert np.array_equal(meteor_scores(m), want)


def test_meteor_item_rows_equal_sum_stats_of_one_item():
    from capeval.metrics.meteor.fast_align import sum_stats
    from capeval.significance.statistics import meteor_item_rows

    rng = random.Random(1)
    tuples = []
    for _ in range(200):
        x1, x2, y1, y2 = ([rng.randint(0, 3) for _ in range(4)] for _ in range(4))
        a, b = sum(x1) + sum(y1) + rng.choice([0, 0, 2]), sum(x2) + sum(y2) + rng.choice([0, 0, 1])
        tuples.append((a, b, rng.randint(0, 3), rng.randint(0, 3), x1, x2, y1, y2, rng.choice([1, 1, 2, 3])))
    want = np.array([[float(v) for v in sum_stats([t]).to_string().split()] for t in tuples])
    assert np.array_equal(meteor_item_rows(tuples), want)


def test_one_scoring_pass_per_system(monkeypatch):
    """compare tokenises and runs METEOR once per system: what capeval.score does for one system,
    times the number of systems (the former code tokenised again and ran METEOR again)."""
    from capeval.metrics import text
    from capeval.metrics.meteor.engine import Meteor15

    calls = {"tokenize": 0, "meteor": 0}
    real_tok, real_best = text.tokenize_texts, Meteor15.best_many

    def tok(*args, **kwargs):
        calls["tokenize"] += 1
        return real_tok(*args, **kwargs)

    def best(self, *args, **kwargs):
        calls["meteor"] += 1
        return real_best(self, *args, **kwargs)

    from capeval.metrics import text_chunks

    monkeypatch.setattr(text, "tokenize_texts", tok)
    monkeypatch.setattr(text_chunks, "tokenize_texts", tok)  # a later system's candidates, in the first one's pass
    monkeypatch.setattr(Meteor15, "best_many", best)
    systems, refs = _random_set(30, 40)
    metrics = "bleu-4,cider-d,meteor"
    _quiet(capeval.score, systems["A"], refs, metrics)
    one = dict(calls)
    assert one["tokenize"] >= 1 and one["meteor"] >= 1
    for key in calls:
        calls[key] = 0
    _quiet(compare, {k: systems[k] for k in "AB"}, refs, metrics, samples=20)
    assert calls == {key: 2 * value for key, value in one.items()}
    for key in calls:
        calls[key] = 0
    _quiet(before.compare, {k: systems[k] for k in "AB"}, refs, metrics, samples=20)
    assert calls["tokenize"] > 2 * one["tokenize"] and calls["meteor"] > 2 * one["meteor"]


def test_draws_and_the_baseline_resamples_made_once(monkeypatch):
    """Three systems: each statistic's resampled() runs once per block (the baseline's too, not
    once per compared system), and each block's CIDEr-D df is counted once for all systems."""
    from capeval.significance import compare as module
    from capeval.significance.statistics import SumStatistic

    seen: list[int] = []
    real = SumStatistic.resampled

    def resampled(self, counts):
        seen.append(id(self))
        return real(self, counts)

    monkeypatch.setattr(SumStatistic, "resampled", resampled)
    dfs = []
    real_df = cider_resample.CiderResampling.df_block

    def df_block(self, counts, *rest):
        dfs.append(len(counts))
        return real_df(self, counts, *rest)

    monkeypatch.setattr(cider_resample.CiderResampling, "df_block", df_block)
    systems, refs = _random_set(25, 50)
    _quiet(module.compare, {k: systems[k] for k in "ABD"}, refs, "bleu-4,cider-d", samples=130)
    assert len(seen) == 3 * 3  # 3 blocks (64, 64, 2) x 3 systems, BLEU-4
    assert len(set(seen)) == 3
    assert sum(dfs) == 130  # every resample's df once, not once per system


def test_tokenizer_none_works_as_in_score(tmp_path):
    """-O cider-d.tokenizer=none / bleu-4.tokenizer=none: the former code rebuilt the n-gram
    tables with the PTB tokenizer (reading only the 'bleu' group's option) and stopped."""
    systems = {"A": {"1": "A Dog, runs!", "2": "a cat sits on the mat", "3": "Two men"},
               "B": {"1": "a dog runs", "2": "A cat sits.", "3": "two men walk"}}
    refs = {"1": ["a dog runs fast", "A Dog, runs!"], "2": ["a cat sits on a mat"], "3": ["two men walk", "men"]}
    from capeval.errors import InputError

    for option in ({"cider-d": {"tokenizer": "none"}}, {"bleu-4": {"tokenizer": "none"}},
                   {"bleu": {"tokenizer": "none"}, "cider-d": {"tokenizer": "none"}}):
        new = _quiet(compare, systems, refs, "bleu-4,cider-d", samples=30, options=option)
        for name in systems:
            direct = capeval.score(systems[name], refs, "bleu-4,cider-d", options=option)
            for m in ("bleu-4", "cider-d"):
                assert new["systems"][name][m]["score"] == direct[m].system
        if "cider-d" in option and "bleu" not in option:
            with pytest.raises(InputError, match="differs from its score"):
                _quiet(before.compare, systems, refs, "bleu-4,cider-d", samples=30, options=option)
    for name, data in (("a", systems["A"]), ("b", systems["B"]), ("r", refs)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    # the CLI hands both options on (each alone is checked through the API above)
    done = _cli(tmp_path, "compare", "-c", "a.json", "b.json", "-r", "r.json", "-m", "bleu-4,cider-d",
                "-O", "cider-d.tokenizer=none", "-O", "bleu-4.tokenizer=none", "--samples", "20", "-q")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)["systems"]
    for m in ("bleu-4", "cider-d"):
        want = capeval.score(systems["B"], refs, m, options={m: {"tokenizer": "none"}})[m].system
        assert printed["b"][m]["score"] == want
    refused = _cli(tmp_path, "compare", "-c", "a.json", "b.json", "-r", "r.json", "-m", "bleu-4",
                   "-O", "cider-d.tokenizer=none", "--samples", "20", "-q")
    assert refused.returncode == 2 and "cider-d" in refused.stderr and "Traceback" not in refused.stderr


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


def test_threshold_is_where_the_real_error_rate_is_at_most_twice_the_nominal():
    """MIN_ITEMS: the fewest items for which a nominal 5% bootstrap test of a mean of normal item
    differences (variance (n-1)/n of the sample's, normal quantiles) rejects a true null at most
    10% of the time: P(|t_(n-1)| > 1.96 sqrt((n-1)/n)) <= 0.10. The t tail is integrated here
    (Simpson's rule on Student's density, error far below the margins of 0.002 checked), the
    normal quantile is the standard library's: no scipy.stats import (seconds)."""
    from statistics import NormalDist

    def error(n: int) -> float:
        nu = n - 1
        x = NormalDist().inv_cdf(0.975) * math.sqrt((n - 1) / n)
        t = np.linspace(0.0, x, 20001)
        density = math.exp(math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)) / math.sqrt(nu * math.pi) \
            * (1 + t * t / nu) ** (-(nu + 1) / 2)
        h = x / (len(t) - 1)
        inner = h / 3 * (density[0] + density[-1] + 4 * density[1:-1:2].sum() + 2 * density[2:-1:2].sum())
        return 1 - 2 * inner

    assert error(MIN_ITEMS) <= 0.10 < error(MIN_ITEMS - 1)
    assert round(error(4), 2) == 0.19


def test_too_few_items_warn_and_are_never_marked(tmp_path):
    from capeval.significance.html import render_html
    from capeval.significance.output import table

    systems, refs = _random_set(4, 60)
    systems["B"] = {i: " ".join(r) for i, r in refs.items()}  # far better: p = 1/(n+1) style small p
    with pytest.warns(UserWarning, match=r"4 items only: too few for a paired test to mean much \(fewer than 10"):
        out = compare({k: systems[k] for k in "AB"}, refs, "bleu-4,cider-d", samples=200)
    rows = out["systems"]["B"]
    assert all(r["too_few_items"] is True and r["p_value"] < 0.05 for r in rows.values())
    assert "too_few_items" not in out["systems"]["A"]["bleu-4"]
    text = table(out)
    assert "*" not in text.split("; * p < 0.05")[0] and "4 items: fewer than 10" in text
    page = render_html(out)
    assert "class='sig'" not in page and "too few for a paired test" in page and "(too few items)" in page
    # enough items: no flag, and a real difference is starred and shaded
    systems, refs = _random_set(MIN_ITEMS, 61)
    systems["B"] = {i: " ".join(r) for i, r in refs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compare({k: systems[k] for k in "AB"}, refs, "bleu-4", samples=200)
    row = out["systems"]["B"]["bleu-4"]
    assert "too_few_items" not in row and row["p_value"] < 0.05
    assert "*" in table(out).splitlines()[2] and "class='sig'" in render_html(out)


def test_identical_systems_get_sacrebleus_smallest_p_but_no_mark():
    """sacreBLEU's formula gives identical systems p = 1/(samples+1) (every |d_k| - mean is 0,
    not > 0): kept, documented, and never shown as significant."""
    from capeval.significance.html import render_html
    from capeval.significance.output import table

    systems, refs = _random_set(30, 70)
    out = _quiet(compare, {"A": systems["A"], "C": systems["C"]}, refs, "bleu-4,cider-d", samples=99)
    for row in out["systems"]["C"].values():
        assert row["p_value"] == 1 / 100 and row["diff"] == 0
    assert "*" not in table(out).split("; * p < 0.05")[0] and "class='sig'" not in render_html(out)


def test_cli_small_sample_warning_is_one_line_and_html_says_so(tmp_path):
    systems, refs = _random_set(4, 80)
    for name, data in (("a", systems["A"]), ("b", systems["B"]), ("r", refs)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    done = _cli(tmp_path, "compare", "-c", "a.json", "b.json", "-r", "r.json", "-m", "bleu-4", "--samples", "30",
                "-q", "--html", "cmp.html", "--out", "cmp.json")
    assert done.returncode == 0, done.stderr
    warn = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(warn) == 1 and warn[0].startswith("capeval: warning: compare: 4 items only: too few"), done.stderr
    assert json.loads((tmp_path / "cmp.json").read_text())["systems"]["b"]["bleu-4"]["too_few_items"] is True
    page = (tmp_path / "cmp.html").read_text()
    assert "Warning:" in page and "class='sig'" not in page


def test_progress_lines_and_quiet(tmp_path):
    systems, refs = _random_set(30, 90)
    for name, data in (("a", systems["A"]), ("b", systems["B"]), ("r", refs)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    args = ("compare", "-c", "a.json", "b.json", "-r", "r.json", "-m", "bleu-4,cider-d", "--samples", "40")
    loud = _cli(tmp_path, *args)
    assert loud.returncode == 0, loud.stderr
    assert "[capeval] compare: scoring: 60/60 (100%)" in loud.stderr
    assert "[capeval] compare: paired bootstrap: 40/40 (100%)" in loud.stderr
    quiet = _cli(tmp_path, *args, "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert json.loads(quiet.stdout) == json.loads(loud.stdout)
    via_score = _cli(tmp_path, "score", "-c", "a.json", "--compare", "b.json", "-r", "r.json", "-m", "bleu-4", "-q")
    assert via_score.returncode == 0 and via_score.stderr == ""


def test_blas_dot_equals_numpys_threaded_call():
    """CIDEr-D's resample means: OpenBLAS splits a dot product of more than 10,000 elements over
    its threads; the same parts on one BLAS thread, added in order, give numpy's call to the last
    bit (a wrong split differs: one thread on the whole vector does), and are used where checked."""
    from capeval.significance.blas_dot import THREADED_ABOVE, BlasDot, split_widths

    assert split_widths(10, 4) == [3, 3, 2, 2] and split_widths(40_001, 2) == [20_001, 20_000]
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rng = np.random.default_rng(7)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        for n in (THREADED_ABOVE, THREADED_ABOVE + 1, 25_001, 40_460):
            cs = rng.integers(0, 4, (6, n)).astype(np.float64)
            ss = rng.random((6, n)) * rng.choice([1e-3, 1.0, 10.0], (6, n))
            dot = BlasDot(n)
            assert dot.rows(cs, ss) == [float(c @ s.copy()) for c, s in zip(cs, ss)]
            if n > THREADED_ABOVE and dot._lib is not None:  # OpenBLAS: the emulation was checked and used
                assert dot._checked == {2: True}
        if dot._lib is not None:  # the split matters (one thread on the whole vectors differs): the check can fail
            with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
                whole = [float(c @ s) for c, s in zip(cs, ss)]
            assert whole != dot.rows(cs, ss)


_SECOND_BLAS_CHECK = """
import numpy as np
import scipy.linalg  # loads SciPy's own OpenBLAS beside numpy's, as numba's first call does
import threadpoolctl
from capeval.significance.blas_dot import BlasDot
libs = threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
assert len(libs) >= 2, [lib.filepath for lib in libs]
with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
    rng = np.random.default_rng(3)
    cs = rng.integers(0, 4, (4, 40_460)).astype(np.float64)
    ss = rng.random((4, 40_460))
    dot = BlasDot(40_460)
    assert dot._lib is not None and "numpy" in dot._lib.filepath, dot._lib
    assert dot.rows(cs, ss) == [float(c @ s.copy()) for c, s in zip(cs, ss)]
    assert dot._checked == {2: True}, dot._checked
print("ok")
"""


def test_blas_dot_finds_numpys_blas_beside_another():
    """With a second OpenBLAS loaded (SciPy's: numba's first call loads it), the resample means
    still use numpy's, checked, instead of falling back to the threaded call (whose spinning
    threads cost seconds of CPU per thousand resamples). In a fresh interpreter."""
    require_module("scipy", "scipy loads a second OpenBLAS beside numpy's")
    require_module("threadpoolctl", "threadpoolctl finds numpy's BLAS")
    out = subprocess.run([sys.executable, "-c", _SECOND_BLAS_CHECK], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_multiplicities_of_the_draws_counted_row_by_row():
    """A block's (k, n) multiplicities against an independent count (np.add.at per draw), on
    shapes with one item, one resample, and items never drawn."""
    from capeval.significance.paired import _counts

    rng = np.random.default_rng(5)
    for k, n in ((1, 1), (1, 7), (3, 1), (64, 50), (5, 12_000)):
        idx = rng.integers(0, n, size=(k, n))
        idx[0, :] = 0  # row 0: one item drawn n times, every other item 0 times
        expected = np.zeros((k, n))
        np.add.at(expected, (np.repeat(np.arange(k), n), idx.ravel()), 1.0)
        got = _counts(idx, n)
        assert got.dtype == np.float64 and got.shape == (k, n)
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("kernel", ["numpy", "compiled"])
def test_counts_and_slots_past_a_byte_equal_the_former_implementation(monkeypatch, kernel):
    """The kept statistics take the narrowest integer type their values fit (counts within a
    sentence, slots and items within a chunk): a word repeated 130 and 300 times in one caption
    (counts past int8) and an item with 140 references (slots past int8) give the former
    implementation's results to the last bit; the types chosen are the ones expected."""
    from capeval.significance.cider_arrays import _narrow_type

    assert [_narrow_type(b) for b in (1, 127, 128, 32767, 32768, 2**31 - 1, 2**31)] == \
        [np.int8, np.int8, np.int16, np.int16, np.int32, np.int32, np.int64]
    if kernel == "compiled":
        require_module("numba", "numba compiles the resampling kernels (the fast extra)")
        monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0)
    else:
        monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 10**12)
    systems, refs = _random_set(30, 21)
    first = next(iter(refs))
    refs[first] = refs[first] + [f"a dog {i % 7} runs" for i in range(140)]
    systems["A"][first] = " ".join(["dog"] * 130 + ["runs"] * 300)
    refs[list(refs)[1]].append(" ".join(["dog"] * 200))
    from capeval.significance.keep import keeping

    with keeping() as kept:
        capeval.score(systems["A"], refs, "cider-d")
    [chunk] = kept["cider-d"]
    assert (chunk.ent_tf.dtype, chunk.hit_slot.dtype, chunk.df_item.dtype) == (np.int16, np.int16, np.int8)
    assert int(chunk.ent_tf.max()) == 300
    old = _quiet(before.compare, systems, refs, "cider-d", samples=40, seed=3)
    new = _quiet(compare, systems, refs, "cider-d", samples=40, seed=3)
    _assert_same(old, new)
