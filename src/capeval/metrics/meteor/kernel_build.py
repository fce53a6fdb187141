"""METEOR's compiled kernel built ahead of time into the capeval cache (numba's ``pycc``).

:mod:`.jit_kernel` compiled by numba's JIT needs numba and LLVM in every process that runs
it: about half a second to load, and about 50 MB of numba's and LLVM's memory in the parent
that every forked worker inherits. The same functions compiled ahead of time
(``numba.pycc``, by a child process, once per kernel source, numba version and Python ABI)
are a plain CPython extension module that imports in a millisecond with numpy alone. It
sits in ``$CAPEVAL_CACHE/kernels`` as ``meteor_kernel_<tag>`` plus the platform's
extension suffix; building it needs what building any C extension needs (a C compiler,
Python's headers, setuptools). Where that fails, the reason is kept beside it
(``<name>.failed``) so later runs do not try again, and :mod:`.jit_align` uses numba's JIT
instead (same results).

The code is LLVM's compilation of the same numba functions for a generic CPU of the
machine's architecture (no host-specific instructions: a cache folder shared between
machines stays safe); ``tests/test_meteor_jit.py`` checks both builds against the Python code.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

#: the exported function's numba signature (arrays C-contiguous int64, see jit_align.finish)
SIGNATURE = "i8[::1](i8[::1], i8[::1], i8, i8, i8, i8, i8, i8, b1)"

#: seconds a build may take before it counts as failed
BUILD_TIMEOUT = 600


def folder() -> Path:
    """Where built kernels live: ``$CAPEVAL_CACHE/kernels`` (not created here)."""
    from capeval.paths import cache_dir

    return cache_dir() / "kernels"


@functools.lru_cache(maxsize=1)
def module_name() -> str:
    """``meteor_kernel_<tag>``: the tag hashes the kernel's source (and this module's, which
    says how it is built), numba's version, the Python ABI and the platform, so a change of
    any of them means another build."""
    source = Path(__file__).with_name("jit_kernel.py").read_bytes() + Path(__file__).read_bytes()
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba_version = "none"
    key = b"\0".join([source, numba_version.encode(), sys.implementation.cache_tag.encode(),
                      platform.machine().encode(), sys.platform.encode(), SIGNATURE.encode()])
    return "meteor_kernel_" + hashlib.sha256(key).hexdigest()[:16]


def built_path(where: Path | None = None) -> Path:
    """The path the built module has (or will have) in ``where`` (default :func:`folder`)."""
    return (where or folder()) / (module_name() + importlib.machinery.EXTENSION_SUFFIXES[0])


def _failed_path(where: Path | None = None) -> Path:
    """Where a failed build's reason is kept: ``<name>.failed`` beside the module."""
    return built_path(where).with_name(module_name() + ".failed")


def failure(where: Path | None = None) -> str | None:
    """Why the last build in ``where`` failed (first line), or None if none failed."""
    path = _failed_path(where)
    try:
        return path.read_text(encoding="utf-8").strip().splitlines()[0] if path.is_file() else None
    except (OSError, IndexError):
        return "unknown"


def state() -> dict[str, Any]:
    """For ``capeval info``: the module's path, whether it is built, and why its last build
    failed (if it did; delete the ``.failed`` file beside it to try again)."""
    path = built_path()
    return {"path": str(path), "built": path.is_file(), "build_failed": failure()}


def load_built(where: Path | None = None) -> Callable[..., Any] | None:
    """The built kernel's ``finish_kernel`` (see :func:`.jit_kernel.finish_kernel`), or None
    when it is not built (or does not load here)."""
    path = built_path(where)
    if not path.is_file():
        return None
    name = module_name()
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError):
        return None
    return module.finish_kernel


def build(where: Path | None = None) -> str | None:
    """Build the module into ``where`` (default :func:`folder`) in a child process; None on
    success, else the reason (first line), also kept in ``<name>.failed``. Concurrent builds
    are safe: each builds in its own folder and moves its file in place atomically."""
    from capeval.errors import CapevalError
    from capeval.io.atomic import atomic_write_text
    from capeval.paths import make_cache_folder

    where = make_cache_folder(where or folder())
    name = module_name()
    try:
        # the child imports this package from where the parent did (a source tree, too)
        src = str(Path(__file__).resolve().parents[3])
        proc = subprocess.run([sys.executable, "-c", _CHILD, src, str(where), name], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT)
        reason = None if proc.returncode == 0 and built_path(where).is_file() else _last_line(proc.stderr)
    except subprocess.TimeoutExpired:
        reason = f"the build took over {BUILD_TIMEOUT} s"
    except OSError as exc:
        reason = str(exc)
    if reason is not None:
        try:  # best effort: without the note the next large job just tries again
            atomic_write_text(_failed_path(where), reason + "\n")
        except (OSError, CapevalError):
            pass
    return reason


_CHILD = ("import sys\nif sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
          "from capeval.metrics.meteor.kernel_build import child_main\nchild_main(sys.argv[2], sys.argv[3])")


def _last_line(text: str) -> str:
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1][:300] if lines else "the build failed without a message"


def child_main(where: str, name: str) -> None:
    """The build child (see :func:`build`): exit status 0, or 1 with the reason as the last
    line of stderr."""
    try:
        _compile(where, name)
    except Exception as exc:  # one line for the parent's warning and the .failed file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"{type(exc).__name__}: {first.split('. ')[0]}", file=sys.stderr)  # the first sentence
        sys.exit(1)


def _compile(where: str, name: str) -> None:
    """Compile with ``numba.pycc`` in a private folder, then move the module in."""
    import warnings

    warnings.simplefilter("ignore")  # pycc's pending-deprecation notice; failures still raise
    from numba.pycc import CC

    from capeval.metrics.meteor import jit_kernel

    work = Path(tempfile.mkdtemp(prefix=".build-", dir=where))
    try:
        cc = CC(name)
        cc.output_dir = str(work)
        cc.verbose = False
        cc.export("finish_kernel", SIGNATURE)(jit_kernel.finish_kernel.py_func)
        cc.compile()
        made = [p for p in work.iterdir() if p.name.startswith(name + ".") and p.is_file()]
        if len(made) != 1:
            raise RuntimeError(f"numba.pycc made {len(made)} files named {name}.*")
        os.replace(made[0], Path(where) / (name + importlib.machinery.EXTENSION_SUFFIXES[0]))
    finally:
        shutil.rmtree(work, ignore_errors=True)

