"""The settings of ``capeval train bridge`` (one flat YAML mapping), with the paper's values as defaults.

Sarto et al. 2024 (BRIDGE), Sec. 4.1 unless noted: CLIP ViT-B/32 (or ViT-L/14), psi of two
Transformer layers, AdamW with lr 0.0001 and batch 256, lambda1 = lambda3 = 0.01 and
lambda2 = 1.0 (Eq. 3), two random noun chunks per caption in training, COCO Karpathy splits,
BLIP ViT-L COCO template captions; US = 3 (Table 1); L1/L2 weighted as in the supplementary's
Eq. 5/6 (``loss_weighting: paper``; :mod:`capeval.train.losses`). The paper gives no epoch count (only
"around one day on a single A100"), weight decay, temperature or schedule: capeval uses
max_epochs 20 with early stopping on the validation loss (patience 3), AdamW's default
weight decay 0.01, CLIP's own (frozen) logit scale as the InfoNCE scale, constant lr.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from capeval.errors import InputError
from capeval.train.config import runtime_problems
from capeval.metrics.bridge.mapping import BridgeConfig
from capeval.metrics.bridge.templates import DEFAULT_SPACY_MODEL
from capeval.train.captioner import DEFAULT_CAPTIONER
from capeval.train.losses import WEIGHTINGS


@dataclass
class BridgeTrainConfig:
    """Every setting of a BRIDGE training run (YAML keys = these names)."""

    RANGES: ClassVar[str] = "bridge"  # capeval.ranges.TRAIN_RANGES

    # data: COCO Karpathy splits from a user-given root (capeval.train.coco)
    coco_root: str | None = None
    annotations: str | None = None         # dataset_coco.json; default <coco_root>/dataset_coco.json
    train_split: str = "train"             # Karpathy train + restval
    val_split: str = "val"
    max_train_images: int | None = None    # first N images only (smoke tests)
    max_val_images: int | None = None
    templates: str = "captioner"           # "captioner" | "reference" | path of a caption file
    captioner: str = DEFAULT_CAPTIONER
    captioner_batch_size: int = 32
    caption_cache: str | None = None       # None: <capeval cache>/bridge-templates
    spacy_model: str = DEFAULT_SPACY_MODEL
    # model (capeval.metrics.bridge.mapping.BridgeConfig)
    backbone: str = "openai/ViT-B-32"
    us: int = 3
    layers: int = 2
    heads: int | None = None
    mapping: str = "transformer"           # Table 1 ablation: "mlp"
    template: str = "caption"              # Table 1 ablation: "none"
    grid: str = "projected"
    dropout: float = 0.1
    prompt: str = "A photo depicts "
    # loss (Eq. 3)
    lambda1: float = 0.01
    lambda2: float = 1.0
    lambda3: float = 0.01                  # 0: Table 1 "w/o regularization branch"
    train_chunks: int = 2
    temperature: float | None = None       # None: CLIP's logit scale (1 / temperature)
    loss_weighting: str = "paper"          # L1/L2: supplementary Eq. 5/6 | "capeval-v1" (capeval 0.1.0's reading)
    # optimisation
    lr: float = 1e-4
    weight_decay: float = 0.01
    batch_size: int = 256
    max_epochs: int = 20
    max_steps: int | None = None
    patience: int = 3                      # epochs without a better validation loss before stopping
    min_delta: float = 0.0
    grad_clip: float | None = None
    # run
    output_dir: str = "runs/bridge"
    seed: int = 0
    workers: int = 4                       # DataLoader processes decoding images
    device: str = "auto"                   # auto: cuda when available
    mixed_precision: str = "no"            # no | bf16 | fp16 (fp16 through accelerate)
    accelerate: str = "auto"               # auto: when installed and on GPU | yes | no
    log_every: int = 50
    tensorboard: bool = False

    def __post_init__(self) -> None:
        problems = runtime_problems(self)
        if self.loss_weighting not in WEIGHTINGS:
            problems.append(f"loss_weighting must be one of {', '.join(WEIGHTINGS)}")
        if problems:
            raise InputError("BRIDGE training config: " + "; ".join(problems))
        self.model_config(None)  # validates the model settings too

    def model_config(self, clip_config: Any) -> BridgeConfig:
        """The :class:`BridgeConfig` of these settings, sized for ``clip_config`` (None: only validate)."""
        options = {"us": self.us, "layers": self.layers, "heads": self.heads, "mapping": self.mapping,
                   "template": self.template, "grid": self.grid, "dropout": self.dropout, "prompt": self.prompt}
        if clip_config is None:
            return BridgeConfig(**options)
        return BridgeConfig.for_clip(clip_config, **options)
