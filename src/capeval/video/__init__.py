"""Video captioning metrics: EMScore and PAC-S for video (reference-free and reference-based).

Importing this package is light (no torch, no PyAV). The pieces:

- :mod:`capeval.video.frames`   locate videos or frame folders, decode with PyAV, sample N frames
- :mod:`capeval.video.emscore`  the EMScore formulas as pure tensor functions (IDF, matching)
- :mod:`capeval.video.scorers`  the scorers behind ``emscore``, ``ref-emscore``,
  ``pac-s-video`` and ``ref-pac-s-video`` (need the ``video`` extra)
- :mod:`capeval.video.specs`    registry entries (data only)
"""

from __future__ import annotations

__all__ = ["frames", "emscore", "scorers", "specs"]
