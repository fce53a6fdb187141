"""Where a distributed job's items come from, shard by shard, in input order.

- :class:`MemorySource`: mappings given to :func:`capeval.score` (``candidates``,
  ``references``, ``images``/``videos`` as a folder or a mapping, ``segments``);
- :class:`DatasetSource`: item tables (:mod:`capeval.io.items`: JSONL, JSON, CSV/TSV,
  Parquet; local paths or any URI pyarrow reads, such as ``s3://bucket/items/``) read as a
  Ray dataset: Ray's read tasks parse the files on the cluster and the driver streams the
  rows in file order (``preserve_order``), cut into shards of a fixed size, so shard ``k``
  holds the same items in every run (what ``resume`` relies on) and the driver never holds
  more than the shards in flight.

Both yield :class:`Shard` objects; :func:`with_context` adds the captions that follow each
shard (the PTB tokenizer's look-ahead, :data:`capeval.tokenize.CONTEXT_CAPTIONS`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capeval.errors import InputError
from capeval.io.items import TEXT_COLUMNS, Items, items_from_rows, table_format


@dataclass
class Shard:
    """Shard ``k``: its items (row order) and the sha256 of everything that decides its scores."""

    k: int
    items: Items
    digest: str

    @property
    def ids(self) -> list[str]:
        return list(self.items.candidates)


def shard_digest(items: Items, media: Any = None) -> str:
    """sha256 of a shard's ids, texts, image/video sources and time windows (``media``: the
    folder of a ``images=``/``videos=`` folder argument, shared by all shards)."""
    h = hashlib.sha256(json.dumps(str(media) if media is not None else None).encode())
    refs, images, videos, segs = (items.references or {}, items.images or {}, items.videos or {},
                                  items.segments or {})
    for i, c in items.candidates.items():
        row = [i, c, refs.get(i), _text(images.get(i)), _text(videos.get(i)), segs.get(i)]
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _text(source: Any) -> str | None:
    if source is None:
        return None
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return f"<{type(source).__name__}>"  # in-memory images: identified by the job's ids only


class MemorySource:
    """Shards of in-memory inputs (already normalised: ``{id: caption}``, ``{id: [refs]}``)."""

    def __init__(self, candidates: dict[str, str], references: dict[str, list[str]] | None,
                 images: Any, videos: Any, segments: Mapping[str, Any] | None, batch_size: int):
        self.ids = list(candidates)
        self.candidates, self.references = candidates, references
        self.batch_size = batch_size
        # a folder argument goes to every shard as it is; a mapping is cut per shard
        self.images, self.videos, self.segments = images, videos, segments
        self.folders = {k: v for k, v in (("images", images), ("videos", videos))
                        if v is not None and not isinstance(v, Mapping)}
        self._digests: list[str] = []  # shard k's digest, computed on the first pass

    def count(self) -> int:
        return len(self.ids)

    def describe(self) -> dict[str, Any]:
        return {"kind": "memory", "n_items": len(self.ids), "folders": {k: str(v) for k, v in self.folders.items()}}

    def shards(self) -> Iterator[Shard]:
        for k, a in enumerate(range(0, len(self.ids), self.batch_size)):
            span = self.ids[a:a + self.batch_size]
            part = Items({i: self.candidates[i] for i in span})
            if self.references is not None:
                part.references = {i: self.references[i] for i in span}
            for name in ("images", "videos", "segments"):
                value = getattr(self, name)
                if isinstance(value, Mapping):
                    setattr(part, name, {i: value[i] for i in span if i in value})
            if len(self._digests) == k:
                self._digests.append(shard_digest(part, self.folders or None))
            yield Shard(k, part, self._digests[k])

    def job_digest(self) -> str:
        """sha256 over every shard's digest (the manifest's; each shard is hashed once per job)."""
        for _ in self.shards():
            pass
        return hashlib.sha256("".join(self._digests).encode()).hexdigest()

    def shard_inputs(self, shard: Shard) -> dict[str, Any]:
        """``images=``/``videos=``/``segments=`` of a shard (folders passed as they are)."""
        out = absolute_paths(shard.items.inputs())
        out.update(absolute_paths(self.folders))
        return out


class DatasetSource:
    """Shards of item tables read as a Ray dataset (needs ``ray.init`` first)."""

    def __init__(self, paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], batch_size: int):
        paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not paths:
            raise InputError("no items file given")
        self.paths = [os.fspath(p) for p in paths]
        formats = {self._format(p) for p in self.paths}
        if len(formats) > 1:
            raise InputError(f"items files of one job must share a format, got {', '.join(sorted(formats))}")
        self.format = formats.pop()
        self.batch_size = batch_size
        self.source = self.paths[0] if len(self.paths) == 1 else f"{self.paths[0]} (+{len(self.paths) - 1} files)"
        self._cached: Any = None

    @staticmethod
    def _format(path: str) -> str:
        from capeval.io.items import format_of, table_files
        from capeval.io.uris import is_uri

        names: list[str] | None = None
        if not is_uri(path):
            if os.path.isdir(path):
                names = os.listdir(path)
            elif not os.path.exists(path):
                raise InputError(f"items file not found: {path}")
        elif format_of(path) is None:
            names = _remote_listing(path)  # a folder (prefix) of an object store
        if names is None:
            return table_format(path)
        found = {table_format(n) for n in table_files(names)}
        if len(found) != 1:
            raise InputError(f"items folder {path}: expected files of one format (.jsonl, .json, .csv, .tsv "
                             f"or .parquet), found {sorted(found) or 'none'}")
        return found.pop()

    def count(self) -> int:
        """Rows of the tables (a pass over JSON/CSV files; Parquet: from the metadata). Before
        the actors start: counting runs an aggregation that needs a free CPU slot."""
        with self._reading():
            return int(self.dataset().count())

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Any failure of Ray's readers (a file that is not what its name says, an empty
        Parquet file, ...) as one line naming the tables; capeval's own errors pass as they are."""
        try:
            yield
        except InputError:
            raise
        except Exception as exc:
            raise InputError(f"{self.source}: cannot read as {self.format} ({_reason(exc)})") from None

    def describe(self) -> dict[str, Any]:
        return {"kind": "items", "paths": self.paths, "format": self.format}

    def cache(self) -> None:
        """Read the tables once into Ray's object store (spilled to disk when it is full), for
        jobs that pass over the items twice (corpus statistics first). Before the actors start."""
        with self._reading():
            self._cached = self.dataset().materialize()

    def dataset(self) -> Any:
        """The Ray dataset of the tables (the cached one after :meth:`cache`): Ray's readers
        with no CPU reserved per read task (the scoring actors may hold every CPU slot; a
        further map operator, e.g. a column projection, would wait for one forever), CSV/TSV
        columns of text read as text."""
        if self._cached is not None:
            return self._cached
        import ray.data

        args: dict[str, Any] = {"num_cpus": 0}
        if self.format in ("csv", "tsv"):
            import pyarrow as pa
            import pyarrow.csv as pcsv

            args["convert_options"] = pcsv.ConvertOptions(column_types={c: pa.string() for c in TEXT_COLUMNS})
            if self.format == "tsv":
                args["parse_options"] = pcsv.ParseOptions(delimiter="\t")
                args["file_extensions"] = ["tsv"]
            return ray.data.read_csv(self.paths, **args)
        if self.format == "parquet":
            return ray.data.read_parquet(self.paths, **args)
        return ray.data.read_json(self.paths, **args)

    def shards(self) -> Iterator[Shard]:
        seen: dict[str, int] = {}
        row = 1
        with self._reading():
            batches = self.dataset().iter_batches(batch_size=self.batch_size, batch_format="pyarrow",
                                                  prefetch_batches=2)
            for k, table in enumerate(batches):
                rows = table.to_pylist()
                part = items_from_rows(rows, self.source, row, seen)
                row += len(rows)
                yield Shard(k, part, shard_digest(part))

    def shard_inputs(self, shard: Shard) -> dict[str, Any]:
        return absolute_paths(shard.items.inputs())


