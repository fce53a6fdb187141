"""The images VisCE2 looks at: where they are, their content hash, PIL and data-URL forms.

An image is a file path, a PIL image or an HxW(xC) uint8 array. Its identity for the cache is
the sha256 of the file's bytes (paths) or of mode, size and pixels (in-memory images), so a
renamed or copied file keeps its cached visual context.

LLaVA-1.5 (``image_aspect_ratio: pad``) centres each image on a square canvas filled with its
image processor's mean colour before the CLIP preprocessing (LLaVA ``mm_utils.py``
``expand2square``, called with ``tuple(int(x * 255) for x in image_processor.image_mean)``):
:func:`expand_to_square` and :func:`mean_fill`. Both backends apply it by default, so a
server receives the pixels LLaVA's own preprocessing sees.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
from typing import Any, Sequence

from capeval.errors import InputError
from capeval.hashing import file_digest
from capeval.io.image_files import decode_image, read_image_bytes
from capeval.io.images import resolve_images as find_images

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif")
#: magic bytes of the formats every OpenAI-compatible server takes as they are
_MAGIC = ((b"\xff\xd8\xff", "image/jpeg"), (b"\x89PNG\r\n\x1a\n", "image/png"), (b"GIF87a", "image/gif"),
          (b"GIF89a", "image/gif"))


def resolve_images(images: Any, ids: Sequence[str], label: str = "visce2") -> tuple[dict[str, Any], dict[str, str]]:
    """``({id: image}, {id: problem})`` (:func:`capeval.io.images.resolve_images`; GIF files too)."""
    return find_images(images, ids, label, IMAGE_EXTENSIONS)


def read_bytes(image: Any, item: str) -> bytes:
    """The file's bytes (paths only; regular files only); errors name the item and the file."""
    try:
        return read_image_bytes(image)
    except InputError as exc:
        raise InputError(f"item {item!r}: {exc}", item) from None


def digest(image: Any, item: str) -> str:
    """sha256 identity of an image (file bytes, or mode/size/pixels in memory)."""
    if isinstance(image, (str, os.PathLike)):
        try:  # remembered per (path, size, mtime): a second scoring call reads nothing
            return file_digest(image)
        except OSError:
            read_bytes(image, item)  # raises the one-line error naming the item
            raise
    if isinstance(image, (bytes, bytearray)):
        return hashlib.sha256(bytes(image)).hexdigest()
    tobytes = getattr(image, "tobytes", None)
    if tobytes is None:
        raise InputError(f"item {item!r}: unsupported image type {type(image).__name__} "
                         "(use a path, a PIL image or a uint8 array)", item)
    head = f"{getattr(image, 'mode', getattr(image, 'dtype', ''))}{getattr(image, 'size', '')}{getattr(image, 'shape', '')}"
    h = hashlib.sha256(head.encode())
    h.update(tobytes())
    return h.hexdigest()


def to_pil(image: Any, item: str) -> Any:
    """A decoded RGB PIL image (the VLM's input); errors name the item."""
    from capeval._optional import require

    pil = require("PIL.Image", purpose="judge images")
    try:
        if isinstance(image, (str, os.PathLike, bytes, bytearray)):
            try:  # regular files only, the pixel limit checked before decoding
                return decode_image(image, item).convert("RGB")
            except InputError as exc:
                raise InputError(f"item {item!r}: {exc}", item) from None
        if isinstance(image, pil.Image):
            return image.convert("RGB")
        import numpy as np

        if isinstance(image, np.ndarray):
            if image.dtype != np.uint8 or image.ndim not in (2, 3):
                raise InputError(f"item {item!r}: image array must be HxW or HxWxC uint8, got {image.dtype} "
                                 f"{image.shape}", item)
            arr = image[:, :, 0] if image.ndim == 3 and image.shape[2] == 1 else image
            return pil.fromarray(np.ascontiguousarray(arr)).convert("RGB")
    except InputError:
        raise
    except Exception as exc:  # PIL raises many kinds for undecodable files
        raise InputError(f"item {item!r}: cannot decode image ({type(exc).__name__}: {exc})", item) from None
    raise InputError(f"item {item!r}: unsupported image type {type(image).__name__}", item)


