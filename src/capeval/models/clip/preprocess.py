"""CLIP image preprocessing without torchvision, equal to its PIL path step by step.

``Resize(size, BICUBIC)`` -> ``CenterCrop(size)`` -> ``convert("RGB")`` -> ``ToTensor`` ->
``Normalize(mean, std)``, in that order (the resize runs on the image's own mode, as in
OpenAI's and open_clip's transforms, so palette images are resized the way PIL does it):

- resize: the shorter side becomes ``size``, the longer ``int(size * long / short)``
  (torchvision truncates), one ``PIL.Image.resize((w, h), BICUBIC)`` call;
- crop: offsets ``int(round((h - size) / 2))`` and ``int(round((w - size) / 2))``
  (Python's round, as torchvision's ``center_crop``);
- to tensor: float32 / 255, then ``(x - mean) / std`` per channel in float32.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from capeval.errors import InputError

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
INCEPTION_MEAN = (0.5, 0.5, 0.5)
INCEPTION_STD = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class Preprocess:
    """Preprocessing of one checkpoint: size, mean/std, interpolation (always bicubic for CLIP)."""

    size: int = 224
    mean: tuple[float, float, float] = OPENAI_MEAN
    std: tuple[float, float, float] = OPENAI_STD
    interpolation: str = "bicubic"

    def signature(self) -> dict[str, Any]:
        return {"size": self.size, "mean": list(self.mean), "std": list(self.std),
                "interpolation": self.interpolation, "resize": "shortest+center-crop"}

    def __call__(self, image: Any, name: str | None = None) -> np.ndarray:
        """(3, size, size) float32 array from a path, PIL image or HWC uint8 array."""
        return to_array(self.transform_pil(open_image(image, name)), self.mean, self.std)

    def transform_pil(self, img: Any) -> Any:
        from PIL import Image

        resample = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}[self.interpolation]
        img = resize_shorter(img, self.size, resample)
        img = center_crop(img, self.size)
        return img.convert("RGB")


def resize_shorter(img: Any, size: int, resample: int) -> Any:
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    if (new_w, new_h) == (w, h):  # torchvision returns the image untouched
        return img
    return img.resize((new_w, new_h), resample)


def center_crop(img: Any, size: int) -> Any:
    w, h = img.size
    if w < size or h < size:  # cannot happen after resize_shorter; torchvision would pad
        raise ValueError(f"image {w}x{h} smaller than the crop {size}")
    top = int(round((h - size) / 2.0))
    left = int(round((w - size) / 2.0))
    return img.crop((left, top, left + size, top + size))


def to_array(img: Any, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    x = np.asarray(img, dtype=np.uint8).astype(np.float32) / np.float32(255)
    x = (x - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def open_image(image: Any, name: str | None = None) -> Any:
    """A fully decoded PIL image from a path, PIL image or numpy array; errors name the file.

    Files and file objects are decoded by :func:`capeval.io.image_files.decode_image`
    (regular files only, the pixel limit checked before decoding)."""
    from PIL import Image

    from capeval.io.image_files import decode_image

    if isinstance(image, Image.Image):
        return image
    if isinstance(image, np.ndarray):
        return _from_array(image, name)
    if isinstance(image, (str, os.PathLike)) or hasattr(image, "read"):
        # a file object (e.g. bytes already read for hashing) carries its file name in .name
        return decode_image(image, name)
    raise InputError(f"unsupported image type {type(image).__name__} for {name or 'image'}", name)


def _from_array(arr: np.ndarray, name: str | None) -> Any:
    from PIL import Image

    label = name or "array"
    if arr.dtype != np.uint8:
        raise InputError(f"image {label}: array must be uint8 HWC, got dtype {arr.dtype}", name)
    if arr.ndim == 2:
        return Image.fromarray(arr, "L")
    if arr.ndim == 3 and arr.shape[2] in (1, 3, 4):
        if arr.shape[2] == 1:
            return Image.fromarray(arr[:, :, 0], "L")
        return Image.fromarray(np.ascontiguousarray(arr), "RGB" if arr.shape[2] == 3 else "RGBA")
    raise InputError(f"image {label}: array must be HxW or HxWx{{1,3,4}} uint8, got shape {arr.shape}", name)
