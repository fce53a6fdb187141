"""Checking a torch device string before anything is loaded.

``torch.device("gpu0")`` raises a bare RuntimeError and ``"cuda"`` on a machine without
CUDA fails only once a model is moved there, after the checkpoint was read; both become
one :class:`InputError` here, before any heavy work.
"""

from __future__ import annotations

import re
from typing import Any

from capeval.errors import InputError

_FORM = re.compile(r"^(cpu|cuda|mps|xpu)(?::(\d+))?$")
_VALID = "cpu, cuda, cuda:N, mps"


def check_device(device: Any) -> str:
    """Return ``device`` as a string when it names a usable torch device; else InputError.

    Accepts ``cpu``, ``cuda``, ``cuda:N``, ``mps`` (and ``xpu``), case-insensitively, and
    ``torch.device`` objects. Availability is checked with torch when it is installed
    (when it is not, building the scorer reports the missing extra instead).
    """
    if device is None:
        return "cpu"
    text = str(device).strip().lower()
    m = _FORM.match(text)
    if not m:
        raise InputError(f"device {str(device)!r} is not a torch device; use one of: {_VALID}")
    kind, index = m.group(1), m.group(2)
    if kind == "cpu":
        if index not in (None, "0"):
            raise InputError(f"device {text!r}: the CPU has no index; use cpu")
        return text
    try:
        import torch
    except ImportError:
        return text
    if kind == "cuda":
        if not torch.cuda.is_available():
            why = "this torch build has no CUDA support" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise InputError(f"device {text!r}: CUDA is not available ({why}; torch {torch.__version__}); use cpu")
        count = torch.cuda.device_count()
        if index is not None and int(index) >= count:
            raise InputError(f"device {text!r}: only {count} CUDA device(s) visible (cuda:0..cuda:{count - 1})")
    elif kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise InputError(f"device {text!r}: Apple MPS is not available on this machine; use cpu")
    elif kind == "xpu":
        xpu = getattr(torch, "xpu", None)
        if xpu is None or not xpu.is_available():
            raise InputError(f"device {text!r}: Intel XPU is not available on this machine; use cpu")
    return text
