"""The SCST captioner on several processes: a real 2-process CPU run (torchrun, gloo), with global
batches split unevenly (9 -> 4 + 5, 5 -> 2 + 3, 1 -> 0 + 1), steps with the gradients of one
process on the same global batches and ends with its weights, losses, rewards and captions;
the loss scaling that makes that true, checked against PyTorch's own means."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
pytest.importorskip("yaml")

from _torchrun import torchrun  # noqa: E402
from capeval.train.runner import Runner  # noqa: E402
from capeval.train.scst import scst_loss, xe_loss  # noqa: E402
from capeval.train.scst_model import PAD, CaptionTransformer, pad_batch  # noqa: E402

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}
SHAPES = ("square", "circle")
BEAM = 3
# Adam divides each step by sqrt(v) + eps: with PyTorch's 1e-8, a parameter whose exact gradient
# is 0 (the attention key biases: softmax ignores a shift shared by all keys) steps by +-lr on
# the sign of its rounding noise, so two runs that differ only in rounding (a batch summed in
# one piece or in two) drift apart by lr per step. An eps far above that noise (~1e-9) and far
# below the real gradients (~1e-2) bounds the step's sensitivity to lr / eps: rounding noise stays
# rounding noise, and both runs can be compared at every step with a tolerance that holds on
# any CPU and thread count.
ADAM_EPS = 0.1

# in each process: record the captioner's forwards and Adam's gradients, then run the CLI
LAUNCH = """
import atexit, importlib.util, os, sys
import torch
spec = importlib.util.spec_from_file_location("recorders", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
log = {}
module.record_into(log)
atexit.register(lambda: torch.save(log, os.path.join(sys.argv[2], "rank%s.pt" % os.environ["RANK"])))
from capeval.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


# in each process: apply this module's hook sys.argv[3] (it may record into ``log``), then run the CLI
HOOKED = """
import atexit, importlib.util, os, sys
import torch
spec = importlib.util.spec_from_file_location("hooks", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
log = {}
getattr(module, sys.argv[3])(log)
atexit.register(lambda: torch.save(log, os.path.join(sys.argv[2], "%s%s.pt" % (sys.argv[3], os.environ["RANK"]))))
from capeval.cli.main import main
sys.exit(main(sys.argv[4:]))
"""
KILL_AT_SCST_STEP = 4  # checkpoint_every=3: last.pt holds SCST step 3, step 4 is done and lost


def kill_in_scst(log: dict) -> None:
    """SIGKILL this process once its SCST step ``KILL_AT_SCST_STEP`` is done (an unclean stop, no atexit)."""
    import signal

    from capeval.train import scst

    make = scst.make_progress

    def progress(total, desc, enabled):
        bar = make(total, desc, enabled)
        if desc == "SCST steps":
            update = bar.update

            def tick(n: int = 1) -> None:
                update(n)
                if bar.done == KILL_AT_SCST_STEP:
                    os.kill(os.getpid(), signal.SIGKILL)

            bar.update = tick
        return bar

    scst.make_progress = progress


def record_resume(log: dict) -> None:
    """:func:`record_into`, plus each loaded Adam state's step counts and the weights after the last step."""
    record_into(log)
    load, step = torch.optim.Adam.load_state_dict, torch.optim.Adam.step

    def loaded(self, state):
        log["loaded"].append(sorted({int(s["step"]) for s in state["state"].values()}))
        return load(self, state)

    def stepped(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        log["weights"] = [p.detach().clone() for g in self.param_groups for p in g["params"]]
        return out

    log["loaded"] = []
    torch.optim.Adam.load_state_dict, torch.optim.Adam.step = loaded, stepped


def record_into(log: dict, patch=setattr) -> None:
    """Keep in ``log`` the batch shape of every captioner forward and the gradients of every Adam step."""
    from capeval.train import scst_model

    forward, step = scst_model.CaptionTransformer.forward, torch.optim.Adam.step

    def recorded_forward(self, feats, targets):
        log["forward"].append([int(feats.shape[0]), int(targets.shape[1])])
        return forward(self, feats, targets)

    def recorded_step(self, *args, **kwargs):
        log["grads"].append([p.grad.detach().clone() for g in self.param_groups for p in g["params"]])
        return step(self, *args, **kwargs)

    log.update(forward=[], grads=[])
    patch(scst_model.CaptionTransformer, "forward", recorded_forward)
    patch(torch.optim.Adam, "step", recorded_step)


class _Split:
    """What a Runner exposes of its place among the processes."""

    def __init__(self, rank: int, world: int):
        self.rank, self.world_size = rank, world

    local_slice = Runner.local_slice


def test_local_slices_cover_a_batch_once_in_order():
    for n in range(0, 12):
        for world in (1, 2, 3, 5):
            parts = [list(range(n))[Runner.local_slice(_Split(r, world), n)] for r in range(world)]
            assert sum(parts, []) == list(range(n))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


def test_xe_loss_split_over_processes_averages_to_the_global_token_mean():
    torch.manual_seed(0)
    model = CaptionTransformer(9, 6, d_model=16, heads=2, enc_layers=1, dec_layers=1, ff_dim=32, dropout=0.0,
                               max_len=6)
    feats = torch.randn(5, 4, 6)
    seqs = [[4, 5, 2], [6, 7, 8, 5, 2], [4, 2], [8, 8, 6, 2], [5, 6, 7, 4, 4, 2]]
    targets = pad_batch(seqs)
    # one process, the whole batch: torch's own token mean
    model.zero_grad()
    torch.nn.CrossEntropyLoss(ignore_index=PAD)(model(feats, targets).reshape(-1, 9), targets.reshape(-1)).backward()
    whole = _grads(model)
    # two processes with 2 and 3 captions: DDP averages their gradients
    tokens = sum(len(s) for s in seqs)
    parts = []
    for part in (slice(0, 2), slice(2, 5)):
        model.zero_grad()
        xe_loss(model(feats[part], targets[part]), targets[part], tokens, world=2).backward()
        parts.append(_grads(model))
    for w, a, b in zip(whole, *parts):
        torch.testing.assert_close((a + b) / 2, w, rtol=1e-5, atol=1e-7)


def test_scst_loss_split_over_processes_averages_to_the_global_image_mean():
    torch.manual_seed(1)
    rewards = torch.rand(5, 3)
    logp = torch.randn(5, 3, requires_grad=True)
    scst_loss(rewards, logp).backward()
    whole = logp.grad.clone()
    logp.grad = None
    for part in (slice(0, 2), slice(2, 5)):  # each process's gradient x 1/2 (DDP's mean)
        (scst_loss(rewards[part], logp[part], images=5) * 2 / 2).backward()
    torch.testing.assert_close(logp.grad, whole)


def _write_inputs(root: Path) -> tuple[Path, Path, Path]:
    """A tiny random CLIP file, its toy vocabulary, and a COCO root (Karpathy json + PNGs)."""
    from PIL import ImageDraw

    from capeval.models.clip.backbone import random_backbone
    from capeval.models.clip.tokenizer import write_vocab

    bb = random_backbone("tiny", seed=1)
    clip_file = root / "tiny_clip.pt"
    torch.save(bb.model.state_dict(), clip_file)
    vocab = write_vocab(root / "vocab", sorted(bb.tokenizer.ranks, key=bb.tokenizer.ranks.get))
    coco = root / "coco"
    (coco / "val2014").mkdir(parents=True)
    entries = []
    for n, (colour, shape) in enumerate([(c, s) for c in COLOURS for s in SHAPES] + [("red", "circle"),
                                                                                      ("blue", "square")]):
        im = Image.new("RGB", (32, 32), (255, 255, 255))
        draw = ImageDraw.Draw(im)
        (draw.rectangle if shape == "square" else draw.ellipse)((6, 6, 26, 26), fill=COLOURS[colour])
        name = f"COCO_val2014_{n:012d}.png"
        im.save(coco / "val2014" / name)
        caps = (f"a {colour} {shape}", f"a {shape} that is {colour}", f"a {colour} {shape} on white")
        entries.append({"filepath": "val2014", "filename": name, "cocoid": n, "split": "train" if n < 6 else "test",
                        "sentences": [{"raw": c} for c in caps]})
    (coco / "dataset_coco.json").write_text(json.dumps({"images": entries}))
    return clip_file, vocab, coco


def _config(path: Path, clip_file: Path, coco: Path) -> Path:
    # 6 training images (18 captions); global XE batch 9 -> parts of 4 and 5; SCST batches of 5
    # and 1 image -> parts of 2 + 3, then none (an idle step) + 1
    settings = {"coco_root": str(coco), "backbone": str(clip_file), "d_model": 32, "heads": 2, "enc_layers": 1,
                "dec_layers": 1, "ff_dim": 64, "dropout": 0.0, "max_len": 6, "min_word_count": 1,
                "stages": ["xe", "scst"], "xe_batch_size": 9, "xe_steps": 6, "xe_lr": 3e-3, "xe_warmup": 2,
                "xe_decay_start": 4, "xe_decay_end": 6, "xe_lr_min": 3e-4, "scst_batch_size": 5, "scst_lr": 1e-3,
                "scst_epochs": 2, "beam_size": BEAM, "reward": {"cider-d": 1.0}, "eval_metrics": "cider-d",
                "eval_beam": 1, "log_every": 2, "checkpoint_every": 3, "adam_eps": ADAM_EPS,
                "eval_incorrect": False}
    import yaml

    path.write_text(yaml.safe_dump(settings))
    return path


def _model(run: Path, stage: str) -> dict[str, torch.Tensor]:
    return torch.load(run / f"{stage}.pt", map_location="cpu", weights_only=False)["model"]


def _losses(run: Path) -> list[tuple[str, str, float]]:
    from capeval.train.logging import read_log

    return [(r["phase"], r["step"], float(r[k])) for r in read_log(run / "metrics.csv")
            for k in ("loss", "reward") if r[k]]


def test_two_processes_train_the_weights_of_one(tmp_path, monkeypatch):
    pytest.importorskip("accelerate")
    from capeval.train.scst import train_captioner

    clip_file, vocab, coco = _write_inputs(tmp_path)
    cfg = _config(tmp_path / "cfg.yaml", clip_file, coco)
    two = tmp_path / "two"
    proc = torchrun(tmp_path, LAUNCH, vocab, __file__, str(tmp_path), "train", "captioner", "--config", str(cfg),
                    "--quiet", "--output-dir", str(two))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count('"run_dir"') == 1  # the main process alone reports
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]

    monkeypatch.setenv("CAPEVAL_CLIP_VOCAB", str(vocab))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    single: dict = {}
    record_into(single, monkeypatch.setattr)
    one = train_captioner(_one_config(cfg, tmp_path / "one"))  # one process: the plain loop
    monkeypatch.undo()

    # each process ran its own part of every global batch (an idle step is one 1-token caption)
    xe = [[4, 5]] * 6
    scst = [[2 * BEAM, 3 * BEAM], [1, BEAM]] * 2
    for rank in (0, 1):
        assert [b for b, _ in ranks[rank]["forward"]] == [s[rank] for s in xe + scst], rank
    assert [b for b, _ in single["forward"]] == [9] * 6 + [5 * BEAM, BEAM] * 2
    # DDP: both processes step with the same (averaged) gradients
    for ga, gb in zip(ranks[0]["grads"], ranks[1]["grads"], strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ga, gb))
    # ... which are the gradients of the whole global batch's loss, at every XE and SCST step. With
    # ADAM_EPS both runs' weights stay within rounding of each other, so the gradients differ by
    # summation order alone; a float32 sum's rounding error scales with the terms summed, not with
    # its (possibly cancelling) result, hence a bound relative to the step's gradient scale.
    for n, (ga, gb) in enumerate(zip(ranks[0]["grads"], single["grads"], strict=True)):
        scale = max(float(b.abs().max()) for b in gb)
        for k, (a, b) in enumerate(zip(ga, gb)):
            assert float((a - b).abs().max()) <= 1e-5 * scale, (n, k, scale)
    # the same weights after each stage, every tensor (the key biases included)
    for stage in ("xe", "scst"):
        a, b = _model(two, stage), _model(one.run_dir, stage)
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=f"{stage} {k}")
    # the logged losses and rewards are the global batches' ones; the same captions at the end
    for (pa, sa, la), (pb, sb, lb) in zip(_losses(two), _losses(one.run_dir), strict=True):
        assert (pa, sa) == (pb, sb) and la == pytest.approx(lb, rel=1e-5, abs=1e-7)
    for stage in ("xe", "scst"):
        two_eval = json.loads((two / f"eval-{stage}.json").read_text())
        assert two_eval == json.loads((one.run_dir / f"eval-{stage}.json").read_text())


