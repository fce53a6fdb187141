"""``capeval caparena-auto``: the CLI on a fixture in the released layout (``caparena_auto_600.json``,
``all_images/``, the model's result file) through a scripted 127.0.0.1 judge: the scores against an
independent transcription of ``caparena_auto_scores.py``, its leaderboard line, the judged battles
written for the official script, the cache on a rerun, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_caparena_auto import TEST, independent_score, make_fixture, server  # noqa: E402

from capeval.cli.main import main  # noqa: E402


def _official_line(model: str, scores: dict, avg: float, length: float) -> str:
    """The row caparena_auto_scores.py prints (its f-string, transcribed)."""
    return (f"{model:<30} | {avg:<8.2f} | {scores['GPT-4o-0806']:<10.2f} | {scores['CogVLM2-llama3-chat-19B']:<10.2f} | "
            f"{scores['MiniCPM-V2.6-8B']:<10.2f} | {length:<10.2f} |")


def test_cli_end_to_end_through_a_scripted_judge(tmp_path: Path, capsys) -> None:
    auto, results, imgs = make_fixture(tmp_path)
    out = tmp_path / "caparena_auto" / f"{TEST}.json"
    out.parent.mkdir()
    srv = server()
    try:
        args = ["caparena-auto", "--name", TEST, "--captions", str(results), "--data", str(tmp_path),
                "--server", srv.base_url, "--judge", "judge", "--cache", str(tmp_path / "cache"), "-q"]
        assert main(args + ["--out", str(out)]) == 0
        captured = capsys.readouterr()
        battles = json.loads(out.read_text())
        assert len(battles) == 18 and all({"source1", "source2", "caption1", "caption2", "ref_model"} <= set(b)
                                          for b in battles)
        ref = independent_score(battles, TEST)
        lengths = [len((b["caption1"] if b["source1"] == TEST else b["caption2"]).split(" ")) for b in battles]
        lines = captured.out.splitlines()
        assert lines[0].startswith("Model ") and "Score_gpt" in lines[0] and lines[1].startswith("-----")
        assert lines[2] == _official_line(TEST, ref["scores"], ref["score_avg"], sum(lengths) / len(lengths))
        assert "requests sent" in captured.err and "never parsed after 5 tries" in captured.err
        sent = len(srv.bodies)
        assert sent > 18
        # rerun: everything from the cache, the same numbers, as JSON
        assert main(args + ["--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert len(srv.bodies) == sent and summary["generated"] == 0 and summary["cached"] > 0
        assert summary["scores"] == pytest.approx(ref["scores"], abs=0) and summary["score_avg"] == pytest.approx(ref["score_avg"])
        assert summary["battles"] == 18 and summary["unjudged"] and summary["model"] == TEST
    finally:
        srv.close()


@pytest.mark.parametrize("extra, message", [
    ([], "needs --data DIR"),
    (["--data", "{tmp}/none"], "--data {tmp}/none: not a folder"),
    (["--auto600", "{tmp}/caparena_auto_600.json", "--images", "{tmp}/nothing"], "--images {tmp}/nothing: no such folder"),
    (["--data", "{tmp}", "--tries", "0"], "tries=0 out of range"),
    (["--data", "{tmp}", "--top-p", "0"], "top_p=0.0 out of range"),
    (["--data", "{tmp}", "--no-cache", "--cache", "{tmp}/c"], "--cache and --no-cache"),
    (["--data", "{tmp}", "--out", "{tmp}/results.json"], "is also an input file"),
])
def test_bad_input_is_one_line(tmp_path: Path, capsys, extra: list[str], message: str) -> None:
    """Refused before any request (the server URL points nowhere)."""
    _, results, _ = make_fixture(tmp_path)
    args = ["caparena-auto", "--name", TEST, "--captions", str(results), "--server", "http://127.0.0.1:9/v1",
            "-q"] + [a.format(tmp=tmp_path) for a in extra]
    if "--no-cache" not in extra:
        args.append("--no-cache")
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("capeval: error:") and message.format(tmp=tmp_path) in err[0], err


def test_no_server_names_the_flag(tmp_path: Path, capsys, monkeypatch) -> None:
    """Nothing listening: one line pointing at --server (not the Python option name)."""
    monkeypatch.delenv("CAPEVAL_CAPARENA_AUTO_BASE_URL", raising=False)
    _, results, _ = make_fixture(tmp_path)
    assert main(["caparena-auto", "--name", TEST, "--captions", str(results), "--data", str(tmp_path),
                 "--server", "http://127.0.0.1:9/v1", "--judge", "judge", "--no-cache", "-q", "--max-retries", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot connect to http://127.0.0.1:9/v1" in err[0] and "--server URL" in err[0], err
