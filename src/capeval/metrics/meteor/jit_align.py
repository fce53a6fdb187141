"""METEOR's resolution and statistics compiled with numba (the ``fast`` extra), for large jobs.

:func:`finish` gives exactly :func:`.fast_align.finish`'s statistics: pairs of at most
:data:`MAX_WORDS` words in all whose beam keys fit in 62 bits go to the compiled kernel
(:mod:`.jit_kernel`, the same steps on int64), the others to the Python code.

The kernel comes built ahead of time into the capeval cache (:mod:`.kernel_build`, by
``numba.pycc``: a plain extension module that loads in a millisecond without numba), or,
where that build fails, from numba's JIT (about half a second and 50 MB per process, which
forked workers inherit). :class:`.engine.Meteor15` uses a built kernel for every job, and
builds it (once, about 5 s) or loads the JIT only for jobs of :data:`JIT_MIN_ITEMS` items
and more, before any worker is forked (the workers inherit it). numba is chosen because it
is a well-kept PyPI package that compiles this integer code on the user's machine; without
it everything runs in Python, with the same results.
"""

from __future__ import annotations

import numpy as np

from capeval.metrics.meteor.fast_align import finish as python_finish
from capeval.metrics.meteor.fast_align import key_width
from capeval.metrics.meteor.fast_match import transposed, transposed_dup, transposed_paras

#: pairs of more words in all go to the Python code (masks are int64)
MAX_WORDS = 63

#: items from which a job builds the kernel or loads the JIT (below, they cost more than they save)
JIT_MIN_ITEMS = 20_000

_EMPTY = np.zeros(0, dtype=np.int64)
_kernel = None
#: which kernel :func:`load` loaded: "built" (:mod:`.kernel_build`), "jit" (numba's JIT) or None
kind: str | None = None


def available() -> bool:
    """Is numba importable (without importing it)?"""
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def load(build: bool = True) -> bool:
    """Load the compiled kernel in this process; False when there is none to load.

    First the module built ahead of time (:mod:`.kernel_build`: no numba in this process,
    about a millisecond). Without one, and with ``build``: build it once (a child process,
    about 5 s; later runs just load it) and load it; where building fails (no C compiler,
    say: a one-line warning says why, once), numba's JIT (:func:`load_jit`).
    Without ``build``, only an already built module is loaded.

    Ahead of a first large run: ``python -c "from capeval.metrics.meteor import jit_align; jit_align.load()"``.
    """
    global _kernel, kind
    if _kernel is not None:
        return True
    from capeval.errors import CapevalError
    from capeval.metrics.meteor import kernel_build

    try:
        built = kernel_build.load_built()
        if built is None and build and available() and kernel_build.failure() is None:
            reason = kernel_build.build()
            if reason is None:
                built = kernel_build.load_built()
            else:
                _warn(f"METEOR: building the compiled kernel ahead of time failed ({reason}); numba's JIT is "
                      f"used instead (same results, about 0.5 s and 50 MB more per job; the reason is kept in "
                      f"{kernel_build.folder()})")
    except CapevalError:  # an unusable cache folder: the JIT needs none of it
        built = None
    if built is not None:
        _kernel, kind = built, "built"
        return True
    return build and load_jit()


def load_jit() -> bool:
    """Load :mod:`.jit_kernel` through numba's JIT (compiling it on the first use after
    install, then from numba's on-disk cache); False when numba is not installed or cannot
    compile here (a one-line warning says why)."""
    global _kernel, kind
    if _kernel is not None and kind == "jit":
        return True
    try:
        from capeval.metrics.meteor.jit_kernel import finish_kernel

        finish_kernel(np.array([0, 0, 0, 1], dtype=np.int64), _EMPTY, 1, 1, key_width(1, 1, 1), 0, 0, 0, False)  # load or compile now
    except ImportError:
        return False
    except Exception as exc:  # numba installed but unusable here (no cache folder, LLVM, ...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        _warn(f"METEOR: the compiled beam search (numba) could not be loaded ({first}); "
              "the Python one is used (same results)")
        return False
    _kernel, kind = finish_kernel, "jit"
    return True


def _warn(message: str) -> None:
    import warnings

    warnings.warn(message, RuntimeWarning, stacklevel=3)


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
