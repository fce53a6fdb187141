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

from typing import Any

import numpy as np

from capeval.metrics.meteor.fast_align import finish as python_finish
from capeval.metrics.meteor.fast_align import key_width
from capeval.metrics.meteor.fast_match import transposed, transposed_dup, transposed_paras

#: pairs of more words in all go to the Python code (masks are int64)
MAX_WORDS = 63

#: items from which a job builds the kernel or loads the JIT (below, they cost more than they save)
JIT_MIN_ITEMS = 20_000

_EMPTY = np.zeros(0, dtype=np.int64)
#: :func:`_probe`'s answer: one content word matched exactly (module 0) on each side, one chunk
#: (content1[4], content2[4], fmatch1[4], fmatch2[4], chunks; see fast_align.pair_stats)
_PROBE_ANSWER = [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
_kernel = None
#: which kernel :func:`load` loaded: "built" (:mod:`.kernel_build`), "jit" (numba's JIT) or None
kind: str | None = None


def available() -> bool:
    """Is numba importable (without importing it)?"""
    from capeval._optional import available as found

    return found("numba")


def load(build: bool = True) -> bool:
    """Load the compiled kernel in this process; False when there is none to load.

    First the module built ahead of time (:mod:`.kernel_build`: no numba in this process,
    about a millisecond). Without one, and with ``build``: build it once (a child process,
    about 5 s; later runs just load it) and load it; where building fails (no C compiler,
    say: a one-line warning says why, once), numba's JIT (:func:`load_jit`).
    Without ``build``, only an already built module is loaded. A module that fails
    :func:`.kernel_build.check` (changed since it was built, no digest record, not a regular
    file, in a folder writable by others) is never imported: it is removed and built again
    (with ``build``), with one warning; in an unsafe folder nothing is imported or built.

    Ahead of a first large run: ``python -c "from capeval.metrics.meteor import jit_align; jit_align.load()"``.
    """
    global _kernel, kind
    if _kernel is not None:
        return True
    from capeval.errors import CapevalError
    from capeval.metrics.meteor import kernel_build

    built = None
    removed = False
    verb = "imported"
    note = None  # what to say, in one warning, about a module that was not imported
    try:
        status, why = kernel_build.check()
        path = kernel_build.built_path()
        if status == "ok":
            built = _working(kernel_build.load_built())
            if built is None:  # right digest, yet no kernel in it (a build of another numba, say)
                status, why, verb = "bad", "it does not load or work as the kernel", "used"
        if status == "unsafe":
            note = f"METEOR: {why}; " + ("numba's JIT is used instead (same results)" if build and available()
                                         else "the Python code is used (same results)")
        elif status == "bad":
            removed = kernel_build.discard()  # never opened as code; built again below or by a large job
            note = f"METEOR: the compiled kernel {path} was not {verb}: {why}"
            status = "missing"
        if status == "missing" and build and available() and kernel_build.failure() is None:
            reason = kernel_build.build()
            if reason is None:
                status, why = kernel_build.check()
                built = _working(kernel_build.load_built()) if status == "ok" else None
                if built is None:  # kept as a failed build: not built again at every run
                    reason = "the module built does not load or work" if status == "ok" else f"the module built: {why}"
                    kernel_build.discard()
                    kernel_build.note_failure(reason)
                elif note is not None:
                    note += "; it was built again"
            if reason is not None:
                note = (note + "; building it again failed" if note else
                        "METEOR: building the compiled kernel ahead of time failed")
                note += (f" ({reason}); numba's JIT is used instead (same results, about 0.5 s and 50 MB more "
                         f"per job; the reason is kept in {kernel_build.folder()})")
        elif note is not None and status == "missing":
            note += ("; it was removed" if removed else "") + "; " + (
                "numba's JIT is used instead (same results)" if build and available() else
                "the Python code is used (same results)" if not available() else
                "the Python code is used until a large job builds it again (same results)")
    except CapevalError:  # an unusable cache folder: the JIT needs none of it
        built = None
    if note is not None:
        _warn(note)
    if built is not None:
        _kernel, kind = built, "built"
        return True
    return build and load_jit()


def _probe(kernel: Any) -> Any:
    """The kernel's answer for one tiny pair (what :func:`load_jit` also runs first)."""
    return kernel(np.array([0, 0, 0, 1], dtype=np.int64), _EMPTY, 1, 1, key_width(1, 1, 1), 0, 0, 0, False)


def _working(kernel: Any) -> Any:
    """``kernel`` when it answers a tiny pair with the 17 statistics the Python code gives
    (a module whose record matches but holds other code is refused here, never at a job's
    first pair, with a traceback), else None."""
    if kernel is None:
        return None
    try:
        out = _probe(kernel)
        ok = isinstance(out, np.ndarray) and out.dtype == np.int64 and out.shape == (17,)
    except Exception:  # noqa: BLE001  whatever it raises, it is not the kernel
        return None
    return kernel if ok and out.tolist() == _PROBE_ANSWER else None


def load_jit() -> bool:
    """Load :mod:`.jit_kernel` through numba's JIT (compiling it on the first use after
    install, then from numba's on-disk cache); False when numba is not installed or cannot
    compile here (a one-line warning says why)."""
    global _kernel, kind
    if _kernel is not None and kind == "jit":
        return True
    try:
        from capeval.metrics.meteor import jit_kernel
        from capeval.metrics.meteor.jit_kernel import finish_kernel

        unsafe = guard_numba_cache(jit_kernel)
        if unsafe is not None:
            _warn(unsafe)
        _probe(finish_kernel)  # load or compile now
    except ImportError:
        return False
    except Exception as exc:  # numba installed but unusable here (no cache folder, LLVM, ...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        _warn(f"METEOR: the compiled beam search (numba) could not be loaded ({first}); "
              "the Python one is used (same results)")
        return False
    _kernel, kind = finish_kernel, "jit"
    return True


