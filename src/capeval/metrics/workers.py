"""Forked worker processes for the text metrics (the ``workers`` option).

Work is cut into spans of items; each worker runs a job on one span's data at a time with
the parent's other objects (scorers, resources) inherited through ``fork``. A span's data
is sent to the worker (pickled) rather than read from the parent's inputs: reading them
would copy the parent's memory pages into every worker. Everything is deterministic, so
the results are those of one process, in input order.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from capeval.errors import CapevalError, InputError

#: with ``workers=None``, items up to this many are scored in this process
PARALLEL_MIN_ITEMS = 2000


def resolve_workers(workers: int | None, n_items: int) -> int:
    """Worker processes to use for ``n_items`` items (1: work in this process).

    None: ``min(available cores, 4)`` for more than :data:`PARALLEL_MIN_ITEMS` items,
    else 1. Never more than ``n_items``; 1 where ``fork`` is unavailable or unsafe.
    """
    if workers is None:
        if n_items <= PARALLEL_MIN_ITEMS:
            return 1
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            cpus = os.cpu_count() or 1
        workers = min(cpus, 4)
    workers = max(1, min(int(workers), n_items))
    if workers > 1:
        import multiprocessing
        import threading

        # fork only where it exists, not from a multi-threaded program (a forked child
        # could inherit a lock held by another thread) and not from a daemon process
        if (
            "fork" not in multiprocessing.get_all_start_methods()
            or threading.active_count() > 1
            or multiprocessing.current_process().daemon  # a pool worker cannot have children
        ):
            return 1
    return workers


def spans(n_items: int, size: int) -> list[tuple[int, int]]:
    """Contiguous ``(start, stop)`` spans of at most ``size`` items covering ``range(n_items)``."""
    size = max(1, int(size))
    return [(a, min(a + size, n_items)) for a in range(0, n_items, size)]


_JOB: Callable[[Any], Any] | None = None  # inherited by forked workers


def default_sigterm() -> None:
    """Pool initializer: SIGTERM ends a forked worker at once, as by default.

    The CLI's SIGTERM handler is a Python one, inherited through fork. A Python handler only
    runs between bytecodes: a SIGTERM that lands just before a worker blocks on the pool's
    queue lock is noted but never acted on, and ``Pool.terminate`` then waits forever for
    that worker. The kernel's default action has no such window (and prints nothing)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


_HELD = (signal.SIGINT, signal.SIGTERM)


