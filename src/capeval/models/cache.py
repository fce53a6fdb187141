"""Backbones loaded once and shared: two metrics on the same weights get the same object.

:class:`capeval.Evaluator` keeps one cache for all its scorers (``clip-s`` and ``emscore``
both use OpenAI's ViT-B/32: it is read and hashed once); the bench passes one cache to the
evaluators of all its benchmarks.
"""

from __future__ import annotations

import os
from typing import Any


class ModelCache:
    """``(checkpoint, device, options) -> loaded backbone``; ``loads`` counts real loads."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[Any, ...], Any] = {}
        self.loads = 0

    def backbone(self, name: str | os.PathLike[str], device: str = "cpu", **options: Any) -> Any:
        """The :class:`~capeval.models.clip.backbone.ClipBackbone` of ``name``, loaded on first use.

        ``options`` are :func:`~capeval.models.clip.backbone.load_backbone`'s (``lora``,
        ``tokenizer``, ``checkpoint_dir``); ``None`` values mean the default.
        """
        given = {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in options.items() if v is not None}
        key = (os.fspath(name), str(device), tuple(sorted(given.items())))
        if key not in self._loaded:
            from capeval.models.clip.backbone import load_backbone

            self._loaded[key] = load_backbone(name, device=device, **given)
            self.loads += 1
        return self._loaded[key]

    def __len__(self) -> int:
        return len(self._loaded)
