"""Video captioning metrics: EMScore and PAC-S for video (reference-free and reference-based).

Importing this package is light (no torch, no PyAV). The pieces:

- :mod:`capeval.metrics.emscore.formulas`  the EMScore formulas as pure tensor functions (IDF, matching)
- :mod:`capeval.metrics.emscore.scorer`  the scorers behind ``emscore``, ``ref-emscore``,
  ``pac-s-video`` and ``ref-pac-s-video`` (need the ``video`` extra)
- :mod:`capeval.io.video`   locate videos or frame folders, decode with PyAV, sample N frames
"""
