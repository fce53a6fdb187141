"""Work arrays reused from block to block of CIDEr-D resampling (:mod:`.cider_groups`), and a
deferred call that lets go of a block's arrays once made (:class:`Once`).

A block's arrays (weights, squares, norms, products: megabytes for a chunk of 2,048 items and
32 resamples) allocated afresh each time are new pages to the kernel, and touching them for the
first time cost more than the arithmetic done in them. A pool hands each running block one set
of arrays (at most one set per thread that runs blocks), grown when a block needs more.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


class Buffers:
    """One set of named work arrays; :meth:`get` gives a C-contiguous array of the shape and type
    asked for, a view of the named array (its contents are whatever the last block left)."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: type = np.float64) -> np.ndarray:
        size = 1
        for x in shape:
            size *= int(x)
        flat = self._arrays.get(name)
        if flat is None or flat.size < size or flat.dtype != np.dtype(dtype):
            flat = self._arrays[name] = np.empty(max(size, 1), dtype=dtype)
        return flat[:size].reshape(shape)


class BufferPool:
    """Sets of :class:`Buffers`, one lent to each block while it runs."""

    def __init__(self) -> None:
        self._free: list[Buffers] = []
        self._lock = threading.Lock()

    @contextmanager
    def lend(self) -> Iterator[Buffers]:
        with self._lock:
            buffers = self._free.pop() if self._free else Buffers()
        try:
            yield buffers
        finally:
            with self._lock:
                self._free.append(buffers)


class Once:
    """``fn(*args)``, made at the first call only; its arguments (a block's multiplicities and
    score arrays) are let go once it is made, not held by whoever keeps the call."""

    def __init__(self, fn: Any, *args: Any):
        self._call: tuple[Any, tuple] | None = (fn, args)

    def __call__(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call[0](*call[1])