def guard_numba_cache(module: Any) -> str | None:
    """Turn off numba's on-disk cache for ``module``'s functions when another user could
    write it (the rules of :func:`.kernel_build.unsafe_folder`); the line that says so, else None.

    numba's cache (``cache=True`` in :mod:`.jit_kernel`) keeps each compiled function as pickles
    (``.nbi``, ``.nbc``) beside the source (``__pycache__``), in ``$NUMBA_CACHE_DIR`` or in
    ``~/.cache/numba``, and unpickling runs code. numba records no digest of them (they are as
    trusted as Python's own ``.pyc`` files there), so where the cache folder (up to
    ``$NUMBA_CACHE_DIR``, else with the folder holding it) or one of the module's cache files is
    not the user's alone, the JIT compiles afresh (about 15 s) instead of loading them."""
    import os
    import stat

    from capeval.metrics.meteor.kernel_build import not_yours

    caches = [c for c in (getattr(v, "_cache", None) for v in vars(module).values())
              if callable(getattr(c, "disable", None)) and isinstance(getattr(c, "cache_path", None), str)]
    top = os.environ.get("NUMBA_CACHE_DIR")
    root = os.path.realpath(top) if top else None
    why = None
    for path in sorted({c.cache_path for c in caches}):
        real = os.path.realpath(path)
        chain = [real, os.path.dirname(real)]
        while root and chain[-1].startswith(root.rstrip(os.sep) + os.sep):  # up to $NUMBA_CACHE_DIR
            chain.append(os.path.dirname(chain[-1]))
        for folder in chain:
            try:
                problem = not_yours(os.stat(folder))
            except OSError:  # not made yet: numba makes it at its first save
                continue
            if problem is not None:
                fix = (f"run chmod go-w {folder}" if problem.startswith("writable")
                       else "set NUMBA_CACHE_DIR to a folder of yours")
                why = f"{folder} is {problem}; {fix}"
                break
        prefix = module.__name__.rsplit(".", 1)[-1] + "."
        try:
            entries = [e for e in os.scandir(path) if e.name.startswith(prefix)] if why is None else []
        except OSError:
            entries = []
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            problem = not_yours(st) if stat.S_ISREG(st.st_mode) else "not a regular file"
            if problem is not None:
                why = f"{entry.path} is {problem}; delete it"
                break
        if why is not None:
            break
    if why is None:
        return None
    for cache in caches:
        cache.disable()
    return (f"METEOR: numba's cache is not loaded (its pickles run code when loaded) and the JIT compiles "
            f"afresh (same results): {why}")


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
