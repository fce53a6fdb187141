"""LongCap-Arena on fixtures written in the release's layout (the dataset card: Parquet shards
``data/<split>.<perspective>-NNNNN-of-NNNNN.parquet`` with ``file_name``, ``image``, ``refs``,
``cand``, ``score``), checked against scipy's Kendall tau item by item, plus the one-line errors,
the download listing and the CLI."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from capeval.bench import get_benchmark
from capeval.errors import CapevalError

WORDS = "a dog cat man woman red blue runs sits on the grass street ball escalator mall light".split()


def _sent(rng: random.Random, lo: int = 8, hi: int = 30) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) + "."


def _write(root: Path, split: str = "dci_val", perspective: str = "desc", n: int = 24, seed: int = 3,
           shards: int = 2, score=None) -> list[tuple[str, list[str], float]]:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = random.Random(seed)
    rows = [(_sent(rng), [_sent(rng) for _ in range(rng.randint(1, 2))],
             rng.choice([0.0, 0.125, 0.25, 0.5, 0.625, 0.75, 1.0])) for _ in range(n)]
    if score is not None:
        rows[-1] = (rows[-1][0], rows[-1][1], score)
    folder = root / "longcap-arena" / "data"
    folder.mkdir(parents=True, exist_ok=True)
    step = math.ceil(n / shards)
    for s in range(shards):
        part = rows[s * step:(s + 1) * step]
        table = pa.table({
            "file_name": [f"sa_{s}{k:05d}.jpg" for k in range(len(part))],
            "image": pa.array([{"bytes": b"\xff\xd8\xff", "path": None}] * len(part),
                              pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            "refs": pa.array([r[1] for r in part], pa.list_(pa.string())),
            "cand": [r[0] for r in part], "score": pa.array([r[2] for r in part], pa.float64()),
        })
        pq.write_table(table, folder / f"{split}.{perspective}-{s:05d}-of-{shards:05d}.parquet")
    return rows


def test_loader_reads_the_released_layout(tmp_path: Path) -> None:
    rows = _write(tmp_path)
    _write(tmp_path, split="dci_test", perspective="rel", n=10, seed=9, shards=1)
    b = get_benchmark("longcap-arena")
    loaded = b.load(tmp_path)
    items = list(loaded.settings[""].items.values())
    assert [(i.candidate, list(i.references)) for i in items] == [(c, r) for c, r, _ in rows]
    assert items[0].image == "longcap-arena/images/sa_000000.jpg"
    np.testing.assert_array_equal(loaded.data, [r[2] for r in rows])
    assert loaded.options == {"split": "test-a", "perspective": "desc"}
    assert loaded.metric_options == {"vela": {"perspective": "desc"}}
    assert loaded.info["release_split"] == "dci_val.desc" and len(loaded.files) == 2
    other = b.load(tmp_path, split="test-b", perspective="rel")
    assert other.info["rows"] == 10 and other.metric_options == {"vela": {"perspective": "rel"}}


def test_statistics_match_scipy_with_ties(tmp_path: Path) -> None:
    stats = pytest.importorskip("scipy.stats")
    _write(tmp_path, n=40)
    b = get_benchmark("longcap-arena")
    loaded = b.load(tmp_path)
    rng = np.random.default_rng(0)
    metric = rng.integers(0, 5, loaded.data.size).astype(float)  # many ties on both sides
    specs = {s.name: s for s in b.statistics(loaded, {"": metric})}
    assert {n for n, s in specs.items() if s.headline} == {"kendall_tau_c"}
    for v in ("b", "c"):
        want = 100 * stats.kendalltau(metric, loaded.data, variant=v).statistic
        assert specs[f"kendall_tau_{v}"].fn(None) == pytest.approx(want, abs=1e-9)
    nan = metric.copy()
    nan[3] = np.nan
    assert math.isnan({s.name: s for s in b.statistics(loaded, {"": nan})}["kendall_tau_b"].fn(None))


def test_bench_run_end_to_end_matches_scipy_on_the_metrics_own_item_scores(tmp_path: Path) -> None:
    stats = pytest.importorskip("scipy.stats")
    from capeval import score
    from capeval.bench import run

    rows = _write(tmp_path, split="dci_test", perspective="flu", n=20)
    res = run("longcap-arena", "bleu-1", tmp_path, bootstrap=0,
              bench_options={"longcap-arena": {"split": "test-b", "perspective": "flu"}})
    ours = score({str(k): r[0] for k, r in enumerate(rows)}, {str(k): r[1] for k, r in enumerate(rows)},
                 metrics=["bleu-1"])["bleu-1"].items
    m = [ours[str(k)] for k in range(len(rows))]
    for v in ("b", "c"):
        assert res.get("longcap-arena", "bleu-1", f"kendall_tau_{v}").value == pytest.approx(
            100 * stats.kendalltau(m, [r[2] for r in rows], variant=v).statistic, abs=1e-9)


@pytest.mark.parametrize("bad, fragment", [
    (1.5, r"\(row 3\): score must be a number in \[0, 1\]"),
    (float("nan"), r"\(row 3\): score must be a number in \[0, 1\]"),
])
def test_a_bad_score_is_one_line_naming_shard_and_row(tmp_path: Path, bad: float, fragment: str) -> None:
    _write(tmp_path, n=8, shards=2, score=bad)
    with pytest.raises(CapevalError, match=r"dci_val\.desc-00001-of-00002\.parquet " + fragment) as e:
        get_benchmark("longcap-arena").load(tmp_path)
    assert "\n" not in str(e.value)


def test_missing_files_and_options_are_one_line(tmp_path: Path) -> None:
    b = get_benchmark("longcap-arena")
    with pytest.raises(CapevalError, match=r"missing data files longcap-arena/data/dci_val\.desc-\*\.parquet.*"
                                           r"capeval download longcap-arena") as e:
        b.load(tmp_path)
    assert "\n" not in str(e.value)
    with pytest.raises(CapevalError, match=r"longcap-arena\.split='train': use one of test-a, test-b"):
        b.load(tmp_path, split="train")
    with pytest.raises(CapevalError, match=r"longcap-arena\.perspective='fluency': use one of desc, rel, flu"):
        b.load(tmp_path, perspective="fluency")
    with pytest.raises(CapevalError, match="has no loader option 'mode'"):
        b.load(tmp_path, mode="desc")


def test_cli_list_and_bench(tmp_path: Path, capsys) -> None:
    from capeval.cli.main import main

    assert main(["bench", "--list"]) == 0
    assert "longcap-arena" in capsys.readouterr().out
    _write(tmp_path, split="dci_test", perspective="rel", n=12)
    assert main(["bench", "longcap-arena", "-m", "rouge-l", "--data-root", str(tmp_path), "-B",
                 "longcap-arena.split=test-b", "-B", "longcap-arena.perspective=rel", "--bootstrap", "0",
                 "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["statistic"] for r in out["results"]} == {"kendall_tau_b", "kendall_tau_c"}
    assert main(["bench", "longcap-arena", "-m", "rouge-l", "--data-root", str(tmp_path), "-B",
                 "longcap-arena.perspective=coherence"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capeval: error: ") and err.count("\n") == 1


def test_download_lists_the_test_shards_from_the_hub(tmp_path: Path, monkeypatch) -> None:
    """``capeval download longcap-arena`` takes the six test shards' names from the hub listing
    (network replaced by a listing in the release's naming) and ``present`` sees the default split."""
    pytest.importorskip("huggingface_hub")
    import huggingface_hub

    from capeval.bench import data_download as dl
    from capeval.bench.sources import SOURCES

    listing = [f"data/{s}.{p}-00000-of-00001.parquet" for s in ("train", "val", "test", "dci_val", "dci_test")
               for p in ("desc", "rel", "flu")] + ["README.md"]
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", lambda self, repo, **kw: listing)
    monkeypatch.delenv("CAPEVAL_DATA_MIRROR", raising=False)
    files = dl._hub_files(SOURCES["longcap-arena"])
    assert sorted(f.place for f in files) == sorted(f"longcap-arena/{n}" for n in listing
                                                    if n.startswith(("data/dci_val.", "data/dci_test.")))
    assert all(f.urls[0] == f"https://huggingface.co/datasets/Ka2ukiMatsuda/LongCap-Arena/resolve/main/"
               f"{f.place.split('/', 1)[1]}" for f in files)
    assert not dl.present("longcap-arena", tmp_path)
    _write(tmp_path, n=4, shards=1)
    assert dl.present("longcap-arena", tmp_path)


def test_published_vela_cells_follow_the_runs_split_and_perspective() -> None:
    """The twelve cells of the VELA paper's Table 1 are told apart by their loader options: a run's
    benchmark signature picks the one of its own test set and perspective."""
    from capeval.bench import published as pub

    cells = [c for c in pub.cells() if c.paper == "vela"]
    assert len(cells) == 12 and {c.benchmark for c in cells} == {"longcap-arena"}
    assert {tuple(sorted(c.bench_options().items())) for c in cells} == {
        (("perspective", p), ("split", s)) for s in ("test-a", "test-b") for p in ("desc", "rel", "flu")}
    sig = "benchmark:longcap-arena|protocol:longcap-arena-v1|perspective:rel|split:test-b|files:x:1"
    assert pub.published("longcap-arena", "vela", "kendall_tau_b", sig)[0] == 51.9
    assert pub.published("longcap-arena", "vela", "kendall_tau_c", sig.replace("test-b", "test-a"))[0] == 40.0
    assert pub.tolerance("longcap-arena", "learned")[0] == 3.0
