"""What the Ray engine's tests share: one local 2-CPU Ray instance per module, and the
comparison of a distributed Report with the in-process one."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """A 2-CPU local Ray instance for the module (2 actors), as on a 2-worker cluster."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def assert_same(a, b, exact: bool = True) -> None:
    """Same metrics, items in the same order and the same signatures; scores identical bit for
    bit (``exact``) or within 1e-6 (learned metrics: float reductions in other batch shapes)."""
    assert list(a) == list(b)
    for m in a:
        assert list(a[m].items) == list(b[m].items), m
        assert str(a[m].signature) == str(b[m].signature), m
        if exact:
            assert dict(a[m].items) == dict(b[m].items) and a[m].system == b[m].system, m
        else:
            diff = np.abs(np.array(list(a[m].items.values())) - np.array(list(b[m].items.values())))
            assert diff.max() <= 1e-6 and abs(a[m].system - b[m].system) <= 1e-6, m
