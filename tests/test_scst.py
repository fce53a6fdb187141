"""The SCST captioner: beam search, XE schedule, a tiny synthetic XE + SCST run, resume, CLI."""

from __future__ import annotations

import csv
import itertools
import json

import pytest

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
pytest.importorskip("yaml")

from capeval.train import scst
from capeval.train.coco import CaptionedImage
from capeval.train.scst import (
    CaptionerTrainConfig,
    scst_loss,
    train_captioner,
    xe_learning_rate,
)
from capeval.train.scst_model import EOS, PAD, CaptionTransformer, Vocab

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}
SHAPES = ("square", "circle")


def shapes_data() -> list[CaptionedImage]:
    from PIL import ImageDraw

    items = []
    for colour, rgb in COLOURS.items():
        for shape in SHAPES:
            im = Image.new("RGB", (32, 32), (255, 255, 255))
            draw = ImageDraw.Draw(im)
            (draw.rectangle if shape == "square" else draw.ellipse)((6, 6, 26, 26), fill=rgb)
            caps = (f"a {colour} {shape}", f"a {shape} that is {colour}", f"a {colour} {shape} on white")
            items.append(CaptionedImage(f"{colour}-{shape}", im, caps))
    return items


@pytest.fixture
def tiny_backbone(monkeypatch):
    from capeval.models.clip import backbone as bbmod

    bb = bbmod.random_backbone("tiny", seed=1)
    monkeypatch.setattr(bbmod, "load_backbone", lambda name, device="cpu", **kw: bb)
    return bb


def tiny_config(tmp_path, **kw) -> CaptionerTrainConfig:
    base = {"output_dir": str(tmp_path / "run"), "d_model": 32, "heads": 2, "enc_layers": 1, "dec_layers": 1,
            "ff_dim": 64, "dropout": 0.0, "max_len": 8, "min_word_count": 1, "xe_batch_size": 18, "xe_steps": 60,
            "xe_lr": 3e-3, "xe_warmup": 5, "xe_decay_start": 40, "xe_decay_end": 55, "xe_lr_min": 3e-4,
            "eval_metrics": "cider-d", "eval_beam": 1, "log_every": 5, "stages": ["xe"], "scst_batch_size": 6,
            "beam_size": 5, "reward": {"cider-d": 1.0}}
    base.update(kw)
    return CaptionerTrainConfig(**base)


def test_xe_schedule_matches_the_journal():
    cfg = CaptionerTrainConfig()
    assert xe_learning_rate(0, cfg) == pytest.approx(2.5e-7)
    assert xe_learning_rate(999, cfg) == pytest.approx(2.5e-4)
    assert xe_learning_rate(5000, cfg) == 2.5e-4 and xe_learning_rate(9999, cfg) == 2.5e-4
    assert xe_learning_rate(12500, cfg) == pytest.approx((2.5e-4 + 1e-5) / 2)
    assert xe_learning_rate(15000, cfg) == 1e-5 and xe_learning_rate(19999, cfg) == 1e-5
    assert (cfg.d_model, cfg.heads, cfg.enc_layers, cfg.dec_layers, cfg.beam_size) == (512, 8, 3, 3, 5)
    assert (cfg.xe_batch_size, cfg.scst_batch_size, cfg.scst_lr, cfg.scst_epochs) == (1024, 32, 1e-6, 1)


def test_vocab_from_training_captions():
    v = Vocab.build(["A dog.", "a dog runs", "a cat"], min_count=2)
    assert v.words[4:] == ["a", "dog"]
    assert v.encode("a cat", 5) == [4, 3, EOS] and v.decode([4, 5, EOS, 4]) == "a dog"


def test_beam_search_scores_equal_teacher_forced_logprobs_and_exhaustive_best():
    torch.manual_seed(0)
    model = CaptionTransformer(7, 12, d_model=16, heads=2, enc_layers=1, dec_layers=1, ff_dim=32, dropout=0.0,
                               max_len=3).eval()
    feats = torch.randn(2, 5, 12)
    seqs, scores = model.beam_search(feats, beam=4)
    again = model.sequence_logprobs(feats.repeat_interleave(4, 0), seqs.reshape(8, -1)).view(2, 4)
    torch.testing.assert_close(scores, again, rtol=1e-4, atol=1e-4)
    assert torch.all(scores[:, :-1] >= scores[:, 1:])
    # exhaustive search over every caption of <= 3 words (ids 3..6) + <eos>: exact with a wide beam
    words = [3, 4, 5, 6]
    every = [list(w) + [EOS] for n in range(4) for w in itertools.product(words, repeat=n)]
    padded = torch.tensor([s + [PAD] * (4 - len(s)) for s in every])
    with torch.no_grad():
        for b in range(2):
            lp = model.sequence_logprobs(feats[b : b + 1].expand(len(every), -1, -1), padded)
            _, wide_scores = model.beam_search(feats[b : b + 1], beam=len(every))
            assert float(wide_scores[0, 0]) == pytest.approx(float(lp.max()), abs=1e-4)


def test_scst_loss_is_the_journal_formula():
    r = torch.tensor([[1.0, 0.0, 2.0]])
    logp = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    loss = scst_loss(r, logp)
    assert float(loss.detach()) == pytest.approx(-((0 * -1) + (-1 * -2) + (1 * -3)) / 3)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 1 / 3, -1 / 3]]))


def _log_rows(path, phase):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["phase"] == phase]