class _InterruptsHeld:
    """Ctrl-C and SIGTERM noted, not raised, until :meth:`release` (main thread only: Python
    runs its handlers there, so nowhere else can an interrupt be raised).

    ``multiprocessing.Pool.__init__`` forks its workers and starts the threads that replace
    them; an interrupt raised inside it (it cleans up after an ``Exception`` only) leaves the
    workers running with no pool object to terminate them, and they hold the terminal's pipes
    open after this process exits (seen: a SIGTERM during the pool's start left ``capeval
    score`` hanging the caller's ``communicate`` forever). A forked child that receives the
    signal before its initializer ran ends at once, as under the CLI's own handler."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.pending: int | None = None
        self.saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in _HELD:
                handler = signal.getsignal(signum)
                if callable(handler):  # SIG_IGN / SIG_DFL / None: nothing of Python's to raise
                    self.saved[signum] = signal.signal(signum, self._note)

    def _note(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.owner:  # a worker forked meanwhile, before its initializer
            os._exit(128 + signum)
        if self.pending is None:
            self.pending = signum

    def release(self) -> None:
        """The saved handlers back; the first interrupt that arrived meanwhile raised as they
        raise it (the caller holds the pool in its ``with`` by then, which terminates it)."""
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)
        if self.pending is not None:
            self.saved[self.pending](self.pending, None)


@contextmanager
def forked_pool(workers: int, recycle: int | None = None) -> Iterator[Any]:
    """A ``fork`` pool of ``workers`` processes (``recycle``: tasks after which a worker is
    replaced) whose workers end on SIGTERM (:func:`default_sigterm`) and are terminated on
    leaving, however it is left: an interrupt that arrives while the pool starts is raised
    once the pool is held here (:class:`_InterruptsHeld`)."""
    import multiprocessing

    held = _InterruptsHeld()
    try:
        pool = multiprocessing.get_context("fork").Pool(workers, default_sigterm, maxtasksperchild=recycle)
    except BaseException:
        held.release()
        raise
    with pool:
        held.release()
        _widen_pipes(pool)
        yield pool


#: the pipes' capacity asked for (Linux caps it at /proc/sys/fs/pipe-max-size, 1 MiB by default)
_PIPE_BYTES = 1 << 20


def _widen_pipes(pool: Any) -> None:
    """Give the pool's task and result pipes up to :data:`_PIPE_BYTES` of buffer (Linux's
    ``F_SETPIPE_SZ``; 64 KiB by default). A worker writes a chunk's result (a comparison's
    statistics: about a megabyte per 1,024 items) while the parent's thread that reads it waits
    for the interpreter lock, held by the parent's own work meanwhile; with the default buffer the
    worker stops at every 64 KiB until that thread runs. Where the call is refused (another OS, a
    per-user pipe limit) the pipes stay as they are: nothing else changes."""
    try:
        import fcntl

        request = getattr(fcntl, "F_SETPIPE_SZ", None)
        if request is None:
            return
        try:
            with open("/proc/sys/fs/pipe-max-size", encoding="ascii") as fh:
                size = min(_PIPE_BYTES, int(fh.read().strip()))
        except (OSError, ValueError):
            size = _PIPE_BYTES
        for queue in (getattr(pool, "_outqueue", None), getattr(pool, "_inqueue", None)):
            reader = getattr(queue, "_reader", None)
            if reader is not None:
                fcntl.fcntl(reader.fileno(), request, size)
    except (ImportError, OSError, ValueError, AttributeError):
        return


def _run(task: Any) -> Any:
    try:
        return _JOB(task)  # type: ignore[misc]
    except InputError as exc:  # keep the item id across the process boundary
        return _Failure(str(exc), exc.item_id, type(exc))
    except CapevalError as exc:
        return _Failure(str(exc), None, type(exc))


class _Failure:
    def __init__(self, message: str, item_id: str | None, kind: type):
        self.message, self.item_id, self.kind = message, item_id, kind

    def raise_(self) -> None:
        if issubclass(self.kind, InputError):
            raise self.kind(self.message, self.item_id)
        raise self.kind(self.message)


def map_tasks(
    job: Callable[[Any], Any], tasks: Iterable[Any], workers: int, recycle: int | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Iterator[Any]:
    """``job(task)`` for every task, in order: in this process, or over ``workers`` forked ones.

    Results are yielded as they come (in task order), so the caller can merge them and
    keep only what it needs; tasks are drawn from ``tasks`` as workers need them (a few
    ahead). ``recycle``: tasks after which a worker is replaced by a fresh fork.
    ``meanwhile``: called once in this process before the first result is awaited, once the
    workers are forked and given their tasks (with one worker: before the first task).

    Memory: a forked worker shares the parent's pages until one side writes to them, and
    the parent writes to its inputs (reference counts) as it hands them out, so each page
    of input it touches is copied while any worker forked before lives. Recycling the
    workers bounds that, and their caches, to the tasks of one worker's life.
    ``gc.freeze`` keeps the collector from writing to the shared pages in the workers.
    """
    global _JOB
    if workers <= 1:
        if meanwhile is not None:
            meanwhile()
        for task in tasks:
            yield job(task)
        return
    _JOB = job
    gc.freeze()
    try:
        with forked_pool(workers, recycle) as pool:
            results = pool.imap(_run, tasks, chunksize=1)
            if meanwhile is not None:
                meanwhile()
            for out in results:
                if isinstance(out, _Failure):
                    out.raise_()
                yield out
    finally:
        _JOB = None
        gc.unfreeze()
