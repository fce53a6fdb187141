"""Temporary files of :mod:`capeval.io.atomic`, named so that a later run can tell a dead run's
leftovers from a live one's.

A temporary file is ``.<name>.capeval-<host>-<pid>-<random>.tmp`` beside its target. A run
killed with SIGKILL (or a power cut) cannot delete its own; the first atomic write of a process
into a folder deletes those whose writer is gone: same host (a pid says nothing about another
machine sharing the folder over NFS) and the pid no longer running, or running but started
after the file was last written (the pid was reused).
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import threading
from pathlib import Path

_TEMP = re.compile(r"\.capeval-(?P<host>[A-Za-z0-9-]*)-(?P<pid>\d+)-[a-z0-9_]+\.(?:tmp|probe|part)$")
_swept: set[str] = set()
_lock = threading.Lock()


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:32]


def make_temp(target: Path, suffix: str = ".tmp") -> tuple[int, str]:
    """``mkstemp`` beside ``target``, named for :func:`sweep_dead_temps` (mode 0600, open fd)."""
    folder = target.parent
    sweep_dead_temps(folder)
    # the target's own name is cut so that the temporary name stays under NAME_MAX (255)
    prefix = f".{target.name[:120]}.capeval-{_host()}-{os.getpid()}-"
    return tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)


def _writer_gone(pid: int, written: float) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    started = _start_time(pid)
    return started is not None and started > written + 2.0  # a reused pid


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds; Linux ``/proc``), else None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
        with open("/proc/stat", encoding="ascii", errors="replace") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])  # field 22, starttime
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def sweep_dead_temps(folder: str | os.PathLike[str]) -> int:
    """Delete the temporary files in ``folder`` left by dead writers on this host (once per
    folder per process); the number deleted. Never raises: a folder that cannot be listed
    or a file that cannot be removed is left as it is."""
    key = os.path.abspath(folder)
    with _lock:
        if key in _swept:
            return 0
        _swept.add(key)
    host, removed = _host(), 0
    try:
        entries = list(os.scandir(key))
    except OSError:
        return 0
    for entry in entries:
        m = _TEMP.search(entry.name) if entry.name.startswith(".") else None
        if m is None or m["host"] != host:
            continue
        try:
            if entry.is_file(follow_symlinks=False) and _writer_gone(int(m["pid"]), entry.stat().st_mtime):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed
