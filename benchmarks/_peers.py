"""Optional peers of the benchmarks (the implementations capeval is timed against).

A peer that is not installed is reported as one line, ``<row>: skipped: <peer> not installed``,
and the benchmark still prints its other rows. Scripts import this module from their own
folder (``python benchmarks/bench_x.py`` puts it first on ``sys.path``).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys


def missing(*peers: str) -> str | None:
    """The first of ``peers`` that is not installed, else None. A peer is an importable top-level
    module name, or ``java`` (an executable on ``PATH``)."""
    for peer in peers:
        if peer == "java":
            if shutil.which("java") is None:
                return peer
            continue
        try:
            if importlib.util.find_spec(peer) is None:
                return peer
        except (ImportError, ValueError):  # a broken or blocked install counts as missing
            return peer
    return None


def skipped(row: str, peer: str) -> str:
    """Print the one line that stands for a row whose peer is missing; return its text."""
    text = f"skipped: {peer} not installed"
    print(f"{row}: {text}", flush=True)
    return text


def flickr8k_data(folder: str, script: str):
    """The data folder ``folder`` as a Path when it holds Flickr8k (``flickr8k/ExpertAnnotations.txt``),
    else None after printing one line naming ``script`` and the folder."""
    from pathlib import Path

    data = Path(folder)
    if (data / "flickr8k" / "ExpertAnnotations.txt").exists():
        return data
    print(f"{script}: Flickr8k data not found under {data} (pass --data or set CAPEVAL_DATA)", file=sys.stderr)
    return None