def absolute_paths(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` with relative local paths (folders, or the values of image/video mappings)
    made absolute against the driver's working directory: an actor may run elsewhere."""
    from capeval.io.uris import is_uri

    def fix(v: Any) -> Any:
        if isinstance(v, (str, os.PathLike)) and not is_uri(str(v)) and not os.path.isabs(v):
            return os.path.abspath(v)
        return v

    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if name in ("images", "videos"):
            value = {k: fix(v) for k, v in value.items()} if isinstance(value, Mapping) else fix(value)
        out[name] = value
    return out


def _remote_listing(uri: str) -> list[str]:
    """File names directly under the folder ``uri`` (pyarrow's filesystems)."""
    import pyarrow.fs as pafs

    try:
        fs, root = pafs.FileSystem.from_uri(uri)
        infos = fs.get_file_info(pafs.FileSelector(root.rstrip("/"), recursive=False))
    except Exception as exc:  # unknown scheme, no such bucket or prefix, credentials
        raise InputError(f"items {uri}: cannot list ({_reason(exc)})") from None
    return [os.path.basename(i.path) for i in infos if i.type == pafs.FileType.File]


def _reason(exc: BaseException) -> str:
    """The innermost cause of a (Ray-wrapped) exception, on one line."""
    cause = getattr(exc, "cause", None) or exc.__cause__ or exc
    text = f"{type(cause).__name__}: {cause}".splitlines()
    return text[0][:300] if text else type(cause).__name__


def with_context(shards: Iterator[Shard], n_context: int) -> Iterator[tuple[Shard, list[str], list[str]]]:
    """``(shard, following candidates, following references)``: the first ``n_context`` items
    after each shard (its candidates; the first ``n_context`` of their references), looking
    ahead as many shards as that takes."""
    pending: deque[Shard] = deque()

    def emit() -> tuple[Shard, list[str], list[str]]:
        head = pending.popleft()
        hyps: list[str] = []
        refs: list[str] = []
        for s in pending:
            for i, c in s.items.candidates.items():
                if len(hyps) == n_context:
                    break
                hyps.append(c)
                refs.extend((s.items.references or {}).get(i, []))
        return head, hyps, refs[:n_context]

    for shard in shards:
        pending.append(shard)
        while pending and sum(len(s.items) for s in list(pending)[1:]) >= n_context:
            yield emit()
    while pending:
        yield emit()
