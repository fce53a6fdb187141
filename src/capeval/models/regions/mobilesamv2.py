"""``"mobilesamv2"`` region backend: the segmenter HICE-S reports (MobileSAMv2), run through
its authors' own code. capeval ships neither the code nor the weights and never imitates it.

MobileSAMv2 has no PyPI package. It needs:

- the ``MobileSAMv2`` folder of https://github.com/ChaoningZhang/MobileSAM on ``sys.path``
  (it holds the ``mobilesamv2``, ``efficientvit`` and ``tinyvit`` packages) and its
  requirements (``ultralytics`` 8.0.x, whose ``ultralytics.yolo`` API it imports; ``timm``;
  ``opencv-python``);
- one folder of weights (``weights_dir=``, else ``$CAPEVAL_MOBILESAMV2_WEIGHTS``, else
  ``cache_dir()/mobilesamv2``): ``ObjectAwareModel.pt``, ``Prompt_guided_Mask_Decoder.pt`` and
  the image encoder's file (``l2.pt`` for ``efficientvit_l2``, upstream's default;
  ``mobile_sam.pt`` for ``tiny_vit``; ``sam_vit_h.pt`` for ``sam_vit_h``).

The steps are upstream ``MobileSAMv2/Inference.py``: YOLOv8 object-aware boxes (``conf``
0.4, ``iou`` 0.9, ``imgsz`` 1024, retina masks) are box prompts for the prompt-guided
decoder (one mask per box, ``simple_type=True``), upsampled by ``Sam.postprocess_masks``
and binarised at ``mask_threshold`` (0). Upstream has no IoU/stability filter and no NMS;
neither is added. ``score``: the decoder's IoU prediction.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from capeval.errors import InputError, MissingDependencyError, ResourceError
from capeval.models.regions.base import Region, check_number, image_size, ordered

ENCODER_FILES = {"efficientvit_l2": "l2.pt", "tiny_vit": "mobile_sam.pt", "sam_vit_h": "sam_vit_h.pt"}
WEIGHT_FILES = ("ObjectAwareModel.pt", "Prompt_guided_Mask_Decoder.pt")
# MobileSAMv2/Inference.py argparse defaults
DEFAULTS: dict[str, Any] = {"encoder_type": "efficientvit_l2", "conf": 0.4, "iou": 0.9, "imgsz": 1024,
                            "retina": True, "boxes_per_batch": 320}
INSTALL = ("clone https://github.com/ChaoningZhang/MobileSAM, put its MobileSAMv2/ folder on PYTHONPATH and "
           "install its requirements (ultralytics 8.0.x, timm, opencv-python)")


def default_weights_dir() -> Path:
    env = os.environ.get("CAPEVAL_MOBILESAMV2_WEIGHTS")
    if env:
        return Path(env).expanduser()
    from capeval.paths import cache_dir

    return cache_dir() / "mobilesamv2"


def check_available(weights_dir: str | os.PathLike[str] | None = None, encoder_type: str = "efficientvit_l2") -> dict[str, Path]:
    """The weight files to use; raises when the package or a weight file is missing.

    :class:`MissingDependencyError` when ``mobilesamv2`` or ``ultralytics`` cannot be
    imported, :class:`ResourceError` when a weight file is absent (both messages say what to get).
    """
    if encoder_type not in ENCODER_FILES:
        raise InputError(f"region option encoder_type={encoder_type!r}: known: {', '.join(ENCODER_FILES)}")
    folder = Path(weights_dir).expanduser() if weights_dir is not None else default_weights_dir()
    files = {"object": folder / WEIGHT_FILES[0], "decoder": folder / WEIGHT_FILES[1],
             "encoder": folder / ENCODER_FILES[encoder_type]}
    missing_pkgs = [m for m in ("mobilesamv2", "ultralytics") if not _findable(m)]
    missing_files = [p.name for p in files.values() if not p.is_file()]
    if missing_pkgs:
        weights = f"; it will also need {', '.join(missing_files)} in {folder}" if missing_files else ""
        raise MissingDependencyError(f"region backend 'mobilesamv2' needs the package(s) {', '.join(missing_pkgs)}, "
                                     f"which are not installed (MobileSAMv2 has no PyPI package): {INSTALL}{weights}; "
                                     "or use region backend 'sam' (any transformers SAM checkpoint) or 'grid'")
    if missing_files:
        raise ResourceError(f"region backend 'mobilesamv2': weight file(s) {', '.join(missing_files)} not found in "
                            f"{folder} (set weights_dir= or $CAPEVAL_MOBILESAMV2_WEIGHTS; the files are linked from "
                            "the MobileSAM repository's MobileSAMv2 README)")
    return files


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class MobileSamV2Regions:
    """MobileSAMv2 everything-mode through the upstream ``mobilesamv2`` package (CPU, fp32)."""

    name = "mobilesamv2"

    def __init__(self, weights_dir: str | os.PathLike[str] | None = None, **options: Any):
        unknown = sorted(set(options) - set(DEFAULTS))
        if unknown:
            raise InputError(f"unknown option(s) {', '.join(unknown)} for region backend 'mobilesamv2'; "
                             f"known: weights_dir, {', '.join(DEFAULTS)}")
        self.options = {**DEFAULTS, **options}
        for key in ("conf", "iou"):
            check_number(key, self.options[key], 0.0, 1.0)
        check_number("imgsz", self.options["imgsz"], 32, 8192, integer=True)
        check_number("boxes_per_batch", self.options["boxes_per_batch"], 1, integer=True)
        self.files = check_available(weights_dir, self.options["encoder_type"])
        self._digests: dict[str, str] | None = None
        try:
            self._load()
        except ImportError as exc:
            raise MissingDependencyError(f"region backend 'mobilesamv2': importing MobileSAMv2 failed ({exc}): {INSTALL}") from exc

    def _load(self) -> None:
        torch = importlib.import_module("torch")
        ms = importlib.import_module("mobilesamv2")
        ObjectAwareModel = importlib.import_module("mobilesamv2.promt_mobilesamv2").ObjectAwareModel
        registry = ms.sam_model_registry
        self.detector = ObjectAwareModel(str(self.files["object"]))
        decoder = registry["PromptGuidedDecoder"](str(self.files["decoder"]))
        sam = registry["vit_h"]()  # as upstream: the shell whose parts are replaced below
        sam.prompt_encoder = decoder["PromtEncoder"]
        sam.mask_decoder = decoder["MaskDecoder"]
        sam.image_encoder = registry[self.options["encoder_type"]](str(self.files["encoder"]))
        self.sam = sam.to(device="cpu", dtype=torch.float32).eval()
        self.predictor = ms.SamPredictor(self.sam)
        self._torch = torch

    def settings(self) -> dict[str, Any]:
        if self._digests is None:
            from capeval.hashing import file_digest

            self._digests = {k: file_digest(p) for k, p in sorted(self.files.items())}
        opts = {k: v for k, v in self.options.items() if k != "boxes_per_batch"}
        return {"backend": self.name, "algorithm": "mobilesamv2-inference/1", "weights_sha256": self._digests,
                "precision": "fp32", **opts}

    def masks(self, image: Any) -> list[Region]:
        """Region proposals of a PIL image, one per object-aware box."""
        torch = self._torch
        image_size(image)
        arr = np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
        found = self.detector(arr, device="cpu", retina_masks=self.options["retina"], imgsz=self.options["imgsz"],
                              conf=self.options["conf"], iou=self.options["iou"])
        if found is None:  # upstream's predict() swallows its exceptions and returns None
            raise ResourceError("region backend 'mobilesamv2': the object-aware model failed on this image")
        boxes = found[0].boxes.xyxy.detach().cpu().numpy()
        if boxes.shape[0] == 0:
            return []
        regions: list[Region] = []
        with torch.inference_mode():
            self.predictor.set_image(arr)
            prompts = torch.from_numpy(self.predictor.transform.apply_boxes(boxes, self.predictor.original_size)).float()
            features, pe = self.predictor.features, self.sam.prompt_encoder.get_dense_pe()
            step = self.options["boxes_per_batch"]
            for i in range(0, prompts.shape[0], step):
                chunk = prompts[i : i + step]
                n = chunk.shape[0]
                sparse, dense = self.sam.prompt_encoder(points=None, boxes=chunk, masks=None)
                low, iou = self.sam.mask_decoder(image_embeddings=features.expand(n, -1, -1, -1),
                                                 image_pe=pe.expand(n, -1, -1, -1), sparse_prompt_embeddings=sparse,
                                                 dense_prompt_embeddings=dense, multimask_output=False, simple_type=True)
                up = self.sam.postprocess_masks(low, self.predictor.input_size, self.predictor.original_size)
                binary = (up[:, 0] > self.sam.mask_threshold).cpu().numpy()
                for j in range(n):
                    region = Region.from_mask(binary[j], float(iou.reshape(n, -1)[j, 0]))
                    if region.area:
                        regions.append(region)
        return ordered(regions)
