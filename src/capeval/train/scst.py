"""Training the SCST captioner of PAC-S++ (Sarto et al. 2024, Sec. 4.2 and 5.1): ``capeval train captioner``.

Stage 1, cross-entropy (teacher forcing, Eq. 16): Adam, batch 1,024 (image, caption) pairs,
``xe_steps`` = 20,000; the learning rate rises linearly over 1,000 steps to 2.5e-4, stays
until 10,000, falls to 1e-5 by 15,000 (linearly: the journal says "sub-linearly" without a
formula) and stays there.

Stage 2, SCST (Eq. 18-19): per image, beam search (beam l = 5) gives l captions t^_i, each
rewarded by :class:`capeval.reward.Reward` (any capeval metric or a weighted mix; CIDEr-D's
document frequencies fitted once on the training references); baseline b = mean reward
of the image's beam; loss = -(1/l) sum_i (r(t^_i) - b) log p(t^_i), averaged over the
images of a batch; Adam 1e-6, batch 32 images, one epoch. The journal does not say whether
dropout is active in this stage. The beams are searched without gradient and their
log-probabilities recomputed with it, so the search's dropout masks could not be reused
anyway: both run with dropout off (eval mode), so log p(t^_i) is the probability under the
very policy that chose t^_i. (Meshed-memory-style SCST loops instead search in train mode and
take log p from the search itself; with ``dropout: 0`` the two coincide.)

Adam's epsilon (``adam_eps``) is PyTorch's default, 1e-8: the journal names Adam without one.

Each stage ends with ``<stage>.pt`` (model, vocabulary, config) and an evaluation of the
``eval_split`` captions (beam ``eval_beam``) with ``eval_metrics`` (one ``capeval.score``
call) plus the diagnostics rep-1..4 / length / vocab / ``incorrect`` (``eval_incorrect``: on by
default, it needs spaCy's English model; a missing model is an error before any training, and
``eval_incorrect: false`` leaves the diagnostic out explicitly): ``eval-<stage>.json``.
``last.pt`` holds everything needed to resume (optimizer, stage, step) and is written every
``checkpoint_every`` steps.

Several processes (``accelerate launch`` / ``torchrun``; :class:`capeval.train.runner.Runner`):
``xe_batch_size`` and ``scst_batch_size`` stay global batch sizes; each process takes its
contiguous part of every global batch (sizes differ by at most one; an empty part adds a zero
loss), and the losses are scaled so that DDP's gradient average is the gradient of the global
batch's loss: XE sums its token losses times ``world / global tokens``, SCST its images'
losses times ``world / global images``. Each process computes its part's grid features, beam
search and rewards (its own :class:`capeval.reward.Reward`, fitted on the same references);
the main process alone writes checkpoints, logs and runs the evaluations.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from capeval.errors import InputError
from capeval.io.atomic import atomic_open, atomic_write_text
from capeval.progress import make_progress
from capeval.train.coco import CaptionedImage
from capeval.train.config import dump_yaml, load_config, runtime_problems, to_dict
from capeval.train.logging import MetricsLog
from capeval.train.runner import Runner
from capeval.train.scst_eval import diagnostics_scorer, evaluate, generate
from capeval.train.scst_model import EOS, PAD, CaptionTransformer, FeatureStore, Vocab, pad_batch, sequence_logprobs

STAGES = ("xe", "scst")


@dataclass
class CaptionerTrainConfig:
    """Settings of ``capeval train captioner`` (YAML keys); defaults are the journal's."""

    RANGES: ClassVar[str] = "captioner"  # capeval.ranges.TRAIN_RANGES

    coco_root: str | None = None
    annotations: str | None = None
    output_dir: str = "runs/captioner"
    backbone: str = "openai/ViT-L-14"
    feature_dir: str | None = None  # default: <output_dir>/features
    max_train_images: int | None = None
    max_eval_images: int | None = None
    min_word_count: int = 5
    max_len: int = 20
    d_model: int = 512
    heads: int = 8
    enc_layers: int = 3
    dec_layers: int = 3
    ff_dim: int = 2048
    dropout: float = 0.1
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    xe_batch_size: int = 1024
    xe_steps: int = 20000
    xe_lr: float = 2.5e-4
    xe_warmup: int = 1000
    xe_decay_start: int = 10000
    xe_decay_end: int = 15000
    xe_lr_min: float = 1e-5
    scst_batch_size: int = 32
    scst_lr: float = 1e-6
    scst_epochs: int = 1
    beam_size: int = 5
    reward: dict[str, float] = field(default_factory=lambda: {"pac-s++": 1.0})
    reward_options: dict[str, Any] = field(default_factory=dict)
    eval_split: str = "test"
    eval_metrics: str = "coco-ngram,clip-s,ref-clip-s,pac-s++,ref-pac-s++"
    eval_beam: int = 5
    log_every: int = 50
    checkpoint_every: int = 1000
    adam_eps: float = 1e-8  # PyTorch's default (the journal names Adam only); range (0, 1]
    eval_incorrect: bool = True  # the %Incorrect diagnostic (spaCy's English model); false: left out
    seed: int = 0
    device: str = "cpu"
    accelerate: str = "auto"
    mixed_precision: str = "no"
    tensorboard: bool = False

    def __post_init__(self) -> None:
        problems = runtime_problems(self)
        if not problems and self.d_model % self.heads:
            problems.append(f"d_model={self.d_model} must be a multiple of heads={self.heads}")
        if not problems and self.xe_decay_end < self.xe_decay_start:
            problems.append(f"xe_decay_end={self.xe_decay_end} must be >= xe_decay_start={self.xe_decay_start}")
        if problems:
            raise InputError("captioner config: " + "; ".join(problems))


