"""Alpha-CLIP's alpha channel: a region mask resized to the model's input and normalised.

Alpha-CLIP (Sun et al., CVPR 2024; github.com/SunzeY/AlphaCLIP) turns a binary mask into the
alpha input with ``transforms.Compose([ToTensor(), Resize((224, 224)), Normalize(0.5, 0.26)])``
applied to ``(binary_mask * 255).astype(np.uint8)`` (``README.md`` lines 85-91 and 110-126;
the same ``mask_transform`` is used for training and evaluation: ``train/dataset/alpha_grit.py``
lines 45-61, ``eval/imagenet_s_zs_test/imagenet_s.py`` lines 45-61). So:

- values: ``ToTensor`` maps 0/255 to 0/1, then ``(x - 0.5) / 0.26`` in float32: outside the
  region -1.9230769, inside +1.9230769 (the value the upstream diffusion demo hard-codes for
  "no mask": ``1.9231``);
- interpolation: ``Resize`` on a tensor is bilinear (``align_corners=False``) through
  ``torch.nn.functional.interpolate``; ``antialias`` defaults to True since torchvision 0.17
  (False before), so it is a field here;
- geometry: upstream squashes the mask to (224, 224) while its image transform resizes the
  shorter side and centre-crops (``alpha_clip/alpha_clip.py`` lines 79-86), which misaligns
  the two for non-square images (training pads both to a square first, ``alpha_grit.py``
  lines 106-125). ``geometry="crop"`` (default) gives the mask exactly the image's geometry
  (:class:`~capeval.models.clip.preprocess.Preprocess`: shorter side to ``size`` with
  ``int`` truncation, then a centre crop with Python-rounded offsets), so mask and pixels
  align; ``geometry="squash"`` reproduces the README literally. Both are equal for square
  inputs. The full-image mask (HICE-S's global embedding) is the constant +1.9230769
  (:func:`full_alpha`; an all-ones mask resampled by any setting differs from it by < 1e-6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from capeval.errors import InputError

MASK_MEAN = 0.5
MASK_STD = 0.26
GEOMETRIES = ("crop", "squash")


def normalise_alpha(values: torch.Tensor) -> torch.Tensor:
    """``(x - 0.5) / 0.26`` in float32 (torchvision's ``Normalize(0.5, 0.26)``), x in [0, 1]."""
    return (values.to(torch.float32) - MASK_MEAN) / MASK_STD


def full_alpha(batch: int, size: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """(batch, 1, size, size) alpha of the whole image: every value ``(1 - 0.5) / 0.26``."""
    return normalise_alpha(torch.ones(batch, 1, size, size, device=device))


def mask_array(mask: Any, name: str | None = None) -> np.ndarray:
    """(H, W) float32 in [0, 1] from a bool/float/uint8 array, a 2-D tensor or a PIL mask.

    bool -> 0/1; uint8 -> /255 (as ``ToTensor``: a 0/255 image-type mask); float -> as is,
    must lie in [0, 1]. A uint8 mask holding only 0 and 1 is refused (``ToTensor`` would
    read it as almost empty): pass it as bool. PIL modes: ``1``, ``L``, ``F``.
    """
    label = name or "mask"
    if isinstance(mask, torch.Tensor):
        mask = mask.detach().cpu().numpy()
    if not isinstance(mask, np.ndarray):
        try:
            from PIL import Image
        except ImportError:  # without PIL nothing else can be a mask
            Image = None
        if Image is None or not isinstance(mask, Image.Image):
            raise InputError(f"{label}: expected an HxW numpy array, 2-D tensor or PIL image, got {type(mask).__name__}", name)
        if mask.mode not in ("1", "L", "F"):
            raise InputError(f"{label}: PIL mode {mask.mode!r} is not a mask; convert it to '1', 'L' or 'F'", name)
        mask = np.asarray(mask)
    if mask.ndim != 2 or mask.size == 0:
        raise InputError(f"{label}: a mask must be a non-empty HxW array, got shape {mask.shape}", name)
    if mask.dtype == np.bool_:
        return mask.astype(np.float32)
    if mask.dtype == np.uint8:
        if mask.max() == 1:
            raise InputError(f"{label}: uint8 mask with values 0/1 is ambiguous (read as x/255); pass it as bool", name)
        return mask.astype(np.float32) / np.float32(255)
    if np.issubdtype(mask.dtype, np.floating):
        out = mask.astype(np.float32)
        if not np.all(np.isfinite(out)) or out.min() < 0 or out.max() > 1:
            raise InputError(f"{label}: float mask values must lie in [0, 1]", name)
        return out
    raise InputError(f"{label}: mask dtype {mask.dtype} not supported; use bool, uint8 (0/255) or float in [0, 1]", name)


@dataclass(frozen=True)
class MaskPreprocess:
    """Mask -> (1, size, size) alpha: resize (bilinear), crop or squash, ``Normalize(0.5, 0.26)``."""

    size: int = 224
    geometry: str = "crop"  # "crop": the image's resize + centre crop; "squash": Resize((size, size))
    antialias: bool = True  # torchvision >= 0.17 default for tensors

    def __post_init__(self) -> None:
        if self.geometry not in GEOMETRIES:
            raise InputError(f"mask geometry {self.geometry!r} unknown; use one of {', '.join(GEOMETRIES)}")

    def signature(self) -> dict[str, Any]:
        return {"size": self.size, "geometry": self.geometry, "interpolation": "bilinear",
                "antialias": self.antialias, "mean": MASK_MEAN, "std": MASK_STD}

    def _resize(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        if tuple(x.shape[-2:]) == (h, w):  # torchvision returns the tensor untouched
            return x
        return F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=self.antialias)

    def resized(self, mask: Any, name: str | None = None, image_size: tuple[int, int] | None = None) -> torch.Tensor:
        """(1, size, size) float32 values in [0, 1] before normalisation.

        ``image_size`` = (width, height) of the image the mask belongs to; a mask of
        another size is refused (it could not be aligned with the pixels).
        """
        arr = mask_array(mask, name)
        h, w = arr.shape
        if image_size is not None and tuple(image_size) != (w, h):
            raise InputError(f"{name or 'mask'}: mask is {w}x{h} but its image is {image_size[0]}x{image_size[1]}", name)
        x = torch.from_numpy(arr)[None, None]
        s = self.size
        if self.geometry == "squash":
            return self._resize(x, s, s)[0]
        # the shorter side becomes s, the longer int(s * long / short): Preprocess's sizes
        if w <= h:
            nh, nw = int(s * h / w), s
        else:
            nh, nw = s, int(s * w / h)
        x = self._resize(x, nh, nw)
        top, left = int(round((nh - s) / 2.0)), int(round((nw - s) / 2.0))
        return x[0, :, top: top + s, left: left + s]

    def __call__(self, mask: Any, name: str | None = None, image_size: tuple[int, int] | None = None) -> torch.Tensor:
        """(1, size, size) float32 alpha for the model (normalised)."""
        return normalise_alpha(self.resized(mask, name, image_size)).contiguous()
