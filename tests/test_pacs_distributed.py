"""PAC-S++ training on several processes: a real 2-process CPU run (torchrun, gloo) against one
process on the same global batches (5 -> parts of 2 + 3, 1 -> 0 + 1, validation 2 -> 1 + 1).
Negatives come from the whole global batch (embeddings gathered with gradient), so both runs
log the same losses and step with the same gradients.

The optimizer's update is skipped in both runs (the hook below records the gradients instead):
every step then starts from the same weights, and the gradients can be compared at every step
with a tolerance relative to their overall scale. (With updates, Adam turns rounding noise in
gradients whose exact value is 0 into lr-sized steps, which no fixed tolerance survives.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("PIL.Image")
pytest.importorskip("yaml")

from _torchrun import torchrun  # noqa: E402
from test_scst_distributed import HOOKED, _Split, _write_inputs  # noqa: E402

from capeval.train.runner import Runner  # noqa: E402

TRAIN_BATCH = 5  # 6 training images: global batches of 5 and 1 per epoch
REL = 1e-5       # float32 rounding of a different summation order, relative to the gradient's scale


def record_frozen(log: dict, patch=setattr) -> None:
    """Keep in ``log`` each forward's (part size, idle) and each AdamW step's gradients; skip the update."""
    from capeval.train import pacs

    forward = pacs.PacsObjective.forward

    def recorded_forward(self, batch):
        log["forward"].append((len(batch["v"]), bool(batch.get("idle")), self.training))
        return forward(self, batch)

    def recorded_step(self, *args, **kwargs):
        log["grads"].append([p.grad.detach().clone() for g in self.param_groups for p in g["params"]])

    log.update(forward=[], grads=[])
    patch(pacs.PacsObjective, "forward", recorded_forward)
    patch(torch.optim.AdamW, "step", recorded_step)


def _positives(root: Path, coco: Path) -> Path:
    """A positives folder for the COCO root of ``_write_inputs``: a generated caption per image and
    a generated image (the real one mirrored and darkened) per caption."""
    from PIL import Image, ImageOps

    out = root / "positives"
    (out / "images").mkdir(parents=True)
    lines = []
    for entry in json.loads((coco / "dataset_coco.json").read_text())["images"]:
        i = str(entry["cocoid"])
        lines.append({"kind": "caption", "image_id": i, "text": f"a generated picture number {i}"})
        real = Image.open(coco / entry["filepath"] / entry["filename"]).convert("RGB")
        for j in range(len(entry["sentences"])):
            ImageOps.mirror(real).point(lambda x, j=j: x * (3 - j) // 4).save(out / "images" / f"{i}_{j}.png")
            lines.append({"kind": "image", "image_id": i, "caption_index": j, "path": f"images/{i}_{j}.png"})
    (out / "positives-000-of-001.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return out


def _config(path: Path, clip_file: Path, coco: Path, positives: Path) -> Path:
    import yaml

    settings = {"mode": "pacs++", "coco_root": str(coco), "val_split": "test", "positives": str(positives),
                "backbone": str(clip_file), "batch_size": TRAIN_BATCH, "max_epochs": 2, "val_every": 1,
                "patience_steps": 100, "lr": 1e-2, "workers": 0, "log_every": 1, "device": "cpu"}
    path.write_text(yaml.safe_dump(settings))
    return path


def _losses(run: Path) -> list[tuple[str, str, str, float]]:
    from capeval.train.logging import read_log

    return [(r["phase"], r["step"], k, float(r[k])) for r in read_log(run / "metrics.csv")
            for k in ("loss", "l_vt", "l_gv_t", "l_v_gt")]


def test_part_sizes_are_the_local_slices():
    for n in range(0, 9):
        for world in (1, 2, 3):
            sizes = Runner.part_sizes(_Split(world - 1, world), n)
            assert sizes == [len(range(n)[Runner.local_slice(_Split(r, world), n)]) for r in range(world)]


def test_two_processes_compute_the_loss_and_gradients_of_one(tmp_path, monkeypatch):
    pytest.importorskip("accelerate")
    from capeval.train.config import load_config
    from capeval.train.pacs import train_pacs
    from capeval.train.pacs_config import PacsTrainConfig

    clip_file, vocab, coco = _write_inputs(tmp_path)
    cfg = _config(tmp_path / "cfg.yaml", clip_file, coco, _positives(tmp_path, coco))
    two = tmp_path / "two"
    proc = torchrun(tmp_path, HOOKED, vocab, __file__, str(tmp_path), "record_frozen", "train", "pacs", "--config",
                    str(cfg), "--quiet", "--output-dir", str(two))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count('"run_dir"') == 1  # the main process alone reports
    ranks = [torch.load(tmp_path / f"record_frozen{r}.pt", weights_only=False) for r in (0, 1)]

    monkeypatch.setenv("CAPEVAL_CLIP_VOCAB", str(vocab))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    single: dict = {}
    record_frozen(single, monkeypatch.setattr)
    one = train_pacs(load_config(PacsTrainConfig, cfg, {"output_dir": str(tmp_path / "one"), "accelerate": "no"}),
                     progress=False)
    monkeypatch.undo()
    assert one.steps == 4

    # each process encoded its part of every global batch; an empty part is one placeholder image;
    # after every step a validation batch of 2 images (1 + 1)
    train_parts = [(2, 3), (1, 1), (2, 3), (1, 1)]
    idle = [(False, False), (True, False)] * 2
    for rank in (0, 1):
        got = ranks[rank]["forward"]
        assert got[0::2] == [(p[rank], i[rank], True) for p, i in zip(train_parts, idle)], rank
        assert got[1::2] == [(1, False, False)] * 4, rank
    assert single["forward"][0::2] == [(TRAIN_BATCH, False, True), (1, False, True)] * 2
    # DDP: both processes step with the same (averaged) gradients ...
    for ga, gb in zip(ranks[0]["grads"], ranks[1]["grads"], strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ga, gb, strict=True))
    # ... which are the one-process gradients of the global batch's loss, at every step (the same
    # weights: updates are skipped), within float32 rounding of the gradient's overall scale
    # (a global batch of 1 image has no negative: loss and gradient are exactly 0 in both runs)
    for n, (ga, gb) in enumerate(zip(ranks[0]["grads"], single["grads"], strict=True)):
        scale = max(float(b.abs().max()) for b in gb)
        assert (scale > 0) == (n % 2 == 0), n
        worst = max(float((a - b).abs().max()) for a, b in zip(ga, gb, strict=True))
        assert worst <= REL * scale, (n, worst, scale)
    # the logged train and validation losses (every term) are the global batches' ones
    for (pa, sa, ka, la), (pb, sb, kb, lb) in zip(_losses(two), _losses(one.run_dir), strict=True):
        assert (pa, sa, ka) == (pb, sb, kb) and la == pytest.approx(lb, rel=REL, abs=1e-7), (pa, sa, ka)
