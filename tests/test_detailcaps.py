"""DetailCaps: the loader on a fixture in the released Parquet layout, the protocol's statistics
against scipy / scikit-learn item by item, malformed rows named in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
scipy_stats = pytest.importorskip("scipy.stats")

from capeval.bench import get_benchmark  # noqa: E402
from capeval.bench.detailcaps import MODELS, REFERENCES, one_minus_r2, sample_taus  # noqa: E402
from capeval.errors import ResourceError  # noqa: E402


def _write(root: Path, n: int = 12, seed: int = 3, evals=None, release: str = "4870") -> np.ndarray:
    """The released columns (binary included) with random captions and GPT4_Eval judgments."""
    rng = np.random.default_rng(seed)
    human = rng.integers(0, 11, size=(n, 3)).astype(float)
    human[0] = 5.0  # an image whose judgments tie: no sample tau
    cols: dict[str, list] = {"image": [f"coco/{i}.jpg" for i in range(n)], "source": ["COCO"] * n,
                             "binary": [b"\xff\xd8" + bytes([i]) for i in range(n)]}
    for c in REFERENCES:
        cols[c] = [f"{c} reference {i} a dog on the grass" for i in range(n)]
    cols[REFERENCES[1]][2] = None  # a missing reference is dropped
    for m in MODELS:
        cols[m] = [f"{m} says image {i} shows a dog" for i in range(n)]
    cols["GPT4_Eval"] = evals if evals is not None else [json.dumps(dict(zip(MODELS, h.tolist()))) for h in human]
    (root / "detailcaps").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), root / "detailcaps" / f"DetailCaps-{release}.parquet", row_group_size=5)
    return human


def test_loader_reads_the_released_layout(tmp_path: Path) -> None:
    human = _write(tmp_path)
    evals = [json.dumps(dict(zip(MODELS, h.tolist()))) for h in human]
    evals.insert(4, None)  # a row without judgments is skipped
    _write(tmp_path, n=13, evals=evals)
    loaded = get_benchmark("detailcaps").load(tmp_path)
    items = loaded.settings[""].items
    assert loaded.info["rows_without_judgment"] == 1 and loaded.info["images"] == 12
    assert len(items) == 36 and list(items)[:3] == [f"0|{m}" for m in MODELS]
    assert "4|CogVLM" not in items and "5|CogVLM" in items
    assert items["2|LLaVA_v15"].references == (f"{REFERENCES[0]} reference 2 a dog on the grass",
                                               f"{REFERENCES[2]} reference 2 a dog on the grass")
    assert items["1|ShareCaptioner"].candidate == "ShareCaptioner says image 1 shows a dog"
    assert len(items["1|ShareCaptioner"].references) == 3
    np.testing.assert_array_equal(loaded.data, human)  # the judgments of the rows kept, in order
    assert loaded.signature.fields["release"] == "4870" and loaded.signature.fields["protocol"] == "detailcaps-v1"


def test_statistics_match_scipy_and_sklearn_item_by_item(tmp_path: Path) -> None:
    human = _write(tmp_path, n=40, seed=7)
    bench = get_benchmark("detailcaps")
    loaded = bench.load(tmp_path)
    rng = np.random.default_rng(11)
    metric = rng.integers(0, 4, size=human.shape).astype(float) / 3  # ties on purpose
    metric[1] = 0.5  # constant metric on an image: no sample tau
    specs = {s.name: s for s in bench.statistics(loaded, {"": metric.ravel()})}
    h, m = human.ravel(), metric.ravel()
    assert specs["pcc"].fn(None) == pytest.approx(100 * scipy_stats.pearsonr(m, h)[0], abs=1e-9)
    assert specs["kendall_tau_b"].fn(None) == pytest.approx(100 * scipy_stats.kendalltau(m, h)[0], abs=1e-9)
    r2 = pytest.importorskip("sklearn.metrics").r2_score(h, m)
    assert specs["one_minus_r2"].fn(None) == pytest.approx(1 - r2, rel=1e-12)
    per = [scipy_stats.kendalltau(metric[i], human[i])[0] for i in range(len(human))]
    np.testing.assert_allclose(sample_taus(metric, human), per, atol=1e-12, equal_nan=True)
    assert np.isnan(per[0]) and np.isnan(per[1])  # ties: the images left out of the mean
    assert specs["sample_tau"].fn(None) == pytest.approx(100 * np.nanmean(per), abs=1e-9)
    assert loaded.info["sample_tau_undefined_images"] == int(np.isnan(per).sum())
    units = np.array([3, 3, 5, 0, 1, 9])  # a bootstrap resample of images keeps their three rows
    assert specs["pcc"].fn(units) == pytest.approx(
        100 * scipy_stats.pearsonr(metric[units].ravel(), human[units].ravel())[0], abs=1e-9)
    assert specs["sample_tau"].fn(units) == pytest.approx(100 * np.nanmean(np.array(per)[units]), abs=1e-9)


def test_random_sample_taus_with_ties_match_scipy() -> None:
    rng = np.random.default_rng(0)
    for k in (2, 3, 5):
        m = rng.integers(0, 3, size=(200, k)).astype(float)
        h = rng.integers(0, 3, size=(200, k)).astype(float)
        ref = [scipy_stats.kendalltau(a, b)[0] for a, b in zip(m, h)]
        np.testing.assert_allclose(sample_taus(m, h), ref, atol=1e-12, equal_nan=True)


def test_no_nan_becomes_a_number() -> None:
    assert np.isnan(one_minus_r2(np.array([1.0, np.nan]), np.array([1.0, 2.0])))
    assert np.isnan(one_minus_r2(np.array([1.0, 2.0]), np.array([3.0, 3.0])))
    assert np.isnan(sample_taus(np.array([[np.nan, 1, 2]]), np.array([[1.0, 2, 3]]))[0])


@pytest.mark.parametrize("bad, fragment", [
    ('{"CogVLM": 3, "ShareCaptioner": NaN, "LLaVA_v15": 2}', "GPT4_Eval[ShareCaptioner] must be a number in [0, 100]"),
    ('{"CogVLM": 3, "ShareCaptioner": 1e9, "LLaVA_v15": 2}', "GPT4_Eval[ShareCaptioner] must be a number in [0, 100]"),
    ('{"CogVLM": 3, "LLaVA_v15": 2}', "GPT4_Eval must be an object with CogVLM, ShareCaptioner, LLaVA_v15"),
    ("{not json", "GPT4_Eval is not JSON"),
])
def test_a_malformed_row_is_one_line_naming_file_and_row(tmp_path: Path, bad: str, fragment: str) -> None:
    evals = [json.dumps(dict(zip(MODELS, [1, 2, 3])))] * 4
    evals[2] = bad
    _write(tmp_path, n=4, evals=evals)
    with pytest.raises(ResourceError) as exc:
        get_benchmark("detailcaps").load(tmp_path)
    msg = str(exc.value)
    assert "\n" not in msg and f"detailcaps/DetailCaps-4870.parquet (row 2): {fragment}" in msg, msg


def test_cli_bench_list_and_a_malformed_row(tmp_path: Path, capsys) -> None:
    from capeval.cli import main

    assert main(["bench", "--list"]) == 0
    assert "detailcaps" in capsys.readouterr().out
    evals = [json.dumps(dict(zip(MODELS, [1, 2, 3])))] * 3 + ['{"CogVLM": 1, "ShareCaptioner": -1, "LLaVA_v15": 2}']
    _write(tmp_path, n=4, evals=evals)
    code = main(["bench", "detailcaps", "-m", "bleu-1", "--data-root", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and err.startswith("capeval: error: malformed data file"), err
    assert "DetailCaps-4870.parquet (row 3)" in err


def test_release_100_reads_the_same_layout_and_options_are_checked(tmp_path: Path) -> None:
    _write(tmp_path, n=5, release="100")
    loaded = get_benchmark("detailcaps").load(tmp_path, release="100")
    assert loaded.info["images"] == 5 and loaded.options == {"release": "100"}
    with pytest.raises(ResourceError, match="missing data file 'detailcaps/DetailCaps-4870.parquet'"):
        get_benchmark("detailcaps").load(tmp_path)


def test_bench_run_end_to_end_matches_scipy_on_the_metrics_own_item_scores(tmp_path: Path) -> None:
    """``capeval.bench.run`` on the fixture: the four statistics of a real metric (BLEU-1), equal to
    scipy / scikit-learn on the item scores ``capeval.score`` gives for the same items."""
    import capeval
    import capeval.bench as cb

    n, rng = 16, np.random.default_rng(4)
    words = "a dog cat runs on the grass red ball man sits near table two birds fly over water".split()
    human = _write(tmp_path, n=n, seed=9)
    table = pq.read_table(tmp_path / "detailcaps" / "DetailCaps-4870.parquet")
    for m in MODELS:  # captions that differ, so BLEU-1 varies
        caps = [" ".join(rng.choice(words, size=int(rng.integers(3, 12)))) for _ in range(n)]
        table = table.set_column(table.schema.get_field_index(m), m, pa.array(caps))
    pq.write_table(table, tmp_path / "detailcaps" / "DetailCaps-4870.parquet")
    run = cb.run(["detailcaps"], ["bleu-1"], data_root=str(tmp_path))
    got = {r.statistic: r.value for r in run}
    items = cb.load("detailcaps", data_root=str(tmp_path)).settings[""].items
    report = capeval.score({k: i.candidate for k, i in items.items()},
                           {k: list(i.references) for k, i in items.items()}, "bleu-1")
    m = np.array([report["bleu-1"].items[k] for k in items], float)
    h = human.ravel()
    assert got["pcc"] == pytest.approx(100 * scipy_stats.pearsonr(m, h)[0], abs=1e-9)
    assert got["kendall_tau_b"] == pytest.approx(100 * scipy_stats.kendalltau(m, h)[0], abs=1e-9)
    assert got["one_minus_r2"] == pytest.approx(((h - m) ** 2).sum() / ((h - h.mean()) ** 2).sum(), rel=1e-12)
    per = [scipy_stats.kendalltau(a, b)[0] for a, b in zip(m.reshape(n, 3), human)]
    assert got["sample_tau"] == pytest.approx(100 * np.nanmean(per), abs=1e-9)


def test_download_through_a_mirror_places_the_release_where_bench_reads_it(tmp_path: Path, monkeypatch, capsys) -> None:
    """``capeval download detailcaps`` (CAPEVAL_DATA_MIRROR on 127.0.0.1): the Parquet goes to
    ``<data>/detailcaps/``, the unpublished DetailCaps-100 is optional, and ``bench`` reads it."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from capeval.cli import main

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    mirror = tmp_path / "mirror"
    _write(mirror, n=6)  # mirror/detailcaps/DetailCaps-4870.parquet = URL/<benchmark>/<name>
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(mirror)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("CAPEVAL_DATA_MIRROR", f"http://127.0.0.1:{server.server_address[1]}/")
        monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
        monkeypatch.delenv("CAPEVAL_DATA", raising=False)
        assert main(["download", "detailcaps"]) == 0, capsys.readouterr().err
        capsys.readouterr()
        assert main(["bench", "detailcaps", "-m", "bleu-1", "--bootstrap", "0", "--json", "--quiet"]) == 0
        out = json.loads(capsys.readouterr().out)
    finally:
        server.shutdown()
        server.server_close()
    assert {r["statistic"] for r in out["results"]} == {"pcc", "one_minus_r2", "kendall_tau_b", "sample_tau"}
