"""METEOR's one-time builds started ahead, beside the first large job that needs them.

After small runs, which only scan the paraphrase table (:mod:`.partial_index`), the first
large job needs METEOR's full index (:func:`.index_build.prepare`, about 4.5 s of CPU on three
threads) and, with numba, the kernel built ahead of time (:mod:`.kernel_build`, 5-7 s of one
core). It used to build them one after the other, with a core idle each time: the kernel in
the parent, while the corpus pass's workers finished their share and then waited, then the
index in the first scoring worker, while the other worker waited on the builders' lock.

:func:`start` starts both as child processes as soon as the job knows its size, so that they
run at the same time and beside the corpus pass. The job waits for the index where it needs
it: a worker (or this process) that opens it waits on the builders' lock, which the child
holds from the start (:func:`start_index` hands it over), and finds it built. The kernel is
not waited for by a job scored in chunks (:meth:`.metric.Meteor.before_chunks`): its chunks
run the Python code until the module is in place with its record, then the kernel
(:meth:`.engine.Meteor15.pick_up_kernel`; the same statistics either way), and the job waits
for the build at its end (:func:`reap`), where a failure is kept and said in one warning as
before. ``compiled=true`` and direct :class:`.engine.Meteor15` calls wait for it before they
start (:func:`.kernel_build.build` waits for the child :func:`.kernel_build.start_build`
started instead of starting another).

What is built and how it is checked do not change: the same locks (the kernel's build now
takes one too, so two jobs at once compile it once), the same atomic publication (a folder
renamed into place, a module moved in before its sha256 record), the same checks before use.
So a half-written index or module is never used. An index child that fails leaves the job to
build in line, as before, and to say why in one line. Children still running when the
process exits (after an error, say) are interrupted, which removes their temporary folders,
and waited for.

Where both are built (every run after the first large one) this module starts nothing and
costs a stat and a 2 ms hash.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
from pathlib import Path

from capeval.metrics.meteor.resources import INDEX_BUILDS
from capeval.metrics.workers import PARALLEL_MIN_ITEMS

#: items from which a job with no full index yet will build it: the forked workers of such a
#: job (above :data:`capeval.metrics.workers.PARALLEL_MIN_ITEMS`) build it rather than each
#: scanning the table (see :func:`.partial_index._in_pool_worker`)
INDEX_AHEAD_ITEMS = PARALLEL_MIN_ITEMS + 1

#: seconds :func:`reap` waits for a child before interrupting it (a build takes a few seconds)
REAP_TIMEOUT = 120.0

#: index builds started by this process, by index folder: (child, the starter's pid)
# the index builds started here live in resources.INDEX_BUILDS (the same dict), which the
# resources' loader reads without importing this module (no import circle)
_index: dict[str, tuple[subprocess.Popen, int]] = INDEX_BUILDS
_registered = False

_CHILD = ("import sys\nif sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
          "from capeval.metrics.meteor.ahead import index_child_main\nindex_child_main(sys.argv[2], sys.argv[3])")


def start(index_dir: Path | None, n_items: int, kernel: bool) -> None:
    """Start what a job of ``n_items`` items will build: the full index in ``index_dir`` (None:
    the job has it already) from :data:`INDEX_AHEAD_ITEMS` items, and the kernel when
    ``kernel`` (the job will call :func:`.jit_align.load` with ``build=True``). Never in a
    pool worker; never a second time; nothing when it is built already."""
    if _in_pool_worker():
        return
    if index_dir is not None and n_items >= INDEX_AHEAD_ITEMS:
        start_index(index_dir)
    if kernel:
        start_kernel()


def started(index_dir: Path) -> bool:
    """Whether this process (or the parent it was forked from) started building the index in
    ``index_dir``: the job then waits for it instead of scanning the table or announcing a
    build of its own."""
    return str(index_dir) in _index


def start_index(index_dir: Path) -> bool:
    """Start building the full index in ``index_dir`` in a child process, announced in one line
    on stderr as an in-line build is; False when it was started before, or another builder
    holds the builders' lock (the job then waits on that lock as before), or the cache cannot
    hold it (the job says why when it builds).

    The lock is taken here, before the child exists, and handed to it (an inherited descriptor
    of the same open lock file): from the moment this returns, any process of the job that
    opens the index waits for the child's build, never starts its own."""
    from capeval.errors import CapevalError
    from capeval.paths import make_cache_folder

    key = str(index_dir)
    if key in _index:
        return False
    try:
        import fcntl
    except ImportError:  # pragma: no cover  (no flock: the job builds in line)
        return False
    try:
        make_cache_folder(index_dir.parent)
        fd = os.open(index_dir.parent / f".{index_dir.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except (CapevalError, OSError):
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another process is building: the job waits on its lock as before
            return False
        try:
            proc = _launch(_CHILD, str(index_dir), str(fd), pass_fds=(fd,))
        except OSError:
            return False
    finally:
        os.close(fd)  # the child holds the lock now (or nobody does)
    _index[key] = (proc, os.getpid())
    _register()
    print(f"[capeval meteor] preparing METEOR 1.5 resources in {index_dir} (no index yet); one-time, "
          "beside the job", file=sys.stderr, flush=True)
    return True


def start_kernel() -> bool:
    """Start building METEOR's kernel ahead of time (:func:`.kernel_build.start_build`) when
    :func:`.jit_align.load` would build it: numba installed, nothing loaded yet, no module in
    the cache and no earlier build failed there. The job picks the kernel up once it is built
    (:meth:`.engine.Meteor15.pick_up_kernel`) or, where it must have it before it starts,
    waits for this child (:func:`.kernel_build.build`)."""
    from capeval.metrics.meteor import jit_align, kernel_build

    if jit_align.kind is not None or not jit_align.available():
        return False
    try:
        if kernel_build.failure() is not None or kernel_build.check()[0] != "missing":
            return False  # built, refused (load says why and rebuilds in line) or failed before
        if kernel_build.start_build() is not None:
            return False
    except Exception:  # noqa: BLE001  whatever is wrong with the cache, load() says it
        return False
    _register()
    return True


def kernel_building() -> bool:
    """Whether this process started the kernel's build (:func:`start_kernel`) and the module is
    not in place with its record yet."""
    from capeval.metrics.meteor import kernel_build

    started = kernel_build._started.get(str(kernel_build.folder()))
    return started is not None and started[3] == os.getpid() and not kernel_ready()


def kernel_ready() -> bool:
    """Whether the kernel module is in place and passes :func:`.kernel_build.check` (what a
    forked worker asks before it loads it: a module still without its record is "bad" there,
    and loading it would discard it)."""
    from capeval.metrics.meteor import kernel_build

    try:
        return kernel_build.check()[0] == "ok"
    except Exception:  # noqa: BLE001  an unusable cache: not ready
        return False


def reap(kernel: bool = True) -> None:
    """Wait for the builds this process started beside the job: the index's (the job has used
    the index by now, so it is done or about to see it built; a child still running after
    :data:`REAP_TIMEOUT` seconds is interrupted) and, with ``kernel``, the kernel's (waited for
    as :func:`.jit_align.load` would have, its failure kept and said in one warning)."""
    if _in_pool_worker():
        return
    if kernel:
        _finish_kernel()
    for key, (proc, pid) in list(_index.items()):
        if pid != os.getpid():
            continue
        try:
            proc.wait(timeout=REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            _stop(proc)
        del _index[key]


def _finish_kernel() -> None:
    """Wait for the kernel's build this process started and did not wait for (a job that
    picked the kernel up as it came); one warning when it failed, as :func:`.jit_align.load`
    gives (later large jobs use numba's JIT, the reason is kept beside the module)."""
    from capeval.metrics.meteor import jit_align, kernel_build

    started = kernel_build._started.get(str(kernel_build.folder()))
    if started is None or started[3] != os.getpid():
        return
    try:
        reason = kernel_build.build()  # waits for the started child
    except Exception as exc:  # noqa: BLE001  the cache folder went away meanwhile
        reason = str(exc)
    if reason is not None:
        jit_align._warn(f"METEOR: building the compiled kernel ahead of time failed ({reason}); this job used the "
                        f"Python code and larger jobs use numba's JIT instead (same results, about 0.5 s and 50 MB "
                        f"more per job; the reason is kept in {kernel_build.folder()})")


def _stop(proc: subprocess.Popen) -> None:
    """Interrupt a child (SIGINT: its build removes its temporary folder) and wait for it;
    killed if it does not end within 10 s."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except OSError:
        pass


def _at_exit() -> None:
    """Children still running when this process exits (an error or an interrupt before the job
    used them) are interrupted and waited for, so that no build outlives the job."""
    for proc, pid in list(_index.values()):
        if pid == os.getpid():
            _stop(proc)
    from capeval.metrics.meteor import kernel_build

    for proc, err, _, pid in list(kernel_build._started.values()):
        if pid == os.getpid():
            _stop(proc)
            err.close()


def _register() -> None:
    global _registered
    if not _registered:
        atexit.register(_at_exit)
        _registered = True


def _launch(code: str, *args: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """A child ``python -c code <src> *args`` importing this package from where this process did;
    nothing read from or written to the terminal."""
    src = str(Path(__file__).resolve().parents[3])
    return subprocess.Popen([sys.executable, "-c", code, src, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=pass_fds)


def index_child_main(index_dir: str, lock_fd: str) -> None:
    """The index child: :func:`.index_build.prepare_locked` under the builders' lock the job
    handed it (descriptor ``lock_fd``; nothing is built when the index is there already). A
    failure exits with status 1 and says nothing: the job then builds in line and reports it in
    one line. The lock is released when this process ends, however it ends."""
    try:
        from capeval.metrics.meteor.index_build import prepare_locked

        prepare_locked(Path(index_dir))
    except BaseException:  # noqa: BLE001  an interrupt too: the build removed its temporary folder
        sys.exit(1)


def _in_pool_worker() -> bool:
    """Whether this is a forked pool worker (it never starts builds: its parent does)."""
    import multiprocessing

    return multiprocessing.current_process().daemon
