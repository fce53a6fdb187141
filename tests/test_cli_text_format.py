"""``capeval score --format text`` (issue 47 item 4): one aligned line per metric; JSON off a
terminal by default, text on one; and ``capeval list`` fits 100 columns."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from capeval.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ARGS = ["score", "-m", "bleu-4,rouge-l,cider-d", "-c", str(EXAMPLES / "candidates.json"),
        "-r", str(EXAMPLES / "references.json"), "-q"]


def _json_scores() -> dict:
    out = subprocess.run([sys.executable, "-m", "capeval.cli", *ARGS], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "src"))).stdout
    return json.loads(out)


def test_text_lines_are_aligned_and_carry_the_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--format", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    payload = _json_scores()
    assert lines[0].split()[:3] == ["metric", "score", "n"]
    assert [line.split()[0] for line in lines[1:]] == ["bleu-4", "rouge-l", "cider-d"]
    for line, result in zip(lines[1:], payload["results"]):
        name, score, n, signature = line.split(maxsplit=3)
        assert float(score) == pytest.approx(result["system"], abs=5e-5) and score == f"{result['system']:.4f}"
        assert int(n) == result["n"]
        from capeval._version import __version__

        kept = [f for f in result["signature"].split("|") if f not in (f"metric:{name}", f"version:{__version__}")]
        assert signature == "|".join(kept)
    score_column = {line.index(line.split()[1]) + len(line.split()[1]) for line in lines}  # right-aligned
    assert len(score_column) == 1


def _on_a_terminal(*extra: str) -> str:
    """stdout a pseudo-terminal, as a user's shell gives it."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "capeval.cli", *ARGS, *extra], stdout=follower,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_terminal_default_is_text_and_json_on_request() -> None:
    assert _on_a_terminal().splitlines()[0].split()[:2] == ["metric", "score"]
    assert json.loads(_on_a_terminal("--format", "json"))["scores"]


def test_a_terminal_line_never_wraps() -> None:
    from capeval.cli.score import text_table

    payload = {"results": [{"metric": "meteor", "system": 0.28, "n": 4, "signature": "metric:meteor|" + "x" * 300}]}
    lines = text_table(payload, width=80).splitlines()
    assert max(len(line) for line in lines) <= 80 and lines[1].endswith("...")
    assert text_table(payload).splitlines()[1].endswith("x" * 300)  # off a terminal: whole


def test_pipe_default_stays_json() -> None:
    assert set(_json_scores()["scores"]) == {"bleu-4", "rouge-l", "cider-d"}


def test_out_file_stays_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main([*ARGS, "-f", "text", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["scores"]["bleu-4"] > 0


def test_format_with_compare_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([*ARGS, "-f", "text", "--compare", str(EXAMPLES / "candidates.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "--format" in err and len(err.strip().splitlines()) == 1


def test_list_fits_100_columns_and_says_the_better_side_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "is better" not in out
    from capeval import registry

    for name in registry.metrics():
        assert f"  {name} " in out
