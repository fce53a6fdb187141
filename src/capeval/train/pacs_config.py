"""The settings of ``capeval train pacs`` (one flat YAML mapping), with the papers' values as defaults.

Sarto et al. 2024 (PAC-S++ journal), Sec. 4.1: CLIP ViT-B/32, COCO Karpathy splits, LoRA
rank 4, AdamW lr 1e-4, batch 256, lambda_v 0.1, lambda_t 0.001, training stopped when the
validation loss has not decreased for 1,500 iterations. PAC-S (Sarto et al. 2023; journal
Table 7 first row): only the final projections trained, lambda_v 0.05, lambda_t 0.1.
Not given by the papers (capeval's choices): validation every 100 steps, AdamW's default
weight decay 0.01, CLIP's own logit scale (frozen) as 1/tau, constant lr, max 30 epochs.
SigLIP / SigLIP 2 backbones (journal Table 8, "the same training strategies"): the same
settings; ``loss: sigmoid`` (capeval's option, not the paper's) trains with SigLIP's loss.
``mode`` picks the defaults of ``lambda_v`` / ``lambda_t`` when they are left unset (null).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from capeval.errors import InputError
from capeval.train.config import runtime_problems

TARGETS = ("attn", "attn_out", "mlp", "conv1")  # attn = q/k/v (in_proj_weight), attn_out = out_proj
QKV_INITS = ("xavier", "zeros")  # pacscore's attention layer | loralib's (B = 0)

LOSSES = ("infonce", "sigmoid")  # the papers' InfoNCE | SigLIP's sigmoid loss (Zhai et al. 2023), an option
MODE_LAMBDAS = {"pacs": (0.05, 0.1), "pacs++": (0.1, 0.001)}


@dataclass
class PacsTrainConfig:
    """Every setting of a PAC-S / PAC-S++ training run (YAML keys = these names)."""

    RANGES: ClassVar[str] = "pacs"  # capeval.ranges.TRAIN_RANGES

    mode: str = "pacs++"                   # pacs: projections only | pacs++: LoRA
    # data (capeval.train.coco + capeval.train.pacs_data)
    coco_root: str | None = None
    annotations: str | None = None         # dataset_coco.json; default <coco_root>/dataset_coco.json
    train_split: str = "train"
    val_split: str = "val"
    positives: str | None = None           # folder of `capeval train pacs generate` (*.jsonl)
    max_train_images: int | None = None
    max_val_images: int | None = None
    # model
    backbone: str = "openai/ViT-B-32"
    lora_rank: int = 4
    lora_alpha: float = 1.0
    lora_targets: list[str] = field(default_factory=lambda: list(TARGETS))
    lora_qkv_init: str = "xavier"          # xavier: pacscore's attention layer | zeros: B = 0 (starts at CLIP)
    # loss: L = L(V,T) + lambda_v L(V',T) + lambda_t L(V,T')
    lambda_v: float | None = None          # None: 0.05 (pacs) / 0.1 (pacs++)
    lambda_t: float | None = None          # None: 0.1 (pacs) / 0.001 (pacs++)
    temperature: float | None = None       # None: CLIP's learned logit scale (1 / temperature)
    loss: str = "infonce"                  # infonce: the papers' | sigmoid: SigLIP's own loss (SigLIP backbones)
    # optimisation
    lr: float = 1e-4
    weight_decay: float = 0.01
    batch_size: int = 256                  # images per optimizer step, over all processes
    grad_accum: int = 1                    # micro-batches per step (negatives: the whole global micro-batch)
    max_epochs: int = 30
    max_steps: int | None = None
    val_every: int = 100                   # steps between validations
    patience_steps: int = 1500             # stop after this many steps without a better val loss
    grad_clip: float | None = None
    # run
    output_dir: str = "runs/pacs"
    seed: int = 0
    workers: int = 4
    device: str = "auto"
    mixed_precision: str = "no"            # no | bf16 | fp16 (fp16 through accelerate)
    accelerate: str = "auto"
    log_every: int = 50
    tensorboard: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.mode not in MODE_LAMBDAS:
            problems.append(f"mode={self.mode!r} (pacs or pacs++)")
        problems += runtime_problems(self)
        if not problems and self.batch_size % self.grad_accum:
            problems.append(f"batch_size {self.batch_size} must be a multiple of grad_accum {self.grad_accum}")
        if self.loss not in LOSSES:
            problems.append(f"loss={self.loss!r} ({' or '.join(LOSSES)})")
        if self.lora_qkv_init not in QKV_INITS:
            problems.append(f"lora_qkv_init={self.lora_qkv_init!r} ({' or '.join(QKV_INITS)})")
        bad = sorted(set(self.lora_targets) - set(TARGETS))
        if bad:
            problems.append(f"lora_targets {bad} (known: {', '.join(TARGETS)})")
        if problems:
            raise InputError("PAC-S training config: " + "; ".join(problems))

    @property
    def lambdas(self) -> tuple[float, float]:
        """(lambda_v, lambda_t) after the mode's defaults."""
        dv, dt = MODE_LAMBDAS[self.mode]
        return (dv if self.lambda_v is None else self.lambda_v, dt if self.lambda_t is None else self.lambda_t)

    @property
    def micro_batch(self) -> int:
        return self.batch_size // self.grad_accum
