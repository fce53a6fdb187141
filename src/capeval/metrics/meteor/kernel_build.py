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

Importing an extension module runs its code, so nothing in the cache is imported unverified
(:func:`check`): the build records the module's sha256 beside it (``<name>.sha256``, in
``sha256sum`` format, written atomically after the module is in place), and every import first
hashes the file and compares. A module that differs, has no record, is not a regular file
(a link, a folder, a pipe), is over :data:`MAX_MODULE_BYTES` or is writable by others is never
opened as code: :mod:`.jit_align` removes it and builds again (once), or uses numba's JIT.
The record lives beside the module, so it tells a changed or foreign file from the one built
here, not an attacker who can write both: what keeps other users out is that the kernels
folder and its parents up to the cache root must be yours (or root's) and not writable by
group or others (as ssh requires of ``~/.ssh``; a group-writable folder is accepted only when
the group is your user-private group, what a umask of 002 gives on Debian and Ubuntu).
Otherwise nothing there is imported or built (:func:`unsafe_folder`, one warning with the
``chmod go-w`` that fixes it).
"""

from __future__ import annotations

import contextlib
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
from typing import Any, Callable, Iterator

# the trust rules live beside; named here too, where callers and tests look for them
from capeval.metrics.meteor.kernel_trust import (MAX_MODULE_BYTES, _cut_elf, _file_digest, _private_group,  # noqa: F401
                                                 module_file_problem, not_yours, recorded_digest)

#: the exported function's numba signature (arrays C-contiguous int64, see jit_align.finish)
SIGNATURE = "i8[::1](i8[::1], i8[::1], i8, i8, i8, i8, i8, i8, b1)"

#: seconds a build may take before it counts as failed
BUILD_TIMEOUT = 600


#: the largest digest record read (one ``sha256sum`` line)
_MAX_RECORD_BYTES = 4096

_imports = 0  # imports tried in this process (see _import)


def folder() -> Path:
    """Where built kernels live: ``$CAPEVAL_CACHE/kernels`` (not created here)."""
    from capeval.paths import cache_dir

    return cache_dir() / "kernels"


@functools.lru_cache(maxsize=1)
def module_name() -> str:
    """``meteor_kernel_<tag>``: the tag hashes the kernel's source (and this module's and
    :mod:`.kernel_child`'s, which say how it is built), numba's version, the Python ABI and the platform, so a change of
    any of them means another build."""
    here = Path(__file__)
    source = b"".join(here.with_name(name).read_bytes() for name in ("jit_kernel.py", here.name, "kernel_child.py"))
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


def digest_path(where: Path | None = None) -> Path:
    """Where the built module's sha256 is recorded: ``<name>.sha256`` beside it."""
    return built_path(where).with_name(module_name() + ".sha256")


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
    when it is not built, fails :func:`check` (then it is not opened at all) or does not load."""
    status, _ = check(where)
    return _import(where) if status == "ok" else None


def check(where: Path | None = None) -> tuple[str, str | None]:
    """Whether the module in ``where`` (default :func:`folder`) may be imported, before
    anything of it is opened as code: ``("ok", None)``; ``("missing", None)`` when it is not
    built; ``("unsafe", line)`` when a folder is writable by others (:func:`unsafe_folder`);
    ``("bad", why)`` when the file is not the one built here (no or another sha256 record,
    not a regular file, over :data:`MAX_MODULE_BYTES`, writable by others)."""
    where = where or folder()
    unsafe = unsafe_folder(where)
    if unsafe is not None:
        return "unsafe", unsafe
    path = built_path(where)
    found = module_file_problem(path)
    if found is not None:
        return found
    recorded = _recorded_digest(where)
    if recorded is None:
        return "bad", f"there is no sha256 record of it in {digest_path(where).name}"
    actual = _file_digest(path)
    if actual is None:
        return "bad", f"it cannot be read or is over {MAX_MODULE_BYTES >> 20} MB"
    if actual != recorded:
        return "bad", f"its sha256 differs from the one recorded in {digest_path(where).name} when it was built"
    cut = _cut_elf(path)
    if cut is not None:  # a record written for a cut file: loading it would die of SIGBUS
        return "bad", f"it is a cut file ({cut})"
    return "ok", None


def problem() -> str | None:
    """For ``capeval info``: why the built module would not be imported (None when it would be,
    or is not built)."""
    try:
        status, why = check()
    except Exception as exc:  # info must work with a broken cache
        return str(exc)
    return why if status in ("bad", "unsafe") else None


def discard(where: Path | None = None) -> bool:
    """Remove a module that failed :func:`check` and its record (a link is removed, never
    followed), so that it is built again or no longer looked at; whether the module is gone."""
    for path in (digest_path(where), built_path(where)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:  # a folder in its place, say: the build's os.replace then fails and says so
            return False
    return True


def _import(where: Path | None) -> Callable[..., Any] | None:
    """Import the module :func:`check` passed (the folder is ours alone, so the file cannot
    be swapped in between); None when it does not load or lacks the function."""
    global _imports
    path = built_path(where)
    name = module_name()
    # The dynamic loader knows a library by the path string it was opened with, and a library
    # is never unloaded: a file that failed to import (another module's code under this name)
    # would be handed back again for the rebuilt one at the same path. Each later try in this
    # process spells the path anew (``dir/./name``), so the loader opens the file it names.
    spelled = os.path.join(str(path.parent), *(["."] * _imports), path.name)
    _imports += 1
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, spelled)
        spec = importlib.util.spec_from_file_location(name, spelled, loader=loader)
        if spec is None:
            return None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        kernel = module.finish_kernel
    except (ImportError, OSError, AttributeError):
        return None
    return kernel if callable(kernel) else None


def unsafe_folder(where: Path | None = None) -> str | None:
    """One line naming the first of the kernels folder and its parents up to the cache root
    (the folder alone when it is elsewhere) that is owned by another user or writable by
    group or others, with the fix; None when all are safe (or do not exist yet)."""
    from capeval.paths import cache_dir

    where = Path(os.path.realpath(where or folder()))
    try:
        root = Path(os.path.realpath(cache_dir()))
    except Exception:  # noqa: BLE001  an unusable cache root: check the folder alone
        root = where
    chain = [where]
    if root in where.parents:
        chain += [p for p in where.parents if p == root or root in p.parents]
    for path in chain:
        try:
            st = os.stat(path)
        except OSError:
            continue  # not created yet: the build creates it ours
        why = not_yours(st)
        if why is None:
            continue
        fix = (f"run chmod go-w {path}" if why.startswith("writable")
               else "set CAPEVAL_CACHE to a folder of yours")
        return f"{path} is {why}, so compiled code in it is not imported; {fix}"
    return None


def _recorded_digest(where: Path | None) -> str | None:
    """The sha256 recorded for the module (``<hex>  <file name>``), or None when there is
    no readable record naming it."""
    return recorded_digest(digest_path(where), built_path(where), _MAX_RECORD_BYTES)


def _own_folder(where: Path | None) -> Path | str:
    """``where`` (default :func:`folder`) created if need be, readable by all and writable by us
    alone; the reason instead when it is not safe to build in (:func:`unsafe_folder`). Raises
    the cache's one-line :class:`~capeval.errors.ResourceError` when it cannot be made."""
    from capeval.paths import make_cache_folder

    where = Path(where or folder())
    if not where.is_dir():  # made readable by all but writable by us alone, whatever the umask
        make_cache_folder(where.parent)
        try:
            where.mkdir(mode=0o755, exist_ok=True)
        except OSError:
            pass  # make_cache_folder below says why in one line
    where = make_cache_folder(where)
    unsafe = unsafe_folder(where)
    return where if unsafe is None else unsafe  # nothing built where another user could swap it


#: builds started ahead (:func:`start_build`), by folder: (child, its stderr file, start time,
#: the pid of the process that started it: only that one can wait for the child)
_started: dict[str, tuple[subprocess.Popen, Any, float, int]] = {}


def _launch(where: Path) -> tuple[subprocess.Popen, Any, float, int]:
    """Start the build child for ``where``; its stderr goes to an unnamed file (never a pipe
    that could fill while nobody reads it)."""
    import time

    # the child imports this package from where the parent did (a source tree, too)
    src = str(Path(__file__).resolve().parents[3])
    err = tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, src, str(where), module_name()],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    except BaseException:
        err.close()
        raise
    return proc, err, time.monotonic(), os.getpid()


