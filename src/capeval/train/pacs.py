"""Training PAC-S / PAC-S++ (Sarto et al. 2023; 2024): positive-augmented contrastive fine-tuning of CLIP.

Loss (journal Eq. 1-3; CVPR poster)::

    L_{A,B} = 1/2 [ -1/N sum_i log softmax_j(s cos(a_i, b_j))_i  -1/N sum_i log softmax_j(s cos(a_j, b_i))_i ]
    L       = L_{V,T} + lambda_v L_{V',T} + lambda_t L_{V,T'}

V / T: real images and captions of the batch, V' images generated from T, T' captions
generated from V; s = 1/tau = exp(CLIP's logit_scale) (frozen; ``temperature`` overrides).
The journal's Eq. 1 prints the two directions as a sum and its text says "computed as the
average of the two": capeval averages (:func:`capeval.train.losses.infonce`; a sum only
doubles the loss and the effective lr). PAC-S trains ``visual.proj`` and ``text_projection``;
PAC-S++ LoRA factors (:mod:`capeval.train.pacs_lora`). Validation loss every ``val_every``
steps; stop after ``patience_steps`` steps without improvement (1,500 in the journal).
Files in ``output_dir``: ``best.safetensors`` / ``best.pth`` (released layout, loadable
with ``--backbone``), ``last.safetensors``, ``state.pt`` (optimizer, counters: resume),
``metrics.csv``, ``config.yaml``, ``run.json`` (config hash, data hashes).

Several processes (``accelerate launch`` / ``torchrun``): ``batch_size`` stays the global batch
(images per optimizer step, ``batch_size / grad_accum`` per micro-batch). Each process encodes
its contiguous part of every global micro-batch (:meth:`Runner.local_slice`; parts differ by at
most one, an empty part encodes one image and keeps none of it) and the embeddings are gathered
over the processes with gradient into the local rows (:meth:`Runner.gather`), so the negatives
are the whole global micro-batch, as on one process and as pacscore's all-gather-with-gradient
helper suggests the authors trained. Every process then holds the global loss L and backpropagates
``world_size * L``: DDP's gradient average is exactly the one-process gradient
(tests/test_pacs_distributed.py).

SigLIP / SigLIP 2 backbones (journal Table 8): the same recipe on transformers' models
(:mod:`capeval.train.pacs_siglip`), exporting only the trained tensors; option ``loss: sigmoid``
replaces InfoNCE by SigLIP's own sigmoid loss with its frozen learned bias (not the paper's).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from capeval.io.atomic import atomic_write_text
from capeval._version import __version__
from capeval.errors import InputError
from capeval.progress import make_progress
from capeval.train.coco import CaptionedImage, split_items
from capeval.train.config import dump_yaml, load_config, to_dict
from capeval.train.logging import MetricsLog
from capeval.train.losses import infonce, sigmoid_pairs
from capeval.train.pacs_config import PacsTrainConfig
from capeval.train.pacs_data import (
    PacsDataset,
    Positives,
    check_positives,
    collate,
    read_positives,
    tokenize,
)
from capeval.train.pacs_lora import (
    add_lora,
    describe_trainable,
    export_state,
    import_state,
    train_projections,
)
from capeval.train.pacs_backbone import load_training_backbone, shape_only_model
from capeval.train.pacs_siglip import as_trainable
from capeval.train.runner import Runner, atomic_torch_save, launched_processes

LOSS_FIELDS = ("loss", "l_vt", "l_gv_t", "l_v_gt")


def pacs_loss(v: torch.Tensor, t: torch.Tensor, v_gen: torch.Tensor | None, t_gen: torch.Tensor | None,
              scale: torch.Tensor | float, lambda_v: float, lambda_t: float, bias: torch.Tensor | None = None
              ) -> dict[str, torch.Tensor]:
    """The module docstring's L from unnormalised (N, D) features; terms with lambda 0 or None inputs are 0.
    ``bias`` (option ``loss: sigmoid``, SigLIP only): SigLIP's sigmoid loss with that bias replaces InfoNCE."""
    pair = infonce if bias is None else partial(sigmoid_pairs, bias=bias)
    v, t = F.normalize(v.float(), dim=-1), F.normalize(t.float(), dim=-1)
    l_vt = pair(v, t, scale)
    zero = l_vt * 0.0
    l_gv = pair(F.normalize(v_gen.float(), dim=-1), t, scale) if v_gen is not None and lambda_v else zero
    l_gt = pair(v, F.normalize(t_gen.float(), dim=-1), scale) if t_gen is not None and lambda_t else zero
    return {"loss": l_vt + lambda_v * l_gv + lambda_t * l_gt, "l_vt": l_vt, "l_gv_t": l_gv, "l_v_gt": l_gt}


