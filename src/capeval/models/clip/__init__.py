"""CLIP machinery (model, tokenizer, preprocessing, checkpoints, LoRA) and the CLIP-based image metrics.

Importing this package loads nothing heavy; use the submodules
(:mod:`capeval.models.clip.backbone` for ``load_backbone``/``random_backbone``/``ClipBackbone``;
:mod:`capeval.models.clip.alpha` for Alpha-CLIP).
"""
