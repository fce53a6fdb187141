"""An interrupt that lands while a worker pool starts: the workers are terminated, not left behind.

``multiprocessing.Pool.__init__`` forks its workers before it returns; a SIGTERM raised inside it
used to leave them waiting on the pool's queue after ``capeval`` exited, holding its stdout and
stderr open (CI: ``test_sigterm_during_meteor_workers`` hung the caller's ``communicate``). Here
the signal is sent from inside ``Pool.__init__``, after the workers are forked, so the window is
hit every time, not by chance.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import capeval

SRC = str(Path(capeval.__file__).parents[1])

_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import multiprocessing.pool as mp_pool
    import psutil
    from capeval.metrics import workers
    from capeval.metrics.meteor import parallel

    class Terminated(KeyboardInterrupt):
        pass

    def on_sigterm(signum, frame):
        if os.getpid() != OWNER:
            os._exit(128 + signum)
        raise Terminated()

    OWNER = os.getpid()
    signal.signal(signal.SIGTERM, on_sigterm)
    where = sys.argv[1]
    repopulate = mp_pool.Pool._repopulate_pool

    def interrupted_start(self):
        out = repopulate(self)  # the workers are forked: now the signal, still inside __init__
        os.kill(os.getpid(), signal.SIGINT if where.endswith("-int") else signal.SIGTERM)
        time.sleep(0.05)  # the handler runs at the next bytecode, inside __init__
        return out

    mp_pool.Pool._repopulate_pool = interrupted_start
    forked = []
    try:
        if where.startswith("map_tasks"):
            list(workers.map_tasks(abs, range(50), 2, recycle=3))
        else:
            parallel.run_forked(lambda h, r: [len(x) for x in h], ["a"] * 40, [["b"]] * 40, 2)
        print("no interrupt")
    except KeyboardInterrupt as exc:
        print(type(exc).__name__)
    me = psutil.Process()
    deadline = time.monotonic() + 20
    while me.children(recursive=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("children left:", len(me.children(recursive=True)))
    print("handlers back:", signal.getsignal(signal.SIGTERM) is on_sigterm,
          signal.getsignal(signal.SIGINT) is signal.default_int_handler)
""")


@pytest.mark.parametrize("where", ["map_tasks", "run_forked", "map_tasks-int"])
def test_interrupt_while_the_pool_starts_leaves_no_worker(where):
    pytest.importorskip("psutil")
    res = subprocess.run([sys.executable, "-c", _SCRIPT, where], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    expected = "KeyboardInterrupt" if where.endswith("-int") else "Terminated"
    assert res.stdout.splitlines() == [expected, "children left: 0", "handlers back: True True"], res.stderr


def test_pool_without_interrupt_runs_and_restores_the_handlers():
    import signal

    from capeval.metrics.workers import map_tasks

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert list(map_tasks(abs, [-3, 4, -5], 2)) == [3, 4, 5]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
