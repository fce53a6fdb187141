"""The command line as a user types it: formats, outputs, errors."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from capeval.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_score_prints_json_with_signatures(capsys, tmp_path):
    per_item = tmp_path / "items.json"
    code, out, err = run(
        capsys, "score", "-m", "bleu-4,cider-d,rouge-l", "-c", str(EXAMPLES / "candidates.json"),
        "-r", str(EXAMPLES / "references.json"), "--per-item", str(per_item), "--quiet",
    )
    assert code == 0, err
    payload = json.loads(out)
    assert list(payload["scores"]) == ["bleu-4", "cider-d", "rouge-l"]
    assert payload["signatures"]["cider-d"].startswith("metric:cider-d|")
    items = json.loads(per_item.read_text())
    assert set(items) == {"bleu-4", "cider-d", "rouge-l"}
    assert set(items["bleu-4"]) == {"img1", "img2", "img3", "img4"}
    assert err == ""


def test_jsonl_and_csv_inputs(capsys):
    code, out, err = run(
        capsys, "score", "-m", "bleu-1", "-c", str(EXAMPLES / "candidates.jsonl"),
        "-r", str(EXAMPLES / "references.csv"), "--quiet",
    )
    assert code == 0, err
    assert 0 < json.loads(out)["scores"]["bleu-1"] <= 1


def test_coco_results_layout(capsys, tmp_path):
    c = tmp_path / "res.json"
    r = tmp_path / "ann.json"
    c.write_text(json.dumps([{"image_id": 1, "caption": "a dog runs"}, {"image_id": 2, "caption": "a cat"}]))
    r.write_text(json.dumps({"annotations": [
        {"image_id": 1, "caption": "a dog is running"}, {"image_id": 1, "caption": "the dog runs"},
        {"image_id": 2, "caption": "a cat sleeps"},
    ]}))
    code, out, err = run(capsys, "score", "-m", "cider-d", "-c", str(c), "-r", str(r), "--quiet")
    assert code == 0, err


@pytest.mark.parametrize(
    "content,pattern",
    [
        (b"\xff\xfe not utf8", "not valid UTF-8"),
        (b"{bad json", "invalid JSON"),
        (b'{"img1": 5}', "candidate 'img1': caption must be a string"),
    ],
)
def test_bad_candidate_files(capsys, tmp_path, content, pattern):
    c = tmp_path / "c.json"
    c.write_bytes(content)
    out_file = tmp_path / "out.json"
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", str(c), "-r", str(EXAMPLES / "references.json"),
                         "--out", str(out_file), "--quiet")
    assert code == 2
    assert pattern in err and "Traceback" not in err
    assert not out_file.exists()


def test_missing_file_and_unknown_metric(capsys):
    code, _, err = run(capsys, "score", "-c", "nope.json", "-r", "nope2.json", "-m", "bleu-1")
    assert code == 2 and "file not found: nope.json" in err
    code, _, err = run(capsys, "score", "-c", str(EXAMPLES / "candidates.json"), "-m", "bleu-9")
    assert code == 2 and "unknown metric 'bleu-9'" in err


def test_mismatched_ids_named(capsys, tmp_path):
    c = tmp_path / "c.json"
    c.write_text(json.dumps({"img1": "a dog", "extra": "a cat"}))
    code, _, err = run(capsys, "score", "-m", "bleu-1", "-c", str(c), "-r", str(EXAMPLES / "references.json"), "-q")
    assert code == 2 and "'extra'" in err and "'img2'" in err


def test_list_and_info(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0 and "cider-d" in out and "coco" in out
    code, out, _ = run(capsys, "list", "--json")
    assert "coco" in json.loads(out)["presets"]
    code, out, _ = run(capsys, "info")
    info = json.loads(out)
    assert code == 0 and "capeval" in info and "cache_dir" in info
    assert "CAPEVAL_CACHE" in info["cache_dir_variable"] and "CAPEVAL_DATA" in info["data_root_variable"]
    if importlib.util.find_spec("numba") is not None:  # the fast extra: whether METEOR's kernel is built
        assert set(info["meteor"]["compiled_kernel"]) == {"path", "built", "build_failed"}
        assert info["meteor"]["compiled_kernel"]["path"].startswith(info["cache_dir"])
    assert len(out.splitlines()) < 80  # a summary; the checkpoint table is behind --checkpoints
    assert set(info["checkpoints"]) >= {"dir", "present", "known"}
    code, out, _ = run(capsys, "info", "--checkpoints")
    table = json.loads(out)
    assert code == 0 and "openai/ViT-B-32" in table["entries"] and len(table["entries"]) == info["checkpoints"]["known"]
    assert info["checkpoints"]["present"] == sorted(n for n, e in table["entries"].items() if e["present"])


def test_info_lists_every_feature_extra():
    """`capeval info` reports each optional-dependency group of pyproject.toml that selects
    features (all of them but the aggregate and the development ones)."""
    import tomllib

    from capeval.cli import info

    groups = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    declared = set(groups["project"]["optional-dependencies"]) - {"all", "docs", "test"}
    assert set(info.EXTRAS) == declared


def test_info_extras_follow_their_requirements(monkeypatch):
    """An extra is installed when every distribution it names is, through nested extras
    (video = clip + av): without av, video is missing and clip is not."""
    from capeval.cli import info

    real = info._version
    monkeypatch.setattr(info, "_version", lambda d: None if d == "av" else real(d))
    extras = info.extras_installed()
    if extras is None:
        pytest.skip("capeval's metadata is not installed")
    assert extras["video"] is False
    assert extras["clip"] is (all(real(d) for d in ("torch", "pillow", "safetensors", "regex", "ftfy")))


def test_progress_bar_goes_to_stderr(capsys, monkeypatch):
    from capeval import api

    api_score = api.score

    def forced(*a, **k):
        k["progress"] = True
        return api_score(*a, **k)

    monkeypatch.setattr(api, "score", forced)
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", str(EXAMPLES / "candidates.json"),
                         "-r", str(EXAMPLES / "references.json"))
    assert code == 0
    assert "4/4" in err and "4/4" not in out
    json.loads(out)
