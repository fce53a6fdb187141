"""CIDEr-D's resampling kernels (:mod:`.cider_jit`) built ahead of time, as METEOR's kernel is.

Through numba's JIT the kernels cost a job about 0.8 s of CPU before their first resample
(importing numba and LLVM, loading the cached kernels; about half a second of it on one core
while the other waits): more than scoring one system of 2,000 items. The same functions
compiled ahead of time (``numba.pycc``) are a plain CPython extension module that imports in a
millisecond with numpy alone. It is built once per kernel source, numba version, Python ABI and
CPU (:func:`module_name`), by a child process that the first job large enough to use numba
starts (:func:`start_build`; that job uses numba's JIT and waits for the child when it ends),
into METEOR's kernels folder (``$CAPEVAL_CACHE/kernels``) as ``cider_kernel_<tag>`` with its
sha256 record beside it. Later jobs use it: on one thread below :data:`THREADS_MIN_WORK` items x
resamples, on the scorers' number of threads from there (its functions release the GIL, as the
JIT's ``nogil=True`` kernels do: the build sets numba's ``release_gil`` flag, which pycc leaves
unset, and :func:`releases_gil` checks the built file).

The code is LLVM's compilation of the same numba functions with the same options as the JIT's
(``error_model="numpy"``, no fast-math, so no fused multiply-adds: the same doubles), for this
machine's CPU and the features it reports, as the JIT compiles (where the CPU cannot be read
from ``/proc/cpuinfo``, for a generic CPU of the architecture, about 15% slower). The CPU's
identity is part of the module's name, so a cache folder shared between machines holds one
module per CPU and none is run on a CPU it was not built for. It is imported only as METEOR's module is
(:mod:`capeval.metrics.meteor.kernel_build`): the folder and its parents yours and not
writable by others, a regular file of yours with the sha256 recorded when it was built, a
whole ELF object; and it must answer a probe. A call whose arrays are not of the built
signature's types and layouts goes to numba's JIT instead (a pycc function would read them as
declared). A failed build is kept in ``<name>.failed`` (delete it to try again); the JIT is used.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

#: items x resamples from which a job runs the built kernels on several threads (below, one:
#: the blocks are too small for threads to pay)
THREADS_MIN_WORK = 8_000_000
#: items x resamples from which a job without the module starts its build (as JIT_MIN_WORK)
BUILD_MIN_WORK = 500_000
#: seconds the build may take (the job waits for it when it ends)
BUILD_TIMEOUT = 600

_I8, _F8, _I4, _U2, _U1 = (np.dtype(t) for t in (np.int64, np.float64, np.int32, np.uint16, np.uint8))
_INT = {_I4: "i4", _U2: "u2", _U1: "u1"}


def _df_kernel(ct: np.dtype, df: np.dtype) -> tuple[str, tuple]:
    return (f"void({_INT[ct]}[:, ::1], i8[::1], i8[::1], i8, i8, {_INT[df]}[:, ::1], f8[::1], f8[:, ::1])",
            ((ct, 2, True), (_I8, 1, True), (_I8, 1, True), None, None, (df, 2, True), (_F8, 1, True), (_F8, 2, True)))


def _weights_kernel(df: np.dtype) -> tuple[str, tuple]:
    return (f"void({_INT[df]}[:, ::1], f8[::1], f8[:, ::1], i8[::1], i8[::1], i8[::1], i8[::1], f8[:, ::1], "
            "f8[:, ::1])", ((df, 2, True), (_F8, 1, True), (_F8, 2, True)) + ((_I8, 1, True),) * 4
            + ((_F8, 2, True),) * 2)


def _hits_kernel(df: np.dtype) -> tuple[str, tuple]:
    return (f"void({_INT[df]}[:, ::1], f8[::1], i8[::1], i8[::1], f8[::1], f8[::1], i8[::1], f8[:, ::1], i8)",
            ((df, 2, True), (_F8, 1, True), (_I8, 1, True), (_I8, 1, True), (_F8, 1, True), (_F8, 1, True),
             (_I8, 1, True), (_F8, 2, True), None))


#: per kernel built: its numba signature and, per argument, (dtype, dimensions, C-contiguous) or
#: None (an integer). Variants of one kernel of cider_jit (see VARIANT_OF) take the
#: multiplicities as bytes (``8``: CiderResampling.transposed_counts) and the df as uint16
#: (``_16``: CiderResampling.df_dtype); a call goes to the first variant its arguments fit
KERNELS: dict[str, tuple[str, tuple]] = {
    "df_block": _df_kernel(_I4, _I4),
    "df_block8": _df_kernel(_U1, _I4),
    "df_block_16": _df_kernel(_I4, _U2),
    "df_block8_16": _df_kernel(_U1, _U2),
    "weights_block": _weights_kernel(_I4),
    "weights_block_16": _weights_kernel(_U2),
    "norms_block": ("void(f8[:, ::1], f8[:, ::1], i8[::1], i8[::1], i8, i8[::1], i8[::1], i8[::1], i8[::1], "
                    "f8[:, :, ::1])",
                    ((_F8, 2, True), (_F8, 2, True), (_I8, 1, True), (_I8, 1, True), None) + ((_I8, 1, True),) * 4
                    + ((_F8, 3, True),)),
    "hits_block": _hits_kernel(_I4),
    "hits_block_16": _hits_kernel(_U2),
    "items_block": ("void(f8[:, ::1], i8[::1], f8[:, :, ::1], i8[::1], i8[::1], i8[::1], f8[::1], i8[::1], "
                    "i8[::1], i8[::1], f8[::1], f8[:, :], f8[:, :, ::1])",
                    ((_F8, 2, True), (_I8, 1, True), (_F8, 3, True)) + ((_I8, 1, True),) * 3 + ((_F8, 1, True),)
                    + ((_I8, 1, True),) * 3 + ((_F8, 1, True), (_F8, 2, False), (_F8, 3, True))),
}
#: the resamples of a full block, for which every kernel is also built (``<name>64``, and the df
#: kernels on bytes only; cider_jit.with_lanes), so LLVM knows each lane loop's trip count
LANES_BUILT = 64
KERNELS.update({name.replace("_block8", "_block").replace("_block", f"_block{LANES_BUILT}", 1): spec
                for name, spec in list(KERNELS.items()) if name not in ("df_block", "df_block_16")})
#: per kernel built: (the cider_jit kernel it is built from, the lanes it is built for or 0: any)
VARIANT_OF: dict[str, tuple[str, int]] = {
    name: (name.split("_block")[0] + "_block", LANES_BUILT if f"_block{LANES_BUILT}" in name else 0)
    for name in KERNELS}


def folder() -> Path:
    """METEOR's kernels folder, ``$CAPEVAL_CACHE/kernels`` (same trust rules)."""
    from capeval.metrics.meteor.kernel_build import folder as kernels_folder

    return kernels_folder()