def start_build(where: Path | None = None) -> str | None:
    """Start :func:`build`'s child without waiting for it: a job that knows early that it will
    build the kernel starts it here, so that it compiles beside the job's other work; the next
    :func:`build` of the same folder in this process waits for it instead of starting another.
    None when started (or started already), else why not (:func:`build` says it again)."""
    from capeval.errors import CapevalError

    try:
        ready = _own_folder(where)
    except CapevalError as exc:
        return str(exc)
    if isinstance(ready, str):
        return ready
    if str(ready) not in _started:
        try:
            _started[str(ready)] = _launch(ready)
        except OSError as exc:
            return str(exc)
    return None


def build(where: Path | None = None) -> str | None:
    """Build the module into ``where`` (default :func:`folder`) in a child process (or wait for
    the one :func:`start_build` started); None on success, else the reason (first line), also
    kept in ``<name>.failed``. Concurrent builds are safe: the child takes the folder's build
    lock (a second job's child waits, then finds the module built and records nothing), builds
    in its own folder, moves its file in place atomically, then records its sha256 beside it
    (:func:`digest_path`)."""
    import time

    where = _own_folder(where)
    if isinstance(where, str):
        return where
    started = _started.pop(str(where), None)
    if started is not None and started[3] != os.getpid():  # a forked copy of the starter's table
        started = None
    err = None
    try:
        proc, err, t0, _ = started or _launch(where)
        try:
            proc.wait(timeout=max(BUILD_TIMEOUT - (time.monotonic() - t0), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        reason = None if proc.returncode == 0 and built_path(where).is_file() else _last_line(_tail(err))
    except subprocess.TimeoutExpired:
        reason = f"the build took over {BUILD_TIMEOUT} s"
    except OSError as exc:
        reason = str(exc)
    finally:
        if err is not None:
            err.close()
    if reason is not None:
        note_failure(reason, where)
    return reason


def _tail(err: Any) -> str:
    """The last 64 KB of the child's stderr file."""
    try:
        size = err.seek(0, os.SEEK_END)
        err.seek(max(0, size - (64 << 10)))
        return err.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def note_failure(reason: str, where: Path | None = None) -> None:
    """Keep ``reason`` in ``<name>.failed`` so that later runs do not build again (best effort:
    without the note the next large job just tries again)."""
    from capeval.errors import CapevalError
    from capeval.io.atomic import atomic_write_text

    try:
        atomic_write_text(_failed_path(where), reason + "\n")
    except (OSError, CapevalError):
        pass


_CHILD = ("import sys\nif sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
          "from capeval.metrics.meteor.kernel_child import child_main\nchild_main(sys.argv[2], sys.argv[3])")


def _last_line(text: str) -> str:
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1][:300] if lines else "the build failed without a message"
