"""capeval's lmms-eval task files (issue 48 item 3): lmms-eval 0.7.3's own TaskManager indexes the
folder ``capeval harness lmms-eval --print-path`` prints and resolves every ``!function``; the
coco2017 task's aggregations equal lmms-eval's own coco_cap aggregations (pycocoevalcap, Java) on
the same documents. The loader runs in a child process (tests/data/harness/lmms_load_tasks.py,
heavy imports stubbed by stub_imports.py there)."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from capeval.cli.main import main
from capeval.harness import lmms_eval_tasks
from capeval.io.harness_lmms import TASKS, read_samples

DATA = Path(__file__).parent / "data" / "harness"
ROOT = Path(__file__).resolve().parents[1]
TASK_NAMES = {"capeval_coco2017_cap_val", "capeval_coco2017_cap_val_clip", "capeval_coco2014_cap_val",
              "capeval_nocaps_val", "capeval_flickr30k_test", "capeval_textcaps_val"}

DOCS = [  # lmms-lab-encoder/COCO-Caption2017's fields (question_id: the image file; answer: its captions)
    {"question_id": "000000397133.jpg", "id": 1, "answer": ["a man riding a wave on top of a surfboard",
                                                           "a surfer riding a large wave in the ocean",
                                                           "a person on a surfboard rides a wave"]},
    {"question_id": "000000000139.jpg", "id": 2, "answer": ["a living room with a couch and a television",
                                                           "a room with chairs, a table and a tv"]},
    {"question_id": "000000000285.jpg", "id": 3, "answer": ["a big brown bear sitting in the grass",
                                                           "a large bear sits on a green field"]},
]
PREDS = ["A surfer rides a big wave.", "A living room with a TV and chairs.", "a brown bear in the grass"]


def test_print_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["harness", "lmms-eval", "--print-path"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert folder == lmms_eval_tasks() and folder.is_dir()
    assert {p.stem for p in folder.glob("*.yaml")} == TASK_NAMES
    assert TASK_NAMES <= set(TASKS)  # their samples files read back with --from lmms-eval


def test_task_files_are_package_data() -> None:
    """pyproject's package-data globs take every task file into the wheel."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["capeval"]
    package = ROOT / "src" / "capeval"
    for path in lmms_eval_tasks().glob("*.yaml"):
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), relative


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if importlib.util.find_spec("lmms_eval") is None:
        pytest.skip("lmms-eval 0.7.3 is not installed (pip install --no-deps lmms-eval==0.7.3)")
    out = tmp_path_factory.mktemp("lmms_tasks")
    env = {k: v for k, v in os.environ.items() if k != "CAPEVAL_AS_PYCOCOEVALCAP"}  # lmms-eval's side: the real one
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    spec = {"folder": str(lmms_eval_tasks()), "docs": DOCS, "preds": PREDS, "out": str(out)}
    run = subprocess.run([sys.executable, str(DATA / "lmms_load_tasks.py"), json.dumps(spec)], capture_output=True,
                         text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_lmms_eval_task_manager_indexes_and_resolves(loaded: dict) -> None:
    assert {n for n, kind in loaded["index"].items() if kind == "task"} == TASK_NAMES
    assert loaded["index"]["capeval_caption"] == "tag"
    coco = loaded["tasks"]["capeval_coco2017_cap_val"]
    assert coco["process_results"] == "capeval.harness.lmms_tasks.coco_process_result"
    assert coco["doc_to_visual"] == "lmms_eval.tasks.coco_cap.utils.coco_doc_to_visual"
    assert coco["doc_to_text"] == "lmms_eval.tasks.coco_cap.utils.coco_doc_to_text"
    assert coco["dataset_path"] == "lmms-lab-encoder/COCO-Caption2017"
    assert coco["metrics"]["capeval_SPICE"] == "capeval.harness.lmms_tasks.spice"
    assert len(coco["metrics"]) == 8
    clip = loaded["tasks"]["capeval_coco2017_cap_val_clip"]["metrics"]
    assert clip["capeval_CLIP_S"] == "capeval.harness.lmms_tasks.clip_s"
    assert clip["capeval_RefCLIP_S"] == "capeval.harness.lmms_tasks.ref_clip_s"
    for name, task in loaded["tasks"].items():
        assert task["process_results"].startswith("capeval.harness.lmms_tasks."), name
        assert task["doc_to_visual"].startswith("lmms_eval.tasks."), name
        assert all(fn.startswith("capeval.harness.lmms_tasks.") for fn in task["metrics"].values()), name


def test_aggregations_equal_lmms_evals_own(loaded: dict) -> None:
    """The same documents through lmms-eval's coco_cap (pycocoevalcap with Java) and capeval's task."""
    if "theirs" not in loaded:
        pytest.skip("no java: lmms-eval's own coco_cap aggregation needs pycocoevalcap's Java tokenizer")
    assert loaded["ours"] == loaded["theirs"]


def test_items_read_back_with_from(loaded: dict, tmp_path: Path) -> None:
    """A samples file of capeval's task (its items as lmms-eval logs them) reads back as the documents."""
    path = tmp_path / "20261206_100000_samples_capeval_coco2017_cap_val.jsonl"
    path.write_text("".join(json.dumps({"doc_id": i, "capeval_CIDEr": item}) + "\n"
                            for i, item in enumerate(loaded["items"])))
    task, candidates, references = read_samples(path)
    assert task == "capeval_coco2017_cap_val"
    assert candidates == {str(int(d["question_id"].split(".")[0])): p for d, p in zip(DOCS, PREDS)}
    assert references == {str(int(d["question_id"].split(".")[0])): d["answer"] for d in DOCS}



@pytest.mark.slow  # torch and a CLIP model: seconds, not milliseconds
def test_clip_task_scores_items_as_capeval_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The _clip task's per-document CLIP-S/RefCLIP-S and their mean equal capeval's own scoring of
    the same images and captions in one batch (a tiny random CLIP: no weights needed)."""
    pytest.importorskip("torch")
    from PIL import Image

    from capeval.harness import lmms_tasks
    from capeval.metrics.clip_score import ClipScore
    from capeval.models.clip.backbone import random_backbone

    scorer = ClipScore(("clip-s", "ref-clip-s"), backbone=random_backbone("tiny", seed=7))
    monkeypatch.setitem(lmms_tasks._clip, "scorer", scorer)
    docs = [dict(d, image=Image.new("RGB", (40, 30), (60 * i, 200 - 50 * i, 90))) for i, d in enumerate(DOCS)]
    items = [lmms_tasks.coco_process_result_clip(d, [p]) for d, p in zip(docs, PREDS)]
    ids = [str(int(d["question_id"].split(".")[0])) for d in DOCS]
    batch = scorer.score(dict(zip(ids, PREDS)), {i: d["answer"] for i, d in zip(ids, DOCS)},
                         images={i: d["image"] for i, d in zip(ids, docs)})
    for name, metric, aggregate in (("CLIP_S", "clip-s", lmms_tasks.clip_s),
                                    ("RefCLIP_S", "ref-clip-s", lmms_tasks.ref_clip_s)):
        per_item = [item[f"capeval_{name}"] for item in items]
        assert per_item == pytest.approx([batch[metric].items[i] for i in ids], abs=1e-6)
        assert aggregate(per_item) == pytest.approx(batch[metric].system, abs=1e-6)
    assert items[0]["capeval_CIDEr"] == {"answer": DOCS[0]["answer"], "pred": PREDS[0], "image_id": 397133}
