"""Embedding many images/texts fast: each unique input once, length-sorted text batches,
image decoding in threads overlapped with the model, and an optional on-disk cache.

Cache: off by default; ``cache=True`` uses ``cache_dir()/embeddings``, a path uses that
folder. Content-addressed: ``<dir>/<backbone signature hash[:16]>/<kind>/<sha256[:2]>/<sha256>.emb``
where the sha256 is of the file bytes (images), of mode/size/pixels (PIL images and arrays) or
of the UTF-8 text. Files are written atomically (temporary file + ``os.replace``) and checked
when read (:class:`EmbeddingCache`).
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import stat
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from capeval.paths import make_cache_folder
from capeval.errors import InputError
from capeval.io.atomic import atomic_write_bytes
from capeval.io.image_files import read_image_bytes
from capeval.progress import make_progress


class EmbeddingCache:
    """One file per embedding, keyed by (backbone signature, content hash), each verified when read.

    An entry is ``<key>.emb``: the magic ``CEVE``, the dimension (uint32 little endian), a
    sha256 over (kind, key, dimension, values) and the float32 little-endian values. Any
    mismatch (truncated or altered bytes, another dimension or dtype, an entry copied under
    another name, a non-finite value) is a miss: the embedding is computed again and the entry
    rewritten. A file of another size is never read whole (memory stays bounded).
    """

    MAGIC = b"CEVE"
    #: a (rows, dim) matrix (HICE-S: an image and its regions): ``CEVM``, dim, rows, sha256, values
    MATRIX_MAGIC = b"CEVM"

    def __init__(self, root: str | os.PathLike[str], namespace: str, dim: int):
        self.root = Path(root) / namespace[:16]
        self.dim = int(dim)

    def _path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / f"{key}.emb"

    def _checksum(self, kind: str, key: str, payload: bytes, rows: int = 0) -> bytes:
        h = hashlib.sha256(f"{kind}\0{key}\0{self.dim}\0".encode() + (f"{rows}\0".encode() if rows else b""))
        h.update(payload)
        return h.digest()

    def get(self, kind: str, key: str) -> np.ndarray | None:
        """The stored embedding, or None when absent or not exactly what :meth:`put` wrote."""
        try:  # O_NONBLOCK: a FIFO planted under an entry's name must not hang the run
            with os.fdopen(os.open(self._path(kind, key), os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
                info = os.fstat(f.fileno())
                head = f.read(12) if stat.S_ISREG(info.st_mode) else b""
                rows = int.from_bytes(head[8:12], "little") if head[:4] == self.MATRIX_MAGIC else 0
                header = 12 if rows else 8
                size = header + 32 + 4 * self.dim * max(rows, 1)
                if len(head) < 8 or info.st_size != size or (head[:4] != self.MAGIC and not rows):
                    return None
                data = head + f.read(size - len(head))
        except OSError:
            return None  # absent or unreadable: recompute
        payload = data[header + 32:]
        if (len(data) != size or int.from_bytes(data[4:8], "little") != self.dim
                or data[header:header + 32] != self._checksum(kind, key, payload, rows)):
            return None
        value = np.frombuffer(payload, dtype="<f4").astype(np.float32)
        if rows:
            value = value.reshape(rows, self.dim)
        return value if np.isfinite(value).all() else None

    def put(self, kind: str, key: str, value: np.ndarray) -> None:
        value = np.asarray(value, dtype="<f4")
        rows = value.shape[0] if value.ndim == 2 else 0
        if value.shape not in ((self.dim,), (rows, self.dim)) or (value.ndim == 2 and not rows) \
                or not np.isfinite(value).all():
            return  # never store what get() would refuse
        payload = value.tobytes()
        path = self._path(kind, key)
        make_cache_folder(path.parent)
        if path.exists() and not path.is_file():  # a device or FIFO would be written into, not replaced
            try:
                path.unlink()
            except OSError:
                return  # a folder under an entry's name: this entry is not cached
        head = (self.MATRIX_MAGIC + self.dim.to_bytes(4, "little") + rows.to_bytes(4, "little") if rows
                else self.MAGIC + self.dim.to_bytes(4, "little"))
        atomic_write_bytes(path, head + self._checksum(kind, key, payload, rows) + payload)


def open_cache(cache: Any, backbone: Any) -> EmbeddingCache | None:
    if cache is None or cache is False:
        return None
    if cache is True:
        from capeval.paths import cache_dir

        root = cache_dir() / "embeddings"
    else:
        root = Path(cache)
    return EmbeddingCache(root, backbone.signature_hash, backbone.embed_dim)


def _image_key(image: Any) -> Any:
    """Identity for de-duplication within one call: the path string, else the object."""
    if isinstance(image, (str, os.PathLike)):
        return ("path", os.path.abspath(os.fspath(image)))
    return ("obj", id(image))


def _content_hash(image: Any) -> tuple[str, Any]:
    """(sha256, what to decode) - files are read once and decoded from memory."""
    if isinstance(image, (str, os.PathLike)):
        data = read_image_bytes(image)  # a regular file only: a FIFO would block this thread forever
        return hashlib.sha256(data).hexdigest(), data
    if isinstance(image, np.ndarray):
        h = hashlib.sha256(f"{image.dtype}{image.shape}".encode())
        h.update(np.ascontiguousarray(image).tobytes())
        return h.hexdigest(), image
    h = hashlib.sha256(f"{getattr(image, 'mode', '')}{getattr(image, 'size', '')}".encode())
    h.update(image.tobytes())
    return h.hexdigest(), image


def embed_usable_images(backbone: Any, ids: Sequence[str], sources: Any, bad: dict[str, str], batch_size: int,
                        cache: Any, progress: bool | None, skip_bad_items: bool, workers: int | None = None,
                        stats: dict[str, Any] | None = None) -> tuple[list[str], np.ndarray]:
    """The image step of the image metrics: embed the images of the items not yet in ``bad``,
    add the items whose image fails to decode to ``bad``, apply ``skip_bad_items``
    (:func:`capeval.io.inputs.raise_bad_items`); ``(usable ids, their embeddings)`` (rows as
    :func:`embed_images`, not normalised). No usable item left is an InputError."""
    from capeval.io.inputs import raise_bad_items

    good = [i for i in ids if i not in bad]
    errors: dict[int, str] = {}
    img = embed_images(backbone, [sources[i] for i in good], batch_size, cache, progress, errors=errors,
                       names=good, workers=workers, stats=stats)
    for k, msg in errors.items():
        bad[good[k]] = msg if msg.startswith("item ") else f"item {good[k]!r}: {msg}"
    raise_bad_items(ids, bad, skip_bad_items)
    keep = [k for k, i in enumerate(good) if i not in bad]
    if not keep:
        raise InputError("no usable items: every item was skipped")
    return [good[k] for k in keep], img[keep]


def embed_images(backbone: Any, images: Sequence[Any], batch_size: int = 64, cache: Any = None,
                 progress: bool | None = False, errors: dict[int, str] | None = None,
                 names: Sequence[str] | None = None, workers: int | None = None,
                 stats: dict[str, Any] | None = None) -> np.ndarray:
    """(N, D) float32 image embeddings (projected, not normalised), one row per input.

    ``images``: paths, PIL images or HWC uint8 arrays; duplicates are embedded once.
    Bad images raise :class:`InputError` naming the file, or, when an ``errors`` dict is
    given, are recorded there (input index -> message) and get a row of NaN.
    """
    store = open_cache(cache, backbone)
    first: dict[Any, int] = {}
    owner = [first.setdefault(_image_key(im), i) for i, im in enumerate(images)]
    uniq = list(first.values())
    out = np.full((len(images), backbone.embed_dim), np.nan, dtype=np.float32)
    done: dict[int, np.ndarray] = {}
    bad: dict[int, str] = {}

    def label(i: int) -> str:
        return names[i] if names is not None else (os.fspath(images[i]) if isinstance(images[i], (str, os.PathLike)) else f"#{i}")

    def prepare(i: int) -> tuple[str | None, Any]:
        """Runs in a worker thread: hash (for the cache), look up, else decode + preprocess."""
        im = images[i]
        key = None
        if store is not None:
            key, im = _content_hash(im)
            hit = store.get("image", key)
            if hit is not None:
                return key, hit
            if isinstance(im, bytes):
                buf = io.BytesIO(im)
                buf.name = os.fspath(images[i])  # errors name the user's file
                im = buf
        return key, backbone.load_image(im, label(i))

    workers = workers or min(4, (os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=workers) as pool, make_progress(len(uniq), "images", progress) as bar:
        pending: collections.deque[tuple[int, Future]] = collections.deque()
        it = iter(uniq)
        ahead = 3 * batch_size  # bounded prefetch keeps memory flat

        def refill() -> None:
            while len(pending) < ahead:
                try:
                    i = next(it)
                except StopIteration:
                    return
                pending.append((i, pool.submit(prepare, i)))

        refill()
        batch_idx: list[int] = []
        batch_px: list[torch.Tensor] = []
        batch_keys: list[str | None] = []

        def flush() -> None:
            if not batch_idx:
                return
            feats = backbone.encode_images(torch.stack(batch_px)).to("cpu", torch.float32).numpy()
            for j, i in enumerate(batch_idx):
                done[i] = feats[j]
                if store is not None and batch_keys[j] is not None:
                    store.put("image", batch_keys[j], feats[j])
            bar.update(len(batch_idx))
            batch_idx.clear(), batch_px.clear(), batch_keys.clear()

        while pending:
            i, fut = pending.popleft()
            refill()
            try:
                key, value = fut.result()
            except InputError as exc:
                if errors is None:
                    raise
                bad[i] = str(exc)
                bar.update(1)
                continue
            if isinstance(value, np.ndarray):  # cache hit
                done[i] = value
                bar.update(1)
                continue
            batch_idx.append(i), batch_px.append(value), batch_keys.append(key)
            if len(batch_idx) >= batch_size:
                flush()
        flush()
    for i, o in enumerate(owner):
        if o in done:
            out[i] = done[o]
        elif errors is not None and o in bad:
            errors[i] = bad[o]
    if stats is not None:
        stats.update({"unique_images": len(uniq)})
    return out


def embed_texts(backbone: Any, texts: Sequence[str], batch_size: int = 256, cache: Any = None,
                progress: bool | None = False, stats: dict[str, Any] | None = None) -> np.ndarray:
    """(N, D) float32 text embeddings (EOT features @ text_projection, not normalised).

    Each unique text is tokenised and embedded once; texts are sorted by token count and
    each batch is padded to its own longest sequence (exact under the causal mask).
    ``stats`` (optional dict) receives ``unique_texts`` and ``truncated`` (unique texts cut at 77).
    """
    store = open_cache(cache, backbone)
    index: dict[str, int] = {}
    owner = [index.setdefault(t, len(index)) for t in texts]
    uniq = list(index)
    ids: list[list[int]] = []
    cut: list[bool] = []
    for t in uniq:  # one at a time to know which texts were truncated
        one, n = backbone.tokenize([t])
        ids.append(one[0])
        cut.append(bool(n))
    feats = np.zeros((len(uniq), backbone.embed_dim), dtype=np.float32)
    todo = list(range(len(uniq)))
    keys: list[str] = []
    if store is not None:
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in uniq]
        todo = []
        for i, k in enumerate(keys):
            hit = store.get("text", k)
            if hit is None:
                todo.append(i)
            else:
                feats[i] = hit
    todo.sort(key=lambda i: len(ids[i]))
    with make_progress(len(todo), "texts", progress) as bar:
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            emb = backbone.encode_texts([ids[i] for i in chunk]).to("cpu", torch.float32).numpy()
            feats[chunk] = emb
            if store is not None:
                for j, i in enumerate(chunk):
                    store.put("text", keys[i], emb[j])
            bar.update(len(chunk))
    if stats is not None:
        stats.update({"unique_texts": len(uniq), "truncated": sum(cut),
                      "truncated_texts": {uniq[i] for i in range(len(uniq)) if cut[i]}})
    return feats[owner] if owner else feats[:0]


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation in float32, as the reference code does it in numpy."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.sqrt(np.sum(x**2, axis=1, keepdims=True))
