"""End-to-end ``capeval bench`` runs on the real data, and bad input at the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capeval.cli.main import main


def test_cli_expert_and_thumb_match_published_numbers(shared_data: Path, tmp_path: Path, capsys) -> None:
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    rc = main([
        "bench", "flickr8k-expert", "thumb", "--metrics", "bleu-1,bleu-4", "rouge-l", "cider-d",
        "--data-root", str(shared_data), "--out", str(out), "--html", str(page), "--bootstrap", "100", "--quiet",
    ])
    assert rc == 0
    table = capsys.readouterr().out
    assert "kendall_tau_c" in table and "pearson_total_no_human" in table
    data = json.loads(out.read_text())
    rec = {(r["benchmark"], r["metric"], r["statistic"]): r for r in data["results"]}
    # CLIPScore paper (Hessel et al. 2021), Flickr8k-Expert tau-c
    for metric, published in (("bleu-1", 32.3), ("bleu-4", 30.8), ("rouge-l", 32.3), ("cider-d", 43.9)):
        r = rec[("flickr8k-expert", metric, "kendall_tau_c")]
        assert r["value"] == pytest.approx(published, abs=0.05)
        assert r["n"] == 16992 and r["ci_low"] < r["value"] < r["ci_high"]
        assert "bench" not in r["metric_signature"] and r["benchmark_signature"].startswith("benchmark:flickr8k-expert")
    assert rec[("thumb", "cider-d", "pearson_total")]["n"] == 2500
    assert rec[("thumb", "cider-d", "pearson_total_no_human")]["n"] == 2000
    assert data["comparisons"] and {"p_value", "delta"} <= set(data["comparisons"][0])
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "<script" not in html


def test_python_api_is_deterministic(shared_data: Path) -> None:
    import capeval.bench as cb

    a = cb.run(["thumb"], ["bleu-1"], data_root=shared_data, bootstrap=50, seed=3)
    b = cb.run(["thumb"], ["bleu-1"], data_root=shared_data, bootstrap=50, seed=3)
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    assert a.get("thumb", "bleu-1", "pearson_P").n == 2500


@pytest.mark.slow
def test_cli_all_local_benchmarks(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    rc = main([
        "bench", "flickr8k-expert", "flickr8k-cf", "pascal-50s", "thumb", "--metrics", "bleu-4", "cider-d",
        "--data-root", str(shared_data), "--out", str(out), "--bootstrap", "20", "--quiet",
    ])
    assert rc == 0
    rec = {(r["benchmark"], r["metric"], r["statistic"]): r for r in json.loads(out.read_text())["results"]}
    assert rec[("flickr8k-cf", "cider-d", "kendall_tau_b")]["n"] == 47830
    for cat in ("HC", "HI", "HM", "MM"):
        assert rec[("pascal-50s", "cider-d", f"accuracy_{cat}")]["n"] == 1000
        assert ("pascal-50s", "cider-d", f"ties_{cat}_fixed") in rec
    assert rec[("pascal-50s", "cider-d", "accuracy_mean")]["n"] == 4000


def test_cli_unknown_benchmark(shared_data: Path, capsys) -> None:
    assert main(["bench", "flickr9k", "--metrics", "bleu-4", "--data-root", str(shared_data)]) == 2
    assert "unknown benchmark 'flickr9k'" in capsys.readouterr().err


def test_cli_missing_data_root(tmp_path: Path, capsys) -> None:
    assert main(["bench", "thumb", "--metrics", "bleu-4", "--data-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "mscoco_THumB-1.0.jsonl" in err and str(tmp_path) in err


def test_cli_no_data_root(monkeypatch, capsys) -> None:
    monkeypatch.delenv("CAPEVAL_DATA", raising=False)
    assert main(["bench", "thumb", "--metrics", "bleu-4"]) == 2
    assert "CAPEVAL_DATA" in capsys.readouterr().err


def test_cli_unknown_metric(shared_data: Path, capsys) -> None:
    assert main(["bench", "thumb", "--metrics", "blue-4", "--data-root", str(shared_data)]) == 2
    assert "unknown metric 'blue-4'" in capsys.readouterr().err


def test_cli_list(capsys) -> None:
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "pascal-50s" in out and "activitynet-foil" in out


def test_cli_stdout_is_the_table_or_json_never_both(shared_data: Path, tmp_path: Path) -> None:
    """`capeval bench ... > t.txt` is the human table; `... --json > r.json` is valid JSON (the
    --out payload). Run as a process so that anything printed to stdout is caught."""
    import subprocess
    import sys

    base = [sys.executable, "-m", "capeval.cli", "bench", "flickr8k-expert", "-m", "bleu-4",
            "--data-root", str(shared_data), "--bootstrap", "20", "--quiet"]
    table = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "kendall_tau_c" in table.stdout and "{" not in table.stdout
    out = tmp_path / "r.json"
    js = subprocess.run(base + ["--json", "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert js.returncode == 0, js.stderr
    payload = json.loads(js.stdout)
    assert payload == json.loads(out.read_text())
    rec = {(r["metric"], r["statistic"]): r for r in payload["results"]}
    assert rec[("bleu-4", "kendall_tau_c")]["value"] == pytest.approx(30.8, abs=0.05)  # CLIPScore paper, Table 1
