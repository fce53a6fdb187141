"""Polaris and Nebula loaders on small fixtures written in the datasets' real layouts
(Polaris: the Polos code's CSV columns mt, refs, score, imgid; Nebula: the dataset card's
Parquet columns file_name, image, refs, mt, human_score), checked against an independent
Kendall tau (scipy) item by item, plus the one-line errors."""

from __future__ import annotations

import csv
import hashlib
import random
from pathlib import Path

import numpy as np
import pytest

from capeval.bench import get_benchmark
from capeval.errors import CapevalError

WORDS = "a dog cat man woman red blue runs sits on the grass street ball".split()


def _sent(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))


def _polaris(root: Path, n: int = 40, seed: int = 0) -> list[tuple[str, list[str], float]]:
    rng = random.Random(seed)
    rows = [(_sent(rng), [_sent(rng) for _ in range(rng.randint(1, 5))], rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]))
            for _ in range(n)]
    (root / "polaris").mkdir(parents=True)
    with open(root / "polaris" / "polaris_test.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["", "mt", "refs", "score", "imgid"])  # pandas' unnamed index column, as in the release
        for k, (mt, refs, score) in enumerate(rows):
            w.writerow([k, mt, repr(refs), score, f"{k:06d}.jpg"])
    return rows


def test_polaris_items_and_statistic_match_scipy(tmp_path: Path) -> None:
    stats = pytest.importorskip("scipy.stats")
    from capeval.bench import run

    rows = _polaris(tmp_path)
    b = get_benchmark("polaris")
    loaded = b.load(tmp_path)
    items = list(loaded.settings[""].items.values())
    assert [(i.candidate, list(i.references)) for i in items] == [(mt, refs) for mt, refs, _ in rows]
    assert items[3].image == "polaris/images/000003.jpg"
    assert loaded.files["polaris/polaris_test.csv"] == hashlib.sha256(
        (tmp_path / "polaris" / "polaris_test.csv").read_bytes()).hexdigest()
    assert loaded.info["unverified_files"] == ["polaris/polaris_test.csv"]
    res = run("polaris", "bleu-1,rouge-l", tmp_path, bootstrap=0)
    from capeval import score

    cands = {str(k): r[0] for k, r in enumerate(rows)}
    refs = {str(k): r[1] for k, r in enumerate(rows)}
    human = [r[2] for r in rows]
    for metric in ("bleu-1", "rouge-l"):
        ours = score(cands, refs, metrics=[metric])[metric].items
        m = [ours[str(k)] for k in range(len(rows))]
        for variant in ("b", "c"):
            expected = 100 * stats.kendalltau(m, human, variant=variant).statistic
            assert res.get("polaris", metric, f"kendall_tau_{variant}").value == pytest.approx(expected, abs=1e-9)


def test_polaris_errors_are_one_line(tmp_path: Path) -> None:
    b = get_benchmark("polaris")
    with pytest.raises(CapevalError, match="missing data file 'polaris/polaris_test.csv'") as e:
        b.load(tmp_path)
    assert "\n" not in str(e.value)
    _polaris(tmp_path)
    (tmp_path / "polaris" / "polaris_val.csv").write_text("mt,refs,score,imgid\nx,\"['y']\",0.5,1.jpg\n")
    with pytest.raises(CapevalError, match=r"polaris_val.csv differs from the published file") as e:
        b.load(tmp_path, split="val")
    assert "\n" not in str(e.value)
    (tmp_path / "polaris" / "polaris_test.csv").write_text("mt,refs,score,imgid\nx,not a list,0.5,1.jpg\n")
    with pytest.raises(CapevalError, match=r"row 2.*refs must be a list") as e:
        b.load(tmp_path)
    with pytest.raises(CapevalError, match=r"polaris\.split='train': use one of test, val"):
        b.load(tmp_path, split="train")


def _nebula(root: Path, n: int = 30, seed: int = 1) -> list[tuple[str, list[str], float]]:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = random.Random(seed)
    rows = [(_sent(rng), [_sent(rng) for _ in range(3)], float(rng.randint(0, 10)) / 10) for _ in range(n)]
    (root / "nebula" / "data").mkdir(parents=True)
    half = n // 2
    for shard, part in ((0, rows[:half]), (1, rows[half:])):
        table = pa.table({
            "file_name": [f"img{shard}_{k}.jpg" for k in range(len(part))],
            "image": pa.array([{"bytes": b"\xff\xd8", "path": None}] * len(part),
                              pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            "refs": [r[1] for r in part], "mt": [r[0] for r in part], "human_score": [r[2] for r in part],
        })
        pq.write_table(table, root / "nebula" / "data" / f"test-0000{shard}-of-00002-abcdef.parquet")
    return rows


def test_nebula_reads_the_parquet_layout(tmp_path: Path) -> None:
    stats = pytest.importorskip("scipy.stats")
    rows = _nebula(tmp_path)
    loaded = get_benchmark("nebula").load(tmp_path)
    items = list(loaded.settings[""].items.values())
    assert [(i.candidate, list(i.references)) for i in items] == [(mt, refs) for mt, refs, _ in rows]
    assert items[0].image == "nebula/images/img0_0.jpg" and len(loaded.files) == 2
    np.testing.assert_array_equal(loaded.data, [r[2] for r in rows])
    metric = np.array([len(r[0]) for r in rows], float)
    specs = {s.name: s for s in get_benchmark("nebula").statistics(loaded, {"": metric})}
    assert specs["kendall_tau_c"].fn(None) == pytest.approx(
        100 * stats.kendalltau(metric, loaded.data, variant="c").statistic, abs=1e-9)


def test_nebula_missing_files(tmp_path: Path) -> None:
    with pytest.raises(CapevalError, match=r"nebula: missing data files nebula/data/test-\*\.parquet") as e:
        get_benchmark("nebula").load(tmp_path)
    assert "\n" not in str(e.value)


def test_bench_list_shows_both(capsys) -> None:
    from capeval.cli.main import main

    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "polaris" in out and "nebula" in out


def test_polaris_passes_strings_as_written_and_declares_its_split(tmp_path: Path) -> None:
    """The Polos code hands mt and refs to the metric unchanged (validate/dataset.py): no whitespace
    normalisation; ``split`` is a declared loader option (so bench/reproduce accept it)."""
    (tmp_path / "polaris").mkdir()
    with open(tmp_path / "polaris" / "polaris_test.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["", "mt", "refs", "score", "imgid"])
        w.writerow([0, "a  dog\truns ", repr(["a dog  runs", " x"]), 0.5, "1.jpg"])
        w.writerow([1, "b", repr(["c"]), 0.25, "2.jpg"])
    items = list(get_benchmark("polaris").load(tmp_path).settings[""].items.values())
    assert (items[0].candidate, items[0].references) == ("a  dog\truns ", ("a dog  runs", " x"))
    assert get_benchmark("polaris").loader_options == {"split": ("test", "val")}
    with open(tmp_path / "polaris" / "polaris_test.csv", "a", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerow([2, "", repr(["c"]), 0.25, "3.jpg"])
    with pytest.raises(CapevalError, match=r"row 4.*empty candidate") as e:
        get_benchmark("polaris").load(tmp_path)
    assert "\n" not in str(e.value)


def _spica(root: Path, rows_by_file: dict[str, list[tuple[str, str, float]]]) -> None:
    (root / "spica").mkdir()
    for name, rows in rows_by_file.items():
        with open(root / "spica" / name, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["mt", "refs", "score", "imgid"])
            for imgid, mt, score in rows:
                w.writerow([mt, "['r']", score, imgid])


def test_nebula_corrected_scores_follow_the_spica_rule(tmp_path: Path) -> None:
    """scores=corrected: a test row takes the mean Spica score of its (image stem, whitespace-collapsed
    candidate) over the three Spica files; rows Spica lacks keep their own (the authors' kit's rule),
    checked against a literal transcription of that rule, and the Kendall tau follows."""
    stats = pytest.importorskip("scipy.stats")
    rows = _nebula(tmp_path)
    # shard 0 holds rows[:15] with file_name img0_<k>.jpg, shard 1 rows[15:] with img1_<k>.jpg
    names = [f"img0_{k}.jpg" for k in range(15)] + [f"img1_{k}.jpg" for k in range(15)]
    spica_rows = {
        "spica_train.csv": [("img0_0.png", rows[0][0], 0.9), ("img0_1", "  " + rows[1][0].replace(" ", "   "), 0.2)],
        "spica_val.csv": [("img0_0.jpg", rows[0][0], 0.5), ("img1_3.jpg", "another caption", 0.1)],
        "spica_test.csv": [("img1_2.jpg", rows[17][0], 0.0), ("img9_9.jpg", rows[5][0], 1.0)],
    }
    _spica(tmp_path, spica_rows)
    acc: dict[tuple[str, str], list[float]] = {}
    for file_rows in spica_rows.values():
        for imgid, mt, score in file_rows:
            acc.setdefault((imgid.rsplit(".", 1)[0] if "." in imgid else imgid, " ".join(mt.split())), []).append(score)
    expected = [float(np.mean(acc[(n.rsplit(".", 1)[0], r[0])])) if (n.rsplit(".", 1)[0], r[0]) in acc else r[2]
                for n, r in zip(names, rows)]
    assert expected[0] == pytest.approx(0.7) and expected[1] == 0.2 and expected[17] == 0.0
    b = get_benchmark("nebula")
    loaded = b.load(tmp_path, scores="corrected")
    np.testing.assert_array_equal(loaded.data, expected)
    assert loaded.info["corrected_rows"] == sum(e != r[2] for e, r in zip(expected, rows))
    assert set(loaded.files) >= {"spica/spica_train.csv", "spica/spica_val.csv", "spica/spica_test.csv"}
    original = b.load(tmp_path)
    np.testing.assert_array_equal(original.data, [r[2] for r in rows])
    metric = np.array([len(r[0]) for r in rows], float)
    specs = {s.name: s for s in b.statistics(loaded, {"": metric})}
    assert specs["kendall_tau_c"].fn(None) == pytest.approx(
        100 * stats.kendalltau(metric, expected, variant="c").statistic, abs=1e-9)
    # end to end: the loader option through capeval.bench.run, against scipy on the corrected scores
    from capeval import score
    from capeval.bench import run

    res = run("nebula", "bleu-1", tmp_path, bootstrap=0, bench_options={"nebula": {"scores": "corrected"}})
    ours = score({str(k): r[0] for k, r in enumerate(rows)}, {str(k): r[1] for k, r in enumerate(rows)},
                 metrics=["bleu-1"])["bleu-1"].items
    m = [ours[str(k)] for k in range(len(rows))]
    for v in ("b", "c"):
        assert res.get("nebula", "bleu-1", f"kendall_tau_{v}").value == pytest.approx(
            100 * stats.kendalltau(m, expected, variant=v).statistic, abs=1e-9)


def test_nebula_option_errors_are_one_line(tmp_path: Path) -> None:
    from capeval.bench.base import check_loader_options

    _nebula(tmp_path)
    b = get_benchmark("nebula")
    for kwargs, pattern in (({"scores": "corrected"}, r"scores=corrected needs spica/spica_train.csv"),
                            ({"scores": "fixed"}, r"nebula\.scores='fixed': use one of original, corrected"),
                            ({"scores": "corrected", "split": "valid"}, r"test split only")):
        with pytest.raises(CapevalError, match=pattern) as e:
            b.load(tmp_path, **kwargs)
        assert "\n" not in str(e.value)
    with pytest.raises(CapevalError, match=r"nebula.scores"):
        check_loader_options([b], {"nebula": {"scores": "fixed"}})
