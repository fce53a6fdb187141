"""BERTScore against the installed bert_score package (0.3.13) on a tiny random RoBERTa.

bert_score's published numbers were made under transformers 4, whose RoBERTa tokenizer honours
``add_prefix_space=True``; transformers >= 5 ignores it. The package run here, in our own
environment, gets that argument back (:func:`_tf4_prefix_space`), so these tests check the rest
of the pipeline (layers, idf, rescaling); tests/test_bertscore_tf4.py runs the package under
transformers 4 itself and compares the token ids and scores.

The model is saved in float64, so both implementations embed, normalise and match in float64
(same weights, same ops up to summation order: differences ~1e-16). The only float32 values
are the idf weights, which the package pads as ``torch.float`` and capeval keeps in float32
likewise; their normalisation's summation order may differ in the last float32 bit, so the
bound is a few float32 ulps of a weighted mean of cosines (<= 1): 1e-5 holds on any CPU.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
bert_score = pytest.importorskip("bert_score")

from bertscore_models import tiny_roberta  # noqa: E402

from capeval.errors import CapevalError, InputError  # noqa: E402
from capeval.metrics.bertscore import formulas  # noqa: E402
from capeval.metrics.bertscore.scorer import BertScore  # noqa: E402

TOL = 1e-5
CANDS = ["a dog runs", "a", "a dog runs", "the cat sits on a red sofa", "two children play with a ball in the park",
         "people walk", "a man rides a bike down the street near the beach at sunset"]
REFS = [["a dog runs on the grass", "two dogs"], ["the cat sits"], ["a dog"],
        ["the cat sits on a red sofa", "a cat", "a red sofa with a cat sitting on it in the sun"],
        ["children play with a ball", "two kids in a park"], ["people walk along the beach", "a beach"],
        ["a man rides a bike", "a man on a bike down the street", "a bike"]]


@pytest.fixture(autouse=True)
def _tf4_prefix_space(monkeypatch):
    """The package's tokenizer with transformers 4's rule for ``add_prefix_space=True`` (a space
    before a text that does not begin with one), which transformers >= 5 drops silently."""
    module = sys.modules["bert_score.score"]
    original = module.get_tokenizer

    def get_tokenizer(*args, **kwargs):
        tok = original(*args, **kwargs)
        encode = tok.encode

        def encode_tf4(text, *a, add_prefix_space=False, **kw):
            if add_prefix_space and text and not text[0].isspace():
                text = " " + text
            return encode(text, *a, **kw)

        tok.encode = encode_tf4
        return tok

    monkeypatch.setattr(module, "get_tokenizer", get_tokenizer)


@pytest.fixture(scope="module")
def model64(tmp_path_factory):
    return tiny_roberta(tmp_path_factory.mktemp("tiny64"), dtype="float64")


@pytest.fixture(scope="module")
def model32(tmp_path_factory):
    return tiny_roberta(tmp_path_factory.mktemp("tiny32"), dtype="float32", seed=1)


def _baseline(path: Path, layers: int) -> Path:
    rng = np.random.default_rng(3)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["LAYER", "P", "R", "F"])
        for k in range(layers + 1):
            w.writerow([k, *rng.uniform(0.2, 0.8, 3).round(7)])
    return path


def _ours(folder, cands, refs, **opts):
    r = BertScore(model=str(folder), **opts).score(cands, {str(i): x for i, x in enumerate(refs)})["bertscore"]
    return np.array([[r.extras["precision"][str(i)], r.extras["recall"][str(i)], r.items[str(i)]]
                     for i in range(len(cands))]), r


def _theirs(folder, cands, refs, num_layers, idf=False, baseline=None, batch_size=3):
    kwargs = dict(rescale_with_baseline=True, baseline_path=str(baseline), lang="en") if baseline else {}
    p, r, f = bert_score.score(cands, refs, model_type=str(folder), num_layers=num_layers, idf=idf,
                               batch_size=batch_size, nthreads=0, **kwargs)
    return np.stack([p.numpy(), r.numpy(), f.numpy()], axis=1)


@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize("rescale", [False, True])
@pytest.mark.parametrize("layers", [0, 2, 4])
def test_parity_float64(model64, tmp_path, idf, rescale, layers):
    baseline = _baseline(tmp_path / "b.tsv", 4) if rescale else None
    opts = dict(rescale_with_baseline=True, baseline_path=str(baseline)) if rescale else {}
    ours, res = _ours(model64, CANDS, REFS, num_layers=layers, idf=idf, batch_size=2, **opts)
    theirs = _theirs(model64, CANDS, REFS, layers, idf=idf, baseline=baseline)
    assert theirs.dtype == np.float64
    assert np.abs(ours - theirs).max() <= TOL, np.abs(ours - theirs).max()
    assert res.system == pytest.approx(float(np.mean(ours[:, 2])))
    if not idf and not rescale:  # ours is float64 all through: this is exact up to summation order
        assert np.abs(ours - theirs).max() <= 1e-12


def test_parity_float32_single_references(model32):
    """Single reference strings (the package's list-of-str form) on a float32 model."""
    refs = [r[0] for r in REFS]
    ours, _ = _ours(model32, CANDS, [[r] for r in refs], num_layers=3)
    theirs = _theirs(model32, CANDS, refs, 3)
    assert np.abs(ours - theirs).max() <= TOL


def test_edge_cases(model64):
    # a candidate equal to its reference scores 1 (without rescaling); duplicates score alike
    ours, res = _ours(model64, ["the cat sits", "the cat sits", "dog"], [["the cat sits"], ["the cat sits"], ["a dog runs"]],
                      num_layers=2)
    # the float32 token weights normalise to 1 up to float32 rounding
    assert ours[0] == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)
    assert np.array_equal(ours[0], ours[1])
    assert res.extras["unique_texts"] == 3  # each distinct sentence embedded once