def _one_config(cfg: Path, out: Path):
    from capeval.train.config import load_config
    from capeval.train.scst import CaptionerTrainConfig

    return load_config(CaptionerTrainConfig, cfg, {"output_dir": str(out)})


def _torchrun(tmp_path: Path, vocab: Path, hook: str, cfg: Path, out: Path, *args: str):
    return torchrun(tmp_path, HOOKED, vocab, __file__, str(tmp_path), hook, "train", "captioner", "--config",
                    str(cfg), "--quiet", "--output-dir", str(out), *args)


def _rows(run: Path) -> list[dict[str, str]]:
    from capeval.train.logging import read_log

    return [{k: v for k, v in r.items() if k != "time"} for r in read_log(run / "metrics.csv")]


@pytest.mark.slow
def test_two_processes_killed_in_scst_and_resumed_end_like_an_uninterrupted_run(tmp_path):
    pytest.importorskip("accelerate")
    clip_file, vocab, coco = _write_inputs(tmp_path)
    cfg = _config(tmp_path / "cfg.yaml", clip_file, coco)
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    proc = _torchrun(tmp_path, vocab, "record_into", cfg, straight)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # both processes killed after SCST step 4; the main one had saved step 3 (XE done) and logged step 2
    proc = _torchrun(tmp_path, vocab, "kill_in_scst", cfg, cut)
    assert proc.returncode != 0 and not (cut / "scst.pt").exists(), proc.stderr[-3000:]
    last = torch.load(cut / "last.pt", map_location="cpu", weights_only=False)
    assert (last["stage"], last["step"], last["done"]) == ("scst", 3, ["xe"])
    assert [(r["phase"], r["step"]) for r in _rows(cut)][-2:] == [("eval-xe", "6"), ("scst", "2")]
    proc = _torchrun(tmp_path, vocab, "record_resume", cfg, cut, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count('"run_dir"') == 1 and '"steps": {\n    "scst": 4\n  }' in proc.stdout, proc.stdout
    ranks = [torch.load(tmp_path / f"record_resume{r}.pt", weights_only=False) for r in (0, 1)]
    # every process loaded last.pt's optimizer (3 Adam steps; accelerate's prepare reloads it once
    # more to place it on the device) and ran SCST step 4 alone (XE skipped): its 1-image batch
    # goes to rank 1, rank 0 runs an idle step; they end with the same weights
    assert [r["loaded"] for r in ranks] == [[[3], [3]], [[3], [3]]]
    assert [[b for b, _ in r["forward"]] for r in ranks] == [[1], [BEAM]]
    assert all(torch.equal(a, b) for a, b in zip(*(r["weights"] for r in ranks), strict=True))
    # the same weights, log (one file, no row twice) and captions as the uninterrupted run
    a, b = _model(cut, "scst"), _model(straight, "scst")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    assert sorted(p.name for p in cut.glob("metrics*")) == ["metrics.csv"]
    assert _rows(cut) == _rows(straight)
    assert (cut / "eval-scst.json").read_text() == (straight / "eval-scst.json").read_text()
