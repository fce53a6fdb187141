"""Training commands (``capeval train ...``) and their shared pieces.

``config`` (YAML configs), ``logging`` (CSV metrics log, optional TensorBoard), ``coco``
(COCO Karpathy splits), ``captioner`` (BLIP / BLIP-2 through transformers), ``losses``
(contrastive losses), ``bridge`` / ``bridge_data`` (BRIDGE's training loop and batches).
Nothing here is imported by ``import capeval``.
"""
