"""The build child of METEOR's compiled kernel (:func:`capeval.metrics.meteor.kernel_build.build`
runs ``python -c`` :data:`~capeval.metrics.meteor.kernel_build._CHILD`, which calls
:func:`child_main` here): numba's ``pycc`` compiles the kernel under the builders' lock, a lean
module first (without numba's C helpers it never calls), the full one if that does not link,
hashed before it is moved in place beside its sha256 record."""

from __future__ import annotations

from pathlib import Path
import contextlib
import importlib
import os
import shutil
import sys
import tempfile
from typing import Iterator

from capeval.metrics.meteor.kernel_build import SIGNATURE, check
from capeval.metrics.meteor.kernel_trust import _file_digest


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
    """Under the folder's build lock: nothing when another job's child built the module while
    this one waited, else :func:`_compile_locked`."""
    with _build_lock(Path(where), name):
        if check(Path(where))[0] == "ok":
            return
        _compile_locked(where, name)


@contextlib.contextmanager
def _build_lock(where: Path, name: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``<name>.lock`` in ``where`` (released by the OS when the child
    dies, so never stale): the children of concurrent jobs build one at a time."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover  (no flock: each child builds, as safely as before)
        yield
        return
    fd = os.open(where / f"{name}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


#: numba.pycc's C sources that only numba's typed containers use (about a quarter of a build's
#: CPU: 1.3-2 s); the module is first built without them (see :func:`_links`)
_UNUSED_C = frozenset({"dictobject.c", "listobject.c", "setobject.c", "utils.c"})


def _links(path: Path) -> bool:
    """Whether the built module's symbols all resolve (``RTLD_NOW``; only its ELF constructors
    run, not its Python init) in this child, which has Python and numpy loaded as a job has."""
    import ctypes

    try:
        ctypes.CDLL(str(path), mode=os.RTLD_NOW | getattr(os, "RTLD_LOCAL", 0))
    except OSError:
        return False
    return True


def _compile_locked(where: str, name: str) -> None:
    """Compile with ``numba.pycc`` in a private folder, then move the module in."""
    import warnings

    warnings.simplefilter("ignore")  # pycc's pending-deprecation notice; failures still raise
    from numba.pycc import CC

    from capeval.metrics.meteor import jit_kernel

    work = Path(tempfile.mkdtemp(prefix=".build-", dir=where))
    try:
        for lean in (True, False):
            cc = CC(name)
            cc.output_dir = str(work)
            cc.verbose = False
            if lean:  # without numba's typed dict/list/set helpers, which the kernel never calls
                cc._mixin_sources = [m for m in getattr(cc, "_mixin_sources", ()) if Path(m).name not in _UNUSED_C]
            cc.export("finish_kernel", SIGNATURE)(jit_kernel.finish_kernel.py_func)
            cc.compile()
            made = [p for p in work.iterdir() if p.name.startswith(name + ".") and p.is_file()]
            if not lean or len(made) != 1 or _links(made[0]):
                break
            for p in made:  # a numba whose other helpers need them: the whole set
                p.unlink()
        if len(made) != 1:
            raise RuntimeError(f"numba.pycc made {len(made)} files named {name}.*")
        os.chmod(made[0], 0o755)  # not the linker's umask-given mode: a group-writable module is refused
        digest = _file_digest(made[0])  # hashed in the private folder, before it is moved in
        if digest is None:
            raise RuntimeError(f"numba.pycc made {made[0].name}, which cannot be read back")
        target = Path(where) / (name + importlib.machinery.EXTENSION_SUFFIXES[0])
        os.replace(made[0], target)
        # the record after the module is in place: a crash in between leaves a module without
        # (or with an older) record, which is refused and built again, never imported
        from capeval.io.atomic import atomic_write_text

        atomic_write_text(target.with_name(name + ".sha256"), f"{digest}  {target.name}\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
