"""Progress bars: drawn on a terminal for every long step, silenced by --quiet and off a terminal."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from capeval.cli.main import main
from capeval.progress import make_progress, progress_setting, resolve

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ARGS = ["score", "-m", "bleu-1,cider-d", "-c", str(EXAMPLES / "candidates.json"), "-r", str(EXAMPLES / "references.json")]


class FakeStderr(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def stderr(monkeypatch):
    def install(tty: bool) -> FakeStderr:
        fake = FakeStderr(tty)
        monkeypatch.setattr(sys, "stderr", fake)
        return fake

    return install


def test_cli_draws_bars_on_a_terminal(stderr, capsys):
    fake = stderr(True)
    assert main(ARGS) == 0
    text = fake.getvalue()
    # tokenisation runs inside the chunked text pipeline: one bar for the reference statistics
    # (CIDEr-D's document frequencies), one for the scoring of the 4 items
    assert "references" in text
    assert "bleu-1" in text and "cider-d" in text and "4/4" in text
    assert "\r" in text
    json.loads(capsys.readouterr().out)  # stdout stays clean JSON


def test_cli_quiet_draws_nothing(stderr, capsys):
    fake = stderr(True)
    assert main([*ARGS, "--quiet"]) == 0
    assert fake.getvalue() == ""


def test_cli_off_a_terminal_draws_no_bar(stderr, capsys):
    fake = stderr(False)
    assert main(ARGS) == 0
    text = fake.getvalue()
    assert "\r" not in text and "tokenize" not in text and "4/4" not in text
    assert "capeval: candidates: JSON object {id: caption} (4 items, 4 captions)" in text  # not a bar: stays


def test_api_progress_none_follows_the_terminal(stderr):
    import capeval

    cands = json.loads((EXAMPLES / "candidates.json").read_text())
    refs = json.loads((EXAMPLES / "references.json").read_text())
    fake = stderr(True)
    capeval.score(cands, refs, metrics="rouge-l", progress=None)
    assert "rouge-l" in fake.getvalue() and "4/4" in fake.getvalue()
    fake = stderr(True)
    capeval.score(cands, refs, metrics="rouge-l")  # the library default stays silent
    assert fake.getvalue() == ""
    fake = stderr(False)
    capeval.score(cands, refs, metrics="rouge-l", progress=True)  # forced
    assert "4/4" in fake.getvalue()


def test_ambient_setting_reaches_nested_steps(stderr):
    stderr(True)
    assert resolve(None) is True
    with progress_setting(False):
        assert resolve(None) is False and not make_progress(10, "x", None).enabled
        assert make_progress(10, "x", True).enabled  # an explicit choice wins
    with progress_setting(None):
        assert resolve(None) is True
    stderr(False)
    assert resolve(None) is False
    with progress_setting(True):
        assert resolve(None) is True


def test_broken_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", object())
    assert resolve(None) is False


def test_clip_embedding_bars(stderr, tmp_path):
    pytest.importorskip("torch")
    Image = pytest.importorskip("PIL.Image")
    import capeval
    from capeval.models.clip.backbone import random_backbone

    for k in range(3):
        Image.new("RGB", (40, 40), (80 * k, 10, 10)).save(tmp_path / f"i{k}.png")
    cands = {f"i{k}": f"a dog number {k}" for k in range(3)}
    bb = random_backbone("tiny")
    fake = stderr(True)
    capeval.score(cands, metrics="clip-s", options={"clip-s": {"backbone": bb}}, images=tmp_path, progress=None)
    text = fake.getvalue()
    assert "images" in text and "3/3" in text and "texts" in text
    fake = stderr(True)
    capeval.score(cands, metrics="clip-s", options={"clip-s": {"backbone": bb}}, images=tmp_path, progress=False)
    assert fake.getvalue() == ""


def test_bench_bar_on_a_terminal_lines_elsewhere(shared_data, stderr, capsys):
    argv = ["bench", "thumb", "--metrics", "bleu-1", "--data-root", str(shared_data), "--bootstrap", "0"]
    fake = stderr(True)
    assert main(argv) == 0
    # the full label (benchmark and metric), never cut to a column width
    assert "bench thumb: statistics of bleu-1" in fake.getvalue() and "2/2" in fake.getvalue() and "\r" in fake.getvalue()
    fake = stderr(False)
    assert main(argv) == 0
    lines = fake.getvalue().splitlines()
    assert "\r" not in fake.getvalue()
    # a run shorter than the line interval: one line, when the outermost step ends
    assert [ln for ln in lines if ln.startswith("[capeval] bench")] == [lines[-1]]
    assert lines[-1].startswith("[capeval] bench thumb: statistics of bleu-1: 2/2 (100%), ") and lines[-1].endswith(" s elapsed")
    for tty in (True, False):
        fake = stderr(tty)
        assert main(argv + ["--quiet"]) == 0
        assert fake.getvalue() == ""


def test_lines_off_a_terminal_at_most_one_per_interval(stderr, monkeypatch):
    import capeval.progress as progress

    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    monkeypatch.setitem(progress._LINES, "last", float("-inf"))
    fake = stderr(False)
    with make_progress(60, "outer", True) as outer:
        for k in range(60):
            clock[0] += 0.5  # 30 s in all
            with make_progress(3, f"inner {k}", True) as inner:
                inner.update(3)  # inner steps end quickly: no line of their own but within the budget
            outer.update(1)
    lines = fake.getvalue().splitlines()
    assert 5 <= len(lines) <= 30 / progress.LINE_INTERVAL + 2
    assert all(ln.startswith("[capeval] ") for ln in lines)
    assert lines[-1] == "[capeval] outer: 60/60 (100%), 30 s elapsed"
    assert "\r" not in fake.getvalue()


def test_download_progress_counts_bytes(stderr):
    fake = stderr(True)
    with make_progress(3_000_000, "Flickr8k_text.zip", True, unit="bytes") as bar:
        bar.update(3_000_000)
    assert "Flickr8k_text.zip" in fake.getvalue() and "3.0 MB/3.0 MB" in fake.getvalue()
