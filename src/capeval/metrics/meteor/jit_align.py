"""METEOR's resolution and statistics compiled with numba (the ``fast`` extra), for large jobs.

:func:`finish` gives exactly :func:`.fast_align.finish`'s statistics: pairs of at most
:data:`MAX_WORDS` words in all whose beam keys fit in 62 bits go to the compiled kernel
(:mod:`.jit_kernel`, the same steps on int64), the others to the Python code. Loading costs
about half a second once per process (importing numba, LLVM, the kernel from numba's
on-disk cache; the first load after install compiles it, a few seconds more), which pays
only on large jobs: :class:`.engine.Meteor15` loads it from :data:`JIT_MIN_ITEMS` items on,
before any worker is forked (the workers inherit it). numba is chosen because it is a
well-kept PyPI package that compiles this integer code without a C toolchain on the
user's machine; without it everything runs in Python, with the same results.
"""

from __future__ import annotations

import numpy as np

from capeval.metrics.meteor.fast_align import finish as python_finish
from capeval.metrics.meteor.fast_align import key_width
from capeval.metrics.meteor.fast_match import transposed, transposed_dup, transposed_paras

#: pairs of more words in all go to the Python code (masks are int64)
MAX_WORDS = 63

#: items from which a job loads the compiled kernel (below, its load costs more than it saves)
JIT_MIN_ITEMS = 20_000

_EMPTY = np.zeros(0, dtype=np.int64)
_kernel = None


def available() -> bool:
    """Is numba importable (without importing it)?"""
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def load() -> bool:
    """Load the compiled kernel in this process (compiling it on the first use after install,
    then from numba's on-disk cache); False when numba is not installed or cannot compile
    here (a one-line warning says why; the Python code gives the same results).

    Ahead of a first large run: ``python -c "from capeval.metrics.meteor import jit_align; jit_align.load()"``.
    """
    global _kernel
    if _kernel is None:
        try:
            from capeval.metrics.meteor.jit_kernel import finish_kernel

            finish_kernel(np.array([0, 0, 0, 1], dtype=np.int64), _EMPTY, 1, 1, key_width(1, 1, 1), 0, 0, 0, False)  # load or compile now
        except ImportError:
            return False
        except Exception as exc:  # numba installed but unusable here (no cache folder, LLVM, ...)
            import warnings

            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
            warnings.warn(f"METEOR: the compiled beam search (numba) could not be loaded ({first}); "
                          "the Python one is used (same results)", RuntimeWarning, stacklevel=2)
            return False
        _kernel = finish_kernel
    return True


def finish(matched: tuple) -> tuple:
    """:func:`.fast_align.finish` (same tuple), compiled where the pair fits (see the module
    docs). ``matched`` may also be a :func:`.fast_match.mirrored` pair: the kernel then
    transposes the reverse pair's candidates itself, in :func:`.fast_match.transposed`'s order."""
    if matched[1] is None:
        r, h, singles, rparas, n_matches, rdup, _, _, rfirst = matched[2][1]
        n1, n2 = h.n, r.n
        width = _width_if_fits(n1, n2, n_matches)
        if not width:
            return python_finish(transposed(matched[2]))
        paras = transposed_paras(rparas, rfirst)
        dup = transposed_dup(rdup, n1, n2)
        flip = True
    else:
        h, r, singles, paras, n_matches, dup, _, _, _ = matched[1]
        n1, n2 = h.n, r.n
        width = _width_if_fits(n1, n2, n_matches)
        if not width:
            return python_finish(matched)
        flip = False
    flat: list[int] = []
    for i, cands, _ in singles:
        for j, mod, g in cands:
            flat += (i, j, mod, g)
    single = np.array(flat, dtype=np.int64) if flat else _EMPTY
    para = np.array(paras, dtype=np.int64).ravel() if paras else _EMPTY
    o = _kernel(single, para, n1, n2, width, dup, h.fmask, r.fmask, flip).tolist()  # type: ignore[misc]
    return (n1, n2, h.nfunc, r.nfunc, o[0:4], o[4:8], o[8:12], o[12:16], o[16])


def _width_if_fits(n1: int, n2: int, n_matches: int) -> int:
    """The pair's key field width when the kernel takes it (loaded, some candidate, int64
    masks and keys), else 0."""
    if _kernel is None or not n_matches or n1 + n2 > MAX_WORDS:
        return 0
    width = key_width(n1, n2, n_matches)
    # a key is at most (n1 + n2) gains shifted by 2 * width, plus chunks and distances below that
    return width if 2 * width + (n1 + n2 + 2).bit_length() + 2 <= 62 else 0
