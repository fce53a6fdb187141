"""Images and videos given as URIs: fetched into a local folder before a metric reads them.

``file://`` names a local file (used in place); ``http://``/``https://`` are read with the
standard library; any other scheme pyarrow's filesystems know (``s3://``, ``gs://``,
``hdfs://``, ...) through :func:`pyarrow.fs.FileSystem.from_uri` (credentials as pyarrow
reads them, e.g. the usual AWS environment variables). A fetch that fails is a problem of
its item, reported like a missing file: an error, or a skipped item with ``skip_bad_items``.
A video given by URI must be a video file (frame folders are local paths only).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")
#: seconds before an HTTP fetch gives up
HTTP_TIMEOUT = 60.0


def is_uri(value: Any) -> bool:
    """Whether ``value`` is a string with a ``scheme://`` prefix (not a Windows drive path)."""
    return isinstance(value, str) and bool(_SCHEME.match(value))


def file_uri_path(uri: str) -> Path:
    """The local path of a ``file://`` URI."""
    parsed = urllib.parse.urlparse(uri)
    return Path(urllib.request.url2pathname(parsed.path))


def fetch(uri: str, dest: Path) -> Path:
    """A local path holding the object ``uri`` (downloaded into ``dest`` unless ``file://``).

    Raises :class:`OSError` (with the reason) when the object cannot be read.
    """
    if uri.startswith("file://"):
        path = file_uri_path(uri)
        if not path.exists():
            raise FileNotFoundError(f"no such file {path}")
        return path
    name = Path(urllib.parse.urlparse(uri).path).name or "object"
    dest.mkdir(parents=True, exist_ok=True)
    # a fresh name keeping the extension (decoders read it): two URIs may end in the same name
    fd, tmp = tempfile.mkstemp(dir=dest, suffix=f"-{name}")
    os.close(fd)
    target = Path(tmp)
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(uri, timeout=HTTP_TIMEOUT) as resp, open(target, "wb") as f:
                shutil.copyfileobj(resp, f)
        except urllib.error.HTTPError as exc:
            raise OSError(f"HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise OSError(str(exc.reason)) from None
        return target
    from capeval._optional import require

    require("pyarrow", "ray", f"reading {uri.split('://', 1)[0]}:// URIs")
    import pyarrow.fs as pafs

    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        with fs.open_input_stream(path) as src, open(target, "wb") as f:
            shutil.copyfileobj(src, f)
    except OSError:
        raise
    except Exception as exc:  # pyarrow's ArrowInvalid etc. for unknown schemes or bad URIs
        raise OSError(f"{type(exc).__name__}: {exc}") from None
    return target


def localize(sources: Mapping[str, Any], dest: Path, what: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``({id: local source}, {id: problem})``: the URIs of ``sources`` fetched into ``dest``
    (each distinct URI once), other values kept as they are. ``what``: "image" or "video"."""
    out: dict[str, Any] = {}
    bad: dict[str, str] = {}
    fetched: dict[str, Path | str] = {}
    for item, value in sources.items():
        if not is_uri(value):
            out[item] = value
            continue
        if value not in fetched:
            try:
                fetched[value] = fetch(value, dest)
            except OSError as exc:
                fetched[value] = f"{exc.strerror or exc}"
        got = fetched[value]
        if isinstance(got, Path):
            out[item] = got
        else:
            bad[item] = f"item {item!r}: cannot fetch {what} {value}: {got}"
    return out, bad


def fetch_media(inputs: Mapping[str, Any], dest: Path, skip_bad_items: bool) -> dict[str, Any]:
    """``inputs`` (``images=``/``videos=``/...) with the URIs of its image and video mappings
    replaced by files fetched into ``dest``; an item whose fetch failed is an error naming
    it, or (``skip_bad_items``) left out of the mapping, so the metric skips it."""
    from capeval.io.inputs import raise_bad_items

    out = dict(inputs)
    for name, what in (("images", "image"), ("videos", "video")):
        value = out.get(name)
        if isinstance(value, Mapping) and any(is_uri(v) for v in value.values()):
            local, bad = localize(value, dest / name, what)
            raise_bad_items(list(value), bad, skip_bad_items)
            out[name] = local
    return out