@functools.lru_cache(maxsize=1)
def module_name() -> str:
    """``cider_kernel_<tag>``: the tag hashes the kernels' source and this module's (which says
    how they are built), numba's version, the Python ABI and the platform."""
    here = Path(__file__)
    source = here.with_name("cider_jit.py").read_bytes() + b"\0" + here.read_bytes()
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba_version = "none"
    key = b"\0".join([source, numba_version.encode(), sys.implementation.cache_tag.encode(),
                      platform.machine().encode(), sys.platform.encode(), (host_cpu() or "generic").encode()])
    return "cider_kernel_" + hashlib.sha256(key).hexdigest()[:16]


#: the lines of /proc/cpuinfo's first processor that name the CPU and its features (x86, ARM)
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "CPU implementer",
               "CPU architecture", "CPU variant", "CPU part", "Features")


@functools.lru_cache(maxsize=1)
def host_cpu() -> str | None:
    """This machine's CPU as the kernel reports it (its first processor's identity and feature
    flags in ``/proc/cpuinfo``), or None where that cannot be read: then the module is built
    for a generic CPU of the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            first = fh.read(1 << 20).split("\n\n", 1)[0]
    except OSError:
        return None
    lines = [line.strip() for line in first.splitlines() if line.split(":", 1)[0].strip() in _CPU_FIELDS]
    has_features = any(line.split(":", 1)[0].strip() in ("flags", "Features") for line in lines)
    return "\n".join(lines) if has_features else None


def releases_gil(path: Path) -> bool:
    """Whether the built module at ``path`` releases the GIL around its kernels (it calls
    ``PyEval_SaveThread``: built with numba's ``release_gil`` flag)."""
    try:
        with open(path, "rb") as fh:
            return b"PyEval_SaveThread" in fh.read()
    except OSError:
        return False


def built_path(where: Path | None = None) -> Path:
    return (where or folder()) / (module_name() + importlib.machinery.EXTENSION_SUFFIXES[0])


def _side(where: Path | None, suffix: str) -> Path:
    return built_path(where).with_name(module_name() + suffix)


def failure(where: Path | None = None) -> str | None:
    """Why the last build in ``where`` failed (first line), or None."""
    path = _side(where, ".failed")
    try:
        return path.read_text(encoding="utf-8").strip().splitlines()[0] if path.is_file() else None
    except (OSError, IndexError):
        return "unknown"


def check(where: Path | None = None) -> tuple[str, str | None]:
    """``("ok", None)``, ``("missing", None)``, ``("unsafe", why)`` or ``("bad", why)`` as
    :func:`capeval.metrics.meteor.kernel_build.check` says of METEOR's module."""
    from capeval.metrics.meteor.kernel_build import unsafe_folder
    from capeval.metrics.meteor.kernel_trust import cut_elf, file_digest, module_file_problem, recorded_digest

    where = where or folder()
    unsafe = unsafe_folder(where)
    if unsafe is not None:
        return "unsafe", unsafe
    path = built_path(where)
    found = module_file_problem(path)
    if found is not None:
        return found
    recorded = recorded_digest(_side(where, ".sha256"), path)
    if recorded is None or file_digest(path) != recorded:
        return "bad", "its sha256 is not the one recorded when it was built"
    cut = cut_elf(path)
    return ("bad", f"it is a cut file ({cut})") if cut is not None else ("ok", None)


class Kernels:
    """The built module's kernels, called as :mod:`.cider_jit`'s; arguments of other types or
    layouts than the built signatures' go to numba's JIT."""

    def __init__(self, module: Any, lanes: int = 0):
        self._module = module
        #: the resamples of the blocks these kernels are handed (0: any), see :meth:`for_lanes`
        self._lanes = lanes
        #: whether df_block reads multiplicities as bytes here (the module has df_block8)
        self.takes_bytes = hasattr(module, "df_block8")

    def for_lanes(self, lanes: int) -> "Kernels":
        """These kernels for blocks of ``lanes`` resamples: a full block's calls go to the builds
        for :data:`LANES_BUILT` lanes (where the arguments fit them), any other to the others."""
        return Kernels(self._module, lanes if lanes == LANES_BUILT else 0)

    def __getattr__(self, name: str) -> Any:
        if VARIANT_OF.get(name) != (name, 0):
            raise AttributeError(name)
        variants = [(getattr(self._module, v), KERNELS[v][1]) for v in _variants(name, self._lanes)
                    if hasattr(self._module, v)]

        def call(*args: Any) -> Any:
            for built, specs in variants:
                if len(args) == len(specs) and all(_fits(a, s) for a, s in zip(args, specs)):
                    return built(*args)
            from capeval.significance import cider_jit

            return getattr(cider_jit, name)(*args)

        return call


@functools.lru_cache(maxsize=None)
def _variants(name: str, lanes: int) -> tuple[str, ...]:
    """The built variants of the JIT's one function ``name`` (which takes every type) for blocks
    of ``lanes`` resamples: the builds for those lanes first, then those for any."""
    return tuple(sorted((v for v, (base, built) in VARIANT_OF.items() if base == name and built in (0, lanes)),
                        key=lambda v: VARIANT_OF[v][1] != lanes))


def _fits(arg: Any, spec: tuple | None) -> bool:
    if spec is None:
        return isinstance(arg, (int, np.integer)) and not isinstance(arg, bool)
    dtype, ndim, contiguous = spec
    return (isinstance(arg, np.ndarray) and arg.dtype == dtype and arg.ndim == ndim
            and (arg.flags.c_contiguous or not contiguous) and arg.flags.aligned)


_loaded: list[Any] = []  # [Kernels or None] once tried in this process


def load(where: Path | None = None) -> Kernels | None:
    """The built kernels when the module is in place, passes :func:`check` and answers the
    probe; else None (nothing of it is opened as code unless it passes the check)."""
    if where is None and _loaded:
        return _loaded[0]
    kernels = None
    try:
        if check(where)[0] == "ok" and releases_gil(built_path(where)):
            loader = importlib.machinery.ExtensionFileLoader(module_name(), str(built_path(where)))
            spec = importlib.util.spec_from_file_location(module_name(), str(built_path(where)), loader=loader)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            loader.exec_module(module)
            kernels = Kernels(module) if _probe(module) else None
    except Exception:  # noqa: BLE001  not importable: numba's JIT, as before
        kernels = None
    if where is None:
        _loaded.append(kernels)
    return kernels


def _probe(module: Any) -> bool:
    """A tiny df block: item sets {0, 1} and {1} over two resamples."""
    ct = np.array([[1, 2], [3, 4]], dtype=np.int32)
    out = np.zeros((2, 2), dtype=np.int32)
    module.df_block(ct, np.array([0, 1, 1], dtype=np.int64), np.array([0, 2, 3], dtype=np.int64), 0, 2, out,
                    np.zeros(0), np.zeros((0, 2)))
    return out.tolist() == [[4, 6], [3, 4]]


_child: list[tuple[subprocess.Popen, Any, Path]] = []

_CHILD = ("import sys\nif sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
          "from capeval.significance.cider_aot import child_main\nchild_main(sys.argv[2], sys.argv[3])")


def start_build() -> bool:
    """Start building the module in a child (numba installed, not built, no failed build, the
    folder safe); the job waits for it when it ends. Whether a child was started."""
    from capeval.metrics.meteor.kernel_build import unsafe_folder
    from capeval.paths import make_cache_folder
    from capeval.significance.cider_arrays import numba_available

    if _child or not numba_available():
        return False
    try:
        where = folder()
        if failure(where) is not None or check(where)[0] != "missing":
            return False
        make_cache_folder(where.parent)
        where.mkdir(mode=0o755, exist_ok=True)
        if unsafe_folder(where) is not None:
            return False
        err = tempfile.TemporaryFile()
        src = str(Path(__file__).resolve().parents[2])
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, src, str(where), module_name()],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    except Exception:  # noqa: BLE001  an unusable cache: the JIT, as before
        return False
    _child.append((proc, err, where))
    atexit.register(finish_build)
    return True