def test_tiny_run_xe_lowers_loss_and_scst_raises_cider(tmp_path, tiny_backbone):
    data = shapes_data()
    cfg = tiny_config(tmp_path, xe_steps=25, stages=["xe", "scst"], scst_lr=2e-3, scst_epochs=25)
    result = train_captioner(cfg, data={"train": data, "test": data})
    rows = _log_rows(result.run_dir / "metrics.csv", "xe")
    assert float(rows[-1]["loss"]) < 0.6 * float(rows[0]["loss"])
    before, after = result.evaluations["xe"]["cider-d"], result.evaluations["scst"]["cider-d"]
    assert after > before + 0.1, (before, after)
    assert "rep-1" in result.evaluations["scst"] and (result.run_dir / "scst.pt").is_file()
    saved = json.loads((result.run_dir / "eval-scst.json").read_text())
    assert set(saved["captions"]) == {it.id for it in data}
    assert _log_rows(result.run_dir / "metrics.csv", "scst")


def test_tiny_run_scst_with_clip_s_raises_clip_s(tmp_path, tiny_backbone):
    data = shapes_data()
    cfg = tiny_config(tmp_path, xe_steps=25, stages=["xe", "scst"], scst_lr=2e-3, scst_epochs=25,
                      reward={"clip-s": 1.0}, eval_metrics="clip-s,cider-d")
    result = train_captioner(cfg, data={"train": data, "test": data})
    before, after = result.evaluations["xe"], result.evaluations["scst"]
    assert after["clip-s"] > before["clip-s"] + 0.05, (before, after)
    # the journal's reward hacking in miniature: CLIP-S alone lengthens and repeats (Table 9)
    assert after["rep-1"] >= before["rep-1"] and after["length"] >= before["length"]


def test_resume_after_interruption_gives_the_same_model(tmp_path, tiny_backbone, monkeypatch):
    data = {"train": shapes_data(), "test": shapes_data()[:2]}
    straight = train_captioner(tiny_config(tmp_path / "a", xe_steps=12, checkpoint_every=5), data=data)
    cfg = tiny_config(tmp_path / "b", xe_steps=12, checkpoint_every=5)
    original = scst.xe_learning_rate

    def interrupt(step, c):
        if step == 7:
            raise KeyboardInterrupt
        return original(step, c)

    monkeypatch.setattr(scst, "xe_learning_rate", interrupt)
    with pytest.raises(KeyboardInterrupt):
        train_captioner(cfg, data=data)
    monkeypatch.setattr(scst, "xe_learning_rate", original)
    with pytest.raises(Exception, match="--resume"):
        train_captioner(cfg, data=data)
    resumed = train_captioner(cfg, data=data, resume=True)
    a = torch.load(straight.checkpoints["xe"], weights_only=False)["model"]
    b = torch.load(resumed.checkpoints["xe"], weights_only=False)["model"]
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)


def test_cli_train_captioner_print_config(tmp_path, capsys):
    from capeval.cli.main import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("d_model: 64\nreward: {cider-d: 1.0, pac-s++: 0.5}\n")
    assert main(["train", "captioner", "--config", str(cfg), "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "d_model: 64" in out and "pac-s++: 0.5" in out


def test_scst_searches_and_scores_its_beams_in_one_mode(tmp_path, tiny_backbone, monkeypatch):
    """With dropout on, the beams' log-probabilities are taken in the mode that chose them (eval)."""
    modes = []
    forward = scst.CaptionTransformer.forward

    def recorded(self, feats, targets):
        if torch.is_grad_enabled() and targets.shape[0] > 1:
            modes.append(self.training)
        return forward(self, feats, targets)

    monkeypatch.setattr(scst.CaptionTransformer, "forward", recorded)
    data = shapes_data()
    cfg = tiny_config(tmp_path, xe_steps=2, stages=["xe", "scst"], dropout=0.3, scst_epochs=1, eval_incorrect=False)
    train_captioner(cfg, data={"train": data, "test": data[:2]})
    # XE steps train with dropout; the one SCST step (6 images x 5 beams) scores with it off
    assert modes == [True, True, False]


@pytest.mark.parametrize("eps", [0.0, -1e-8, 2.0])
def test_adam_eps_out_of_range_is_refused(tmp_path, eps):
    with pytest.raises(Exception, match=r"adam_eps=.* out of range: adam_eps must be a number in \(0, 1\]"):
        tiny_config(tmp_path, adam_eps=eps)


def test_missing_spacy_model_fails_before_training_unless_opted_out(tmp_path, tiny_backbone, monkeypatch):
    from capeval.errors import MissingDependencyError
    from capeval.models import spacy_pipelines

    def missing(name, purpose, exclude=(), disable=()):
        raise MissingDependencyError(f"spaCy model {name!r} is not installed (needed for {purpose})")

    monkeypatch.setattr(spacy_pipelines, "load_pipeline", missing)
    trained = []
    monkeypatch.setattr(scst, "_run_xe", lambda *a, **k: trained.append(1) or 1)
    data = {"train": shapes_data(), "test": shapes_data()[:2]}
    with pytest.raises(MissingDependencyError, match=r"is not installed .*eval_incorrect: false") as err:
        train_captioner(tiny_config(tmp_path / "a", xe_steps=2), data=data)
    assert "\n" not in str(err.value) and not trained  # one line, before any step
    result = train_captioner(tiny_config(tmp_path / "b", xe_steps=2, eval_incorrect=False), data=data)
    assert "incorrect" not in result.evaluations["xe"] and "rep-1" in result.evaluations["xe"]
