"""Ends what a killed driver's local Ray instance leaves behind (``python -m capeval.engines.reaper NODE_ID``).

Ray ties its GCS server and raylet to the driver that started them, but the raylet's agents
(``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) outlive a driver killed with SIGKILL
(measured with Ray 2.x on Linux: both stay, reparented to init, and ignore SIGTERM). The
driver starts this helper in its own session with a pipe on its stdin. While the driver
lives, the helper notes the driver's Ray descendants (command line naming ray) twice a second (PID and start time: a
reparented agent is no longer anyone's descendant once the driver is gone); when the pipe
closes, however the driver ended, it stops those still running and every process of the user
that carries the node's ``RAY_NODE_ID`` (SIGTERM, then SIGKILL after a grace period). After a
normal ``ray.shutdown()`` it finds nothing. Linux only (it reads ``/proc``); elsewhere it
does nothing and ``ray stop`` ends the leftovers.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 3.0


def node_processes(node_id: str) -> list[int]:
    """PIDs of this user's processes whose environment holds ``RAY_NODE_ID=node_id`` (not this one)."""
    marker = f"RAY_NODE_ID={node_id}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                out.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return out


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent PID, start time) of ``pid`` from /proc, None when it is gone."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19]


def _is_ray(pid: int) -> bool:
    """Whether the command line names Ray (``ray::...``, ``raylet``, ``.../ray/...``): other children
    of a library user's process are not this helper's to stop."""
    try:
        return b"ray" in (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False


def descendants(root: int) -> dict[int, str]:
    """PID -> start time of every Ray process under ``root`` (this helper excluded)."""
    parents: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                parents.setdefault(st[0], []).append(int(entry.name))
                started[int(entry.name)] = st[1]
    out: dict[int, str] = {}
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child != os.getpid() and child not in out:
                out[child] = started[child]
                todo.append(child)
    return {pid: t for pid, t in out.items() if _is_ray(pid)}


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def reap(node_id: str, seen: dict[int, str] | None = None, grace_s: float = GRACE_S) -> list[int]:
    """Stop the node's leftover processes and those of ``seen`` (PID -> start time) still
    running as the same process; returns their PIDs."""
    same = [pid for pid, t in (seen or {}).items() if (st := _stat(pid)) is not None and st[1] == t]
    pids = sorted(set(node_processes(node_id)) | set(same))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            if _alive(pid):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
    return pids


def start(node_id: str) -> subprocess.Popen | None:
    """Start the helper for the local Ray node ``node_id`` (None off Linux). Close its stdin to release it."""
    if not Path("/proc/self/environ").exists():
        return None
    return subprocess.Popen([sys.executable, "-m", "capeval.engines.reaper", node_id, str(os.getpid())],
                            stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            close_fds=True)


def release(helper: subprocess.Popen | None) -> None:
    """After ``ray.shutdown()``: let the helper sweep once and end."""
    if helper is None:
        return
    try:
        helper.stdin.close()  # type: ignore[union-attr]
        helper.wait(timeout=2 * GRACE_S + 5)
    except (OSError, subprocess.TimeoutExpired):
        helper.kill()


def _main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    node_id, driver = sys.argv[1], int(sys.argv[2])
    seen: dict[int, str] = {}
    fd = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready and not os.read(fd, 4096):  # EOF: the driver closed the pipe or is gone
            break
        if not ready:
            seen.update(descendants(driver))
    reap(node_id, seen)


if __name__ == "__main__":
    _main()
