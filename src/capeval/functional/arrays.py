"""Array helpers shared by :mod:`capeval.functional`: numpy or torch, without importing torch."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a torch tensor; never imports torch (no tensor exists before it is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def as_array(x: Any) -> Any:
    """Tensors stay tensors; anything else becomes a numpy array of its own dtype."""
    return x if is_tensor(x) else np.asarray(x)
