"""Shard files of a distributed scoring job: one Parquet file per shard, written atomically.

A shard file holds the per-item scores (column ``id`` plus one float64 column per metric,
NaN for skipped items) and, in the schema metadata ``capeval.shard`` (JSON), everything the
driver's merge needs: the text scorers' chunk outputs (``TextScorer.score_chunk``: BLEU's
summed counts, METEOR's statistics) and the other metrics' extras, skipped ids and
signature. Floats travel as raw float64 bytes or as JSON ``repr`` (shortest round-trip), so a
shard read back gives the scorer's ``merge`` exactly the objects it produced: results are
bit for bit those of a run that never touched the disk. No pickle: a shard file is data.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from capeval.errors import InputError, ResourceError
from capeval.engines.storage import ShardDir

META_KEY = b"capeval.shard"
MANIFEST = "manifest.json"
FORMAT = 1


def spans(n_items: int, size: int) -> list[tuple[int, int]]:
    """``[a, b)`` index ranges of consecutive shards of ``size`` items."""
    return [(a, min(a + size, n_items)) for a in range(0, n_items, size)]


def ids_digest(ids: Sequence[str]) -> str:
    """sha256 of the ids in order: identifies a shard's (or a job's) items."""
    h = hashlib.sha256()
    for i in ids:
        h.update(i.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def shard_name(k: int) -> str:
    """The file name of shard ``k``."""
    return f"shard-{k:06d}.parquet"


# -- exact JSON codec for chunk outputs -------------------------------------------------
def encode(obj: Any) -> Any:
    """A JSON-able form of ``obj`` that :func:`decode` turns back into an equal object, exactly."""
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        if arr.dtype == object:
            raise TypeError("object arrays cannot be stored in a shard")
        return {"__nd__": base64.b64encode(arr.tobytes()).decode("ascii"), "dtype": arr.dtype.str,
                "shape": list(arr.shape)}
    if isinstance(obj, np.generic):
        return encode(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v) for v in obj]}
    if isinstance(obj, list):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {"__map__": [[encode(k), encode(v)] for k, v in obj.items()]}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        if not cls.__module__.startswith("capeval."):
            raise TypeError(f"cannot store {cls.__qualname__} in a shard")
        fields = {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {"__dc__": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    raise TypeError(f"cannot store {type(obj).__name__} in a shard")


def decode(obj: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__nd__" in obj:
        raw = base64.b64decode(obj["__nd__"])
        return np.frombuffer(raw, dtype=np.dtype(obj["dtype"])).reshape(obj["shape"]).copy()
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__tuple__" in obj:
        return tuple(decode(v) for v in obj["__tuple__"])
    if "__map__" in obj:
        return {decode(k): decode(v) for k, v in obj["__map__"]}
    if "__dc__" in obj:
        module, _, name = obj["__dc__"].partition(":")
        if not module.startswith("capeval."):
            raise ResourceError(f"shard names a class outside capeval: {obj['__dc__']}")
        cls = getattr(importlib.import_module(module), name)
        return cls(**{k: decode(v) for k, v in obj["fields"].items()})
    raise ResourceError(f"unreadable shard metadata entry: {sorted(obj)[:3]}")


# -- files ---------------------------------------------------------------------------------
def write_shard(store: ShardDir, k: int, ids: Sequence[str], columns: dict[str, np.ndarray],
                meta: dict[str, Any]) -> None:
    """Write shard ``k`` (items ``ids``, a float64 column per metric) atomically into ``store``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    info = {"format": FORMAT, "shard": k, "n_items": len(ids), "ids_sha": ids_digest(ids), **meta}
    arrays = {"id": pa.array(list(ids), type=pa.string())}
    for name, values in columns.items():
        arrays[name] = pa.array(np.asarray(values, dtype=np.float64), type=pa.float64())
    table = pa.table(arrays).replace_schema_metadata({META_KEY: json.dumps(info).encode()})
    store.write(shard_name(k), lambda f: pq.write_table(table, f))


def read_shard(store: ShardDir, k: int) -> tuple[list[str], dict[str, np.ndarray], dict[str, Any]]:
    """(ids, metric columns, metadata) of shard ``k``; :class:`ResourceError` if it is unreadable."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    where = store.where(shard_name(k))
    try:
        table = pq.read_table(pa.BufferReader(store.read_bytes(shard_name(k))))
    except Exception as exc:  # missing, truncated or corrupt: pyarrow raises several types
        raise ResourceError(f"{where}: unreadable shard ({exc})") from exc
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise ResourceError(f"{where}: not a capeval shard (no {META_KEY.decode()} metadata)")
    meta = json.loads(raw)
    ids = table.column("id").to_pylist()
    cols = {n: table.column(n).to_numpy() for n in table.column_names if n != "id"}
    return ids, cols, meta


def shard_complete(store: ShardDir, k: int, ids: Sequence[str]) -> dict[str, Any] | None:
    """The metadata of shard ``k`` when its file holds exactly ``ids`` (the resume check), else None."""
    if not store.exists(shard_name(k)):
        return None
    try:
        got, _, meta = read_shard(store, k)
    except ResourceError:
        return None
    ok = (meta.get("format") == FORMAT and meta.get("shard") == k and meta.get("n_items") == len(ids)
          and meta.get("ids_sha") == ids_digest(ids) and len(got) == len(ids))
    return meta if ok else None


def check_manifest(store: ShardDir, plan: dict[str, Any], resume: bool, overwrite: bool = False) -> None:
    """Write the job's manifest; refuse a folder made by a different job on ``resume``, and
    without ``overwrite`` (its shards are another job's work: never deleted silently)."""
    if store.exists(MANIFEST):
        old = json.loads(store.read_bytes(MANIFEST))
        if old != plan and not overwrite:
            diff = sorted(k for k in set(old) | set(plan) if old.get(k) != plan.get(k))
            if resume:
                raise InputError(f"{store}: cannot resume, the folder holds another job (differs in {', '.join(diff)})")
            if store.names("shard-", ".parquet"):
                raise InputError(f"{store} holds the shards of another job (differs in {', '.join(diff)}); "
                                 "give another folder, or overwrite=True (--overwrite) to replace them")
        if not resume:
            for stale in store.names("shard-", ".parquet"):
                store.remove(stale)
    for partial in store.names(".shard-", ".tmp"):  # left by a worker killed while writing
        store.remove(partial)
    store.make()
    text = json.dumps(plan, indent=1).encode()
    store.write(MANIFEST, lambda f: f.write(text))