class PacsObjective(nn.Module):
    """CLIP with its trainable parts set up for ``cfg.mode``: ``forward(batch)`` -> the loss terms."""

    def __init__(self, clip: nn.Module, tokenizer: Any, cfg: PacsTrainConfig):
        super().__init__()
        clip = as_trainable(clip, tokenizer)  # SigLIP: transformers' model behind CLIP's hooks
        self.clip, self.tokenizer, self.cfg = clip, tokenizer, cfg
        self.lambda_v, self.lambda_t = cfg.lambdas
        # Runner.gather on several processes: batches then carry "global" (the global batch's size)
        self.gather: Callable[[torch.Tensor, int], torch.Tensor] | None = None
        if cfg.mode == "pacs++":
            add_lora(clip, cfg.lora_rank, cfg.lora_alpha, cfg.lora_targets, cfg.seed, cfg.lora_qkv_init)
        else:
            train_projections(clip)
        if cfg.loss == "sigmoid" and not hasattr(clip, "logit_bias"):
            raise InputError("PAC-S training option loss=sigmoid needs a SigLIP backbone (it uses SigLIP's logit_bias)")

    def scale(self) -> torch.Tensor:
        if self.cfg.temperature is not None:
            return torch.tensor(1.0 / self.cfg.temperature)
        return self.clip.logit_scale.detach().exp()

    def text(self, texts: Sequence[str], device: Any) -> torch.Tensor:
        if hasattr(self.clip, "encode_captions"):  # SigLIP: its own tokenizer and padding
            return self.clip.encode_captions(texts, device)
        ids, eot = tokenize(self.tokenizer, texts, device)
        return self.clip.encode_text(ids, eot)

    def forward(self, batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """The loss terms of ``batch``; with ``self.gather`` and ``batch["global"]``: of the global batch
        (``batch["idle"]``: this process's part is empty and ``batch`` a placeholder item)."""
        dev = batch["v"].device
        n = len(batch["v"])
        use_v = self.lambda_v > 0 and batch["v_gen"].numel() > 0
        # one image pass for real and generated images (same weights, one kernel launch)
        images = self.clip.encode_image(torch.cat([batch["v"], batch["v_gen"]]) if use_v else batch["v"])
        # "use_t": the trainer's decision, the same on every process (a part's captions may all be "")
        use_t = self.lambda_t > 0 and batch.get("use_t", any(batch["t_gen"]))
        texts = self.text(list(batch["t"]) + (list(batch["t_gen"]) if use_t else []), dev)
        views = [images[:n], texts[:n]] + ([images[n:]] if use_v else []) + ([texts[n:]] if use_t else [])
        if self.gather is not None and "global" in batch:
            keep = 0 if batch.get("idle") else n
            # one collective for all views: (n, views, D), every view in CLIP's embedding width
            views = list(self.gather(torch.stack([x.float() for x in views], 1)[:keep], batch["global"]).unbind(1))
        v, t, *rest = views
        v_gen = rest.pop(0) if use_v else None
        t_gen = rest.pop(0) if use_t else None
        bias = self.clip.logit_bias.detach().to(dev) if self.cfg.loss == "sigmoid" else None
        return pacs_loss(v, t, v_gen, t_gen, self.scale().to(dev), self.lambda_v, self.lambda_t, bias)


def global_batches(order: Sequence[int], size: int) -> list[list[int]]:
    """``order`` cut into consecutive batches of ``size`` (the last one may be smaller)."""
    return [list(order[k : k + size]) for k in range(0, len(order), size)]


def local_batches(dataset: Any, batches: Sequence[Sequence[int]], runner: Any, workers: int, use_t: bool
                  ) -> Iterator[dict[str, Any]]:
    """This process's part of each global batch, loaded, on the device, with ``global`` / ``idle`` /
    ``use_t`` for :meth:`PacsObjective.forward` (an empty part loads the batch's first item)."""
    parts = [list(b)[runner.local_slice(len(b))] for b in batches]
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=[p or list(b)[:1] for p, b in zip(parts, batches)],
                                         num_workers=workers, collate_fn=collate)
    for b, part, batch in zip(batches, parts, loader):
        batch = {n: (x.to(runner.device) if torch.is_tensor(x) else x) for n, x in batch.items()}
        yield {**batch, "global": len(b), "idle": not part, "use_t": use_t}


