"""BERTScore against bert_score 0.3.13 run under transformers 4, where its published numbers and
rescale baselines were made (issue 34).

transformers >= 5 ignores the ``add_prefix_space=True`` that bert_score passes to a RoBERTa /
GPT-2 tokenizer, so a reference run in our own environment inherits that change. Here the
package runs in a second environment pinned to transformers 4.x (``.ci/tf4-venv`` builds it;
``$CAPEVAL_TF4_PYTHON`` names another interpreter) in a subprocess, on a tiny random RoBERTa
(byte-level BPE trained by the test) and a tiny random BERT saved in float32. The token ids of
every sentence must be equal id by id; per-item P/R/F agree within 1e-5 (both sides compute in
float32 with the same weights; only summation order differs, ~1e-7). Under ``CI=true`` a
missing second environment fails the test (tests/_reference.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from _reference import unavailable  # noqa: E402
from bertscore_models import tiny_bert, tiny_roberta  # noqa: E402

from capeval.metrics.bertscore.scorer import BertScore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-5
CANDS = ["a dog runs", "a", "the cat sits on a red sofa", "two children play with a ball in the park",
         "  people walk  ", "A Man rides a bike, down the street!", "café naïve 😀 dogs", "a\tdog\truns"]
REFS = [["a dog runs on the grass", "two dogs"], ["the cat sits"], ["the cat sits on a red sofa", "a cat"],
        ["children play with a ball", "two kids in a park"], ["people walk along the beach", "a beach"],
        ["a man rides a bike", "a man on a bike down the street"], ["a dog", "dogs in a café"], ["a dog runs"]]
#: sentences whose ids are compared besides the candidates and references: spaces, punctuation,
#: digits, an empty one (special tokens only) and one longer than the model's 40 tokens (truncated)
EXTRA = ["", "   ", "a  dog   runs", "1,234 dogs; 5 cats.", "it's the dog's ball", " ".join(["a dog runs on the grass"] * 12)]


def _python() -> str:
    py = os.environ.get("CAPEVAL_TF4_PYTHON") or str(ROOT / ".ci-tf4-venv" / "bin" / "python")
    if not os.path.isfile(py):
        unavailable(f"no transformers-4 environment at {py}: build it with `.ci/tf4-venv` "
                    "(or set CAPEVAL_TF4_PYTHON) to compare with bert_score under transformers 4")
    return py


def _reference(folder: Path, tmp_path: Path, num_layers: int, idf: bool) -> dict:
    request = {"model": str(folder), "sentences": [*CANDS, *(r for g in REFS for r in g), *EXTRA],
               "cands": CANDS, "refs": REFS, "num_layers": num_layers, "idf": idf}
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = subprocess.run([_python(), str(ROOT / "tests" / "_bertscore_tf4.py"), str(tmp_path / "request.json")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    ref = json.loads(out.stdout)
    assert ref["transformers"].startswith("4."), ref["transformers"]
    assert ref["bert_score"] == "0.3.13", ref["bert_score"]
    return ref | {"sentences": request["sentences"]}


@pytest.mark.parametrize("kind, idf", [("roberta", False), ("roberta", True), ("bert", False)])
def test_equal_to_bert_score_under_transformers_4(tmp_path, kind, idf):
    build = tiny_roberta if kind == "roberta" else tiny_bert
    folder = build(tmp_path / kind, dtype="float32", seed=3)
    ref = _reference(folder, tmp_path, 3, idf)
    scorer = BertScore(model=str(folder), num_layers=3, idf=idf, batch_size=3)
    ours_ids = [scorer.embedder.encode(s) for s in ref["sentences"]]
    for sentence, a, b in zip(ref["sentences"], ours_ids, ref["ids"]):
        assert a == b, f"{sentence!r}: ours {a} vs bert_score under transformers 4 {b}"
    if kind == "roberta":  # the prefix space is there: 'a' inside a sentence and first are one token
        tok = scorer.embedder.tokenizer
        assert tok.convert_ids_to_tokens(ref["ids"][0])[1] == "\u0120a"
    res = scorer.score(CANDS, {str(i): r for i, r in enumerate(REFS)})["bertscore"]
    ours = np.array([[res.extras["precision"][str(i)], res.extras["recall"][str(i)], res.items[str(i)]]
                     for i in range(len(CANDS))])
    theirs = np.array([ref["P"], ref["R"], ref["F"]]).T
    diff = np.abs(ours - theirs)
    print(f"\n{kind} idf={idf} transformers {ref['transformers']} ({ref['tokenizer']}): per item F ours | theirs")
    for i, c in enumerate(CANDS):
        print(f"  {c!r:45} {ours[i, 2]:.9f} {theirs[i, 2]:.9f} {diff[i, 2]:.1e}")
    print(f"  max |diff| P/R/F: {diff.max():.2e}")
    assert diff.max() <= TOL, diff.max()
