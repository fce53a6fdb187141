"""capeval.compare: the paired tests against sacreBLEU's, and corpus scores of resamples against
capeval.score on the materialised resample."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import numpy as np
import pytest

import capeval
from capeval.errors import InputError
from capeval.significance.paired import approximate_randomization, paired_bootstrap
from capeval.significance.statistics import SumStatistic

sacrebleu = pytest.importorskip("sacrebleu")
from sacrebleu.metrics import BLEU  # noqa: E402
from sacrebleu.significance import PairedTest  # noqa: E402

WORDS = "a the man woman dog cat red blue sits runs on in with near park street ball frisbee".split()


def _systems(n: int, seed: int = 0) -> tuple[list[str], list[str], list[str], list[list[str]]]:
    rng = random.Random(seed)
    refs = [[" ".join(rng.choices(WORDS, k=rng.randint(4, 10))) for _ in range(3)] for _ in range(n)]
    base = [" ".join(rng.choices(WORDS, k=rng.randint(1, 9))) for _ in range(n)]
    # the other system copies reference words more often: a real but noisy difference
    other = [" ".join(rng.choice(r[0].split()) if rng.random() < 0.45 else rng.choice(WORDS)
                      for _ in range(rng.randint(1, 9))) for r in refs]
    third = [c if rng.random() < 0.5 else b for b, c in zip(base, other)]
    return base, other, third, refs


def _sacrebleu_statistic(metric: BLEU, hyps: list[str], refs_t: list[list[str]], dtype) -> SumStatistic:
    stats = np.array(metric._extract_corpus_statistics(hyps, refs_t))

    def aggregate(sums: np.ndarray) -> np.ndarray:
        return np.array([metric._compute_score_from_stats(s.astype(dtype)).score for s in sums])

    return SumStatistic(stats, aggregate)


@pytest.mark.parametrize("test_type", ["bs", "ar"])
def test_paired_tests_equal_sacrebleu_exactly(test_type, monkeypatch):
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    base, other, third, refs = _systems(150)
    refs_t = [list(r) for r in zip(*refs)]  # sacreBLEU: one list per reference position
    metric = BLEU()
    samples = 300 if test_type == "bs" else 500
    test = PairedTest([("base", base), ("other", other), ("third", third)], {"BLEU": metric}, refs_t,
                      test_type=test_type, n_samples=samples)
    _, scores = test()
    # sacreBLEU sums float32 statistics for the bootstrap and int64 for randomisation
    dtype = np.float32 if test_type == "bs" else np.int64
    bl = _sacrebleu_statistic(metric, base, refs_t, dtype)
    for k, hyps in enumerate((other, third), start=1):
        sys_stat = _sacrebleu_statistic(metric, hyps, refs_t, dtype)
        ours = (paired_bootstrap(bl, sys_stat, samples, 12345) if test_type == "bs"
                else approximate_randomization(bl, sys_stat, samples, 12345))
        theirs = scores["BLEU"][k]
        assert ours.p_value == theirs.p_value
        # the system score itself: sacreBLEU computes it from integer sums; the bootstrap aggregate
        # above mimics its float32 resample sums, hence the float32-level tolerance here only
        assert ours.system == pytest.approx(theirs.score, rel=0 if dtype is np.int64 else 1e-6)
        if test_type == "bs":
            assert ours.mean == theirs.mean and ours.ci == theirs.ci
    assert 0 < scores["BLEU"][1].p_value < 1


def _materialised(cands: dict[str, str], refs: dict[str, list[str]], idx: np.ndarray):
    keys = list(cands)
    c = {f"{j}:{keys[i]}": cands[keys[i]] for j, i in enumerate(idx)}
    r = {f"{j}:{keys[i]}": refs[keys[i]] for j, i in enumerate(idx)}
    return c, r


def test_resampled_corpus_scores_equal_capeval_score_on_the_resample():
    from capeval.significance.compare import _statistics

    base, _, _, refs = _systems(60, seed=3)
    cands = {str(i): c for i, c in enumerate(base)}
    refs_d = {str(i): r for i, r in enumerate(refs)}
    metrics = ["bleu-1", "bleu-4", "cider-d", "rouge-l", "meteor"]
    stats, report = _statistics("base", cands, refs_d, metrics, None)
    rng = np.random.default_rng(5)
    for _ in range(3):
        idx = rng.choice(60, size=60, replace=True)
        counts = np.bincount(idx, minlength=60).astype(np.float64)[None, :]
        c, r = _materialised(cands, refs_d, idx)
        direct = capeval.score(c, r, metrics)
        for m in metrics:
            got = float(stats[m].resampled(counts)[0])
            # BLEU sums integers (exact); CIDEr-D and the means add the same floats in another order
            assert math.isclose(got, direct[m].system, rel_tol=1e-12, abs_tol=1e-15), (m, got, direct[m].system)
    # a resample's CIDEr-D is not the mean of the full-set item scores: df changed
    idx = rng.choice(60, size=60, replace=True)
    counts = np.bincount(idx, minlength=60).astype(np.float64)
    fixed_df = float(counts @ np.array([report["cider-d"].items[k] for k in cands])) / 60
    assert stats["cider-d"].resampled(counts[None, :])[0] != pytest.approx(fixed_df, rel=1e-9)


def test_compare_api_result_and_signature():
    base, other, third, refs = _systems(80, seed=1)
    systems = {"A": dict(enumerate(base)), "B": dict(enumerate(other)), "C": dict(enumerate(third))}
    out = capeval.compare(systems, dict(enumerate(refs)), "bleu-4,cider-d,rouge-l", samples=200)
    assert out["baseline"] == "A" and list(out["systems"]) == ["A", "B", "C"]
    row = out["systems"]["B"]["cider-d"]
    assert 0 < row["p_value"] <= 1 and row["diff_ci"][0] <= row["diff"] + 1e-12 or row["diff_ci"][1] >= row["diff"]
    assert "paired:bs|samples:200|seed:12345" in out["signatures"]["bleu-4"]
    again = capeval.compare(systems, dict(enumerate(refs)), "bleu-4,cider-d,rouge-l", samples=200)
    assert again == out
    ar = capeval.compare(systems, dict(enumerate(refs)), "bleu-4", method="ar", samples=64)
    assert set(ar["systems"]["C"]["bleu-4"]) == {"score", "diff", "p_value"}


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(samples=0), "samples"), (dict(seed=-1), "seed"), (dict(confidence=1.0), "confidence"),
    (dict(method="t-test"), "method"),
])
def test_bad_options_are_one_line_errors(kwargs, pattern):
    with pytest.raises(InputError, match=pattern):
        capeval.compare({"A": {"1": "a dog"}, "B": {"1": "a cat"}}, {"1": ["a dog"]}, "bleu-1", **kwargs)


def test_bad_systems_are_refused():
    refs = {"1": ["a dog"], "2": ["a cat"]}
    with pytest.raises(InputError, match="at least two systems"):
        capeval.compare({"A": {"1": "a", "2": "b"}}, refs)
    with pytest.raises(InputError, match="same items"):
        capeval.compare({"A": {"1": "a", "2": "b"}, "B": {"1": "a"}}, refs)
    with pytest.raises(InputError, match="vocab.*no resampling rule"):
        capeval.compare({"A": {"1": "a dog", "2": "a cat"}, "B": {"1": "a cat", "2": "a dog"}}, refs, "vocab")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True)


def test_cli_compare_json_table_html_and_score_compare(tmp_path):
    base, other, _, refs = _systems(40, seed=2)
    a, b, r = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "refs.json"
    a.write_text(json.dumps(dict(enumerate(base))))
    b.write_text(json.dumps(dict(enumerate(other))))
    r.write_text(json.dumps(dict(enumerate(refs))))
    out, page = tmp_path / "cmp.json", tmp_path / "cmp.html"
    done = _cli("compare", "-c", str(a), f"ours={b}", "-r", str(r), "-m", "bleu-4,cider-d", "--samples", "50",
                "--out", str(out), "--html", str(page))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed == json.loads(out.read_text())
    assert list(printed["systems"]) == ["a", "ours"] and printed["samples"] == 50
    assert "Is B better than A?" in page.read_text() and "paired:bs|samples:50|seed:12345" in page.read_text()
    via_score = _cli("score", "-c", str(a), "--compare", f"ours={b}", "-r", str(r), "-m", "bleu-4,cider-d")
    assert via_score.returncode == 0, via_score.stderr
    same = capeval.compare({"a": dict(enumerate(base)), "ours": dict(enumerate(other))}, dict(enumerate(refs)),
                           "bleu-4,cider-d")
    assert json.loads(via_score.stdout) == json.loads(json.dumps(same))
    table = _cli("compare", "-c", str(a), str(b), "-r", str(r), "-m", "bleu-4", "--samples", "20", "--table")
    assert table.returncode == 0 and "paired bootstrap, 20 samples, seed 12345" in table.stdout


@pytest.mark.parametrize("extra, pattern", [
    (["--samples", "0"], "samples"), (["--confidence", "1.5"], "confidence"), (["-m", "vocab"], "vocab"),
])
def test_cli_compare_bad_input_is_one_line(tmp_path, extra, pattern):
    a, r = tmp_path / "a.json", tmp_path / "refs.json"
    a.write_text(json.dumps({"1": "a dog", "2": "a cat"}))
    r.write_text(json.dumps({"1": ["a dog"], "2": ["a cat"]}))
    done = _cli("compare", "-c", str(a), f"b={a}", "-r", str(r), *extra)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("capeval: error")]
    assert pattern in line
    one = _cli("compare", "-c", str(a), "-r", str(r))
    assert one.returncode == 2 and "at least two files" in one.stderr
