"""CHAIR on the official generated-sentence files: the CHAIR paper's ``setup.sh`` downloads the
captions of its models in ruotianluo/self-critical.pytorch's evaluation layout (``{"overall": ...,
"imgToEval": {id: {"image_id", "caption", ...}}}``, what ``utils/chair.py`` reads);
``capeval score -c FILE`` reads that layout directly (a fixture in it, values worked out by hand)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("ijson")

sys.path.insert(0, str(Path(__file__).parent))
from test_foil_chair import write_fixture  # noqa: E402

from capeval.cli.main import main  # noqa: E402
from capeval.io.captions import read_caption_file  # noqa: E402


def test_score_reads_the_generated_sentences_layout(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    coco = write_fixture(tmp_path)
    generated = {"overall": {"CIDEr": 0.9},
                 "imgToEval": {"1": {"image_id": 1, "caption": "a brown cat lying on a couch", "CIDEr": 0.1},
                               "2": {"image_id": 2, "caption": "a man riding a horse", "CIDEr": 0.2}}}
    path = tmp_path / "fc_beam5_test.json"
    path.write_text(json.dumps(generated))
    read = read_caption_file(path, "candidates")
    assert read.data == {"1": "a brown cat lying on a couch", "2": "a man riding a horse"}
    assert "imgToEval" in read.format
    assert main(["score", "-m", "chair", "-c", str(path), "-O", f"chair.annotations={coco}"]) == 0
    scores = json.loads(capsys.readouterr().out)["scores"]
    # image 1 has no cat (1 of its 2 mentions hallucinated); image 2 has a person and a horse
    assert scores == {"chair-s": pytest.approx(0.5), "chair-i": pytest.approx(1 / 4)}
