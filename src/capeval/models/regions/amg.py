"""The steps of SAM's automatic ("segment everything") mask generation, in torch only.

Written after ``segment_anything/automatic_mask_generator.py`` and ``utils/amg.py``
(facebookresearch/segment-anything, commit dca509f) and transformers' ``SamImageProcessor``
(``post_process_masks``, ``filter_masks``), without torchvision or OpenCV:

- :func:`point_grid`: ``n x n`` prompt points at the cell centres of [0, 1]^2, x fastest
  (upstream ``build_point_grid``);
- :func:`upsample_logits`: low-resolution mask logits -> the padded model input size ->
  crop of the resized image -> the original size, bilinear with ``align_corners=False``
  (upstream ``Sam.postprocess_masks``; transformers ``post_process_masks``);
- :func:`stability_score`: IoU of the masks thresholded at ``t + offset`` and ``t - offset``
  (upstream ``calculate_stability_score``);
- :func:`masks_to_boxes`: inclusive XYXY boxes, zeros for an empty mask (``batched_mask_to_box``);
- :func:`box_iou` / :func:`nms`: greedy non-maximum suppression as ``torchvision.ops.nms``
  (a box is dropped when its IoU with a kept, higher-scoring box is > the threshold);
  ties in score keep their input order, so the result is deterministic.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def point_grid(n_per_side: int) -> np.ndarray:
    """(n*n, 2) float64 points ``(x, y)`` in (0, 1): centres of an n x n grid, row by row."""
    step = 1.0 / n_per_side
    centres = np.linspace(step / 2, 1 - step / 2, n_per_side)
    xs, ys = np.meshgrid(centres, centres)  # xs varies along a row: x fastest
    return np.stack([xs.ravel(), ys.ravel()], axis=1)


def prompt_points(n_per_side: int, original_size: tuple[int, int], resized_size: tuple[int, int]) -> np.ndarray:
    """Grid points in the resized model input's pixel frame, (n*n, 2) float64.

    As upstream: the unit grid is scaled by the original (w, h), then each axis by
    ``resized / original`` (``ResizeLongestSide.apply_coords``; transformers' ``_normalize_coordinates``).
    """
    (h, w), (rh, rw) = original_size, resized_size
    pts = point_grid(n_per_side) * np.array([w, h], dtype=np.float64)
    return pts * np.array([rw / w, rh / h], dtype=np.float64)


def upsample_logits(low_res: torch.Tensor, pad_size: tuple[int, int], resized_size: tuple[int, int],
                    original_size: tuple[int, int]) -> torch.Tensor:
    """(N, h, w) low-resolution logits -> (N, H, W) logits at ``original_size``.

    Bilinear (``align_corners=False``) to the padded input size, crop the top-left
    ``resized_size`` (the image without its padding), bilinear again to ``original_size``.
    """
    x = F.interpolate(low_res[:, None], size=tuple(pad_size), mode="bilinear", align_corners=False)
    x = x[..., : resized_size[0], : resized_size[1]]
    x = F.interpolate(x, size=tuple(original_size), mode="bilinear", align_corners=False)
    return x[:, 0]


def stability_score(logits: torch.Tensor, mask_threshold: float, offset: float) -> torch.Tensor:
    """(N,) float32: |logits > t + o| / |logits > t - o| per mask (NaN when both are empty).

    The high-threshold mask lies inside the low-threshold one, so the ratio is their IoU, in [0, 1].
    """
    # row counts in int16 first (as upstream): summing bools straight into int64 is ~8x slower on CPU
    row_dtype = torch.int16 if logits.shape[-1] < 2**15 else torch.int32
    inner = (logits > mask_threshold + offset).sum(-1, dtype=row_dtype).sum(-1, dtype=torch.int64)
    outer = (logits > mask_threshold - offset).sum(-1, dtype=row_dtype).sum(-1, dtype=torch.int64)
    return inner.to(torch.float32) / outer.to(torch.float32)


def masks_to_boxes(masks: torch.Tensor) -> torch.Tensor:
    """(N, 4) int64 boxes ``(x0, y0, x1, y1)`` with inclusive ends around each (N, H, W) bool mask.

    Inclusive ends as upstream's ``batched_mask_to_box`` (the NMS below runs on these, as
    upstream's does); an empty mask gets (0, 0, 0, 0).
    """
    n, h, w = masks.shape
    if n == 0:
        return torch.zeros((0, 4), dtype=torch.int64)
    rows, cols = masks.any(dim=2), masks.any(dim=1)
    ar_h = torch.arange(h, dtype=torch.int64).expand(n, h)
    ar_w = torch.arange(w, dtype=torch.int64).expand(n, w)
    y0 = torch.where(rows, ar_h, h).amin(1)
    y1 = torch.where(rows, ar_h, -1).amax(1)
    x0 = torch.where(cols, ar_w, w).amin(1)
    x1 = torch.where(cols, ar_w, -1).amax(1)
    boxes = torch.stack([x0, y0, x1, y1], dim=1)
    boxes[~rows.any(dim=1)] = 0
    return boxes


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(N, M) IoU of XYXY boxes with area ``(x1 - x0) * (y1 - y0)`` (torchvision's convention)."""
    a, b = a.to(torch.float32), b.to(torch.float32)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Indices of the boxes kept by greedy NMS, highest score first (int64).

    Boxes are visited by decreasing score (a stable sort: equal scores keep input order);
    each kept box removes every later box whose IoU with it is > ``iou_threshold``.
    A NaN IoU (two zero-area boxes) removes nothing, as in torchvision.
    """
    if boxes.shape[0] == 0:
        return torch.zeros(0, dtype=torch.int64)
    order = torch.sort(scores, descending=True, stable=True).indices
    ordered_boxes = boxes[order]
    removed = torch.zeros(order.shape[0], dtype=torch.bool)
    keep: list[int] = []
    for i in range(order.shape[0]):
        if removed[i]:
            continue
        keep.append(i)
        rest = ordered_boxes[i + 1 :]
        if rest.shape[0]:
            removed[i + 1 :] |= box_iou(ordered_boxes[i : i + 1], rest)[0] > iou_threshold
    return order[torch.tensor(keep, dtype=torch.int64)]
