"""CapArena: the loader on a fixture in the released annotation layout; caption-level agreement
and the model-level ranking checked against the official scripts (njucckevin/CapArena, run from
a fetched mirror where there is one) and against an independent transcription of them (always)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

scipy_stats = pytest.importorskip("scipy.stats")

from capeval.bench import get_benchmark  # noqa: E402
from capeval.bench.caparena import CAPARENA_COMMIT, HUMAN_RANKING  # noqa: E402
from capeval.errors import ResourceError  # noqa: E402

MODELS = ["GPT-4o-0806", "InternVL2-26B", "LLaVA-1.5-7B", "Qwen2-VL-2B-Instruct", "Claude-3.5-Sonnet-0620"]
MIRROR = Path("/work/.mirror/njucckevin+CapArena/repo")
JUDGE = {1: "Caption 1 is better.", 2: "Caption 2 is better", 0: "Tie."}


def _write(root: Path, n: int = 90, seed: int = 5) -> list[dict]:
    """Battles in the released layout: random pairs, winners incl. the tie labels, human battles."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        a, b = rng.choice(len(MODELS), 2, replace=False)
        s1, s2 = MODELS[a], MODELS[b]
        if k % 17 == 3:
            s2 = "human"
        winner = [s1, s2, "tie", "tie (bothbad)"][rng.choice(4, p=[0.4, 0.4, 0.1, 0.1])]
        rows.append({"img": f"test_{k:05d}.jpg", "source1": s1, "source2": s2, "caption1": f"{s1} sees {k}",
                     "caption2": f"{s2} sees {k}", "winner": winner, "cluster": f"level {k % 4 + 1}",
                     "ref": f"a human reference {k}", "in-400": bool(k % 2)})
    (root / "caparena").mkdir(parents=True, exist_ok=True)
    (root / "caparena" / "caparena_annots_eval.json").write_text(json.dumps(rows))
    return rows


def _run(tmp_path: Path, seed: int = 1):
    rows = _write(tmp_path)
    bench = get_benchmark("caparena")
    loaded = bench.load(tmp_path)
    scores = np.random.default_rng(seed).integers(0, 3, size=len(loaded.settings[""].items)).astype(float)
    specs = {s.name: s.fn(None) for s in bench.statistics(loaded, {"": scores})}
    votes = {}  # row index -> metric vote, for the non-human battles the loader kept
    kept = [k for k, r in enumerate(rows) if "human" not in (r["source1"], r["source2"])]
    for k, (a, b) in zip(kept, scores.reshape(-1, 2)):
        votes[k] = 1 if a > b else 2 if a < b else 0
    return rows, loaded, specs, votes


def test_loader_reads_the_released_layout(tmp_path: Path) -> None:
    rows = _write(tmp_path)
    loaded = get_benchmark("caparena").load(tmp_path)
    human = [r for r in rows if "human" not in (r["source1"], r["source2"])]
    assert loaded.info["battles"] == len(human) and loaded.info["battles_with_human_captioner"] == len(rows) - len(human)
    items = list(loaded.settings[""].items.values())
    assert items[0].candidate == human[0]["caption1"] and items[1].candidate == human[0]["caption2"]
    assert items[0].references == (human[0]["ref"],)
    assert loaded.info["human_ranking"] == list(HUMAN_RANKING)


def _transcribed_agreement(rows: list[dict], votes: dict[int, int]) -> dict[str, float]:
    """cal_agreement(include_tie=True) transcribed on judge strings (vlm_as_a_judge.py:58-96)."""
    levels: dict[str, list[int]] = {"overall": [], "level 1": [], "level 2": [], "level 3": [], "level 4": []}
    for k, item in enumerate(rows):
        if k not in votes:
            continue
        judge = JUDGE[votes[k]]
        human = ("Caption 1 is better." if item["winner"] == item["source1"] else
                 "Caption 2 is better." if item["winner"] == item["source2"] else "Tie.")
        levels["overall"].append(1 if judge in human else 0)
        levels[item["cluster"]].append(1 if judge in human else 0)
    return {k: 100 * sum(v) / len(v) for k, v in levels.items()}


def _transcribed_ranking(rows: list[dict], votes: dict[int, int]) -> list[str]:
    """calculate_elo_rankings transcribed without pandas: global np.random seeded 42, median over rounds."""
    battles = [(r["source1"], r["source2"], r["source1"] if votes[k] == 1 else r["source2"] if votes[k] == 2
                else "equal") for k, r in enumerate(rows) if k in votes]
    np.random.seed(42)
    ratings: dict[str, list[float]] = {}
    for _ in range(1000):
        rating: dict[str, float] = {}
        for i in np.random.choice(len(battles), size=len(battles), replace=True):
            a, b, w = battles[i]
            ra, rb = rating.get(a, 1000), rating.get(b, 1000)
            sa = 1 if w == a else 0 if w == b else 0.5
            rating[a] = ra + 4 * (sa - 1 / (1 + 10 ** ((rb - ra) / 400)))
            rating[b] = rb + 4 * (1 - sa - 1 / (1 + 10 ** ((ra - rb) / 400)))
        for m, v in rating.items():
            ratings.setdefault(m, []).append(v)
    return sorted(ratings, key=lambda m: -float(np.median(ratings[m])))