def test_empty_candidate_is_one_line_error(model64):
    with pytest.raises(InputError, match="candidate '1': caption is empty"):
        BertScore(model=str(model64), num_layers=2).score(["a dog", " "], {"0": ["a dog"], "1": ["a cat"]})


def test_fit_on_own_references_equals_unfitted(model64):
    refs = {str(i): r for i, r in enumerate(REFS)}
    a = BertScore(model=str(model64), num_layers=2, idf=True).score(CANDS, refs)["bertscore"]
    s = BertScore(model=str(model64), num_layers=2, idf=True)
    b = s.fit(refs).score(CANDS, refs)["bertscore"]
    assert dict(a.items) == dict(b.items)
    assert "idf:fitted(n=" in str(b.signature) and "idf:references" in str(a.signature)


def test_idf_table_equals_package_get_idf_dict():
    from bert_score.utils import get_idf_dict

    rng = np.random.default_rng(0)
    docs = [[0, *rng.integers(3, 12, rng.integers(1, 6)).tolist(), 2] for _ in range(9)] + [[0, 5, 2]] * 2
    theirs = get_idf_dict(docs, None, nthreads=0)  # tokenizer None: the documents are id lists already
    table, unseen = formulas.idf_table(docs)
    for t in range(20):
        assert table.get(t, unseen) == theirs[t]


@pytest.mark.parametrize("opts, message", [
    ({"num_layers": 9}, "num_layers: expected 0..4"),
    ({"num_layers": -1}, "num_layers=-1 out of range: num_layers must be an integer in [0, 1024]"),
    ({"num_layers": 2, "batch_size": 0}, "batch_size=0 out of range: batch_size must be an integer in [1, 4096]"),
    ({"num_layers": 2, "baseline_path": "/nonexistent.tsv"}, "baseline_path: given without rescale_with_baseline"),
    ({"num_layers": 2, "rescale_with_baseline": True, "baseline_path": "/nonexistent.tsv"}, "no file"),
    ({}, "num_layers: required for model"),
])
def test_option_errors(model64, opts, message):
    with pytest.raises(CapevalError, match=re.escape(message)) as exc:
        BertScore(model=str(model64), **opts)
    assert "\n" not in str(exc.value)


def test_rescale_without_package_baseline_is_one_line(model64):
    with pytest.raises(CapevalError, match="ships no baseline") as exc:
        BertScore(model=str(model64), num_layers=2, rescale_with_baseline=True)
    assert "\n" not in str(exc.value)


def test_package_baseline_file_is_read_from_the_package():
    from capeval.metrics.bertscore.baseline import package_baseline, read_baseline

    path = package_baseline("en", "roberta-large")
    import pandas as pd

    expected = pd.read_csv(path).iloc[17].to_numpy()[1:].astype(np.float32)
    assert np.array_equal(read_baseline(path, 17), expected)


def test_missing_model_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    with pytest.raises(CapevalError, match="capeval download bertscore") as exc:
        BertScore(model="no-such-org/no-such-model", num_layers=1)
    assert "\n" not in str(exc.value)


def test_declared_ranges_checked_before_building():
    from capeval.options import check_options

    for opt, value in (("batch_size", 0), ("batch_size", 5000), ("num_layers", -1)):
        with pytest.raises(InputError, match=rf"option bertscore\.{opt}={value} out of range"):
            check_options("bertscore", {"bertscore": {opt: value}})
    with pytest.raises(InputError, match="bertscore has no option 'layers'"):
        check_options("bertscore", {"bertscore": {"layers": 3}})


def test_cli_score_end_to_end(model32, tmp_path):
    import json
    import subprocess
    import sys

    (tmp_path / "c.json").write_text(json.dumps({"a": "a dog runs", "b": "the cat sits"}))
    (tmp_path / "r.json").write_text(json.dumps({"a": ["a dog runs on the grass"], "b": ["a cat", "the cat sits"]}))
    out = subprocess.run([sys.executable, "-m", "capeval.cli", "score", "--metrics", "bertscore", "-c",
                          str(tmp_path / "c.json"), "-r", str(tmp_path / "r.json"), "-O", f"bertscore.model={model32}",
                          "-O", "bertscore.num_layers=2", "--quiet"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    theirs = _theirs(model32, ["a dog runs", "the cat sits"], [["a dog runs on the grass"], ["a cat", "the cat sits"]], 2)
    assert payload["scores"]["bertscore"] == pytest.approx(float(np.mean(theirs[:, 2])), abs=TOL)
