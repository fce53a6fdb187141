"""Region backends (capeval.models.regions): SAM everything-mode on a tiny random SamModel
against transformers' own SAM processing steps, NMS / stability / boxes against brute force,
the grid fallback, the mask cache, and the errors.

The reference for the everything-mode is built from transformers' pieces that need no
torchvision (SamImageProcessorPil.generate_crop_boxes for the point grid, the processor,
SamModel, post_process_masks, filter_masks) plus a brute-force NMS written here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _reference import SHARED_DATA, require_module, unavailable
from PIL import Image

from capeval.errors import (
    InputError,
    MissingDependencyError,
    ResourceError,
    UnknownNameError,
)
from capeval.models.regions import Region, RegionBackend, mask_bbox, region_backend
from capeval.models.regions.cache import CachedBackend, image_digest
from capeval.models.regions.grid import GridRegions

SAMPLE = SHARED_DATA / "samples" / "clipscore_example" / "images" / "image1.jpg"
SIDE = 128  # the tiny model's input size (patch 16 -> 8x8 embedding -> 32x32 low-res masks)


# -- helpers ------------------------------------------------------------------------
def synthetic(w: int, h: int, seed: int = 0, mode: str = "RGB") -> Image.Image:
    """Blocks of colour plus noise, so the resize/normalise path sees real structure."""
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 40, size=(h, w, 3), dtype=np.uint8)
    arr[: h // 2, : w // 3] += np.array([200, 30, 30], dtype=np.uint8)
    arr[h // 3 :, w // 2 :] += np.array([10, 180, 60], dtype=np.uint8)
    return Image.fromarray(arr, "RGB").convert(mode)


def brute_iou(a, b) -> float:
    """IoU with torchvision's area convention (x1 - x0) * (y1 - y0), in Python floats."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union else float("nan")


def brute_nms(boxes, scores, thresh) -> list[int]:
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # Python's sort is stable
    keep: list[int] = []
    for i in order:
        if all(not brute_iou(boxes[i], boxes[k]) > thresh for k in keep):
            keep.append(i)
    return keep


def rle_decode(rle: dict) -> np.ndarray:
    """COCO uncompressed RLE (column-major counts, starting with zeros) -> bool (H, W)."""
    h, w = rle["size"]
    flat = np.zeros(h * w, dtype=bool)
    pos, value = 0, False
    for count in rle["counts"]:
        flat[pos : pos + count] = value
        pos += count
        value = not value
    return flat.reshape(w, h).T