def test_statistics_against_an_independent_transcription(tmp_path: Path) -> None:
    rows, _, specs, votes = _run(tmp_path)
    assert 0 in votes.values()  # metric ties occur
    want = _transcribed_agreement(rows, votes)
    assert specs["agreement"] == pytest.approx(want["overall"], abs=1e-12)
    for i in range(1, 5):
        assert specs[f"agreement_level_{i}"] == pytest.approx(want[f"level {i}"], abs=1e-12)
    order = _transcribed_ranking(rows, votes)
    human = [HUMAN_RANKING.index(m) + 1 for m in order]
    own = list(range(1, len(order) + 1))
    assert specs["spearman_models"] == pytest.approx(100 * scipy_stats.spearmanr(human, own)[0], abs=1e-9)
    assert specs["kendall_models"] == pytest.approx(100 * scipy_stats.kendalltau(human, own)[0], abs=1e-9)


def _official(tmp_path: Path):
    """Import caparena_metrics.py (and the cal_ranking / vlm_as_a_judge it imports) from the mirror,
    with stubs for the plotting / download modules they import but these functions never use."""
    if not MIRROR.is_dir():
        pytest.skip("no CapArena mirror (fetch njucckevin/CapArena)")
    pytest.importorskip("pandas")
    src = tmp_path / "official"
    src.mkdir()
    for name in ("caparena_metrics.py", "cal_ranking.py", "vlm_as_a_judge.py"):
        text = subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"{CAPARENA_COMMIT}:{name}"],
                              capture_output=True, text=True, check=True).stdout
        (src / name).write_text(text)
    stubs = {"gdown": types.ModuleType("gdown"), "plotly": types.ModuleType("plotly"),
             "plotly.express": types.ModuleType("plotly.express")}
    for name, mod in stubs.items():
        sys.modules.setdefault(name, mod)
    sys.path.insert(0, str(src))
    try:
        import caparena_metrics  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(src))
    return caparena_metrics


def test_statistics_against_the_official_scripts(tmp_path: Path) -> None:
    official = _official(tmp_path)
    rows, _, specs, votes = _run(tmp_path)
    judged = [dict(r, judge=JUDGE[votes[k]]) if k in votes else dict(r) for k, r in enumerate(rows)]
    path = tmp_path / "metric_annots.json"
    path.write_text(json.dumps(judged))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        official.cal_agreement(judged, include_tie=True, in_400=False)
    printed = dict(re.findall(r"(Overall|Level \d): ([0-9.]+) \(", out.getvalue()))
    assert f"{specs['agreement'] / 100:.3f}" == printed["Overall"]
    for i in range(1, 5):
        assert f"{specs[f'agreement_level_{i}'] / 100:.3f}" == printed[f"Level {i}"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        order = official.calculate_elo_rankings(str(path))
    from capeval.bench.caparena import elo_ranking

    ours = elo_ranking([(r["source1"], r["source2"], votes[k]) for k, r in enumerate(rows) if k in votes])
    assert ours == order
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        official.cal_model_level_agreement(list(order))
    rho = float(re.search(r"Spearman ρ: (\S+)", out.getvalue()).group(1))
    tau = float(re.search(r"Kendall Tau: (\S+)", out.getvalue()).group(1))
    assert specs["spearman_models"] == pytest.approx(100 * rho, abs=1e-9)
    assert specs["kendall_models"] == pytest.approx(100 * tau, abs=1e-9)


def test_human_ranking_elo_option(tmp_path: Path) -> None:
    rows = _write(tmp_path)
    loaded = get_benchmark("caparena").load(tmp_path, human_ranking="elo")
    human = {k: (1 if r["winner"] == r["source1"] else 2 if r["winner"] == r["source2"] else 0)
             for k, r in enumerate(rows) if "human" not in (r["source1"], r["source2"])}
    assert loaded.info["human_ranking"] == _transcribed_ranking(rows, human)


@pytest.mark.parametrize("field,value,message", [
    ("winner", None, "'winner' must be a string"),
    ("cluster", "level 9", "cluster must be one of"),
    ("source2", "GPT-4o-0806", "source1 and source2 are both"),
])
def test_malformed_row_is_one_line(tmp_path: Path, field: str, value, message: str) -> None:
    rows = _write(tmp_path)
    rows[4]["source1"] = "GPT-4o-0806"
    rows[4]["source2"] = "LLaVA-1.5-7B"
    rows[4][field] = value
    path = tmp_path / "caparena" / "caparena_annots_eval.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(ResourceError) as err:
        get_benchmark("caparena").load(tmp_path)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and "(row 4)" in text and message in text


def test_bench_list_shows_caparena(capsys: pytest.CaptureFixture[str]) -> None:
    from capeval.cli import main

    assert main(["bench", "--list"]) == 0
    assert "caparena" in capsys.readouterr().out


def test_bench_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from capeval.cli import main

    _write(tmp_path)
    assert main(["bench", "caparena", "-m", "bleu-1", "--data-root", str(tmp_path), "--bootstrap", "20"]) == 0
    out = capsys.readouterr().out
    for name in ("agreement", "agreement_level_4", "spearman_models", "kendall_models"):
        assert f" {name} " in out, name


def test_a_nan_score_gives_nan_statistics(tmp_path: Path) -> None:
    _write(tmp_path)
    bench = get_benchmark("caparena")
    loaded = bench.load(tmp_path)
    scores = np.ones(len(loaded.settings[""].items))
    scores[3] = np.nan
    values = {s.name: s.fn(None) for s in bench.statistics(loaded, {"": scores})}
    assert np.isnan(values["agreement"]) and np.isnan(values["spearman_models"]) and np.isnan(values["kendall_models"])