def config_hash(cfg: PacsTrainConfig) -> str:
    """sha256 of the settings that change the trained weights (not paths, workers, logging)."""
    skip = {"output_dir", "workers", "log_every", "tensorboard", "device", "accelerate"}
    blob = json.dumps({k: v for k, v in to_dict(cfg).items() if k not in skip}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def items_hash(items: Sequence[CaptionedImage]) -> str:
    """sha256 over ids and captions (what the loss sees of COCO; image bytes are not re-read)."""
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps([it.id, list(it.captions)]).encode())
    return h.hexdigest()[:16]


def export(objective: PacsObjective, folder: Path, stem: str, meta: Mapping[str, Any],
           extras: Mapping[str, torch.Tensor] | None = None) -> tuple[Path, Path]:
    """``<stem>.safetensors`` (tensors + run metadata) and ``<stem>.pth`` (``{"state_dict": ...}``)."""
    from safetensors.torch import save_file

    own = getattr(objective.clip, "export_tensors", None)  # SigLIP: the trained tensors only
    state = {k: v.contiguous() for k, v in (own() if own else export_state(objective.clip, extras)).items()}
    meta = {**meta, **getattr(objective.clip, "export_meta", dict)()}
    st, pth = folder / f"{stem}.safetensors", folder / f"{stem}.pth"
    save_file(state, str(st), metadata={k: json.dumps(v, default=str) for k, v in meta.items()})
    atomic_torch_save({"state_dict": state}, pth)
    return st, pth