def finish_build() -> None:
    """Wait for the child :func:`start_build` started; its failure is kept in ``<name>.failed``."""
    from capeval.io.atomic import atomic_write_text

    while _child:
        proc, err, where = _child.pop()
        try:
            proc.wait(timeout=BUILD_TIMEOUT)
            reason = None if proc.returncode == 0 else "the build failed"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            reason = f"the build took over {BUILD_TIMEOUT} s"
        if reason is not None:
            try:
                err.seek(0)
                lines = [x.strip() for x in err.read().decode("utf-8", "replace").splitlines() if x.strip()]
                atomic_write_text(_side(where, ".failed"), (lines[-1][:300] if lines else reason) + "\n")
            except Exception:  # noqa: BLE001  best effort: the next job tries again
                pass
        err.close()


def child_main(where: str, name: str) -> None:
    """The build child: under the folder's lock, nothing when another job built it meanwhile,
    else compile with ``numba.pycc`` in a private folder, move the module in, record its sha256."""
    import fcntl
    import shutil

    try:
        fd = os.open(Path(where) / f"{name}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if check(Path(where))[0] == "ok":
            return
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=where))
        try:
            _compile(work, Path(where), name)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    except Exception as exc:  # one line for the .failed file
        print(f"{type(exc).__name__}: {str(exc).strip()[:200]}", file=sys.stderr)
        sys.exit(1)


