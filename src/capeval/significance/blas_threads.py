"""Numpy's OpenBLAS threads in ``capeval compare``'s resamples.

A threaded OpenBLAS call wakes its threads, which then spin for about a tenth of a second each
before they sleep (``OPENBLAS_THREAD_TIMEOUT``: 2^28 cycles), and so does a thread OpenBLAS
creates: after a fork (whose handler shuts the threads down in the parent) the next threaded
call, or the next ``set_num_threads`` call of any count, creates them again. A call per block
of resamples kept a core spinning beside the CIDEr-D kernels. So:

- products whose doubles do not depend on BLAS's split (sums of whole numbers below 2^53:
  BLEU's and METEOR's counts times multiplicities) run on one thread (:func:`threads_for`);
- within :func:`quiet_blas` (``capeval compare``'s scoring and resamples, for metrics whose
  scorers make no BLAS call) numpy's BLAS stays on one thread, set before the scoring pass's
  forks, so no thread is created after them; a product whose doubles depend on the split (an
  item mean's) is still made with the threads numpy's call had outside (:func:`natural_threads`),
  as the former implementation made it, and so are :class:`~.blas_dot.BlasDot`'s emulated splits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

@functools.lru_cache(maxsize=1)
def _openblas() -> Any:
    """The threadpoolctl controller of numpy's BLAS when it is OpenBLAS, else None.

    Other BLAS libraries may be loaded beside numpy's (numba's first call loads SciPy's, an
    OpenBLAS of its own): numpy's is the one in numpy's folder or its wheel's ``numpy.libs``;
    with no library there, the only one loaded. Whichever is taken, :meth:`BlasDot._check`
    proves on this machine that it is the one numpy's dot products use before it is relied on."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    try:
        libs = ThreadpoolController().select(user_api="blas").lib_controllers
    except Exception:  # noqa: BLE001 - an unusual install: the plain call
        return None
    from pathlib import Path

    home = Path(np.__file__).resolve().parent
    own = [lib for lib in libs if _inside(lib.filepath, (home, home.with_name("numpy.libs")))]
    libs = own if own else libs
    if len(libs) != 1 or libs[0].internal_api != "openblas":
        return None
    return libs[0]


def _inside(path: Any, folders: tuple[Any, ...]) -> bool:
    from pathlib import Path

    try:
        where = Path(path).resolve()
    except (OSError, TypeError, ValueError):
        return False
    return any(where.is_relative_to(f) for f in folders)


#: the BLAS threads numpy's calls had when :func:`quiet_blas` set one (None: outside it)
_NATURAL: list[int | None] = [None]


def natural_threads() -> int:
    """The BLAS threads numpy's calls use outside :func:`quiet_blas` (1 without OpenBLAS found)."""
    lib = _openblas()
    if lib is None:
        return 1
    natural = _NATURAL[0]
    return natural if natural is not None else int(lib.get_num_threads())


@contextmanager
def at_threads(threads: int) -> Iterator[None]:
    """Numpy's OpenBLAS on ``threads`` threads within the block (restored after); nothing is
    set when it already has them (a ``set_num_threads`` after a fork creates spinning threads)."""
    lib = _openblas()
    before = int(lib.get_num_threads()) if lib is not None else threads
    if before == threads:
        yield
        return
    lib.set_num_threads(threads)
    try:
        yield
    finally:
        lib.set_num_threads(before)


@contextmanager
def threads_for(exact: Callable[[], bool]) -> Iterator[None]:
    """One BLAS thread within the block when ``exact()`` (the products' doubles are the same
    however BLAS splits them), else the threads numpy's call has outside :func:`quiet_blas`.
    ``exact`` is called only when that choice matters (more than one thread)."""
    natural = natural_threads()
    if natural <= 1:
        yield
        return
    with at_threads(1 if exact() else natural):
        yield


@contextmanager
def quiet_blas(when: bool = True) -> Iterator[None]:
    """Numpy's OpenBLAS on one thread within the block (``when``; restored after). Only around
    work whose BLAS calls are all made through :func:`threads_for` or
    :class:`~.blas_dot.BlasDot` (``capeval compare``'s resamples) or whose scorers make none."""
    lib = _openblas() if when else None
    if lib is None or _NATURAL[0] is not None or lib.get_num_threads() <= 1:
        yield
        return
    natural = int(lib.get_num_threads())
    _NATURAL[0] = natural
    lib.set_num_threads(1)
    try:
        yield
    finally:
        _NATURAL[0] = None
        lib.set_num_threads(natural)
