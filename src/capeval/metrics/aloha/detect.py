"""The detector of ALOHa's official pipeline (DavidMChan/aloha ``utils/object_detections.py``,
``aloha evaluate-dataset --add-detections``): DETR ``facebook/detr-resnet-50`` through
``transformers``, every detection with score above 0.9 kept, its label from the model's
``id2label`` (duplicates kept here; the metric deduplicates them).

The official code runs the model as is (no ``torch.no_grad``, no device choice); here under
``torch.inference_mode`` on ``device`` (same numbers on CPU). ``facebook/detr-resnet-50``'s
backbone is a timm ResNet-50 (``pip install timm``).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from capeval.errors import InputError, ResourceError

DETR = "facebook/detr-resnet-50"
THRESHOLD = 0.9


class Detector:
    """``labels(image_path) -> [label, ...]`` with DETR ``model`` (hub name or folder)."""

    def __init__(self, model: str = DETR, threshold: float = THRESHOLD, device: str = "cpu"):
        self.name, self.threshold, self.device = model, threshold, device
        self._proc: Any = None
        self._model: Any = None

    def _load(self) -> None:
        try:
            from transformers import AutoImageProcessor, DetrForObjectDetection
        except ImportError:
            raise InputError("aloha detector=detr needs transformers: pip install 'capeval[hf]'") from None
        try:
            self._proc = AutoImageProcessor.from_pretrained(self.name)
            self._model = DetrForObjectDetection.from_pretrained(self.name).to(self.device).eval()
        except (OSError, ValueError, ImportError) as exc:
            raise ResourceError(f"aloha: cannot load the detector {self.name!r} ({str(exc).splitlines()[0][:160]}); "
                                "pass -O aloha.detector_model=FOLDER") from None

    def labels(self, image: str | os.PathLike[str]) -> list[str]:
        import torch
        from PIL import Image

        if self._model is None:
            self._load()
        try:
            with Image.open(image) as im:
                rgb = im.convert("RGB")
        except OSError as exc:
            raise InputError(f"aloha detector: cannot read image {os.fspath(image)!r} ({exc})") from None
        inputs = self._proc(images=rgb, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            outputs = self._model(**inputs)
        sizes = torch.tensor([rgb.size[::-1]])
        result = self._proc.post_process_object_detection(outputs, threshold=self.threshold, target_sizes=sizes)[0]
        return [str(self._model.config.id2label[int(label)]) for label in result["labels"]]

    def detect(self, images: Mapping[str, Any]) -> dict[str, list[str]]:
        """``{id: labels}`` for ``{id: image path}``; each file run once."""
        seen: dict[str, list[str]] = {}
        out = {}
        for i, path in images.items():
            key = os.fspath(path)
            if key not in seen:
                seen[key] = self.labels(path)
            out[i] = list(seen[key])
        return out
