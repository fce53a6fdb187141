"""Where capeval keeps prepared resources and caches."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$CAPEVAL_CACHE``, else ``$XDG_CACHE_HOME/capeval``, else ``~/.cache/capeval``."""
    env = os.environ.get("CAPEVAL_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "capeval"
