"""``capeval score --from lmms-eval|vlmevalkit FILE`` (issue 48 item 2): files written by the
harnesses' own code, read back as the candidates, references and ids the harness scored.

lmms-eval 0.7.3 (installed --no-deps) writes the samples files in a child process
(tests/data/harness/lmms_write_samples.py: its ``evaluator._process_document_results`` over each
task's own ``process_results``, then ``EvaluationTracker.save_results_samples``). VLMEvalKit's
files come from its ``vlmeval/smp/file.py`` ``dump`` taken from the mirror; recorded copies of
both (tests/data/harness/, provenance in README.md there) are checked when either is missing.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from capeval.cli.main import main
from capeval.errors import CapevalError
from capeval.io.harness import read_harness
from capeval.io.harness_lmms import TASKS, read_samples
from capeval.io.harness_vlmeval import VLMEVALKIT_COMMIT, read_predictions

DATA = Path(__file__).parent / "data" / "harness"
MIRROR = Path("/work/.mirror/open-compass+VLMEvalKit/repo")
HAVE_LMMS = importlib.util.find_spec("lmms_eval") is not None

REFS = ["a dog runs across the grass", "a brown dog running on a lawn", "the dog is playing outside"]

# task -> (lmms-eval module, process_results, doc_to_target, documents as its dataset has them, model outputs)
DOCS: dict[str, tuple[str, str, str, list[dict], list[str]]] = {
    "coco2017_cap_val": ("lmms_eval.tasks.coco_cap.utils", "coco_process_result", "answer", [
        {"question_id": "000000397133.jpg", "id": 7, "answer": REFS, "image": {"bytes": "x"}},
        {"question_id": "000000000139.jpg", "id": 8, "answer": ["a kitchen with a stove", "an oven in a kitchen"]},
    ], ["a dog is running on the grass", "a kitchen with an oven"]),
    "coco2014_cap_val": ("lmms_eval.tasks.coco_cap.utils", "coco_process_result", "answer", [
        {"question_id": "COCO_val2014_000000391895.jpg", "id": 1, "answer": REFS},
    ], ["a man riding a bike"]),
    "coco2017_cap_test": ("lmms_eval.tasks.coco_cap.utils", "coco_test_process_result", "question_id", [
        {"question_id": "000000000001.jpg"},
    ], ["a test image"]),
    "nocaps_val": ("lmms_eval.tasks.nocaps.utils", "nocaps_process_result", "annotations_captions", [
        {"image_id": 0, "annotations_captions": REFS}, {"image_id": 12, "annotations_captions": ["a red car"]},
    ], ["a dog", "a car"]),
    "flickr30k_test": ("lmms_eval.tasks.flickr30k.utils", "flickr_process_result", "caption", [
        {"img_id": "1000092795", "caption": REFS},
    ], ["two dogs play"]),
    "textcaps_val": ("lmms_eval.tasks.textcaps.utils", "textcaps_process_result", "caption_str", [
        {"image_id": "011e7e629fb9ae7b", "caption_str": ["a sign that says stop", "a red stop sign"]},
    ], ["a stop sign"]),
    "vatex_test": ("lmms_eval.tasks.vatex.utils", "vatex_process_result", "enCap", [
        {"videoID": "Ptf_2VRj-V0_000122_000132", "enCap": REFS},
    ], ["a dog runs"]),
    "youcook2_val": ("lmms_eval.tasks.youcook2.utils", "youcook2_process_results", "sentence", [
        {"youtube_id": "GLd3aX16zBg", "segment": [90, 102], "sentence": "spread margarine on two slices of bread"},
        {"youtube_id": "GLd3aX16zBg", "segment": [114, 127], "sentence": "place a slice of cheese on the bread"},
    ], ["spread butter on the bread", "put cheese on the café bread"]),
    "detailcaps": ("lmms_eval.tasks.detailcaps.utils", "detailcaps_process_result", "fn:detailcaps_doc_to_target", [
        {"image": "sa_1525.jpg", "binary": "jpeg", "GT_Caption_GPT4O": "A long caption.",
         "GT_Caption_GPT4V": "Another caption.", "GT_Caption_Gemini15Pro": "A third one."},
    ], ["A detailed description of a street."]),
    "coco_cap_chair": ("lmms_eval.tasks.coco_cap_chair.utils", "coco_cap_chair_process_result", "gt_object", [
        {"question_id": "391895", "gt_object": ["person", "bicycle"]},
    ], ["A man rides a bicycle next to a dog."]),
    "amber_g": ("lmms_eval.tasks.amber_g.utils", "amber_g_process_result", "truth", [
        {"question_id": 1, "task_type": "generative", "truth": ["beach", "sky"], "hallu": ["boat"]},
        {"question_id": 2, "task_type": "generative", "truth": ["tree"], "hallu": ["dog"]},
    ], ["A beach under a blue sky.", "A tree in a field."]),
}


def expected(task: str) -> tuple[dict[str, str], dict[str, list[str]] | None]:
    """What each task's own aggregation scores, written from the documents (not from the log)."""
    _, _, _, docs, preds = DOCS[task]
    if task.startswith("coco20"):
        ids = [str(int(d["question_id"].split("_")[-1].split(".")[0])) for d in docs]
    elif task in ("nocaps_val", "textcaps_val"):
        ids = [str(d["image_id"]) for d in docs]
    elif task == "flickr30k_test":
        ids = [d["img_id"] for d in docs]
    elif task == "vatex_test":
        ids = [d["videoID"] for d in docs]
    elif task == "youcook2_val":
        ids = [f"{d['youtube_id']}_{d['segment'][0]}_{d['segment'][1]}" for d in docs]
        preds = [p.replace("é", " ") for p in preds]  # its remove_nonascii: the text its metrics scored
    elif task == "detailcaps":
        ids = [d["image"] for d in docs]
    elif task == "coco_cap_chair":
        ids = [d["question_id"] for d in docs]
    else:  # amber_g: the AMBER id, the dataset's row + 1
        ids = [str(d["question_id"]) for d in docs]
    refs_of = {"coco2017_cap_test": None, "coco_cap_chair": None, "amber_g": None, "youcook2_val": "sentence",
               "detailcaps": "GT"}
    field = refs_of.get(task, DOCS[task][2])
    if field is None:
        return dict(zip(ids, preds)), None
    if field == "GT":
        refs = [[d["GT_Caption_GPT4O"], d["GT_Caption_GPT4V"], d["GT_Caption_Gemini15Pro"]] for d in docs]
    else:
        refs = [d[field] if isinstance(d[field], list) else [d[field]] for d in docs]
    return dict(zip(ids, preds)), dict(zip(ids, refs))


