"""Opening image files safely: regular files only, and a pixel limit checked before decoding.

Every image capeval decodes from a file or from bytes goes through :func:`decode_image`
(the CLIP-family metrics, HICE-S, BRIDGE, the VLM judges), so that:

- a path that is not a regular file (a FIFO, a device, a socket) is refused at once: it is
  opened non-blocking (opening a FIFO without a writer would wait forever) and checked with
  ``fstat`` before anything is read;
- an image whose header declares more than :func:`capeval.io.reading.max_image_pixels`
  pixels (width x height; ``CAPEVAL_MAX_IMAGE_PIXELS`` / ``--max-image-pixels``, range 1 to
  2^40) is refused before a pixel is decoded: a 109 KB PNG can declare 30000 x 30000 pixels,
  2.7 GB once decoded. The default, 178,956,970, is PIL's own refusal threshold (twice
  ``PIL.Image.MAX_IMAGE_PIXELS``), so every image the official code decodes is decoded;
- PIL's own decompression-bomb check (a two-line ``DecompressionBombWarning`` on stderr above
  89,478,485 pixels, an exception above twice that) is replaced by this one limit while an
  image is opened, so a large but allowed image prints nothing and a raised limit is honoured.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import threading
from pathlib import Path
from typing import Any

from capeval.errors import InputError

# PIL reads its limit from a module global while it parses a header: it is lifted for that
# moment under this lock (the header parse is short; pixel decoding runs outside it)
_OPEN_LOCK = threading.Lock()

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not an image file to read (``"a FIFO"``, ...), or None (a regular file,
    or a path that does not exist: its reader says so). Never opens the file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


def open_image_file(path: str | os.PathLike[str]) -> io.BufferedReader:
    """``path`` opened for binary reading, refused unread unless it is a regular file;
    one-line :class:`InputError` naming the file for the usual failures."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"image file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"expected an image file, got a directory: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read image {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = _kind(mode)
        raise InputError(f"expected an image file, got {kind}: {path}" if kind == "a directory"
                         else f"not a regular file ({kind}): {path}; images are read from regular files only")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_image_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular image file (:func:`open_image_file`)."""
    with open_image_file(path) as f:
        try:
            return f.read()
        except OSError as exc:
            raise InputError(f"cannot read image {path}: {exc.strerror or exc}") from None


def decode_image(source: Any, name: str | None = None) -> Any:
    """A fully decoded PIL image from a path, bytes or a binary file object (its ``name``, if
    any, labels errors), refused before decoding when over the pixel limit.

    Errors are one-line :class:`InputError` naming the file; ``name`` (the item) becomes their
    ``item_id``. The caller prefixes the item to the message where it wants it.
    """
    from PIL import Image, UnidentifiedImageError

    from capeval.io.reading import max_image_pixels

    limit = max_image_pixels()
    if isinstance(source, (str, os.PathLike)):
        path, stream = Path(source), None
    elif isinstance(source, (bytes, bytearray)):
        path, stream = Path(name or "<bytes>"), io.BytesIO(bytes(source))
    else:
        path, stream = Path(str(getattr(source, "name", None) or name or "<stream>")), source
    try:
        f = open_image_file(path) if stream is None else stream
        with f if stream is None else contextlib.nullcontext():
            with _OPEN_LOCK:
                saved = Image.MAX_IMAGE_PIXELS
                Image.MAX_IMAGE_PIXELS = None  # the check below replaces PIL's warning and error
                try:
                    img = Image.open(f)
                finally:
                    Image.MAX_IMAGE_PIXELS = saved
            with img:
                w, h = img.size
                if w * h > limit:
                    raise InputError(f"image {path}: {w}x{h} = {w * h:,} pixels, more than the {limit:,} an image may "
                                     "have (set CAPEVAL_MAX_IMAGE_PIXELS or --max-image-pixels to raise the limit)", name)
                img.load()  # decode now: truncated files fail here, inside the error handling
                return img
    except InputError as exc:
        if exc.item_id is None and name is not None:
            raise InputError(str(exc), name) from None
        raise
    except UnidentifiedImageError:
        raise InputError(f"not an image file (unrecognised format): {path}", name) from None
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        raise InputError(f"cannot decode image {path}: {exc}", name) from None

