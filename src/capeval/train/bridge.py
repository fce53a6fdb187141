"""Training BRIDGE's mapping module (Sarto et al. 2024, Sec. 3.3 and 4.1) on a frozen CLIP.

Per step, for a batch of images I_i with one ground-truth caption T_i each (a random one of
its captions; each image once per epoch, so no image is its own negative)::

    grid, v_i = E_V(I_i)                                   frozen, no gradient
    t*_ij = E_T(psi(replica_ij, grid_i))                   frozen E_T, gradient to psi only
    L1 = weighted InfoNCE(t*, v), L2 = weighted InfoNCE(t*, E_T(prompt + T_i))   (supp. Eq. 5/6; losses.py)
    L3 = InfoNCE(C(t*_ij), E_T('a photo of a <chunk_ij>'))  C = Linear-ReLU-Linear (Eq. 2)
    L  = lambda1 L1 + lambda2 L2 + lambda3 L3              (Eq. 3; 0.01, 1.0, 0.01)

AdamW; each epoch ends with the validation loss (same losses, fixed chunk draws, dropout
off), ``last.safetensors`` + ``state.pt`` (optimizer, counters: resume restarts the
interrupted epoch) and ``best.safetensors`` when the validation loss improved (a last batch of
one image, which has no negatives, is left out of each epoch); training
stops after ``patience`` epochs without improvement, ``max_epochs`` or ``max_steps``.
Checkpoints are :mod:`capeval.metrics.bridge.checkpoint` files (config, backbone, capeval
version). With accelerate installed and a GPU, or when started on several processes
(``accelerate: auto``; :class:`capeval.train.runner.Runner`), the loop runs through
``accelerate.Accelerator`` (mixed precision, ``accelerate launch``/``torchrun`` for several
GPUs; the contrastive negatives are those of each process's batch); otherwise a plain torch loop.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from capeval.io.atomic import atomic_write_text
from capeval._version import __version__
from capeval.errors import InputError
from capeval.metrics.bridge.checkpoint import backbone_info, read_checkpoint, save_checkpoint
from capeval.metrics.bridge.mapping import BridgeModel, image_features, pseudo_captions
from capeval.progress import make_progress, note
from capeval.train.bridge_config import BridgeTrainConfig
from capeval.train.bridge_data import ImageDataset, StepBatch, StepBuilder, prepare_templates
from capeval.train.coco import CaptionedImage, split_items
from capeval.train.config import dump_yaml, load_config, to_dict
from capeval.train.logging import MetricsLog
from capeval.train.losses import infonce, weighted_infonce
from capeval.train.runner import Runner, atomic_torch_save

LOSS_FIELDS = ("loss", "l1", "l2", "l3")


@dataclass
class TrainResult:
    """Where a run left its files and how it ended."""

    run_dir: Path
    best: Path | None
    last: Path
    epochs: int
    steps: int
    best_val: float | None
    stopped: str
    history: list[dict[str, float]] = field(default_factory=list)


class BridgeObjective(nn.Module):
    """Frozen CLIP + trainable :class:`BridgeModel`: ``forward(pixels, StepBatch)`` -> the Eq. 3 losses."""

    def __init__(self, clip: nn.Module, model: BridgeModel, cfg: BridgeTrainConfig):
        super().__init__()
        self.clip = clip.requires_grad_(False).eval()
        self.model = model
        self.lambdas = (cfg.lambda1, cfg.lambda2, cfg.lambda3)
        self.use_l3 = cfg.lambda3 > 0 and model.config.template == "caption"
        if not self.use_l3:  # an unused branch would stall multi-GPU gradient sync
            model.regularizer.requires_grad_(False)
        self.temperature = cfg.temperature
        self.weighting = cfg.loss_weighting
        self.grid = model.config.grid

    def train(self, mode: bool = True) -> "BridgeObjective":
        super().train(mode)
        self.clip.eval()  # frozen: always inference behaviour
        return self

    def scale(self) -> torch.Tensor:
        if self.temperature is not None:
            return torch.tensor(1.0 / self.temperature)
        return self.clip.logit_scale.detach().exp()

    def forward(self, pixels: torch.Tensor, batch: StepBatch) -> dict[str, torch.Tensor]:
        clip = self.clip
        with torch.no_grad():
            grid, v = image_features(clip, pixels, self.grid)
            t = clip.encode_text(batch.caption_ids, batch.caption_eot)
            p = clip.encode_text(batch.prompt_ids, batch.prompt_eot) if self.use_l3 else None
        pseudo = F.normalize(pseudo_captions(clip, self.model.mapping, batch.replicas, grid).float(), dim=-1)
        owner, scale = batch.replicas.owner, self.scale().to(pseudo.device)
        l1 = weighted_infonce(pseudo, F.normalize(v.float(), dim=-1), owner, scale, self.weighting)  # Eq. 5
        l2 = weighted_infonce(pseudo, F.normalize(t.float(), dim=-1), owner, scale, self.weighting)  # Eq. 6
        if p is not None and len(pseudo) > 1:
            reg = F.normalize(self.model.regularizer(pseudo).float(), dim=-1)
            l3 = infonce(reg, F.normalize(p.float(), dim=-1), scale, batch.same_prompt)
        else:
            l3 = pseudo.sum() * 0.0
        a, b, c = self.lambdas
        return {"loss": a * l1 + b * l2 + c * l3, "l1": l1, "l2": l2, "l3": l3}


def _items(cfg: BridgeTrainConfig, data: Sequence[CaptionedImage] | None, split: str, limit: int | None
           ) -> list[CaptionedImage] | None:
    return split_items(data, cfg.coco_root, cfg.annotations, split, limit)


def train_bridge(config: BridgeTrainConfig | str | os.PathLike[str], *, backbone: Any = None, captioner: Any = None,
                 train_data: Sequence[CaptionedImage] | None = None, val_data: Sequence[CaptionedImage] | None = None,
                 resume: bool = False, progress: bool | None = None, **settings: Any) -> TrainResult:
    """Train BRIDGE; ``config``: a :class:`BridgeTrainConfig` or a YAML file (``settings`` override it).

    ``backbone``: a loaded :class:`~capeval.models.clip.backbone.ClipBackbone` instead of
    ``config.backbone``; ``captioner``: an object with ``key`` and ``caption(images)``;
    ``train_data`` / ``val_data``: :class:`CaptionedImage` lists instead of COCO.
    """
    cfg = config if isinstance(config, BridgeTrainConfig) else load_config(BridgeTrainConfig, config, settings)
    if isinstance(config, BridgeTrainConfig) and settings:
        cfg = load_config(BridgeTrainConfig, None, {**to_dict(config), **settings})
    run = Path(cfg.output_dir)
    if (run / "state.pt").exists() and not resume:
        raise InputError(f"{run} already holds a training run (state.pt): resume it (--resume) or choose another "
                         "output_dir")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    runner = Runner(cfg)
    if backbone is None:
        from capeval.models.clip.backbone import load_backbone

        backbone = load_backbone(cfg.backbone, device="cpu")
    clip = backbone.model.to(runner.device)
    model_cfg = cfg.model_config(clip.config)
    train_items = _items(cfg, train_data, cfg.train_split, cfg.max_train_images)
    if not train_items:
        raise InputError("BRIDGE training needs data: set coco_root (COCO with dataset_coco.json) or pass train_data")
    val_items = _items(cfg, val_data, cfg.val_split, cfg.max_val_images)
    run.mkdir(parents=True, exist_ok=True)
    mode = cfg.templates
    builders = {}
    for name, items in (("train", train_items), ("val", val_items)):
        if not items:
            continue
        tpls = None
        if model_cfg.template == "caption":
            tpls = prepare_templates(items, mode, captioner or cfg.captioner, cfg.caption_cache or True,
                                     cfg.spacy_model, run / f"templates-{name}.jsonl", progress,
                                     cfg.captioner_batch_size, str(runner.device))
            keep = [k for k, t in enumerate(tpls) if any(t.chunks)]
            if len(keep) < len(items):
                note(f"{name}: {len(items) - len(keep)} images without a maskable noun chunk left out", progress)
            items, tpls = [items[k] for k in keep], [tpls[k] for k in keep]
        if len(items) < 2:  # the contrastive losses need another image as the negative
            raise InputError(f"BRIDGE training: the {name} split needs at least 2 images (each other's negatives), "
                             f"has {len(items)}")
        if len(items) % cfg.batch_size == 1:
            note(f"{name}: the last batch would hold 1 image, which has no negatives: left out each epoch", progress)
        builders[name] = (items, StepBuilder(items, tpls or [], backbone.tokenizer, model_cfg.us, model_cfg.template,
                                             model_cfg.prompt, cfg.train_chunks, mode == "reference",
                                             backbone.context_length))
    model = BridgeModel(model_cfg)
    objective = BridgeObjective(clip, model, cfg).to(runner.device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr,
                                  weight_decay=cfg.weight_decay)
    start_epoch, step, best, bad_epochs, elapsed, history = 0, 0, None, 0, 0.0, []
    if resume and (run / "state.pt").exists():
        state = torch.load(run / "state.pt", map_location="cpu", weights_only=True)
        model.load_state_dict(read_checkpoint(run / "last.safetensors").state)
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, step, best = state["epoch"] + 1, state["step"], state["best"]
        bad_epochs, elapsed, history = state["bad_epochs"], state["elapsed"], list(state["history"])
    generator = torch.Generator().manual_seed(cfg.seed)
    loaders = {name: torch.utils.data.DataLoader(
        ImageDataset(items, backbone.preprocess), batch_size=cfg.batch_size, shuffle=name == "train",
        generator=generator if name == "train" else None, num_workers=cfg.workers,
        drop_last=len(items) % cfg.batch_size == 1)
        for name, (items, _) in builders.items()}
    objective, optimizer, *prepared = runner.prepare(objective, optimizer, *loaders.values())
    loaders = dict(zip(loaders, prepared))
    info = backbone_info(backbone)
    if runner.is_main:
        atomic_write_text(run / "config.yaml", dump_yaml(cfg))
    log = MetricsLog(run, [*LOSS_FIELDS, "lr", "replicas", "images"], cfg.tensorboard, runner.is_main, elapsed)
    stopped = "max_epochs"
    epoch = start_epoch
    for epoch in range(start_epoch, cfg.max_epochs):
        generator.manual_seed(cfg.seed + epoch)  # the same order after a resume
        rng = random.Random(cfg.seed * 1_000_003 + epoch)
        objective.train()
        sums = {k: 0.0 for k in LOSS_FIELDS}
        batches = 0
        with make_progress(len(loaders["train"]), f"epoch {epoch + 1}", progress if runner.is_main else False) as bar:
            for pixels, index in loaders["train"]:
                batch = builders["train"][1].build(index.tolist(), rng).to(runner.device)
                with runner.autocast():
                    out = objective(pixels.to(runner.device), batch)
                runner.backward(out["loss"])
                if cfg.grad_clip:
                    runner.clip(model.parameters(), cfg.grad_clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                batches += 1
                for k in LOSS_FIELDS:
                    sums[k] += float(out[k].detach())
                if step % cfg.log_every == 0:
                    log.log(step, epoch + 1, "train", **{k: float(out[k].detach()) for k in LOSS_FIELDS},
                            lr=cfg.lr, replicas=len(batch.replicas), images=len(index))
                bar.update(1)
                if cfg.max_steps is not None and step >= cfg.max_steps:
                    stopped = "max_steps"
                    break
        record = {"epoch": epoch + 1, "step": step, **{f"train_{k}": v / max(batches, 1) for k, v in sums.items()}}
        if "val" in loaders:
            val = evaluate(objective, loaders["val"], builders["val"][1], runner, cfg.seed)
            record.update({f"val_{k}": v for k, v in val.items()})
            log.log(step, epoch + 1, "val", **val)
        history.append(record)
        current = record.get("val_loss")
        improved = current is not None and (best is None or current < best - cfg.min_delta)
        if improved:
            best, bad_epochs = current, 0
        elif current is not None:
            bad_epochs += 1
        if runner.is_main:
            meta = {"epoch": epoch + 1, "step": step, "val_loss": current, "best_val_loss": best,
                    "capeval_version": __version__, "config": to_dict(cfg)}
            save_checkpoint(run / "last.safetensors", model, info, meta)
            if improved:
                save_checkpoint(run / "best.safetensors", model, info, meta)
            atomic_torch_save({"optimizer": optimizer.state_dict(), "epoch": epoch, "step": step, "best": best,
                                "bad_epochs": bad_epochs, "elapsed": log.elapsed(), "history": history},
                               run / "state.pt")
        if stopped == "max_steps":
            break
        if current is not None and bad_epochs >= cfg.patience > 0:
            stopped = "early_stopping"
            break
    log.close()
    best_path = run / "best.safetensors"
    return TrainResult(run, best_path if best_path.exists() else None, run / "last.safetensors", epoch + 1, step,
                       best, stopped, history)


@torch.no_grad()
def evaluate(objective: BridgeObjective, loader: Any, builder: StepBuilder, runner: Any, seed: int = 0
             ) -> dict[str, float]:
    """Mean validation losses over ``loader`` (weighted by images), chunks drawn with a fixed seed."""
    was_training = objective.training
    objective.eval()
    rng = random.Random(seed)
    sums = {k: 0.0 for k in LOSS_FIELDS}
    count = 0
    for pixels, index in loader:
        batch = builder.build(index.tolist(), rng).to(runner.device)
        with runner.autocast():
            out = objective(pixels.to(runner.device), batch)
        for k in LOSS_FIELDS:
            sums[k] += runner.mean(out[k]) * len(index)
        count += len(index)
    objective.train(was_training)
    return {k: v / max(count, 1) for k, v in sums.items()}