@dataclass
class CaptionerResult:
    run_dir: Path
    checkpoints: dict[str, Path]
    evaluations: dict[str, dict[str, float]]
    steps: dict[str, int]
    is_main: bool = True  # False on the other processes of a multi-process run


def xe_learning_rate(step: int, cfg: CaptionerTrainConfig) -> float:
    """Stage-1 learning rate at ``step`` (0-based): warm-up, plateau, decay, floor."""
    if step < cfg.xe_warmup:
        return cfg.xe_lr * (step + 1) / cfg.xe_warmup
    if step < cfg.xe_decay_start:
        return cfg.xe_lr
    if step < cfg.xe_decay_end:
        frac = (step - cfg.xe_decay_start) / (cfg.xe_decay_end - cfg.xe_decay_start)
        return cfg.xe_lr + frac * (cfg.xe_lr_min - cfg.xe_lr)
    return cfg.xe_lr_min


def _order(n: int, k: int, seed: int) -> int:
    """Index of the k-th draw over epochs of seeded permutations of range(n) (resumable)."""
    return int(np.random.default_rng([seed, k // n]).permutation(n)[k % n])


def _save(obj: Any, path: Path) -> None:
    with atomic_open(path) as f:
        torch.save(obj, f)


def train_captioner(config: CaptionerTrainConfig | str | os.PathLike[str], *, resume: bool = False,
                    backbone: Any = None, data: Mapping[str, Sequence[CaptionedImage]] | None = None,
                    progress: bool | None = False) -> CaptionerResult:
    """Run the configured stages; ``data``: ``{"train": [...], eval_split: [...]}`` instead of COCO."""
    cfg = config if isinstance(config, CaptionerTrainConfig) else load_config(CaptionerTrainConfig, config)
    unknown = [s for s in cfg.stages if s not in STAGES]
    if unknown:
        raise InputError(f"captioner config: unknown stage {unknown[0]!r}; stages are {', '.join(STAGES)}")
    torch.manual_seed(cfg.seed)
    runner = Runner(cfg)
    main = runner.is_main
    run = Path(cfg.output_dir)
    run.mkdir(parents=True, exist_ok=True)
    state_path = run / "last.pt"
    state = torch.load(state_path, map_location="cpu", weights_only=False) if resume and state_path.exists() else None
    if state is None and (run / "last.pt").exists() and not resume:
        raise InputError(f"{run} already holds a run (last.pt): pass --resume or another output_dir")
    if main:
        atomic_write_text(run / "config.yaml", dump_yaml(cfg))
    train, held = _splits(cfg, data)
    if main:
        diagnostics_scorer(cfg.eval_incorrect)  # a missing spaCy model fails now, not after training
    if backbone is None:
        from capeval.models.clip.backbone import load_backbone

        with runner.main_first():  # a download happens once
            backbone = load_backbone(cfg.backbone, device=str(runner.device))
    store = FeatureStore(backbone, cfg.feature_dir or run / "features")
    images = {it.id: it.image for it in [*train, *held]}
    # each process extracts its share (one process alone could outlast the barrier's timeout)
    share = list(images)[runner.local_slice(len(images))]
    store.extract({i: images[i] for i in share}, progress=progress if main else False)
    runner.wait_for_everyone()
    vocab = Vocab(state["vocab"][4:]) if state else Vocab.build([c for it in train for c in it.captions],
                                                                 cfg.min_word_count)
    feature_dim = store.get([train[0].id]).shape[-1]
    model = CaptionTransformer(len(vocab), feature_dim, cfg.d_model, cfg.heads, cfg.enc_layers, cfg.dec_layers,
                               cfg.ff_dim, cfg.dropout, cfg.max_len).to(runner.device)
    if state:
        model.load_state_dict(state["model"])
    net = runner.prepare(model)
    log = MetricsLog(run, ("loss", "lr", "reward", "baseline", *_metric_fields(cfg)), cfg.tensorboard, main,
                     time_offset=state.get("time", 0.0) if state else 0.0)
    result = CaptionerResult(run, {}, {}, {}, main)
    done_stages = list(state["done"]) if state else []
    for stage in cfg.stages:
        if stage in done_stages:
            continue
        resume_state = state if state and state["stage"] == stage else None
        step_fn = _run_xe if stage == "xe" else _run_scst
        steps = step_fn(cfg, runner, net, vocab, store, train, log, resume_state, done_stages, progress)
        done_stages.append(stage)
        ckpt, evaluation = run / f"{stage}.pt", run / f"eval-{stage}.json"
        if main:
            _save({"model": model.state_dict(), "vocab": vocab.words, "config": to_dict(cfg), "stage": stage}, ckpt)
            _save({"model": model.state_dict(), "optimizer": None, "vocab": vocab.words, "stage": stage,
                   "step": steps, "done": done_stages, "time": log.elapsed()}, state_path)
            caps = generate(model, store, vocab, [it.id for it in held], cfg.eval_beam)
            scores = evaluate(caps, held, cfg.eval_metrics, cfg.eval_incorrect)
            log.log(steps, 0, f"eval-{stage}", **{k: v for k, v in scores.items() if k in log.fields})
            atomic_write_text(evaluation, json.dumps({"scores": scores, "captions": caps}, indent=1))
        runner.wait_for_everyone()
        if not main:
            scores = json.loads(evaluation.read_text(encoding="utf-8"))["scores"]
        result.checkpoints[stage], result.evaluations[stage], result.steps[stage] = ckpt, scores, steps
        state = None
    log.close()
    return result


def _metric_fields(cfg: CaptionerTrainConfig) -> list[str]:
    from capeval import registry

    names = registry.expand(cfg.eval_metrics) if cfg.eval_metrics else []
    return [*names, "rep-1", "rep-2", "rep-3", "rep-4", "length", "vocab", "incorrect"]


def _splits(cfg: CaptionerTrainConfig, data: Mapping[str, Sequence[CaptionedImage]] | None
            ) -> tuple[list[CaptionedImage], list[CaptionedImage]]:
    if data is None:
        if cfg.coco_root is None:
            raise InputError("captioner config: coco_root (COCO with dataset_coco.json) is required")
        from capeval.train.coco import load_karpathy

        data = {s: load_karpathy(cfg.coco_root, s, cfg.annotations, lim)
                for s, lim in (("train", cfg.max_train_images), (cfg.eval_split, cfg.max_eval_images))}
    if "train" not in data or cfg.eval_split not in data:
        raise InputError(f"captioner data: need the 'train' and {cfg.eval_split!r} splits")
    train = list(data["train"])[: cfg.max_train_images]
    held = list(data[cfg.eval_split])[: cfg.max_eval_images]
    if not train or not held:
        raise InputError("captioner data: the train and evaluation splits must not be empty")
    return train, held


def _checkpoint(path: Path, model: Any, optimizer: Any, vocab: Vocab, stage: str, step: int, done: list[str],
                log: MetricsLog) -> None:
    _save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "vocab": vocab.words, "stage": stage,
           "step": step, "done": list(done), "time": log.elapsed()}, path)


def _optimizer(runner: Runner, model: torch.nn.Module, lr: float, eps: float, state: dict | None
               ) -> tuple[Any, int]:
    opt = torch.optim.Adam(model.parameters(), lr=lr, eps=eps)
    if state is not None:
        opt.load_state_dict(state["optimizer"])
    return runner.prepare(opt), state["step"] if state is not None else 0


def _idle_loss(net: torch.nn.Module, feats: torch.Tensor) -> torch.Tensor:
    """A zero loss through every parameter: a process without a sample still joins DDP's all-reduce."""
    tokens = torch.full((feats.shape[0], 1), EOS, dtype=torch.long, device=feats.device)
    return net(feats, tokens).sum() * 0.0


def xe_loss(logits: torch.Tensor, targets: torch.Tensor, tokens: int | None = None, world: int = 1) -> torch.Tensor:
    """Cross-entropy of (B, T, V) ``logits`` against (B, T) ``targets``, ``<pad>`` ignored.

    ``tokens=None``: the mean over this batch's tokens. Else ``tokens`` is the global batch's
    token count over ``world`` processes: sum of this part's token losses x world / tokens, so
    the mean of the processes' gradients (DDP) is the gradient of the global token mean.
    """
    flat_logits, flat = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    if tokens is None:
        return F.cross_entropy(flat_logits, flat, ignore_index=PAD)
    return F.cross_entropy(flat_logits, flat, ignore_index=PAD, reduction="sum") * (world / tokens)


def _run_xe(cfg: CaptionerTrainConfig, runner: Runner, net: torch.nn.Module, vocab: Vocab, store: FeatureStore,
            train: list[CaptionedImage], log: MetricsLog, state: dict | None, done: list[str],
            progress: bool | None) -> int:
    model, world, device = runner.unwrap(net), runner.world_size, runner.device
    pairs = [(it.id, vocab.encode(c, cfg.max_len)) for it in train for c in it.captions]
    opt, start = _optimizer(runner, model, cfg.xe_lr, cfg.adam_eps, state)
    net.train()
    with make_progress(cfg.xe_steps - start, "XE steps", progress if runner.is_main else False) as bar:
        for step in range(start, cfg.xe_steps):
            lr = xe_learning_rate(step, cfg)
            for group in opt.param_groups:
                group["lr"] = lr
            batch = [pairs[_order(len(pairs), k, cfg.seed)]
                     for k in range(step * cfg.xe_batch_size, (step + 1) * cfg.xe_batch_size)]
            mine = batch[runner.local_slice(len(batch))]  # the global batch's part of this process
            with runner.autocast():
                if mine:
                    feats = store.get([b[0] for b in mine]).to(device)
                    targets = pad_batch([b[1] for b in mine], max(len(b[1]) for b in batch)).to(device)
                    tokens = sum(sum(1 for t in b[1] if t != PAD) for b in batch) if world > 1 else None
                    loss = xe_loss(net(feats, targets), targets, tokens, world)
                else:
                    loss = _idle_loss(net, store.get([batch[0][0]]).to(device))
            opt.zero_grad(set_to_none=True)
            runner.backward(loss)
            opt.step()
            bar.update(1)
            if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.xe_steps:
                value = float(runner.sum(loss.float()) / world)  # every process logs: the all-reduce needs all
                log.log(step + 1, (step + 1) * cfg.xe_batch_size // len(pairs), "xe", loss=value, lr=lr)
            if runner.is_main and (step + 1) % cfg.checkpoint_every == 0:
                _checkpoint(Path(cfg.output_dir) / "last.pt", model, opt, vocab, "xe", step + 1, done, log)
    return cfg.xe_steps


def scst_loss(rewards: torch.Tensor, logprobs: torch.Tensor, images: int | None = None) -> torch.Tensor:
    """SCST loss (Eq. 19) of (B, l) rewards and (B, l) sequence log-probs: baseline = the beam's mean reward.

    Averaged over the B images, or with ``images``: summed over them and divided by ``images``
    (a global batch's image count, for a batch split over processes).
    """
    advantage = rewards - rewards.mean(dim=1, keepdim=True)
    per_image = -(advantage.detach() * logprobs).mean(dim=1)
    return per_image.mean() if images is None else per_image.sum() / images


def _run_scst(cfg: CaptionerTrainConfig, runner: Runner, net: torch.nn.Module, vocab: Vocab, store: FeatureStore,
              train: list[CaptionedImage], log: MetricsLog, state: dict | None, done: list[str],
              progress: bool | None) -> int:
    from capeval.reward import Reward

    model, world, device = runner.unwrap(net), runner.world_size, runner.device
    refs = {it.id: list(it.captions) for it in train}
    images = {it.id: it.image for it in train}
    with runner.main_first():  # model downloads happen once
        reward = Reward(cfg.reward, fit=refs, device=str(device), options=cfg.reward_options or None)
    opt, start = _optimizer(runner, model, cfg.scst_lr, cfg.adam_eps, state)
    per_epoch = -(-len(train) // cfg.scst_batch_size)
    total = per_epoch * cfg.scst_epochs
    beam = cfg.beam_size
    with make_progress(total - start, "SCST steps", progress if runner.is_main else False) as bar:
        for step in range(start, total):
            epoch, k = divmod(step, per_epoch)
            perm = np.random.default_rng([cfg.seed, 1, epoch]).permutation(len(train))
            ids = [train[j].id for j in perm[k * cfg.scst_batch_size : (k + 1) * cfg.scst_batch_size]]
            mine = ids[runner.local_slice(len(ids))]
            stats = torch.zeros(3, device=device)  # reward sum, captions, beam-mean sum
            if mine:
                feats = store.get(mine).to(device)
                net.eval()  # search and log-probs both without dropout (module docs)
                seqs, _ = model.beam_search(feats, beam)
                b, l, t = seqs.shape
                flat = seqs.reshape(b * l, t)
                caps = [vocab.decode(s) for s in flat.cpu()]
                image_ids = [i for i in mine for _ in range(l)]
                r = reward(caps, refs, image_ids=image_ids, images={i: images[i] for i in mine}).to(device).view(b, l)
                with runner.autocast():
                    logp = sequence_logprobs(net(feats.repeat_interleave(l, 0), flat), flat).view(b, l)
                net.train()
                loss = scst_loss(r, logp) if world == 1 else scst_loss(r, logp, len(ids)) * world
                rf = r.detach().float()
                stats = torch.stack([rf.sum(), rf.new_tensor(float(rf.numel())), rf.mean(dim=1).sum()])
            else:
                with runner.autocast():
                    loss = _idle_loss(net, store.get(ids[:1]).to(device))
            opt.zero_grad(set_to_none=True)
            runner.backward(loss)
            opt.step()
            bar.update(1)
            if (step + 1) % cfg.log_every == 0 or step + 1 == total:
                value = float(runner.sum(loss.float()) / world)
                stats = runner.sum(stats.float())
                log.log(step + 1, epoch, "scst", loss=value, lr=cfg.scst_lr, reward=float(stats[0] / stats[1]),
                        baseline=float(stats[2] / len(ids)))
            if runner.is_main and (step + 1) % cfg.checkpoint_every == 0:
                _checkpoint(Path(cfg.output_dir) / "last.pt", model, opt, vocab, "scst", step + 1, done, log)
    return total
