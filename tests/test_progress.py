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


def test_bench_bar_on_a_terminal_only(shared_data, stderr, capsys):
    argv = ["bench", "thumb", "--metrics", "bleu-1", "--data-root", str(shared_data), "--bootstrap", "0"]
    fake = stderr(True)
    assert main(argv) == 0
    assert "thumb" in fake.getvalue() and "2/2" in fake.getvalue() and "\r" in fake.getvalue()
    for tty, extra in ((True, ["--quiet"]), (False, [])):
        fake = stderr(tty)
        assert main(argv + extra) == 0
        assert "\r" not in fake.getvalue() and "2/2" not in fake.getvalue()
