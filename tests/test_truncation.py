"""No silent truncation (capeval.truncation): every text encoder counts the candidates and
references it cut (extras), says so once on stderr per run, and records its context in the
signature. Checked on the shared pieces, then per encoder: CLIP (77), Long-CLIP (248, in
tests/test_longclip.py), BERTScore's RoBERTa, BERT-S++ (refuses instead), Polos's SimCSE side,
HICE-S's FACTUAL parser; end to end through the evaluator and the CLI (one line per run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from capeval import truncation
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

LONG = " ".join(["a dog runs on the grass near the red car"] * 12)  # about 110 CLIP tokens
SHORT = "a dog runs on the grass"


def _result(metric, cand, ref=None, trunc="77:keep-first+eot", **more):
    extras = {truncation.CANDIDATES: cand, **({truncation.REFERENCES: ref} if ref is not None else {}), **more}
    return MetricResult(metric, 0.5, {"a": 0.5}, Signature.build(metric, backbone="b", trunc=trunc), extras)


def test_tally_counts_every_occurrence_of_a_cut_text():
    cut = {"x", "y"}
    assert truncation.tally(["x", "z", "x"], [["y", "z"], ["x"]], cut) == {
        truncation.CANDIDATES: 2, truncation.REFERENCES: 2}
    assert truncation.tally(["z"], None, cut) == {truncation.CANDIDATES: 0}
    assert truncation.tally(["x"], [], cut, part="parser") == {"parser_truncated_candidates": 1,
                                                              "parser_truncated_references": 0}
    assert truncation.policy(248, "keep-first+eot") == "248:keep-first+eot"


def test_one_line_per_encoder_setting_naming_its_metrics():
    report = Report([_result("clip-s", 2), _result("ref-clip-s", 2, 3), _result("bleu-4", 0)])
    lines = truncation.lines(report)
    assert len(lines) == 1
    assert lines[0] == ("capeval: clip-s, ref-clip-s: cut 2 candidates and 3 references to the text encoder's "
                        "77-token context (keep-first+eot); counts in the extras (truncated_candidates/"
                        "truncated_references)")
    two = Report([_result("polos", 1, 0, parser_truncated_candidates=0,
                          simcse_truncated_candidates=0, simcse_truncated_references=4)])
    assert [ln.split(": ", 2)[2][:44] for ln in truncation.lines(two)] == [
        "cut 1 candidate to the text encoder's 77-tok", "cut 0 candidates and 4 references to the sim"]
    assert truncation.lines(Report([_result("clip-s", 0, 0)])) == []


class _Cutting(ScorerBase):
    produces = ("clip-s",)

    def score(self, candidates, references=None, **kw):
        return Report([_result("clip-s", 1)])


class _Calls(_Cutting):  # a subclass that calls its parent's score: still one line
    def score(self, candidates, references=None, **kw):
        return super().score(candidates, references)


def test_every_scorer_says_it_once_per_call_and_nothing_when_deferred(capsys):
    _Calls().score(["x"])
    assert capsys.readouterr().err.count("context") == 1
    with truncation.deferred():
        report = _Cutting().score(["x"])
        _Cutting().score(["x"])
    assert capsys.readouterr().err == ""
    truncation.announce(report, force=True)
    assert capsys.readouterr().err.count("\n") == 1


# -- CLIP family ---------------------------------------------------------------------------

def test_clip_counts_candidates_and_references_and_says_it_once(capsys):
    pytest.importorskip("torch")
    from capeval.metrics.clip_score import ClipScore
    from capeval.models.clip.backbone import random_backbone

    rng = np.random.default_rng(0)
    images = {k: rng.integers(0, 255, (32, 32, 3), dtype=np.uint8) for k in "abc"}
    cands = {"a": LONG, "b": SHORT, "c": LONG + " and a cat"}
    refs = {"a": [SHORT, LONG], "b": [LONG, LONG], "c": [SHORT]}
    report = ClipScore(backbone=random_backbone("tiny", seed=1)).score(cands, refs, images=images)
    assert report["clip-s"].extras[truncation.CANDIDATES] == 2
    assert report["ref-clip-s"].extras[truncation.REFERENCES] == 3
    assert report["clip-s"].signature.fields["trunc"] == "77:keep-first+eot"
    err = capsys.readouterr().err
    assert err.count("context") == 1 and "clip-s, ref-clip-s: cut 2 candidates and 3 references" in err


def _tiny_clip_file(folder: Path) -> Path:
    """A tiny CLIP state dict with the real vocabulary's 49,408 rows, and that vocabulary beside it."""
    import torch

    from _upstream import real_vocab
    from capeval.models.clip.model import build_model, get_config

    cfg = get_config("tiny", vocab_size=49408)
    path = folder / "tiny-clip.pt"
    torch.save(build_model(cfg, seed=2).state_dict(), path)
    (folder / "vocab").mkdir()
    (folder / "vocab" / real_vocab().name).write_bytes(real_vocab().read_bytes())
    return path