#: CLIP's image mean (OpenAI ``clip.py``), the mean of LLaVA-1.5's CLIP-ViT-L/14-336 processor
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)


def mean_fill(image_mean: Sequence[float] | None = None) -> tuple[int, ...]:
    """LLaVA's padding colour: ``tuple(int(x * 255) for x in image_mean)`` (truncation, not rounding)."""
    return tuple(int(x * 255) for x in (CLIP_MEAN if image_mean is None else image_mean))


def expand_to_square(image: Any, fill: tuple[int, ...]) -> Any:
    """The image centred on a square canvas of ``fill`` colour (LLaVA's ``expand2square``:
    offset ``(side - w) // 2`` / ``(side - h) // 2``); a square image is returned unchanged."""
    from PIL import Image

    w, h = image.size
    if w == h:
        return image
    side = max(w, h)
    canvas = Image.new(image.mode, (side, side), fill)
    canvas.paste(image, ((side - w) // 2, (side - h) // 2))
    return canvas


def _is_square(image: Any) -> bool | None:
    """Whether an in-memory image is square (None for files: they are decoded to know)."""
    size = getattr(image, "size", None)
    if isinstance(size, tuple) and len(size) == 2:
        return size[0] == size[1]
    shape = getattr(image, "shape", None)
    if isinstance(shape, tuple) and len(shape) >= 2:
        return shape[0] == shape[1]
    return None


def data_url(image: Any, item: str, pad_fill: tuple[int, ...] | None = None) -> str:
    """``data:<mime>;base64,...``: JPEG/PNG/GIF files as they are, anything else re-encoded as PNG.

    ``pad_fill``: a non-square image is first padded to a square of that colour
    (:func:`expand_to_square` of the decoded RGB image) and sent as lossless PNG; square
    images are sent as they are.
    """
    if pad_fill is not None and _is_square(image) is not True:
        pil = to_pil(image, item)
        if pil.size[0] != pil.size[1]:
            buf = io.BytesIO()
            expand_to_square(pil, pad_fill).save(buf, format="PNG")
            return f"data:image/png;base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"
    if isinstance(image, (str, os.PathLike, bytes, bytearray)):
        data = bytes(image) if isinstance(image, (bytes, bytearray)) else read_bytes(image, item)
        for magic, mime in _MAGIC:
            if data.startswith(magic):
                return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return f"data:image/webp;base64,{base64.b64encode(data).decode('ascii')}"
    buf = io.BytesIO()
    to_pil(image, item).save(buf, format="PNG")
    return f"data:image/png;base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def usable_items(cands: dict[str, str], images: Any, label: str, skip_bad_items: bool, decode: bool = True
                 ) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """The items an image judge can ask about: each needs an image that resolves, reads and
    (``decode``) decodes, as the CLIP metrics check theirs, and a non-empty caption; the
    others go through :func:`capeval.io.inputs.raise_bad_items`.
    ``(usable ids, {id: image}, {id: image sha256})``; none usable is an InputError."""
    from capeval.io.inputs import raise_bad_items

    ids = list(cands)
    sources, bad = resolve_images(images, ids, label)
    digests: dict[str, str] = {}
    for i in ids:
        if i in bad:
            continue
        if not cands[i].strip():
            bad[i] = f"item {i!r}: caption is empty"
            continue
        try:
            digests[i] = digest(sources[i], i)
            if decode:  # decoded before anything is sent: an unreadable image is this item's problem
                to_pil(sources[i], i)
        except InputError as exc:
            bad[i] = str(exc)
    raise_bad_items(ids, bad, skip_bad_items)
    good = [i for i in ids if i not in bad]
    if not good:
        raise InputError("no usable items: every item was skipped")
    return good, sources, digests
