"""What compare does between its scoring pass and its resamples (issue 47 item 2): no METEOR
engine imported for CIDEr-D's compiled kernels (their build and trust rules live in METEOR's
package, whose names are now imported at first use), and the built kernels loaded while the
scoring pass's workers score."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_meteor_package_imports_its_engine_only_when_asked():
    code = ("import sys\n"
            "import capeval.metrics.meteor.kernel_build, capeval.metrics.meteor.kernel_trust\n"
            "assert 'capeval.metrics.meteor.engine' not in sys.modules, 'engine imported'\n"
            "import capeval.metrics.meteor as m\n"
            "from capeval.metrics.meteor import Meteor15, compute, prepare, resource_info\n"
            "assert 'capeval.metrics.meteor.engine' in sys.modules\n"
            "assert set(m.__all__) <= set(dir(m))\n"
            "assert all(getattr(m, n) is not None for n in m.__all__)\n"
            "try:\n    m.nothing_here\nexcept AttributeError as e:\n    print('ok', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]
    assert "'nothing_here'" in out.stdout


def test_built_kernels_loaded_while_the_scoring_pass_runs(monkeypatch):
    import importlib

    from capeval.significance import cider_aot, cider_arrays, cider_resample, keep  # noqa: F401 - bound before the patch

    compare_module = importlib.import_module("capeval.significance.compare")
    monkeypatch.setattr(cider_arrays, "JIT_MIN_WORK", 0)  # what compare's loading ahead reads
    monkeypatch.setattr(cider_arrays, "numba_available", lambda: True)
    events: list[str] = []
    monkeypatch.setattr(cider_aot, "load", lambda where=None: events.append("load"))
    real_deferred = keep.run_deferred

    def deferred():
        events.append("pass")
        real_deferred()

    monkeypatch.setattr(keep, "run_deferred", deferred)
    refs = {str(i): [f"a dog runs in the park {i}", "a dog plays"] for i in range(12)}
    a = {str(i): "a dog runs" for i in range(12)}
    b = {str(i): "a cat sits" for i in range(12)}
    monkeypatch.setattr(compare_module, "bootstrap_scores", lambda *x, **k: pytest.skip("stop before the resamples"))
    with pytest.raises(pytest.skip.Exception):
        compare_module.compare({"a": a, "b": b}, refs, "cider-d", samples=8)
    assert events[:2] == ["pass", "load"], events


def test_no_kernels_loaded_ahead_for_small_or_randomisation_jobs(monkeypatch):
    import importlib

    from capeval.significance import cider_aot

    compare_module = importlib.import_module("capeval.significance.compare")
    loaded: list[int] = []
    monkeypatch.setattr(cider_aot, "load", lambda where=None: loaded.append(1))
    refs = {str(i): [f"a dog runs in the park {i}", "a dog plays"] for i in range(12)}
    a = {str(i): "a dog runs" for i in range(12)}
    b = {str(i): "a cat sits" for i in range(12)}
    compare_module.compare({"a": a, "b": b}, refs, "cider-d", samples=8)
    compare_module.compare({"a": a, "b": b}, refs, "cider-d", samples=8, method="ar")
    assert loaded == []
