"""glibc malloc settings for the ``capeval`` program: freed memory kept for reuse.

A scoring job allocates and frees arrays of a few megabytes per chunk (n-gram tables, a block of
resamples' work arrays). With glibc's defaults an allocation that size is a fresh ``mmap`` (or
heap memory handed back to the system when freed, past a trim threshold of twice the last such
size), so the next chunk's arrays are new pages again, each one a page fault, and a forked
scoring worker starts its heap over. On this project's 2-core VM a page fault costs several
microseconds: ``capeval compare`` of two systems of 40,000 items took about 550,000 of them
(``score`` 240,000). Raising the two thresholds keeps freed memory in the process for the next
allocation: 343,000 and 144,000 faults, a few percent less wall time for both commands in
alternating runs (``docs/speed.md``).

Only the program sets them (:func:`capeval.cli.main.main` run as a program), never a process
that imports capeval as a library; and never where the user chose malloc settings of their own
(``GLIBC_TUNABLES`` naming ``glibc.malloc``, or one of the ``MALLOC_*_`` variables).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: ``mallopt``'s parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: allocations below this come from the heap, not a fresh mapping (32 MiB: the largest value
#: glibc's own adaptive threshold would reach)
MMAP_THRESHOLD = 32 << 20
#: free memory at the heap's top kept for reuse, up to this much
TRIM_THRESHOLD = 128 << 20

_OWN_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                 "MALLOC_ARENA_MAX")


def user_chose(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` sets glibc malloc options of the user's own."""
    return "glibc.malloc" in environ.get("GLIBC_TUNABLES", "") or any(name in environ for name in _OWN_SETTINGS)


def tune_for_program(environ: Mapping[str, str] | None = None) -> bool:
    """Set :data:`MMAP_THRESHOLD` and :data:`TRIM_THRESHOLD` with glibc's ``mallopt`` (inherited
    by the forked scoring workers). True when set; False where the C library is not glibc, or
    the user chose settings (:func:`user_chose`), or ``mallopt`` refused them."""
    import platform

    if user_chose(os.environ if environ is None else environ) or platform.libc_ver()[0] != "glibc":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # pragma: no cover - glibc always has it
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on a refused value
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
