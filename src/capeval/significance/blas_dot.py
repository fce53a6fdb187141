"""The mean of a resample as the former implementation computed it, without waking BLAS's threads.

CIDEr-D's score on a resample is ``float(counts @ scores) / N``: numpy's dot product, which is
BLAS's ``ddot``. Its last bits depend on how BLAS splits it: OpenBLAS (numpy's wheels) gives
vectors longer than :data:`THREADED_ABOVE` to its threads in equal parts (each thread its part's
dot product; ``kernel/x86_64/ddot.c``, ``driver/others/blas_l1_thread.c``: part widths
``ceil(left / threads left)``) and adds the parts' results in order, from 0.0. So the former
implementation's means (and ours) are those of the machine's BLAS thread count, and for each
resample of a large set that call woke every BLAS thread: microseconds on a quiet machine, up to
tens of milliseconds per call on a busy one (spinning threads: seconds of CPU per thousand
resamples).

:class:`BlasDot` gives the same doubles without the threads: the same parts, each part's dot
product by BLAS on one thread (the same kernel on the same memory), added in the same order.
It is used only where that has been checked on this machine, in this process: OpenBLAS found
by ``threadpoolctl`` (installed with scikit-learn; without it the plain call is made), and for
each length and thread count, :data:`CHECKS` random vectors whose emulated and real dot products
are equal to the last bit (a wrong split differs in the last bits on random data); otherwise,
or for vectors up to :data:`THREADED_ABOVE` long (one thread anyway), the plain call. While the
means of a block are computed, BLAS runs on one thread in this process (restored after).
"""

from __future__ import annotations

import numpy as np

from capeval.significance.blas_threads import _openblas, at_threads, natural_threads

#: OpenBLAS's ddot runs on one thread up to this many elements (kernel/x86_64/ddot.c: ``n <= 10000``)
THREADED_ABOVE = 10000
#: random vector pairs on which the emulation must equal the real call before it is used
CHECKS = 16


def split_widths(n: int, threads: int) -> list[int]:
    """OpenBLAS's parts of a level-1 call of length ``n`` over ``threads`` threads, in order:
    each ``ceil(left / threads left)`` (``blas_level1_thread_with_return_value``)."""
    widths = []
    left = n
    for k in range(threads):
        if left <= 0:
            break
        width = -(-left // (threads - k))
        left -= width
        widths.append(width + min(0, left))
    return widths


#: per vector length, BLAS threads -> whether the emulation was equal (numpy's BLAS is the
#: process's: checked once per process, whichever BlasDot asks first)
_CHECKED: dict[int, dict[int, bool]] = {}
#: (length, threads) -> whether the emulation also gave the real call's doubles on vectors at
#: other alignments (then a row is read in place, not copied first)
_IN_PLACE: dict[tuple[int, int], bool] = {}


def check_ahead(n: int) -> None:
    """Check the emulation for vectors of length ``n`` now (:class:`BlasDot`). Its real threaded
    calls wake BLAS's threads, which then spin for a tenth of a second: ``capeval compare`` checks
    before its scoring pass, whose fork shuts them down (OpenBLAS's fork handler), rather than at
    the first resample's mean, beside the kernels."""
    BlasDot(n).checked()


class BlasDot:
    """``float(c @ s)`` for pairs of float64 vectors of length ``n``, to the last bit of numpy's
    call with the BLAS threads of the moment (see the module docs)."""

    def __init__(self, n: int):
        self.n = n
        self._lib = _openblas() if n > THREADED_ABOVE else None
        self._checked = _CHECKED.setdefault(n, {})  # BLAS threads -> whether the emulation was equal

    def _emulated(self, c: np.ndarray, s: np.ndarray, widths: list[int]) -> float:
        dot = 0.0
        a = 0
        for w in widths:
            dot = dot + float(c[a:a + w] @ s[a:a + w])
            a += w
        return dot

    def _check(self, threads: int) -> bool:
        """Whether the emulation equals the real threaded call on :data:`CHECKS` random pairs."""
        rng = np.random.default_rng(threads)
        widths = split_widths(self.n, threads)
        pairs = [(rng.integers(0, 4, self.n).astype(np.float64),
                  rng.random(self.n) * rng.choice([1e-3, 1.0, 10.0], self.n)) for _ in range(CHECKS)]
        with at_threads(threads):
            real = [float(c @ s) for c, s in pairs]
        with at_threads(1):
            emulated = [self._emulated(c, s, widths) for c, s in pairs]
            # the same on vectors at other addresses (8 bytes off a fresh array's, as a row of a
            # (resamples, items) array may lie): where equal, rows() reads the rows in place
            # instead of copying each (128 copies of n doubles per block)
            moved = [self._emulated(_shifted(c, 1), _shifted(s, 3), widths) for c, s in pairs]
        _IN_PLACE[(self.n, threads)] = real == moved
        return real == emulated

    def checked(self) -> int:
        """The BLAS threads numpy's call has (outside :func:`.blas_threads.quiet_blas`) when the
        emulation of their split is checked and equal (checked now if not yet); 0 when the
        plain call must be made (no OpenBLAS found, one thread, vectors too short to be split,
        or a check that failed)."""
        if self._lib is None:
            return 0
        threads = natural_threads()
        if threads <= 1:
            return 0
        ok = self._checked.get(threads)
        if ok is None:
            ok = self._checked[threads] = self._check(threads)
        return threads if ok else 0

    def rows(self, cs: np.ndarray, ss: np.ndarray) -> list[float]:
        """``float(c @ s)`` for each pair of rows of ``cs`` and ``ss``, ``s`` as a fresh copy (the
        former implementation's call): read in place where the check found the emulation's
        doubles the same at other alignments, else copied first."""
        threads = self.checked()
        if not threads:
            with at_threads(natural_threads()):
                return [float(c @ s.copy()) for c, s in zip(cs, ss)]
        widths = split_widths(self.n, threads)
        in_place = _IN_PLACE.get((self.n, threads), False)
        with at_threads(1):
            return [self._emulated(c, s if in_place else s.copy(), widths) for c, s in zip(cs, ss)]


def _shifted(x: np.ndarray, by: int) -> np.ndarray:
    """A copy of ``x`` that starts ``by`` doubles into a larger array (another alignment)."""
    out = np.empty(len(x) + by, dtype=x.dtype)[by:]
    out[...] = x
    return out