@pytest.fixture(scope="module")
def lmms_samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{task: samples file}`` written by lmms-eval 0.7.3's own code (one child process)."""
    if not HAVE_LMMS:
        pytest.skip("lmms-eval 0.7.3 is not installed (pip install --no-deps lmms-eval==0.7.3)")
    root = tmp_path_factory.mktemp("lmms")
    amber = root / "amber" / "metadata"
    amber.mkdir(parents=True)
    for name, text in (("relation.json", "{}"), ("safe_words.txt", ""), ("annotations.json", "[]"),
                       ("metrics.txt", "\n".join(f"{k} = 0" for k in (
                           "chair_score", "chair_num", "safe_cover_score", "safe_cover_num", "hallu_cover_score",
                           "hallu_cover_num", "non_hallu_score", "non_hallu_num", "qa_correct_num")))):
        (amber / name).write_text(text)
    spec = {"out": str(root / "out"), "amber_dir": str(root / "amber"),
            "tasks": {t: {"module": m, "process": p, "target": tg, "docs": d, "preds": pr}
                      for t, (m, p, tg, d, pr) in DOCS.items()}}
    run = subprocess.run([sys.executable, str(DATA / "lmms_write_samples.py"), json.dumps(spec)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    files = {p.name.split("_samples_")[1][: -len(".jsonl")]: p for p in (root / "out" / "model").glob("*.jsonl")}
    assert set(files) == set(DOCS)
    return files


@pytest.mark.parametrize("task", sorted(DOCS))
def test_lmms_eval_samples_written_by_lmms_eval(lmms_samples: dict[str, Path], task: str) -> None:
    name, candidates, references = read_samples(lmms_samples[task])
    assert name == task
    want_candidates, want_references = expected(task)
    assert candidates == want_candidates
    assert references == want_references


def _score(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["score", "-q", "-f", "json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_from_lmms_eval_equals_json_inputs(lmms_samples: dict[str, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    candidates, references = expected("coco2017_cap_val")
    (tmp_path / "c.json").write_text(json.dumps(candidates))
    (tmp_path / "r.json").write_text(json.dumps(references))
    per = [tmp_path / "a.json", tmp_path / "b.json"]
    got = _score(["-m", "bleu-4,cider-d", "--from", "lmms-eval", str(lmms_samples["coco2017_cap_val"]),
                  "--per-item", str(per[0])], capsys)
    want = _score(["-m", "bleu-4,cider-d", "-c", str(tmp_path / "c.json"), "-r", str(tmp_path / "r.json"),
                   "--per-item", str(per[1])], capsys)
    assert [(r["metric"], r["system"], r["signature"]) for r in got["results"]] == \
        [(r["metric"], r["system"], r["signature"]) for r in want["results"]]
    assert json.loads(per[0].read_text()) == json.loads(per[1].read_text())
    assert got["inputs"]["candidates"]["format"] == "lmms-eval 0.7.3 samples of coco2017_cap_val"


def test_recorded_lmms_eval_file() -> None:
    """The recorded file (written by lmms-eval 0.7.3's code, tests/data/harness/README.md) reads as documented."""
    _, candidates, references = read_samples(DATA / "20261206_100000_samples_coco2017_cap_val.jsonl")
    assert (candidates, references) == expected("coco2017_cap_val")
    _, candidates, references = read_samples(DATA / "20261206_100000_samples_youcook2_val.jsonl")
    assert (candidates, references) == expected("youcook2_val")


def _fail(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["score", "-q", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("capeval: error: "), err
    return err


def test_bad_lmms_eval_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = (DATA / "20261206_100000_samples_coco2017_cap_val.jsonl").read_text().splitlines()
    path = tmp_path / "x_samples_coco2017_cap_val.jsonl"
    cases = {
        "line 2: invalid JSON": [good[0], "{not json"],
        "line 1: expected a JSON object": ["[1, 2]"],
        "line 2: no 'coco_CIDEr' object": [good[0], json.dumps({"doc_id": 1, "nocaps_CIDEr": {}})],
        "appears twice (samples 1 and 2)": [good[0], good[0]],
        "coco_CIDEr.answer must be the references": [json.dumps({"coco_CIDEr": {"pred": "x", "image_id": 1,
                                                                                  "answer": [3]}})],
        "id must be a string or a number": [json.dumps({"coco_CIDEr": {"pred": "x", "image_id": [1, "a"],
                                                                       "answer": ["y"]}})],
        "pred must be the caption": [json.dumps({"coco_CIDEr": {"pred": None, "image_id": 1, "answer": ["y"]}})],
        "line 1: nested more than 100 levels deep": ["[" * 100000 + "]" * 100000],
    }
    for message, lines in cases.items():
        path.write_text("\n".join(lines) + "\n")
        err = _fail(["-m", "bleu-4", "--from", "lmms-eval", str(path)], capsys)
        assert message in err, (message, err)
    err = _fail(["-m", "bleu-4", "--from", "lmms-eval", str(tmp_path / "run.jsonl")], capsys)
    assert "give the task as --from lmms-eval:TASK" in err
    err = _fail(["-m", "bleu-4", "--from", "lmms-eval:mmmu_val", str(path)], capsys)
    assert "'mmmu_val' is not a caption task" in err and "coco2017_cap_val" in err and "amber_g" in err
    err = _fail(["-m", "bleu-4", "--from", "vlmevalkit:x", str(path)], capsys)
    assert "unknown harness" in err
    err = _fail(["-m", "bleu-4", "--from", "lmms-eval", str(path), "-c", str(path)], capsys)
    assert "-c cannot be given with it" in err
    err = _fail(["-m", "bleu-4", "--from", "lmms-eval", str(path), "--items", str(path)], capsys)
    assert "--items cannot be given with it" in err
    err = _fail(["-m", "bleu-4", "--from", "lmms-eval"], capsys)
    assert "name the harness's file after it" in err
    err = _fail(["-m", "bleu-4", str(path)], capsys)
    assert "a file is scored with --from HARNESS" in err
    err = _fail(["-m", "bleu-4", "--from", "lmms-eval", str(path), "--html", str(path)], capsys)
    assert "--html " in err and "is the --from file" in err
    err = _fail(["-m", "bleu-4", "--from", "lmms-eval", str(path), "-o", str(path)], capsys)
    assert "is the --from file" in err


def test_reference_free_tasks_refuse_reference_metrics(lmms_samples: dict[str, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    err = _fail(["-m", "cider-d", "--from", "lmms-eval", str(lmms_samples["coco_cap_chair"])], capsys)
    assert "reference" in err


def test_long_line_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPEVAL_MAX_LINE_BYTES", "1024")  # --max-line-bytes sets it; restored (unset) after the test
    path = tmp_path / "a_samples_nocaps_val.jsonl"
    path.write_text('{"x": "' + "y" * 5000 + '"}\n')
    err = _fail(["-m", "bleu-4", "--max-line-bytes", "1024", "--from", "lmms-eval", str(path)], capsys)
    assert "line 1: longer than 1,024 bytes" in err


# -- VLMEvalKit ----------------------------------------------------------------------------------

VLM_ROWS = [  # COCO_VAL's columns (index, question, answer: str of a list) plus the model's prediction
    {"index": 0, "question": "Please describe this image in general.", "answer": str(REFS),
     "prediction": "a dog is running on the grass"},
    {"index": 1, "question": "Please describe this image in general.",
     "answer": str(["an oven in a kitchen", 'a "modern" kitchen, with a stove\tand a sink']),
     "prediction": "a kitchen with an oven\nand a stove"},
    {"index": 2, "question": "Please describe this image in general.", "answer": str(["one reference"]),
     "prediction": ""},
]


def _vlmeval_dump():
    """VLMEvalKit's own ``dump`` (vlmeval/smp/file.py at the pinned commit), with its module's imports."""
    if not (MIRROR / "HEAD").exists():
        pytest.skip("VLMEvalKit mirror missing (fetch github:open-compass/VLMEvalKit); the recorded files are checked")
    source = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"{VLMEVALKIT_COMMIT}:vlmeval/smp/file.py"],
                            capture_output=True, text=True)
    if source.returncode:
        pytest.skip(f"VLMEvalKit commit {VLMEVALKIT_COMMIT[:7]} not in the mirror")
    tree = ast.parse(source.stdout)
    wanted = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in ("dump",
                                                                                                  "NumpyEncoder")]
    import csv
    import pickle

    import numpy as np
    import pandas as pd

    namespace = {"csv": csv, "json": json, "pickle": pickle, "np": np, "pd": pd, "logger": None}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "vlmeval/smp/file.py", "exec"), namespace)
    return namespace["dump"], pd


def _vlmeval_reads(path: Path):
    """What VLMEvalKit's ImageCaptionDataset.evaluate scores: prediction and eval(answer) of each row (its
    load is pandas' read_excel / read_csv(sep='\\t'))."""
    import pandas as pd

    data = pd.read_excel(path) if path.suffix == ".xlsx" else pd.read_csv(path, sep="\t")
    return ({str(r["index"]): str(r["prediction"]) for _, r in data.iterrows()},
            {str(r["index"]): ast.literal_eval(r["answer"]) for _, r in data.iterrows()})


@pytest.mark.parametrize("suffix", [".xlsx", ".tsv", ".json"])
def test_vlmevalkit_files_written_by_vlmevalkit(tmp_path: Path, suffix: str) -> None:
    pytest.importorskip("xlsxwriter")
    dump, pd = _vlmeval_dump()
    path = tmp_path / f"Model_COCO_VAL{suffix}"
    dump(pd.DataFrame(VLM_ROWS), str(path))
    assert path.exists(), "VLMEvalKit's dump fell back to .pkl"
    candidates, references = read_predictions(path)
    assert candidates == {str(r["index"]): r["prediction"] for r in VLM_ROWS}
    assert references == {str(r["index"]): ast.literal_eval(r["answer"]) for r in VLM_ROWS}
    if suffix != ".json":  # VLMEvalKit's own reading: the same except its empty prediction, pandas' NaN -> "nan"
        theirs, their_refs = _vlmeval_reads(path)
        assert references == their_refs
        assert {k: v for k, v in candidates.items() if v} == {k: v for k, v in theirs.items() if k != "2"}
        assert theirs["2"] == "nan" and candidates["2"] == ""


@pytest.mark.filterwarnings("ignore:1 empty candidate caption")
@pytest.mark.parametrize("name", ["Model_COCO_VAL.xlsx", "Model_COCO_VAL.tsv"])
def test_recorded_vlmevalkit_files(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Written by VLMEvalKit's dump (tests/data/harness/README.md); scored as the same pairs given as JSON."""
    pytest.importorskip("openpyxl")
    candidates, references = read_predictions(DATA / name)
    assert candidates == {str(r["index"]): r["prediction"] for r in VLM_ROWS}
    assert references == {str(r["index"]): ast.literal_eval(r["answer"]) for r in VLM_ROWS}
    (tmp_path / "c.json").write_text(json.dumps(candidates))
    (tmp_path / "r.json").write_text(json.dumps(references))
    got = _score(["-m", "bleu-4,cider-d", "--from", "vlmevalkit", str(DATA / name)], capsys)
    want = _score(["-m", "bleu-4,cider-d", "-c", str(tmp_path / "c.json"), "-r", str(tmp_path / "r.json")], capsys)
    assert [r["system"] for r in got["results"]] == [r["system"] for r in want["results"]]
    capsys.readouterr()


def test_bad_vlmevalkit_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tsv = tmp_path / "m_COCO_VAL.tsv"
    cases = {
        "answer '__import__(\"os\")' is not a Python list":
            '"index"\t"answer"\t"prediction"\n"0"\t"__import__(""os"")"\t"x"\n',
        "no 'prediction' column": '"index"\t"answer"\n"0"\t"[\'a\']"\n',
        "index '0' appears twice": '"index"\t"answer"\t"prediction"\n"0"\t"[\'a\']"\t"x"\n"0"\t"[\'a\']"\t"y"\n',
        "line 2: 2 fields, the header has 3": '"index"\t"answer"\t"prediction"\n"0"\t"x"\n',
        "answer must be a non-empty list": '"index"\t"answer"\t"prediction"\n"0"\t"[1]"\t"x"\n',
    }
    for message, text in cases.items():
        tsv.write_text(text)
        err = _fail(["-m", "bleu-4", "--from", "vlmevalkit", str(tsv)], capsys)
        assert message in err, (message, err)
    bad = tmp_path / "m.xlsx"
    bad.write_bytes(b"not a zip")
    assert "not an .xlsx file" in _fail(["-m", "bleu-4", "--from", "vlmevalkit", str(bad)], capsys)
    assert "file not found" in _fail(["-m", "bleu-4", "--from", "vlmevalkit", str(tmp_path / "none.xlsx")], capsys)
    assert "more than 1,024 (CAPEVAL_MAX_JSON_BYTES" in _fail(
        ["-m", "bleu-4", "--max-json-bytes", "1024", "--from", "vlmevalkit", str(DATA / "Model_COCO_VAL.xlsx")], capsys)
    assert "ends in .xlsx, .tsv, .json" in _fail(["-m", "bleu-4", "--from", "vlmevalkit", str(tmp_path / "m.csv")],
                                                capsys)


def test_xlsx_bomb_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import zipfile

    bomb = tmp_path / "m.xlsx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("xl/sharedStrings.xml", b"<" * 3_000_000)
    err = _fail(["-m", "bleu-4", "--max-json-bytes", "1000000", "--from", "vlmevalkit", str(bomb)], capsys)
    assert "unpacks to 3,000,000 bytes, more than 1,000,000" in err


def test_read_harness_names_what_it_read() -> None:
    what, candidates, _ = read_harness("vlmevalkit", DATA / "Model_COCO_VAL.tsv")
    assert what == f"VLMEvalKit {VLMEVALKIT_COMMIT[:7]} predictions" and len(candidates) == 3
    with pytest.raises(CapevalError, match="unknown harness"):
        read_harness("opencompass", DATA / "Model_COCO_VAL.tsv")
    assert {"coco2017_cap_val", "nocaps_val", "flickr30k_test", "textcaps_val", "vatex_test", "youcook2_val",
            "detailcaps", "coco_cap_chair", "amber_g"} <= set(TASKS)


def test_from_with_html_shows_the_harness_items(lmms_samples: dict[str, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``--from`` with ``--html``: the explorer page lists the harness file's items, candidates and
    references as read from it, with the per-item scores of the same run."""
    from test_explorer import check_page

    candidates, references = expected("coco2017_cap_val")
    page, per = tmp_path / "page.html", tmp_path / "per.json"
    _score(["-m", "bleu-4,cider-d", "--from", "lmms-eval", str(lmms_samples["coco2017_cap_val"]),
            "--per-item", str(per), "--html", str(page)], capsys)
    meta, rows = check_page(page.read_text(encoding="utf-8"))
    scores = json.loads(per.read_text())
    assert [row[0] for row in rows] == list(candidates)
    for row in rows:
        assert row[1] == [candidates[row[0]]] and row[2] == references[row[0]]
        assert row[4] == [scores["bleu-4"][row[0]], scores["cider-d"][row[0]]]
