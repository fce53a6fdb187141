"""Benchmarks whose optional peer (the implementation they time capeval against) is not
installed print one ``skipped: <peer> not installed`` line and still print their other rows.

Each script runs as a process with the peer blocked (``sys.modules[peer] = None`` in a
``sitecustomize``, which makes both ``import`` and ``importlib.util.find_spec`` see it missing).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
#: import names of the peers the benchmarks compare with (or run on)
PEERS = {"torchmetrics", "pycocoevalcap", "scipy", "clip", "ray", "pyarrow"}


def _run(tmp_path: Path, script: str, blocked: list[str], *args: str, data: Path | None = None) -> str:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import sys\n" + "".join(f"sys.modules[{b!r}] = None\n" for b in blocked))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")]), "HF_HUB_OFFLINE": "1"}
    if data is not None:
        env["CAPEVAL_DATA"] = str(data)
    out = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_every_peer_import_is_guarded():
    """A benchmark that imports a peer asks ``_peers.missing`` (or catches ImportError) first."""
    unguarded = []
    for path in sorted(BENCH.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
        guarded = "missing(" in text or any(
            isinstance(n, ast.ExceptHandler) and n.type is not None and "ImportError" in ast.dump(n.type)
            for n in ast.walk(tree))
        if imported & PEERS and not guarded:
            unguarded.append(f"{path.name}: {sorted(imported & PEERS)}")
    assert not unguarded, unguarded


def test_missing_sees_blocked_modules_and_java(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    from _peers import missing

    monkeypatch.setitem(sys.modules, "torchmetrics", None)
    assert missing("numpy", "torchmetrics") == "torchmetrics"
    assert missing("numpy") is None
    monkeypatch.setenv("PATH", "")
    assert missing("java") == "java"


def test_bench_stats_without_scipy(tmp_path):
    out = _run(tmp_path, "bench_stats.py", ["scipy"], "--n", "500", "--repeat", "1")
    assert '"scipy": "skipped: scipy not installed"' in out and "capeval_tau_b_and_c_seconds" in out


def test_bench_coco_without_pycocoevalcap(tmp_path, shared_data):
    out = _run(tmp_path, "bench_coco.py", ["pycocoevalcap"], "--skip-prepare", data=shared_data)
    assert out.count("skipped: pycocoevalcap not installed") == 2  # the peer's column, capeval's METEOR
    for row in ("tokenize", "bleu", "rouge-l", "cider-d"):
        assert any(line.startswith(row) and "s " in line for line in out.splitlines()), row


@pytest.mark.slow
def test_bench_clip_without_torchmetrics(tmp_path, shared_data):
    out = _run(tmp_path, "bench_clip.py", ["torchmetrics"], "--images", "2", "--arch", "tiny", "--skip", "a",
               data=shared_data)
    assert "(b) CLIP-S vs torchmetrics: skipped: torchmetrics not installed" in out
    assert "(c) images/s" in out  # the other rows still run
