"""ALOHa end to end: ``capeval score -m aloha`` through a scripted 127.0.0.1 judge, a tiny random
Sentence-BERT of all-mpnet-base-v2's architecture and a blank spaCy pipeline (folders): what
reaches the server (the official chat, decoding), the score against a brute-force reading of
the same answers, the cache on a second run, and one-line errors."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capture_models import tiny_sbert
from test_judges import Scripted

ROOT = Path(__file__).parents[1]
#: sha256 of SINGLE_OBJECT_SYSTEM_PROMPT and MULTI_OBJECT_SYSTEM_PROMPT of object_parser/prompts.py@7da6b90
SINGLE_SHA = "b1c406e3ec0fcb873a84643b3b5a6b95f8c2fc984e5a306184ad6339b9bb09dd"
MULTI_SHA = "39696823be84c73327facafc180c4f58dfbb627a8659653533bad78c06472991"
ANSWERS = {  # the scripted LLM: the last user message -> the object list
    "Caption: a dog near a red car\nObjects:": "- dog\n- red car\n- tree (possibly)",
    "Caption: a cat on a wooden table\nObjects:": "- cat\n- wooden table",
    "Captions:\n- a dog by a car\n- a dog on the street\nObjects:": "- dog\n- car\n- street",
    "Captions:\n- a man at a table\nObjects:": "- man\n- big table or wooden chair",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aloha_models")
    tiny_sbert(folder / "mpnet", dtype="float32").save(str(folder / "sbert"))
    import spacy

    spacy.blank("en").to_disk(folder / "spacy")  # no parser: every token is its own head, the root is the first
    return folder


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _expected(model_dir: Path, targets: list[str], refs: list[str]) -> float:
    """Best total similarity over injective assignments (permutations), then its minimum."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    sim = st.encode(targets, show_progress_bar=False) @ st.encode(refs, show_progress_bar=False).T
    best = max(itertools.permutations(range(len(refs)), len(targets)),
               key=lambda cols: sum(float(sim[i, c]) for i, c in enumerate(cols)))
    return min(float(sim[i, c]) for i, c in enumerate(best))


def test_capeval_score_aloha_through_a_scripted_judge(models, tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"1": "a dog near a red car", "2": "a cat on a wooden table"}))
    (tmp_path / "r.json").write_text(json.dumps({"1": ["a dog by a car", "a dog on the street"],
                                                 "2": ["a man at a table"]}))
    srv = Scripted(lambda body: (ANSWERS[body["messages"][-1]["content"]], None))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

    def run(*more):
        return subprocess.run([sys.executable, "-m", "capeval.cli", "score", "-m", "aloha", "-c", str(tmp_path / "c.json"),
                               "-r", str(tmp_path / "r.json"), "--quiet", "-O", f"aloha.base_url={srv.base_url}",
                               "-O", "aloha.model=judge", "-O", f"aloha.embedder={models / 'sbert'}",
                               "-O", f"aloha.spacy_model={models / 'spacy'}", "-O", f"aloha.cache={tmp_path / 'cache'}",
                               *more], capture_output=True, text=True, env=env, cwd=tmp_path)

    try:
        out = run("--per-item", str(tmp_path / "items.json"), "--per-item-extras", str(tmp_path / "extras.json"))
        assert out.returncode == 0, out.stderr
        payload = json.loads(out.stdout)
        items = json.loads((tmp_path / "items.json").read_text())["aloha"]
        extras = json.loads((tmp_path / "extras.json").read_text())["aloha"]
        assert len(srv.bodies) == 4
        for body in srv.bodies:  # the official request: chat, 3 examples, temperature 0, no seed
            msgs = body["messages"]
            assert body["model"] == "judge" and body["temperature"] == 0.0 and "seed" not in body
            assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 3 + ["user"]
            assert all(isinstance(m["content"], str) for m in msgs)
            multi = msgs[-1]["content"].startswith("Captions:\n")
            assert _sha(msgs[0]["content"]) == (MULTI_SHA if multi else SINGLE_SHA)
            assert msgs[1]["content"].startswith("Captions:\n- A baseball player" if multi
                                                 else "Caption: Two women playing violin")
        assert sorted(b["messages"][-1]["content"] for b in srv.bodies) == sorted(ANSWERS)
        # item 1: "tree (possibly)" dropped; references + their root tokens (blank spaCy: the first token)
        want1 = _expected(models / "sbert", ["dog", "red car"], ["dog", "car", "street"])
        # item 2: the "or" slot has two alternatives, roots "big" / "wooden": the best of the combinations
        want2 = max(_expected(models / "sbert", ["cat", "wooden table"], ["man", r, root])
                    for r, root in (("big table", "big"), ("big table", "wooden"), ("wooden chair", "big"),
                                    ("wooden chair", "wooden")))
        assert items["1"] == pytest.approx(want1, abs=1e-6) and items["2"] == pytest.approx(want2, abs=1e-6)
        assert payload["scores"]["aloha"] == pytest.approx((want1 + want2) / 2, abs=1e-6)
        assert extras["candidate_objects"]["1"] == [["dog"], ["red car"]]
        assert extras["reference_objects"]["2"] == [["man"], ["man"], ["big table", "wooden chair"], ["big", "wooden"]]
        assert {m["target_word"] for m in extras["matches"]["1"]} == {"dog", "red car"}
        low = min(extras["matches"]["1"], key=lambda m: m["similarity"])
        assert extras["localized"]["1"] == low["target_word"] and low["similarity"] == pytest.approx(want1, abs=1e-6)
        sig = payload["signatures"]["aloha"]
        assert "prompt:DavidMChan/aloha@7da6b90" in sig and "aggregate:min" in sig and "temperature:0.0" in sig
        srv.bodies.clear()
        again = run()
        assert again.returncode == 0, again.stderr
        assert srv.bodies == [] and json.loads(again.stdout)["scores"]["aloha"] == payload["scores"]["aloha"]
        bad = run("-O", "aloha.aggregate=max")
        assert bad.returncode == 2 and bad.stderr.strip().startswith("capeval: ") and "aloha" in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    finally:
        srv.close()


def test_missing_spacy_model_is_one_line(tmp_path):
    from capeval.errors import ResourceError
    from capeval.metrics.aloha.models import spacy_root_noun

    with pytest.raises(ResourceError, match="python -m spacy download no_such_model_xx"):
        spacy_root_noun("no_such_model_xx")
    assert np.isfinite(1.0)
