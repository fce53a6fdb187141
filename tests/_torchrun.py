"""Two CPU processes of the ``capeval`` CLI under ``torch.distributed.run`` (gloo), for the
multi-process training tests: the launch script (the test's hook text) is written to
``tmp_path`` and receives ``args``; each process imports ``src/`` and ``tests/``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_PATHS = os.pathsep.join(str(Path(__file__).resolve().parents[k] / d) for k, d in ((1, "src"), (0, "")))


def torchrun(tmp_path: Path, script_text: str, vocab: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``script_text`` in two processes; one thread each so the two share 2 cores evenly."""
    script = tmp_path / "launch.py"
    script.write_text(script_text)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CAPEVAL_CLIP_VOCAB": str(vocab),
           "PYTHONPATH": _PATHS, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(script), *args], env=env, capture_output=True, text=True, timeout=300)
