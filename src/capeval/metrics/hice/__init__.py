"""HICE-S and RefHICE-S (Zeng et al., ACM MM 2024): hierarchical, interpretable caption evaluation.

- :mod:`.scorer`: the ``hice-s`` / ``ref-hice-s`` scorer (:class:`~.scorer.HiceScore`);
- :mod:`.visual`: images -> regions -> Alpha-CLIP embeddings (batched, cached);
- :mod:`.phrases`: captions -> phrases (capeval's SPICE parser, or FACTUAL in :mod:`.factual`);
- :mod:`.explain`: per-item explanation JSON (schema) and PNG;
- the formulas: :mod:`capeval.functional.hice`.

Importing this package loads nothing heavy; the submodules import torch/PIL when used.
"""