def _compile(work: Path, where: Path, name: str) -> None:
    import warnings

    warnings.simplefilter("ignore")  # pycc's pending-deprecation notice; failures still raise
    from numba.core.compiler import Flags
    from numba.pycc import CC, compiler

    from capeval.io.atomic import atomic_write_text
    from capeval.metrics.meteor.kernel_trust import file_digest
    from capeval.significance import cider_jit

    class JitOptions(Flags):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.error_model = "numpy"  # the JIT's: x / 0.0 is inf, as numpy's, never raised
            self.release_gil = True  # the JIT's nogil=True: the kernels run on threads

    compiler.Flags = JitOptions
    cc = CC(name)
    cc.output_dir = str(work)
    cc.verbose = False
    from numba.core.codegen import AOTCPUCodegen

    if host_cpu() is not None and callable(getattr(AOTCPUCodegen, "_customize_tm_features", None)) \
            and callable(getattr(AOTCPUCodegen, "_get_host_cpu_features", None)):
        # this CPU and the features it reports, as numba's JIT compiles (pycc would give the
        # CPU's name only, whose implied features a virtual machine may not have); a numba
        # without these hooks builds for a generic CPU, never for the name alone
        AOTCPUCodegen._customize_tm_features = lambda self: self._get_host_cpu_features()
        cc.target_cpu = "host"
    for fn, (signature, _) in KERNELS.items():
        base, lanes = VARIANT_OF[fn]
        kernel = getattr(cider_jit, base)
        cc.export(fn, signature)(cider_jit.with_lanes(kernel, lanes, fn) if lanes else kernel.py_func)
    cc.compile()
    made = [p for p in work.iterdir() if p.name.startswith(name + ".") and p.is_file()]
    if len(made) != 1:
        raise RuntimeError(f"numba.pycc made {len(made)} files named {name}.*")
    os.chmod(made[0], 0o755)
    digest = file_digest(made[0])
    if digest is None:
        raise RuntimeError(f"numba.pycc made {made[0].name}, which cannot be read back")
    target = where / (name + importlib.machinery.EXTENSION_SUFFIXES[0])
    os.replace(made[0], target)
    atomic_write_text(target.with_name(name + ".sha256"), f"{digest}  {target.name}\n")
