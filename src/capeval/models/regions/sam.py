"""``"sam"`` region backend: SAM's segment-everything mode on a transformers ``SamModel``.

Any SAM-architecture checkpoint works (``facebook/sam-vit-base``/``-large``/``-huge``, the
pruned ``Zigeng/SlimSAM-uniform-77``/``-50``, or a local folder saved with
``save_pretrained``). The pipeline follows ``SamAutomaticMaskGenerator`` with ``crop_n_layers=0``
(segment-anything ``automatic_mask_generator.py``: ``_process_crop``/``_process_batch``):

1. the image is preprocessed by the checkpoint's SAM image processor (longest side -> 1024,
   normalise, pad) and embedded once (``SamModel.get_image_embeddings``);
2. a ``points_per_side`` x ``points_per_side`` grid of single foreground points is decoded in
   batches of ``points_per_batch`` with ``multimask_output=True`` (3 masks per point);
3. masks with predicted IoU <= ``pred_iou_thresh`` are dropped (when it is > 0, as
   upstream); the rest are upsampled to the original size
   (:func:`~capeval.models.regions.amg.upsample_logits`), their stability score (offset
   ``stability_score_offset`` around ``mask_threshold``) must be >= ``stability_score_thresh``
   (when it is > 0); they are binarised at ``mask_threshold``;
4. box NMS at ``box_nms_thresh`` over all points, scored by predicted IoU.

Differences from upstream, all on purpose: only the full-image crop layer
(``crop_n_layers=0``; so upstream's crop-edge filter is a no-op and is not run); no OpenCV
hole/island removal (upstream's ``min_mask_region_area``); instead ``min_area`` (default 0:
off) drops masks with fewer pixels; empty masks are always dropped; the IoU filter runs
before the upsampling (same result, less memory). Defaults are upstream's.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
import torch

from capeval.errors import InputError, ResourceError
from capeval.models.regions.amg import (
    masks_to_boxes,
    nms,
    prompt_points,
    stability_score,
    upsample_logits,
)
from capeval.models.regions.base import SAM_CHECKPOINT as DEFAULT_CHECKPOINT  # named where no torch is imported
from capeval.models.regions.base import Region, check_number, image_size, ordered

# segment-anything SamAutomaticMaskGenerator.__init__ defaults (and transformers' mask-generation pipeline)
DEFAULTS: dict[str, Any] = {
    "points_per_side": 32,
    "points_per_batch": 64,
    "pred_iou_thresh": 0.88,
    "stability_score_thresh": 0.95,
    "stability_score_offset": 1.0,
    "mask_threshold": 0.0,  # Sam.mask_threshold
    "box_nms_thresh": 0.7,
    "crop_n_layers": 0,
    "min_area": 0,
}
# changes the speed, not the masks: left out of settings() so caches are shared across it
_NOT_IN_SETTINGS = ("points_per_batch",)
ALGORITHM = "capeval-sam-amg/1"  # bump when the steps above change


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise InputError(f"unknown option(s) {', '.join(unknown)} for region backend 'sam'; known: {', '.join(DEFAULTS)}")
    opts = {**DEFAULTS, **options}
    check_number("points_per_side", opts["points_per_side"], 1, 1024, integer=True)
    check_number("points_per_batch", opts["points_per_batch"], 1, integer=True)
    # predicted IoUs of trained SAMs lie in [0, 1]; any number is accepted and, as upstream, the
    # filter only runs when the threshold is > 0
    opts["pred_iou_thresh"] = float(check_number("pred_iou_thresh", opts["pred_iou_thresh"], -np.inf))
    opts["stability_score_thresh"] = float(check_number("stability_score_thresh", opts["stability_score_thresh"], 0.0, 1.0))
    opts["stability_score_offset"] = float(check_number("stability_score_offset", opts["stability_score_offset"], 0.0, low_open=True))
    opts["mask_threshold"] = float(check_number("mask_threshold", opts["mask_threshold"], -np.inf))
    opts["box_nms_thresh"] = float(check_number("box_nms_thresh", opts["box_nms_thresh"], 0.0, 1.0, low_open=True))
    check_number("min_area", opts["min_area"], 0, integer=True)
    if opts["crop_n_layers"] != 0:
        raise InputError(f"region option crop_n_layers={opts['crop_n_layers']!r}: only 0 (the whole image, "
                         "no extra crop layers) is supported by capeval's everything-mode")
    return opts


def _processor_settings(proc: Any) -> dict[str, Any]:
    """What the preprocessing depends on (the PIL and torchvision processors resize differently)."""
    keys = ("size", "pad_size", "image_mean", "image_std", "rescale_factor", "resample",
            "do_resize", "do_rescale", "do_normalize", "do_pad", "do_convert_rgb")
    return {"class": type(proc).__name__, **{k: _plain(getattr(proc, k, None)) for k in keys}}


def _plain(value: Any) -> Any:
    """A JSON-able form: SizeDict/dicts without None entries, enums by value, tuples as lists."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if hasattr(value, "__dataclass_fields__"):
        value = {k: getattr(value, k) for k in value.__dataclass_fields__}
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def weights_fingerprint(model: torch.nn.Module) -> str:
    """sha256 over the state dict (names, dtypes, shapes, bytes) in name order."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous().reshape(-1)  # 1-D: 0-dim tensors cannot be viewed as bytes
        h.update(f"{name}|{t.dtype}|{tuple(tensor.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


class SamRegions:
    """Segment-everything with a loaded ``SamModel`` and its SAM image processor."""

    name = "sam"

    def __init__(self, model: Any, image_processor: Any, checkpoint: str | None = None,
                 device: str | torch.device = "cpu", **options: Any):
        self.options = _check_options(options)
        proc = getattr(image_processor, "image_processor", image_processor)  # a SamProcessor is fine too
        pad = getattr(proc, "pad_size", None)
        pad_hw = (int(pad["height"]), int(pad["width"])) if pad else None
        side = int(model.config.vision_config.image_size)
        if pad_hw != (side, side):
            raise ResourceError(f"SAM checkpoint {checkpoint or 'model'}: the image processor pads to {pad_hw} "
                                f"but the model takes {side}x{side} images")
        self.model = model.to(device=device, dtype=torch.float32).eval()
        self.image_processor = proc
        self.checkpoint = checkpoint
        self.device = torch.device(device)
        self.pad_size = pad_hw
        self._fingerprint: str | None = None

    def settings(self) -> dict[str, Any]:
        """Checkpoint name, weights sha256, preprocessing, and every option that changes the masks."""
        if self._fingerprint is None:
            self._fingerprint = weights_fingerprint(self.model)
        return {"backend": self.name, "algorithm": ALGORITHM, "checkpoint": self.checkpoint,
                "weights_sha256": self._fingerprint, "processor": _processor_settings(self.image_processor),
                "precision": "fp32",
                **{k: v for k, v in self.options.items() if k not in _NOT_IN_SETTINGS}}

    @torch.inference_mode()
    def masks(self, image: Any) -> list[Region]:
        """Region proposals of a PIL image (see the module docstring for the steps)."""
        h, w = image_size(image)
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        enc = self.image_processor(images=rgb, return_tensors="pt")
        pixels = enc["pixel_values"].to(self.device, torch.float32)
        resized = tuple(int(v) for v in enc["reshaped_input_sizes"][0])
        embeddings = self.model.get_image_embeddings(pixels)
        points = torch.from_numpy(prompt_points(self.options["points_per_side"], (h, w), resized)).to(torch.float32)
        step = self.options["points_per_batch"]
        parts = [self._batch(embeddings, points[i : i + step], i, resized, (h, w)) for i in range(0, points.shape[0], step)]
        packed = np.concatenate([p[0] for p in parts])
        boxes, scores, stab, index = (torch.cat([p[j] for p in parts]) for j in (1, 2, 3, 4))
        keep = nms(boxes, scores, self.options["box_nms_thresh"])
        keep = keep[torch.argsort(index[keep])]  # candidate order, so the final sort's ties are deterministic
        regions = []
        for i in keep.tolist():
            mask = np.unpackbits(packed[i], count=h * w).astype(bool).reshape(h, w)
            region = Region.from_mask(mask, float(scores[i]), float(stab[i]))
            if region.area > 0 and region.area >= self.options["min_area"]:
                regions.append(region)
        return ordered(regions)

    def _batch(self, embeddings: torch.Tensor, points: torch.Tensor, first: int, resized: tuple[int, int],
               size: tuple[int, int]) -> tuple[np.ndarray, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Masks of one batch of points that pass both filters: (packed bits, inclusive boxes,
        predicted IoU, stability, candidate index ``point * 3 + k``)."""
        n = points.shape[0]
        out = self.model(image_embeddings=embeddings, input_points=points[None, :, None, :].to(self.device),
                         input_labels=torch.ones((1, n, 1), dtype=torch.int64, device=self.device),
                         multimask_output=True)
        low = out.pred_masks[0].to("cpu", torch.float32)  # (n, 3, h', w')
        per_point = low.shape[1]
        low, iou = low.flatten(0, 1), out.iou_scores[0].to("cpu", torch.float32).flatten()
        index = torch.arange(first * per_point, (first + n) * per_point, dtype=torch.int64)
        if self.options["pred_iou_thresh"] > 0:
            sel = iou > self.options["pred_iou_thresh"]
            low, iou, index = low[sel], iou[sel], index[sel]
        packed, boxes, ious, stabs, indices = [], [], [], [], []
        # upsample in chunks: a full batch of original-size float logits can take gigabytes;
        # survivors are kept bit-packed (8x smaller) until NMS has picked the few to return
        chunk = max(1, int(2**25 // max(1, size[0] * size[1])))  # ~128 MiB of float32 logits
        for j in range(0, low.shape[0], chunk):
            logits = upsample_logits(low[j : j + chunk], self.pad_size, resized, size)
            stab = stability_score(logits, self.options["mask_threshold"], self.options["stability_score_offset"])
            good = stab >= self.options["stability_score_thresh"] if self.options["stability_score_thresh"] > 0 \
                else torch.ones_like(stab, dtype=torch.bool)
            masks = (logits if bool(good.all()) else logits[good]) > self.options["mask_threshold"]
            boxes.append(masks_to_boxes(masks))
            packed.append(np.packbits(masks.flatten(1).numpy(), axis=1))
            ious.append(iou[j : j + chunk][good]), stabs.append(stab[good]), indices.append(index[j : j + chunk][good])
        if not packed:
            nbytes = (size[0] * size[1] + 7) // 8
            return (np.zeros((0, nbytes), dtype=np.uint8), torch.zeros((0, 4), dtype=torch.int64), torch.zeros(0),
                    torch.zeros(0), torch.zeros(0, dtype=torch.int64))
        return np.concatenate(packed), torch.cat(boxes), torch.cat(ious), torch.cat(stabs), torch.cat(indices)


def load_sam(checkpoint: str | os.PathLike[str] = DEFAULT_CHECKPOINT, model: Any = None, processor: Any = None,
             device: str = "cpu", **options: Any) -> SamRegions:
    """A :class:`SamRegions` for ``checkpoint`` (hub name or local folder), or for a given ``model``/``processor``.

    Hub names are read from the local Hugging Face cache when offline (``HF_HUB_OFFLINE=1``);
    a checkpoint that cannot be found or read raises :class:`ResourceError`.
    """
    name = os.fspath(checkpoint) if checkpoint is not None else None
    if model is None or processor is None:
        if name is None:
            raise InputError("region backend 'sam': give a checkpoint (hub name or folder) or both model= and processor=")
        model = model if model is not None else _load_model(name)
        processor = processor if processor is not None else _load_processor(name)
    return SamRegions(model, processor, checkpoint=name, device=device, **options)


def _load_model(name: str) -> Any:
    from transformers import SamModel

    try:
        return SamModel.from_pretrained(name, dtype=torch.float32)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResourceError(f"SAM checkpoint {name!r} could not be loaded ({first}); give a hub name present in the "
                            "local Hugging Face cache (or online) or a folder saved with save_pretrained") from exc


def _load_processor(name: str) -> Any:
    # transformers' default SAM image processor needs torchvision; the PIL one does the same steps without it
    from transformers import SamImageProcessorPil

    try:
        return SamImageProcessorPil.from_pretrained(name)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResourceError(f"SAM image processor of {name!r} could not be loaded ({first})") from exc
