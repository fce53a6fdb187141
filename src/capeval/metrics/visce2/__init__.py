"""VisCE2 (Maeda et al. 2024): a vision-language model rates a caption 0-100 after extracting
the image's visual context. The scorer is :class:`capeval.metrics.visce2.scorer.VisCE2`;
prompts in :mod:`.prompts` (data files in ``capeval/data/visce2``), answer parsing in
:mod:`.parse`, the generation cache in :mod:`.cache`, model access in :mod:`.backends`.

Importing this package loads nothing heavy.
"""