@pytest.fixture(scope="module")
def tiny():
    """A random SamModel small enough for CPU tests, and its PIL image processor."""
    torch = require_module("torch", "the SAM backend runs on torch")
    tf = require_module("transformers", "the SAM backend uses transformers' SamModel")
    torch.manual_seed(0)
    cfg = tf.SamConfig(
        vision_config={"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": SIDE,
                       "patch_size": 16, "output_channels": 32, "window_size": 4, "global_attn_indexes": [1],
                       "num_pos_feats": 16, "mlp_dim": 64},
        prompt_encoder_config={"hidden_size": 32, "image_size": SIDE, "patch_size": 16, "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 32, "mlp_dim": 64, "num_attention_heads": 2, "iou_head_hidden_dim": 32},
    )
    model = tf.SamModel(cfg).eval()
    proc = tf.SamImageProcessorPil(size={"longest_edge": SIDE}, pad_size={"height": SIDE, "width": SIDE})
    return model, proc


def sam(tiny, **options):
    model, proc = tiny
    return region_backend("sam", model=model, processor=proc, checkpoint="tiny-random", **options)


def reference_candidates(tiny, image: Image.Image, n: int):
    """transformers' steps for every grid point: (logits (K, H, W) at the original size, IoU (K,), box crop)."""
    import torch

    model, proc = tiny
    crop_boxes, points, crops, labels = proc.generate_crop_boxes(image.convert("RGB"), proc.size.longest_edge,
                                                                  crop_n_layers=0, points_per_crop=n)
    enc = proc(images=crops, return_tensors="pt")
    with torch.no_grad():
        emb = model.get_image_embeddings(enc["pixel_values"])
        out = model(image_embeddings=emb, input_points=points[:, :, 0:1, :].float(), input_labels=labels[:, :, 0:1],
                    multimask_output=True)
    logits = proc.post_process_masks(out.pred_masks, enc["original_sizes"], enc["reshaped_input_sizes"], binarize=False)[0]
    return logits, out.iou_scores[0], crop_boxes[0]


def reference_everything(tiny, image, n, iou_thresh, stab_thresh, nms_thresh):
    """(masks, scores) of transformers' filter_masks + brute-force NMS, in NMS order."""
    logits, iou, crop_box = reference_candidates(tiny, image, n)
    proc = tiny[1]
    rles, scores, boxes = proc.filter_masks(logits, iou, (image.height, image.width), crop_box.tolist(),
                                            iou_thresh, stab_thresh, 0.0, 1.0)
    keep = brute_nms(boxes.tolist(), scores.tolist(), nms_thresh)
    return [rle_decode(rles[i]) for i in keep], [float(scores[i]) for i in keep]


def midpoint_quantile(values: np.ndarray, q: float) -> float:
    """A threshold strictly between two observed values (no ties, so > and >= agree)."""
    v = np.unique(values[np.isfinite(values)])
    i = min(max(1, int(q * len(v))), len(v) - 1)
    return float((v[i - 1] + v[i]) / 2)


def numpy_stability(logits: np.ndarray, t: float, off: float) -> np.ndarray:
    inner = (logits > t + off).sum(axis=(1, 2)).astype(np.float64)
    outer = (logits > t - off).sum(axis=(1, 2)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return inner / outer


# -- torch-only building blocks ----------------------------------------------------------
def test_stability_score_equals_numpy():
    torch = require_module("torch", "amg runs on torch")
    from capeval.models.regions.amg import stability_score

    rng = np.random.default_rng(1)
    logits = rng.normal(0, 1.5, size=(7, 23, 31)).astype(np.float32)
    logits[3] = -5.0  # empty at both thresholds: 0/0 -> NaN, as upstream
    logits[4, :2, :2] = 1.0  # exactly on t + offset: not counted (strict >)
    for t, off in [(0.0, 1.0), (0.3, 0.5)]:
        got = stability_score(torch.from_numpy(logits), t, off).numpy()
        want = numpy_stability(logits, t, off)
        assert np.isnan(got[3]) and np.isnan(want[3])
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
        assert ((got[np.isfinite(got)] >= 0) & (got[np.isfinite(got)] <= 1)).all()


def test_masks_to_boxes_equals_brute_force():
    torch = require_module("torch", "amg runs on torch")
    from capeval.models.regions.amg import masks_to_boxes

    rng = np.random.default_rng(2)
    masks = rng.random((12, 17, 29)) > 0.97
    masks[0] = False
    masks[1] = False
    masks[1, 16, 28] = True  # one pixel in the last corner
    got = masks_to_boxes(torch.from_numpy(masks)).numpy()
    for m, box in zip(masks, got):
        ys, xs = np.nonzero(m)
        want = [0, 0, 0, 0] if len(xs) == 0 else [xs.min(), ys.min(), xs.max(), ys.max()]  # inclusive, as upstream
        assert box.tolist() == want
        x0, y0, x1, y1 = mask_bbox(m)  # the Region bbox: exclusive ends
        assert m[y0:y1, x0:x1].sum() == m.sum()
        assert (x0, y0, x1, y1) == ((0, 0, 0, 0) if len(xs) == 0 else (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1))


@pytest.mark.parametrize("seed", range(6))
def test_nms_equals_brute_force_item_by_item(seed):
    torch = require_module("torch", "amg runs on torch")
    from capeval.models.regions.amg import nms

    rng = np.random.default_rng(seed)
    n = 60
    xy = rng.integers(0, 30, size=(n, 2))
    wh = rng.integers(0, 12, size=(n, 2))  # some zero-width boxes: NaN IoU with each other
    boxes = np.concatenate([xy, xy + wh], axis=1)
    boxes[5] = boxes[4]  # duplicates
    scores = rng.integers(0, 8, size=n).astype(np.float32)  # many ties: order must be stable
    for thresh in (0.3, 0.5, 0.7, 0.95):
        got = nms(torch.from_numpy(boxes), torch.from_numpy(scores), thresh).tolist()
        want = brute_nms(boxes.tolist(), scores.tolist(), thresh)
        assert got == want, (thresh, got, want)
    assert nms(torch.zeros((0, 4)), torch.zeros(0), 0.7).tolist() == []


def test_point_grid_equals_transformers():
    require_module("torch", "amg runs on torch")
    tf_proc = require_module("transformers.models.sam.image_processing_pil_sam", "reference point grid")
    from capeval.models.regions.amg import point_grid, prompt_points

    for n in (1, 4, 32):
        np.testing.assert_allclose(point_grid(n), tf_proc._build_point_grid(n), rtol=0, atol=1e-15)
    for h, w in [(61, 97), (751, 750), (1, 5)]:
        resized = tf_proc.SamImageProcessorPil()._get_preprocess_shape((h, w), 1024)
        want = tf_proc._normalize_coordinates(1024, tf_proc._build_point_grid(5) * np.array([w, h]), (h, w))
        np.testing.assert_allclose(prompt_points(5, (h, w), resized), want, rtol=1e-12)


# -- SAM everything-mode ----------------------------------------------------------
def _check_regions(regions: list[Region], h: int, w: int) -> None:
    for r in regions:
        assert r.mask.shape == (h, w) and r.mask.dtype == np.bool_
        assert r.area == int(r.mask.sum()) > 0
        assert r.bbox == mask_bbox(r.mask)
    keys = [(-r.score, -r.area) for r in regions]
    assert keys == sorted(keys), "order: score, then area, descending"


@pytest.mark.parametrize("case", ["sample", "wide", "tall"])
def test_everything_mode_equals_transformers_steps(tiny, case):
    if case == "sample":
        if not SAMPLE.exists():
            unavailable(f"sample image not found: {SAMPLE} (set CAPEVAL_DATA or place ../shared/data)")
        image, n, batch = Image.open(SAMPLE), 4, 7
    else:
        image, n, batch = (synthetic(97, 61, 3), 6, 5) if case == "wide" else (synthetic(40, 131, 4, mode="L"), 5, 64)
    logits, iou, _ = reference_candidates(tiny, image, n)
    stab = numpy_stability(logits.flatten(0, 1).numpy(), 0.0, 1.0)
    ious = iou.flatten().numpy()
    iou_thresh = midpoint_quantile(ious[ious > 0], 0.3)  # > 0: the filter only runs for a positive threshold
    stab_thresh = midpoint_quantile(stab[iou.flatten().numpy() > iou_thresh], 0.3)
    for nms_thresh in (0.7, 1.0):  # 1.0: nothing is suppressed, every filtered mask is compared
        backend = sam(tiny, points_per_side=n, points_per_batch=batch, pred_iou_thresh=iou_thresh,
                      stability_score_thresh=stab_thresh, box_nms_thresh=nms_thresh)
        got = backend.masks(image)
        want_masks, want_scores = reference_everything(tiny, image, n, iou_thresh, stab_thresh, nms_thresh)
        _check_regions(got, image.height, image.width)
        assert len(got) == len(want_masks) > 0
        if nms_thresh == 1.0:
            assert len(got) > 1
        for r in got:
            assert r.score > iou_thresh and r.stability >= stab_thresh
        # same set: match each reference mask to ours by score, then compare the pixels
        for m, s in zip(want_masks, want_scores):
            match = [r for r in got if abs(r.score - s) < 1e-5]
            assert len(match) >= 1
            assert any(np.array_equal(r.mask, m) for r in match)


def test_thresholds_filter_and_defaults(tiny):
    image = synthetic(50, 40, 5)
    n = 4
    everything = sam(tiny, points_per_side=n, pred_iou_thresh=0.0, stability_score_thresh=0.0, box_nms_thresh=1.0)
    all_regions = everything.masks(image)
    logits, _, _ = reference_candidates(tiny, image, n)
    nonempty = int(((logits.flatten(0, 1) > 0).flatten(1).sum(1) > 0).sum())
    assert len(all_regions) == nonempty  # no filter, no NMS: every non-empty candidate
    scores = np.array([r.score for r in all_regions])
    q = midpoint_quantile(scores[scores > 0], 0.5)
    filtered = sam(tiny, points_per_side=n, pred_iou_thresh=q, stability_score_thresh=0.0, box_nms_thresh=1.0).masks(image)
    assert len(filtered) == int((scores > q).sum()) and all(r.score > q for r in filtered)
    stabs = np.array([r.stability for r in all_regions])
    s = midpoint_quantile(stabs, 0.5)
    filtered = sam(tiny, points_per_side=n, pred_iou_thresh=0.0, stability_score_thresh=s, box_nms_thresh=1.0).masks(image)
    assert len(filtered) == int((stabs >= s).sum()) and all(r.stability >= s for r in filtered)
    # upstream's comparisons: predicted IoU strictly above, stability at or above the threshold
    exact_iou = float(np.sort(scores[scores > 0])[len(scores[scores > 0]) // 2])  # observed values
    exact_stab = float(np.sort(stabs)[len(stabs) // 2])
    on_iou = sam(tiny, points_per_side=n, pred_iou_thresh=exact_iou, stability_score_thresh=0.0, box_nms_thresh=1.0)
    assert exact_iou not in [r.score for r in on_iou.masks(image)] and exact_iou in scores
    on_stab = sam(tiny, points_per_side=n, pred_iou_thresh=0.0, stability_score_thresh=exact_stab, box_nms_thresh=1.0)
    assert exact_stab in [r.stability for r in on_stab.masks(image)]
    big = sam(tiny, points_per_side=n, pred_iou_thresh=0.0, stability_score_thresh=0.0, box_nms_thresh=1.0, min_area=int(np.median([r.area for r in all_regions])))
    assert all(r.area >= big.options["min_area"] for r in big.masks(image))
    # upstream defaults, and options that change nothing stay out of the settings
    default = sam(tiny)
    assert {k: default.options[k] for k in ("points_per_side", "points_per_batch", "pred_iou_thresh",
                                            "stability_score_thresh", "stability_score_offset", "box_nms_thresh")} == \
        {"points_per_side": 32, "points_per_batch": 64, "pred_iou_thresh": 0.88, "stability_score_thresh": 0.95,
         "stability_score_offset": 1.0, "box_nms_thresh": 0.7}
    assert sam(tiny, points_per_batch=3).settings() == default.settings()
    assert sam(tiny, pred_iou_thresh=0.5).settings() != default.settings()
    assert isinstance(default, RegionBackend)


def test_mask_sizes_and_modes(tiny):
    backend = sam(tiny, points_per_side=3, pred_iou_thresh=0.0, stability_score_thresh=0.0, box_nms_thresh=1.0)
    for w, h, mode in [(1, 1, "RGB"), (3, 200, "RGBA"), (130, 9, "L"), (128, 128, "P")]:
        image = synthetic(w, h, 6).convert(mode)
        regions = backend.masks(image)
        _check_regions(regions, h, w)
    with pytest.raises(InputError, match="expected a PIL image"):
        backend.masks(np.zeros((4, 4, 3), dtype=np.uint8))


def test_bad_options(tiny):
    with pytest.raises(InputError, match="crop_n_layers"):
        sam(tiny, crop_n_layers=1)
    with pytest.raises(InputError, match="unknown option"):
        sam(tiny, points_per_sid=8)
    with pytest.raises(InputError, match="pred_iou_thresh"):
        sam(tiny, pred_iou_thresh="high")
    with pytest.raises(InputError, match="stability_score_thresh"):
        sam(tiny, stability_score_thresh=1.5)
    with pytest.raises(InputError, match="points_per_side"):
        sam(tiny, points_per_side=0)


def test_load_from_folder_and_missing_checkpoint(tiny, tmp_path):
    model, proc = tiny
    model.save_pretrained(tmp_path / "tiny-sam")
    proc.save_pretrained(tmp_path / "tiny-sam")
    image = synthetic(45, 33, 7)
    opts = {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0}
    loaded = region_backend("sam", checkpoint=tmp_path / "tiny-sam", **opts)
    direct = sam(tiny, **opts)
    assert loaded.settings()["weights_sha256"] == direct.settings()["weights_sha256"]
    assert loaded.settings()["processor"] == direct.settings()["processor"]
    from transformers import SamProcessor

    wrapped = region_backend("sam", model=model, processor=SamProcessor(image_processor=proc), checkpoint="tiny-random", **opts)
    assert wrapped.settings() == direct.settings()
    a, b = loaded.masks(image), direct.masks(image)
    assert len(a) == len(b) and all(np.array_equal(x.mask, y.mask) and x.score == y.score for x, y in zip(a, b))
    with pytest.raises(ResourceError) as err:
        region_backend("sam", checkpoint=tmp_path / "missing")
    assert "missing" in str(err.value) and "\n" not in str(err.value)


# -- grid ----------------------------------------------------------------------------
def test_grid_backend():
    image = synthetic(10, 7, 8)
    regions = region_backend("grid").masks(image)
    assert len(regions) == 9
    _check_regions(regions, 7, 10)
    total = np.sum([r.mask.astype(int) for r in regions], axis=0)
    assert (total == 1).all()  # a tiling: no gap, no overlap
    assert all(r.score == 1.0 and r.stability is None for r in regions)
    assert min(r.bbox for r in regions) == (0, 0, 3, 2)
    full = GridRegions(rows=2, cols=1, full_image=True).masks(image)
    assert [r.area for r in full] == [70, 40, 30] and full[0].mask.all()
    assert len(GridRegions(rows=9, cols=2).masks(synthetic(4, 3))) == 6  # zero-height rows dropped
    assert GridRegions(rows=2).settings() != GridRegions().settings()
    with pytest.raises(InputError, match="rows"):
        GridRegions(rows=0)
    with pytest.raises(InputError, match="unknown option"):
        region_backend("grid", size=3)


# -- cache ---------------------------------------------------------------------------
class Counting:
    """Wraps a backend to count real computations."""

    def __init__(self, backend):
        self.backend, self.name, self.calls = backend, backend.name, 0

    def settings(self):
        return self.backend.settings()

    def masks(self, image):
        self.calls += 1
        return self.backend.masks(image)


def _same(a: list[Region], b: list[Region]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.mask, y.mask) and x.score == y.score and x.bbox == y.bbox and x.area == y.area
        and (x.stability == y.stability or (x.stability is None and y.stability is None)) for x, y in zip(a, b))


def test_cache_hit_and_corrupt_entry(tiny, tmp_path):
    inner = Counting(sam(tiny, points_per_side=4, pred_iou_thresh=0.0, stability_score_thresh=0.0, box_nms_thresh=1.0))
    cached = CachedBackend(inner, tmp_path)
    image = synthetic(37, 29, 9)
    first = cached.masks(image)
    again = CachedBackend(inner, tmp_path).masks(image.copy())  # a new object, same pixels
    assert inner.calls == 1 and _same(first, again) and len(first) > 1
    path = cached.cache.path(image_digest(image))
    assert path.exists() and (cached.cache.root / "settings.json").exists()
    for damage in (b"", b"not a zip file", path.read_bytes()[: len(path.read_bytes()) // 2]):
        path.write_bytes(damage)
        redo = cached.masks(image)
        assert _same(first, redo)
    assert inner.calls == 4 and cached.misses == 4
    assert _same(first, cached.masks(image)) and inner.calls == 4  # rewritten entry is used again
    # an entry for another size (same key by accident) is not trusted
    cached.cache.put(image_digest(image), first, (29, 38))
    assert _same(first, cached.masks(image)) and inner.calls == 5
    # other settings -> another namespace
    other = CachedBackend(Counting(sam(tiny, points_per_side=3)), tmp_path)
    assert other.cache.root != cached.cache.root


def test_cache_via_factory_and_empty_result(tmp_path):
    backend = region_backend("grid", cache=tmp_path, rows=2, cols=2)
    image = synthetic(6, 6)
    a = backend.masks(image)
    b = backend.masks(image)
    assert backend.hits == 1 and _same(a, b)
    cache_true = region_backend("grid", cache=True)
    assert Path(os.environ["CAPEVAL_CACHE"]) / "regions" in cache_true.cache.root.parents
    empty = CachedBackend(Counting(type("Empty", (), {"name": "none", "settings": lambda self: {"x": 1},
                                                      "masks": lambda self, im: []})()), tmp_path)
    assert empty.masks(image) == [] and empty.masks(image) == [] and empty.hits == 1


# -- names and missing dependencies ----------------------------------------------------------
def test_unknown_backend_one_line():
    with pytest.raises(UnknownNameError) as err:
        region_backend("segment-everything")
    msg = str(err.value)
    assert "unknown region backend 'segment-everything'" in msg and "sam" in msg and "\n" not in msg


def test_mobilesamv2_missing_is_a_clear_error(monkeypatch, tmp_path):
    from capeval.models.regions import mobilesamv2 as ms

    if ms._findable("mobilesamv2"):
        pytest.skip("mobilesamv2 is installed here: the missing-package error cannot be shown")
    with pytest.raises(MissingDependencyError) as err:
        region_backend("mobilesamv2", weights_dir=tmp_path)
    msg = str(err.value)
    assert "mobilesamv2" in msg and "ChaoningZhang/MobileSAM" in msg and "ObjectAwareModel.pt" in msg and "\n" not in msg
    monkeypatch.setattr(ms, "_findable", lambda name: True)  # as if installed: now the weights are missing
    (tmp_path / "ObjectAwareModel.pt").write_bytes(b"x")
    with pytest.raises(ResourceError) as err:
        region_backend("mobilesamv2", weights_dir=tmp_path)
    assert "Prompt_guided_Mask_Decoder.pt, l2.pt" in str(err.value) and str(tmp_path) in str(err.value)
    with pytest.raises(InputError, match="encoder_type"):
        region_backend("mobilesamv2", weights_dir=tmp_path, encoder_type="vit_z")


def test_import_is_light():
    code = ("import sys, capeval.models.regions, capeval.models.regions.grid, capeval.models.regions.cache; "
            "print(','.join(m for m in ('torch', 'transformers', 'PIL') if m in sys.modules))")
    src = str(Path(__file__).resolve().parents[1] / "src")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": src}).stdout.strip()
    assert out == ""
