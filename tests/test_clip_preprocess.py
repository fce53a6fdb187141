"""Image preprocessing equals a direct computation of torchvision's Resize/CenterCrop/ToTensor/Normalize
on PIL images; array inputs; errors that name the file; threaded decoding gives the same tensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from capeval.models.clip.preprocess import OPENAI_MEAN, OPENAI_STD, Preprocess, resize_shorter
from capeval.errors import InputError

torch = pytest.importorskip("torch")


def reference(img: Image.Image, size: int = 224) -> np.ndarray:
    """torchvision's PIL path written out: int() for the long side, round() for crop offsets."""
    w, h = img.size
    if w <= h:
        ow, oh = size, int(size * h / w)
    else:
        ow, oh = int(size * w / h), size
    if (ow, oh) != (w, h):
        img = img.resize((ow, oh), Image.BICUBIC)
    top = int(round((oh - size) / 2.0))
    left = int(round((ow - size) / 2.0))
    img = img.crop((left, top, left + size, top + size)).convert("RGB")
    t = torch.from_numpy(np.array(img)).permute(2, 0, 1).float().div(255)
    mean = torch.tensor(OPENAI_MEAN).view(3, 1, 1)
    std = torch.tensor(OPENAI_STD).view(3, 1, 1)
    return ((t - mean) / std).numpy()


def _image(w: int, h: int, mode: str, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    rgb = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB")
    if mode == "P":
        return rgb.convert("P", palette=Image.ADAPTIVE)
    return rgb.convert(mode)


@pytest.mark.parametrize("w,h", [(500, 375), (375, 500), (224, 224), (300, 224), (1000, 223), (225, 449), (640, 427)])
@pytest.mark.parametrize("mode", ["RGB", "L", "P", "RGBA"])
def test_equals_reference_computation(w, h, mode):
    img = _image(w, h, mode)
    ours = Preprocess()(img)
    assert ours.shape == (3, 224, 224) and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, reference(img))


def test_long_side_is_truncated_like_torchvision():
    img = _image(500, 375, "RGB")
    assert resize_shorter(img, 224, Image.BICUBIC).size == (298, 224)  # 224*500/375 = 298.67 -> 298


def test_other_mean_std_and_size():
    img = _image(333, 250, "RGB")
    prep = Preprocess(32, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    out = prep(img)
    assert out.shape == (3, 32, 32)
    assert out.min() >= -1.0 and out.max() <= 1.0


def test_arrays_and_bad_shapes():
    rng = np.random.default_rng(1)
    arr = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    np.testing.assert_array_equal(Preprocess()(arr), reference(Image.fromarray(arr)))
    assert Preprocess()(arr[:, :, 0]).shape == (3, 224, 224)
    with pytest.raises(InputError, match="shape"):
        Preprocess()(rng.integers(0, 256, (4, 60, 80, 3), dtype=np.uint8), "item7")
    with pytest.raises(InputError, match="uint8"):
        Preprocess()(arr.astype(np.float32))


def test_file_errors_name_the_file(tmp_path: Path):
    good = tmp_path / "good.jpg"
    _image(120, 90, "RGB").save(good, quality=90)
    truncated = tmp_path / "cut.jpg"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    for path in (truncated, text, tmp_path / "missing.jpg"):
        with pytest.raises(InputError) as err:
            Preprocess()(path, "item1")
        assert str(path) in str(err.value)
        assert err.value.item_id == "item1"


def test_threaded_embedding_equals_sequential(tmp_path: Path):
    from capeval.models.clip.backbone import random_backbone
    from capeval.models.clip.embed import embed_images

    bb = random_backbone("tiny")
    files = []
    for k in range(9):
        p = tmp_path / f"{k}.png"
        _image(40 + 7 * k, 50 + 3 * k, "RGB", seed=k).save(p)
        files.append(p)
    files.append(files[0])  # duplicate: embedded once
    stats: dict = {}
    fast = embed_images(bb, files, batch_size=4, workers=3, stats=stats)
    slow = torch.cat([bb.encode_images(bb.load_image(f)[None]) for f in files]).numpy()
    assert stats["unique_images"] == 9
    np.testing.assert_allclose(fast, slow, atol=1e-5)
