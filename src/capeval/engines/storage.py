"""The folder of a distributed job's shard files: a local path or a URI (``s3://``, ``gs://``,
``hdfs://``, ``file://``, ... through :mod:`pyarrow.fs`), so a cluster without a shared
filesystem keeps its shards in object storage.

Writes are atomic everywhere: locally a temporary file beside the target and a rename; on a
URI the object is written under a temporary name and moved (object stores publish an object
only once its upload completes, and a move is a server-side copy), so a shard file that exists
is complete — what ``resume`` relies on.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from capeval.errors import InputError


class ShardDir:
    """A job folder at ``location`` (a path or a URI); files are addressed by name."""

    def __init__(self, location: str | os.PathLike[str]):
        from capeval.io.uris import is_uri

        self.location = os.fspath(location)
        self.local: Path | None = None
        self.fs: Any = None
        if is_uri(self.location) and not self.location.startswith("file://"):
            from capeval._optional import require

            require("pyarrow", "ray", "shard folders on URIs")
            import pyarrow.fs as pafs

            try:
                self.fs, self.root = pafs.FileSystem.from_uri(self.location)
            except Exception as exc:  # unknown scheme, missing credentials, ...
                raise InputError(f"shard folder {self.location}: {exc}") from None
            self.root = self.root.rstrip("/")
        else:
            from capeval.io.uris import file_uri_path

            self.local = file_uri_path(self.location) if self.location.startswith("file://") else Path(self.location)

    def __str__(self) -> str:
        return self.location

    def where(self, name: str) -> str:
        """The file ``name`` as a user reads it in a message."""
        return str(self.local / name) if self.local is not None else f"{self.location.rstrip('/')}/{name}"

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def make(self) -> None:
        """Create the folder (and its parents) if needed."""
        if self.local is not None:
            self.local.mkdir(parents=True, exist_ok=True)
        else:
            self.fs.create_dir(self.root, recursive=True)

    def exists(self, name: str) -> bool:
        if self.local is not None:
            return (self.local / name).is_file()
        import pyarrow.fs as pafs

        return self.fs.get_file_info(self._path(name)).type == pafs.FileType.File

    def names(self, prefix: str, suffix: str) -> list[str]:
        """Sorted names of the files ``prefix*suffix`` in the folder (not its sub-folders)."""
        if self.local is not None:
            found = [p.name for p in self.local.glob(f"{prefix}*{suffix}")] if self.local.is_dir() else []
        else:
            import pyarrow.fs as pafs

            sel = pafs.FileSelector(self.root, allow_not_found=True, recursive=False)
            found = [Path(i.path).name for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.File]
        return sorted(n for n in found if n.startswith(prefix) and n.endswith(suffix))

    def remove(self, name: str) -> None:
        if self.local is not None:
            (self.local / name).unlink(missing_ok=True)
        else:
            self.fs.delete_file(self._path(name))

    def read_bytes(self, name: str) -> bytes:
        """The file's bytes; :class:`FileNotFoundError` when it is not there."""
        if self.local is not None:
            return (self.local / name).read_bytes()
        with self.fs.open_input_stream(self._path(name)) as f:
            return f.read()

    def write(self, name: str, fill: Callable[[IO[bytes]], None]) -> None:
        """Write the file ``name`` atomically: ``fill(f)`` writes the content into ``f``."""
        if self.local is not None:
            from capeval.io.atomic import atomic_open

            with atomic_open(self.local / name) as f:
                fill(f)
            return
        tmp = self._path(f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            with self.fs.open_output_stream(tmp) as f:
                fill(f)
            self.fs.move(tmp, self._path(name))
        except BaseException:
            try:
                self.fs.delete_file(tmp)
            except Exception:  # the temporary object may not exist; the original error matters
                pass
            raise