def plan(cfg: PacsTrainConfig, n_train: int, clip_config: Any = None, trainable: int | None = None,
         total: int | None = None, processes: int = 1) -> dict[str, Any]:
    """Steps per epoch, maximum steps, and a rough GPU memory estimate (GiB) for ``--dry-run``.

    Memory: fp32 weights, gradients + 2 AdamW moments for the trainable part, and
    activations ~ 12 floats per token x width x layer (attention, MLP 4x, norms) per image
    / text pass, kept for backward (PAC-S keeps only the projections' inputs); per process, each
    encoding its part of a global micro-batch (``processes``: the launcher's count).
    """
    steps_per_epoch = -(-n_train // cfg.batch_size)
    max_steps = steps_per_epoch * cfg.max_epochs if cfg.max_steps is None else min(cfg.max_steps, steps_per_epoch *
                                                                                  cfg.max_epochs)
    out = {"mode": cfg.mode, "lambda_v": cfg.lambdas[0], "lambda_t": cfg.lambdas[1], "train_images": n_train,
           "batch_size": cfg.batch_size, "micro_batch": cfg.micro_batch, "grad_accum": cfg.grad_accum,
           "processes": processes,
           "steps_per_epoch": steps_per_epoch, "max_steps": max_steps, "val_every": cfg.val_every,
           "patience_steps": cfg.patience_steps}
    if clip_config is not None and total is not None:
        c = clip_config
        tokens_img = (c.image_size // c.patch_size) ** 2 + 1
        mb = -(-cfg.micro_batch // processes)  # the largest part of a global micro-batch
        n_img = mb * (2 if cfg.lambdas[0] else 1)
        n_txt = mb * (2 if cfg.lambdas[1] else 1)
        act = 12 * (n_img * tokens_img * c.vision_width * c.vision_layers + n_txt * 32 * c.text_width * c.text_layers)
        act *= 0.05 if cfg.mode == "pacs" else 1.0
        half = 0.5 if cfg.mixed_precision != "no" else 1.0
        gib = (4 * total + 16 * (trainable or 0) + 4 * act * half) / 2**30
        out.update({"parameters": total, "trainable": trainable, "memory_estimate_gib": round(gib, 2)})
    return out


def _items(cfg: PacsTrainConfig, data: Sequence[CaptionedImage] | None, split: str, limit: int | None
           ) -> list[CaptionedImage] | None:
    return split_items(data, cfg.coco_root, cfg.annotations, split, limit)


@dataclass
class TrainResult:
    run_dir: Path
    best: Path | None
    last: Path
    steps: int
    best_val: float | None
    stopped: str
    history: list[dict[str, Any]]
    is_main: bool = True  # False on the other processes of a multi-process run


def train_pacs(config: PacsTrainConfig | str | os.PathLike[str], *, backbone: Any = None,
               train_data: Sequence[CaptionedImage] | None = None, val_data: Sequence[CaptionedImage] | None = None,
               positives: Positives | None = None, resume: bool = False, dry_run: bool = False,
               progress: bool | None = None, **settings: Any) -> TrainResult | dict[str, Any]:
    """Train PAC-S (``mode: pacs``) or PAC-S++ (``mode: pacs++``); ``dry_run`` returns :func:`plan` only.

    ``backbone``: a loaded ClipBackbone instead of ``config.backbone``; ``train_data`` /
    ``val_data``: CaptionedImage lists instead of COCO; ``positives``: instead of ``config.positives``.
    """
    if isinstance(config, PacsTrainConfig):
        cfg = load_config(PacsTrainConfig, None, {**to_dict(config), **settings}) if settings else config
    else:
        cfg = load_config(PacsTrainConfig, config, settings)
    run = Path(cfg.output_dir)
    if (run / "state.pt").exists() and not resume and not dry_run:
        raise InputError(f"{run} already holds a training run (state.pt): resume it (--resume) or choose another "
                         "output_dir")
    train_items = _items(cfg, train_data, cfg.train_split, cfg.max_train_images)
    if not train_items:
        raise InputError("PAC-S training needs data: set coco_root (COCO with dataset_coco.json) or pass train_data")
    val_items = [] if dry_run else (_items(cfg, val_data, cfg.val_split, cfg.max_val_images) or [])
    lv, lt = cfg.lambdas
    if positives is None and cfg.positives is not None:
        positives = read_positives(cfg.positives)
    if (lv or lt) and positives is None:
        raise InputError(f"lambda_v={lv}, lambda_t={lt} need generated positives: set positives (a folder of "
                         "`capeval train pacs generate`) or set both lambdas to 0")
    for name, items in (("train", train_items), ("val", val_items)):
        check_positives(items, positives or Positives(), lv > 0, lt > 0, name)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    if dry_run and backbone is None:
        clip = shape_only_model(cfg.backbone)
        counts = describe_trainable(PacsObjective(clip, None, cfg).clip)
        return plan(cfg, len(train_items), clip.config, counts["trainable"], counts["parameters"],
                    launched_processes())
    if backbone is None:
        backbone = load_training_backbone(cfg.backbone, cfg.seed)
    objective = PacsObjective(backbone.model, backbone.tokenizer, cfg)
    counts = describe_trainable(objective.clip)
    the_plan = plan(cfg, len(train_items), objective.clip.config, counts["trainable"], counts["parameters"],
                    launched_processes())
    if dry_run:
        return the_plan
    runner = Runner(cfg)
    objective.to(runner.device)
    params = [p for p in objective.clip.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    step, epoch, skip, best, best_step, history = 0, 0, 0, None, 0, []
    elapsed = 0.0
    if resume and (run / "state.pt").exists():
        state = torch.load(run / "state.pt", map_location="cpu", weights_only=True)
        with torch.no_grad():
            for p, saved in zip(params, state["trainable"]):
                p.copy_(saved)
        optimizer.load_state_dict(state["optimizer"])
        step, epoch, skip, best, best_step = state["step"], state["epoch"], state["batch"], state["best"], state["best_step"]
        elapsed, history = state["elapsed"], list(state["history"])
    datasets = {name: PacsDataset(items, positives, backbone.preprocess, lv > 0, lt > 0, cfg.seed)
                for name, items in (("train", train_items), ("val", val_items)) if items}
    gen = torch.Generator()
    # every process draws the same global micro-batches and loads its own part of each
    val_batches = global_batches(range(len(val_items)), cfg.micro_batch)
    core = objective  # accelerate may wrap it (DDP); export reads the plain module
    core.gather = runner.gather
    objective, optimizer = runner.prepare(objective, optimizer)
    run.mkdir(parents=True, exist_ok=True)
    meta = {"capeval_version": __version__, "mode": cfg.mode, "loss": cfg.loss, "config_hash": config_hash(cfg),
            "data": {"train": items_hash(train_items), "val": items_hash(val_items) if val_items else None,
                     "positives": (positives.hashes if positives else {})},
            "backbone": backbone.signature.get("backbone"), "backbone_sha256": backbone.signature.get("sha256"),
            "plan": the_plan}
    exported: dict[str, Any] = {}
    if resume and (run / "run.json").exists():
        exported = dict(json.loads((run / "run.json").read_text(encoding="utf-8")).get("files", {}))
    if runner.is_main:
        atomic_write_text(run / "config.yaml", dump_yaml(cfg))
        atomic_write_text(run / "run.json", json.dumps(meta, indent=2, default=str))
    log = MetricsLog(run, [*LOSS_FIELDS, "lr"], cfg.tensorboard, runner.is_main, elapsed)
    stopped = "max_epochs"
    max_steps = the_plan["max_steps"]

    def save(tag: str, val: float | None) -> None:
        if not runner.is_main:
            return
        files = export(core, run, tag, {**meta, "step": step, "val_loss": val})
        # the scorer's signature records the loaded file's sha256: run.json maps it back to this run
        from capeval.hashing import file_digest

        exported.update({f.name: {"sha256": file_digest(f, "sha256", cached=False), "step": step} for f in files})
        atomic_write_text(run / "run.json", json.dumps({**meta, "files": exported}, indent=2, default=str))
        atomic_torch_save({"trainable": [p.detach().cpu() for p in params], "optimizer": optimizer.state_dict(),
                            "step": step, "epoch": epoch, "batch": skip, "best": best, "best_step": best_step,
                            "elapsed": log.elapsed(), "history": history}, run / "state.pt")

    with make_progress(max_steps, "train", progress if runner.is_main else False) as bar:
        bar.update(step)
        while epoch < cfg.max_epochs and stopped == "max_epochs":
            datasets["train"].set_epoch(epoch)
            gen.manual_seed(cfg.seed + epoch)  # the same order after a resume, on every process
            order = torch.randperm(len(datasets["train"]), generator=gen).tolist()
            objective.train()
            micro = 0
            batches = global_batches(order, cfg.micro_batch)[skip * cfg.grad_accum :]
            for batch in local_batches(datasets["train"], batches, runner, cfg.workers, lt > 0):
                with runner.autocast():
                    out = objective(batch)
                # out is the global micro-batch's loss on every process (module docstring)
                runner.backward(out["loss"] * runner.world_size / cfg.grad_accum)
                micro += 1
                if micro % cfg.grad_accum:
                    continue
                if cfg.grad_clip:
                    runner.clip(params, cfg.grad_clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step, skip = step + 1, skip + 1
                bar.update(1)
                if step % cfg.log_every == 0:
                    log.log(step, epoch + 1, "train", **{n: float(out[n].detach()) for n in LOSS_FIELDS}, lr=cfg.lr)
                if "val" in datasets and step % cfg.val_every == 0:
                    val = evaluate(objective, local_batches(datasets["val"], val_batches, runner, cfg.workers,
                                                            lt > 0), runner)
                    log.log(step, epoch + 1, "val", **val)
                    history.append({"step": step, "train_loss": float(out["loss"].detach()),
                                    **{f"val_{n}": x for n, x in val.items()}})
                    if best is None or val["loss"] < best:
                        best, best_step = val["loss"], step
                        save("best", best)
                    elif step - best_step >= cfg.patience_steps:
                        stopped = "early_stopping"
                if stopped == "max_epochs" and step >= max_steps:
                    stopped = "max_steps"
                if stopped != "max_epochs":
                    break
            if stopped == "max_epochs":
                epoch, skip = epoch + 1, 0
    save("last", best)
    log.close()
    best_path = run / "best.safetensors"
    return TrainResult(run, best_path if best_path.exists() else None, run / "last.safetensors", step, best,
                       stopped, history, runner.is_main)


@torch.no_grad()
def evaluate(objective: PacsObjective, batches: Iterator[Mapping[str, Any]], runner: Any) -> dict[str, float]:
    """Mean validation loss terms over the global ``batches`` (:func:`local_batches`), weighted by
    their sizes (fixed caption draws)."""
    was = objective.training
    objective.eval()
    sums = {k: 0.0 for k in LOSS_FIELDS}
    count = 0
    for batch in batches:
        with runner.autocast():
            out = objective(batch)
        size = batch.get("global", len(batch["v"]))
        for k in LOSS_FIELDS:  # the global batch's loss on every process; the mean keeps them bit-equal
            sums[k] += runner.mean(out[k]) * size
        count += size
    objective.train(was)
    return {k: v / max(count, 1) for k, v in sums.items()}


def load_released(objective: PacsObjective, path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Load a released-layout file (PAC-S or PAC-S++) into ``objective``'s model; returns extra keys."""
    from capeval.models.clip.checkpoints import read_state_dict

    return import_state(objective.clip, read_state_dict(path, trusted=True), str(path))
