"""Bad input through the command line: exit code 2, one line ``capeval: error: ...`` naming the
file/item/option, no traceback, no output file left behind, and no scoring started when the
problem is knowable up front."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capeval import registry
from capeval.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CANDS = str(EXAMPLES / "candidates.json")
REFS = str(EXAMPLES / "references.json")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> str:
    """Exit 2, nothing on stdout, exactly one stderr line starting ``capeval: error:``."""
    assert code == 2, (code, err)
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("capeval: error: "), err
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


@pytest.fixture
def no_scoring(monkeypatch):
    """Fail the test if the CLI gets as far as scoring."""
    import capeval.api
    from capeval.evaluator import Evaluator

    def refuse(*a, **k):
        raise AssertionError("scoring started although the input error was knowable up front")

    monkeypatch.setattr(capeval.api, "score", refuse)
    monkeypatch.setattr(Evaluator, "score", refuse)  # compare scores with an Evaluator of its own


# -- COCO layouts ------------------------------------------------------------------------------

def _coco_files(tmp_path: Path) -> tuple[Path, Path, dict, dict]:
    # annotation ids deliberately collide with other images' ids: keying by "id" would mix items up
    ann = {
        "info": {"description": "toy"},
        "images": [{"id": 1, "file_name": "1.jpg"}, {"id": 2, "file_name": "2.jpg"}, {"id": 3, "file_name": "3.jpg"}],
        "annotations": [
            {"id": 2, "image_id": 1, "caption": "A dog runs across the grass."},
            {"id": 3, "image_id": 1, "caption": "The brown dog is running outside."},
            {"id": 1, "image_id": 2, "caption": "Two people ride bicycles on a street."},
            {"id": 7, "image_id": 3, "caption": "A red car parked by the road."},
            {"id": 8, "image_id": 2, "caption": "Cyclists in the city."},
            {"id": 9, "image_id": 3, "caption": "A car is parked."},
        ],
    }
    res = [
        {"image_id": 1, "caption": "a dog running on grass", "id": 3},
        {"image_id": 2, "caption": "people riding bikes", "id": 1},
        {"image_id": 3, "caption": "a red car", "id": 2},
    ]
    a = tmp_path / "captions_val.json"
    r = tmp_path / "results.json"
    a.write_text(json.dumps(ann))
    r.write_text(json.dumps(res))
    # what the files mean, written out by hand (not by capeval's reader)
    refs = {"1": ["A dog runs across the grass.", "The brown dog is running outside."],
            "2": ["Two people ride bicycles on a street.", "Cyclists in the city."],
            "3": ["A red car parked by the road.", "A car is parked."]}
    cands = {"1": "a dog running on grass", "2": "people riding bikes", "3": "a red car"}
    return a, r, refs, cands


def test_coco_annotations_are_keyed_by_image_id(capsys, tmp_path):
    import capeval

    ann, res, refs, cands = _coco_files(tmp_path)
    code, out, err = run(capsys, "score", "-m", "bleu-1,cider-d", "-c", str(res), "-r", str(ann))
    assert code == 0, err
    payload = json.loads(out)
    want = capeval.score(cands, refs, metrics="bleu-1,cider-d")
    assert payload["scores"]["cider-d"] == pytest.approx(want["cider-d"].system, abs=1e-12)
    assert payload["scores"]["bleu-1"] == pytest.approx(want["bleu-1"].system, abs=1e-12)
    # the detected layouts are said on stderr and recorded in the output
    assert "capeval: references: COCO annotations file (3 images, 6 captions)" in err
    assert "capeval: candidates: COCO results list (3 images, 3 captions)" in err
    assert payload["inputs"]["references"]["format"] == "COCO annotations file"
    assert payload["inputs"]["candidates"]["format"] == "COCO results list"


def test_coco_reader_matches_hand_written_meaning(tmp_path):
    from capeval.io.captions import read_caption_file

    ann, res, refs, cands = _coco_files(tmp_path)
    got = read_caption_file(ann, "references")
    assert got.data == refs and (got.n_items, got.n_captions) == (3, 6)
    assert read_caption_file(res, "candidates").data == cands


def test_coco_annotations_given_as_candidates(capsys, tmp_path):
    ann, _, _, _ = _coco_files(tmp_path)
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", str(ann), "-r", REFS, "-q")
    assert_one_line_error(code, out, err, str(ann), "annotation 2", "candidate id '1' appears twice",
                          "pass it with --references")


def test_quiet_hides_the_detected_format(capsys, tmp_path):
    ann, res, _, _ = _coco_files(tmp_path)
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", str(res), "-r", str(ann), "--quiet")
    assert code == 0 and err == ""


# -- output paths ------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--out", "--per-item"])
def test_output_into_missing_folder_fails_before_scoring(capsys, tmp_path, no_scoring, flag):
    target = tmp_path / "no-such-dir" / "scores.json"
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", CANDS, "-r", REFS, flag, str(target), "-q")
    assert_one_line_error(code, out, err, flag, str(target), "does not exist")
    assert not (tmp_path / "no-such-dir").exists()


def test_output_under_a_file_or_onto_a_folder(capsys, tmp_path, no_scoring):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", CANDS, "-r", REFS, "--out", str(blocker / "o.json"), "-q")
    assert_one_line_error(code, out, err, "--out", str(blocker), "not a folder")
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", CANDS, "-r", REFS, "--out", str(tmp_path), "-q")
    assert_one_line_error(code, out, err, "--out", "is a directory")
    assert blocker.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root can write anywhere")
def test_output_into_read_only_folder(capsys, tmp_path, no_scoring):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", CANDS, "-r", REFS, "--out", str(ro / "o.json"), "-q")
        assert_one_line_error(code, out, err, "--out", "cannot write")
    finally:
        ro.chmod(0o700)


def test_output_may_not_overwrite_an_input_or_each_other(capsys, tmp_path, no_scoring):
    c = tmp_path / "c.json"
    c.write_text(Path(CANDS).read_text())
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", str(c), "-r", REFS, "--out", str(c), "-q")
    assert_one_line_error(code, out, err, "--out", "is also an input file")
    assert c.read_text() == Path(CANDS).read_text()
    same = tmp_path / "x.json"
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", CANDS, "-r", REFS, "--out", str(same),
                         "--per-item", str(same), "-q")
    assert_one_line_error(code, out, err, "name the same file")


def test_failed_run_leaves_no_output_files(capsys, tmp_path):
    c = tmp_path / "c.json"
    c.write_text(json.dumps({"img1": "a dog", "stray": "a cat"}))
    per_item, out_file = tmp_path / "items.json", tmp_path / "out.json"
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", str(c), "-r", REFS, "--per-item", str(per_item),
                         "--out", str(out_file), "-q")
    assert_one_line_error(code, out, err, "'stray'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


def test_write_all_or_nothing(tmp_path):
    from capeval.io.atomic import atomic_write_many

    first = tmp_path / "a.json"
    with pytest.raises(OSError):
        atomic_write_many([(first, "1"), (tmp_path / "missing" / "b.json", "2")])
    assert list(tmp_path.iterdir()) == []  # neither target nor temporary files
    atomic_write_many([(first, "1"), (tmp_path / "b.json", "2")])
    assert first.read_text() == "1" and (tmp_path / "b.json").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]


# -- -O options ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "metrics,option,fragments",
    [
        ("bleu-1", "foo", ["-O 'foo'", "expected METRIC.KEY=VALUE"]),
        ("bleu-1", "cider-d=3", ["expected METRIC.KEY=VALUE"]),
        ("bleu-1", ".sigma=3", ["expected METRIC.KEY=VALUE"]),
        ("meteor", "meteor.nonexistent=1", ["option meteor.nonexistent", "no option 'nonexistent'",
                                            "valid options for meteor: tokenizer, cache_dir, workers"]),
        ("cider-d", "cider-d.sgima=3", ["option cider-d.sgima", "valid options for cider-d: tokenizer, n, sigma"]),
        ("bleu-1", "unknownmetric.x=1", ["option unknownmetric.x", "no metric or group named 'unknownmetric'",
                                         "known metrics: bleu-1", "presets: coco", "all"]),
        ("bleu-1", "cider-d.sigma=3", ["option cider-d.sigma", "not among the metrics being computed (bleu-1)"]),
        ("cider-d", "cider-d.sigma=abc", ["option cider-d.sigma", "expected float, got 'abc'"]),
        ("cider-d", "cider-d.n=2.5", ["option cider-d.n", "expected int, got 2.5"]),
        ("cider-d", "cider-d.n=true", ["option cider-d.n", "expected int, got True"]),
        ("bleu-1", "bleu.tokenizer=3", ["option bleu.tokenizer", "expected str, got 3"]),
        ("clip-s", "clip-s.batch_size=big", ["option clip-s.batch_size", "expected int"]),
        ("clip-s", "clip-s.wieght=2", ["no option 'wieght'", "valid options for clip: backbone, device, w"]),
    ],
)
def test_bad_options(capsys, no_scoring, metrics, option, fragments):
    code, out, err = run(capsys, "score", "-m", metrics, "-c", CANDS, "-r", REFS, "-O", option, "-q")
    assert_one_line_error(code, out, err, *fragments)


def test_option_aliases_reach_the_scorer(capsys):
    code, out, err = run(capsys, "score", "-m", "cider", "-c", CANDS, "-r", REFS, "-O", "CIDEr.sigma=3.5", "-q")
    assert code == 0, err
    assert "sigma:3.5" in json.loads(out)["signatures"]["cider-d"]


def test_bench_validates_options_too(capsys):
    code, out, err = run(capsys, "bench", "pascal-50s", "-m", "bleu-1", "-O", "bleu.nope=1", "-q")
    assert_one_line_error(code, out, err, "option bleu.nope", "valid options for bleu: tokenizer")


# -- devices ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("device,fragment", [("gpu0", "is not a torch device; use one of: cpu, cuda, cuda:N, mps"),
                                             ("cuda:x", "is not a torch device"), ("cpu:3", "has no index")])
def test_unknown_device(capsys, no_scoring, device, fragment):
    code, out, err = run(capsys, "score", "-m", "clip-s", "-c", CANDS, "--images", ".", "--device", device, "-q")
    assert_one_line_error(code, out, err, repr(device), fragment)


def test_cuda_without_cuda(capsys, no_scoring):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        code, out, err = run(capsys, "score", "-m", "clip-s", "-c", CANDS, "--images", ".", "--device", "cuda:99", "-q")
        assert_one_line_error(code, out, err, "cuda:99", "CUDA device(s) visible")
        return
    code, out, err = run(capsys, "score", "-m", "clip-s", "-c", CANDS, "--images", ".", "--device", "cuda", "-q")
    assert_one_line_error(code, out, err, "device 'cuda'", "CUDA is not available", "use cpu")
    # the same check for a device given as an option
    code, out, err = run(capsys, "score", "-m", "clip-s", "-c", CANDS, "--images", ".", "-O", "clip-s.device=cuda:0", "-q")
    assert_one_line_error(code, out, err, "device 'cuda:0'", "CUDA is not available")


def test_device_check_in_the_api():
    import capeval
    from capeval.errors import InputError

    with pytest.raises(InputError, match="'gpu0' is not a torch device"):
        capeval.score({"a": "x"}, metrics="clip-s", options={"clip-s": {"device": "gpu0"}}, images={})
    with pytest.raises(InputError, match="'gpu0' is not a torch device"):
        capeval.load("clip-s", device="gpu0")


# -- broken checkpoint files ---------------------------------------------------------------------------

@pytest.fixture
def one_image(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    d = tmp_path / "images"
    d.mkdir()
    Image.new("RGB", (32, 32), (200, 30, 30)).save(d / "img1.png")
    c = tmp_path / "c.json"
    c.write_text(json.dumps({"img1": "a red square"}))
    return c, d


def _state_dict_bytes(tmp_path: Path, fmt: str) -> bytes:
    torch = pytest.importorskip("torch")
    sd = {"visual.proj": torch.randn(64, 32), "token_embedding.weight": torch.randn(300, 64)}
    p = tmp_path / f"whole.{fmt}"
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(sd, str(p))
    else:
        torch.save(sd, str(p))
    data = p.read_bytes()
    p.unlink()
    return data


HTML = (b"<!DOCTYPE html><html><head><meta http-equiv=\"content-type\" content=\"text/html; charset=utf-8\"/>"
        b"<title>Google Drive - Virus scan warning</title></head><body><form id=\"download-form\" "
        b"action=\"https://drive.usercontent.google.com/download\">Google Drive can't scan this file for viruses."
        b"</form></body></html>")


@pytest.mark.parametrize(
    "name,content,fragments",
    [
        ("clip_ViT-B-32.pth", lambda tmp: HTML,
         ["is an HTML page", "'Google Drive - Virus scan warning'", "the download was redirected"]),
        ("empty.pth", lambda tmp: b"", ["is empty (0 bytes)"]),
        ("model.pth", lambda tmp: _state_dict_bytes(tmp, "pth")[:3000], ["is truncated or corrupt", "zip archive"]),
        ("model.safetensors", lambda tmp: _state_dict_bytes(tmp, "safetensors")[:3000],
         ["is truncated or corrupt", "safetensors"]),
        ("model.bin", lambda tmp: b"403 Forbidden\n", ["is a text file", "'403 Forbidden'"]),
        ("model.pt", lambda tmp: bytes(range(7, 250)) * 10, ["is not a checkpoint format capeval reads"]),
    ],
)
def test_broken_checkpoint_file(capsys, tmp_path, one_image, name, content, fragments):
    pytest.importorskip("torch")
    bad = tmp_path / name
    bad.write_bytes(content(tmp_path))
    c, images = one_image
    out_file = tmp_path / "out.json"
    code, out, err = run(capsys, "score", "-m", "clip-s", "-c", str(c), "--images", str(images),
                         "--backbone", str(bad), "--out", str(out_file), "-q")
    assert_one_line_error(code, out, err, f"checkpoint {bad}", *fragments)
    assert not out_file.exists()


def test_pickled_objects_are_refused_in_one_line(capsys, tmp_path, one_image):
    torch = pytest.importorskip("torch")
    bad = tmp_path / "module.pth"
    torch.save({"model": torch.nn.Linear(2, 2)}, str(bad))
    c, images = one_image
    code, out, err = run(capsys, "score", "-m", "clip-s", "-c", str(c), "--images", str(images),
                         "--backbone", str(bad), "-q")
    assert_one_line_error(code, out, err, "holds pickled Python objects", "weights_only=True")


# -- malformed caption files -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "fname,content,fragments",
    [
        ("c.json", '{"img1": "a dog",\n "img2": "a cat",\n "img1": "a wolf"}', ["c.json, line 3", "key 'img1' appears twice"]),
        ("c.json", '[{"image_id": "img1", "caption": "a dog"},\n {"image_id": "img2",\n  "caption": "a cat", '
                   '"caption": "two cats"}]', ["c.json, line 3", "key 'caption' appears twice"]),
        ("c.jsonl", '{"id": "img1", "caption": "a"}\n{"id": "img2", "caption": "b", "id": "img3"}\n',
         ["c.jsonl, line 2", "key 'id' appears twice"]),
        ("c.csv", 'id,caption\nimg1,a dog\nimg2,a dog, running\n', ["c.csv, line 3", "3 field(s)",
                                                                   "header has 2 (id, caption)", "must be quoted"]),
        ("c.csv", 'id,caption\nimg1\n', ["c.csv, line 2", "1 field(s)"]),
        ("c.tsv", 'id\tcaption\nimg1\ta dog\textra\n', ["c.tsv, line 2", "3 field(s)", "tab"]),
        ("c.csv", '', ["empty CSV file"]),
        ("c.json", '[{"caption": "a dog"}]', ["record 1: no id field", "the record has caption"]),
    ],
)
def test_malformed_caption_files(capsys, tmp_path, fname, content, fragments):
    c = tmp_path / fname
    c.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", str(c), "-r", REFS, "-q")
    assert_one_line_error(code, out, err, *fragments)


def test_duplicate_keys_in_references_nested(capsys, tmp_path):
    r = tmp_path / "r.json"
    r.write_text('{\n "img1": ["a", "b"],\n "img2": ["c"],\n "img3": ["d"],\n "img4": ["e"],\n "img2": ["f"]\n}')
    code, out, err = run(capsys, "score", "-m", "bleu-1", "-c", CANDS, "-r", str(r), "-q")
    assert_one_line_error(code, out, err, "r.json, line 6", "key 'img2' appears twice")


def test_quoted_commas_and_multiline_fields_still_read(tmp_path):
    from capeval.io.captions import read_captions

    c = tmp_path / "c.csv"
    c.write_text('id,reference\nimg1,"a dog, running"\nimg1,"two\nlines"\nimg2,a cat\n', encoding="utf-8")
    assert read_captions(c, "references") == {"img1": ["a dog, running", "two\nlines"], "img2": ["a cat"]}


# -- metric names -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["", ",", " , ", "bleu-9", "coco,nope"])
def test_bad_metric_lists_name_every_metric_and_preset(capsys, no_scoring, value):
    code, out, err = run(capsys, "score", "-m", value, "-c", CANDS, "-r", REFS, "-q")
    line = assert_one_line_error(code, out, err)
    for name in [*registry.metrics(), *registry.presets()]:
        assert name in line, name
    assert "presets:" in line and "all" in line.split("presets:")[1]


# -- errors that already existed stay one line -------------------------------------------------------

@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["-c", "nope.json", "-r", REFS], "file not found: nope.json"),
        (["-c", CANDS, "-r", "nope.json"], "file not found: nope.json"),
        (["-c", str(EXAMPLES), "-r", REFS], "expected a file, got a directory"),
        (["-c", CANDS, "-r", str(EXAMPLES)], "expected a file, got a directory"),
    ],
)
def test_existing_errors_stay_one_line(capsys, argv, fragment):
    code, out, err = run(capsys, "score", "-m", "bleu-1", *argv, "-q")
    assert_one_line_error(code, out, err, fragment)


def test_real_entry_point_prints_no_traceback(tmp_path):
    """Through ``python -m capeval.cli`` as a user runs it (stderr as the process writes it)."""
    dup = tmp_path / "dup.json"
    dup.write_text('{"img1": "a",\n "img1": "b"}')
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    for argv in (["score", "-c", str(dup), "-r", REFS, "-m", "bleu-1"],
                 ["score", "-c", CANDS, "-r", REFS, "-m", "bleu-1", "-O", "bleu.x=1"],
                 ["score", "-c", CANDS, "-m", "clip-s", "--images", ".", "--device", "gpu0"],
                 ["score", "-c", CANDS, "-r", REFS, "-m", ""]):
        proc = subprocess.run([sys.executable, "-m", "capeval.cli", *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == "" and "Traceback" not in proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("capeval: error: "), proc.stderr


@pytest.mark.parametrize("flag,metric", [("--images", "clip-s"), ("--videos", "emscore")])
def test_missing_media_folder_fails_before_any_model_loads(capsys, tmp_path, no_scoring, flag, metric):
    code, out, err = run(capsys, "score", "-m", metric, "-c", CANDS, flag, str(tmp_path / "nowhere"), "-q")
    assert_one_line_error(code, out, err, flag, "nowhere", "no such folder")


def test_reference_metrics_without_references_name_them_and_the_flag(capsys):
    code, out, err = run(capsys, "score", "-m", "coco", "-c", CANDS, "-q")
    assert_one_line_error(code, out, err, "bleu-1, bleu-2, bleu-3, bleu-4, meteor, rouge-l, cider-d, spice need "
                          "references", "-r/--references")


def test_list_shows_no_better_side_and_aligned_ranges(capsys):
    code, out, _ = run(capsys, "list")
    metrics = out.split("presets:")[0].splitlines()[1:]
    # a metric's row: two spaces, then name, inputs, range, better side (the description follows, indented 6)
    rows = {ln.split()[0]: ln for ln in metrics if ln.startswith("  ") and not ln.startswith("      ")}
    assert "bleu-1" in rows and "is better" not in out
    # length/vocab have no better side; mid's [-inf, inf] does not push its row out of the column
    assert rows["length"].split()[4] == "-" and rows["vocab"].split()[4] == "-"
    col = {name: ln.index(" higher") if " higher" in ln else None for name, ln in rows.items()}
    assert col["mid"] == col["bleu-1"] == col["clip-s"]