def test_cli_says_it_once_for_the_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from PIL import Image

    from capeval.cli.main import main

    ckpt = _tiny_clip_file(tmp_path)
    (tmp_path / "img").mkdir()
    for k in "ab":
        Image.new("RGB", (40, 40), (30 * ord(k) % 255, 90, 10)).save(tmp_path / "img" / f"{k}.png")
    (tmp_path / "c.json").write_text(json.dumps({"a": LONG, "b": SHORT}))
    (tmp_path / "r.json").write_text(json.dumps({"a": [LONG], "b": [SHORT, LONG]}))
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path / "vocab"))
    code = main(["score", "-m", "clip-s,ref-clip-s", "--backbone", str(ckpt), "--images", str(tmp_path / "img"),
                 "-c", str(tmp_path / "c.json"), "-r", str(tmp_path / "r.json"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "context" in ln]
    assert lines == ["capeval: clip-s, ref-clip-s: cut 1 candidate and 2 references to the text encoder's 77-token "
                     "context (keep-first+eot); counts in the extras (truncated_candidates/truncated_references)"]


# -- BERT-family and parser encoders -----------------------------------------------------

def test_bertscore_counts_exactly_the_texts_past_the_model_limit(tmp_path, capsys):
    pytest.importorskip("transformers")
    from bertscore_models import tiny_roberta

    from capeval.metrics.bertscore.scorer import BertScore

    folder = tiny_roberta(tmp_path / "m", max_length=40)
    scorer = BertScore(model=str(folder), num_layers=2)
    emb = scorer.embedder
    # the shortest run of "dog"s at the 40-id limit and one past it (bounded search)
    texts = [" ".join(["dog"] * n + ["a"] * m) for n in range(1, 25) for m in range(4)]
    at_limit = next(t for t in texts if len(emb.tokenizer.encode(t, add_prefix_space=True)) == 40)
    longer = " ".join(["dog"] * 59)
    ids = emb.encode(at_limit)
    assert len(ids) == 40 and not emb.was_cut(at_limit, ids)  # at the limit, not past it
    assert len(emb.encode(longer)) == 40 and emb.was_cut(longer, emb.encode(longer))
    r = scorer.score({"a": at_limit, "b": longer}, {"a": [longer, SHORT], "b": [at_limit]})["bertscore"]
    assert (r.extras[truncation.CANDIDATES], r.extras[truncation.REFERENCES]) == (1, 1)
    assert r.signature.fields["trunc"] == "40:keep-first+special"
    assert capsys.readouterr().err.count("context") == 1


def test_polos_simcse_side_counts_what_it_cut(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from bertscore_models import tiny_roberta
    from transformers import AutoModel, AutoTokenizer

    from capeval.metrics.polos import scorer as polos

    folder = tiny_roberta(tmp_path / "m", max_length=40)
    monkeypatch.setattr(polos, "MAX_TOKENS", 12)
    enc = polos.SimcseEncoder(AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder))
    enc.layers([SHORT, "a dog runs on the grass " * 4])
    assert enc.cut == {"a dog runs on the grass " * 4}


def test_factual_parser_counts_captions_past_its_input_length():
    pytest.importorskip("torch")
    from capeval.metrics.hice.factual import FactualParser

    class Tok:
        def __call__(self, texts, max_length=None, truncation=False, **kw):
            import torch

            ids = [[1] * len(t.split()) for t in texts]
            if truncation:
                ids = [x[:max_length] for x in ids]
            width = max(map(len, ids))
            if kw.get("return_tensors"):
                return {"input_ids": torch.ones(len(ids), width, dtype=torch.long),
                        "attention_mask": torch.ones(len(ids), width, dtype=torch.long)}
            return {"input_ids": ids}

        def batch_decode(self, ids, **kw):
            return ["( dog )"] * len(ids)

    class Model:
        def generate(self, input_ids, **kw):
            return input_ids

    parser = FactualParser("stub", model=Model(), tokenizer=Tok(), max_input_len=8)
    parser.phrases(["a dog", "a dog " * 5])
    assert parser.cut == {"a dog " * 5}
    assert parser.signature_fields()["trunc_parser"] == "8:keep-first+special"
