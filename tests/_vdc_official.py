"""Running rese1f/aurora's ``post_eval/process_vdc_result.py`` (read from the git mirror at a pinned
commit) with stand-ins for ``sglang`` and ``tqdm``: each ``gener_*.run`` records the system and
user texts the script built and returns a scripted reply. Used by tests/test_vdcscore.py."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Callable

#: the git mirror the tools fetch (``$CAPEVAL_AURORA_MIRROR`` to point elsewhere)
MIRROR = Path(os.environ.get("CAPEVAL_AURORA_MIRROR", "/work/.mirror/rese1f+aurora/repo"))
COMMIT = "2bf68d5779ddd98e44ce5bc66c17a6d1525ce204"
SCRIPT = "post_eval/process_vdc_result.py"


def script_text() -> str | None:
    """The script at :data:`COMMIT`, or None without a mirror."""
    if not (MIRROR / "HEAD").exists():
        return None
    done = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"{COMMIT}:{SCRIPT}"], capture_output=True,
                          text=True)
    return done.stdout if done.returncode == 0 else None


class _State:
    def __init__(self) -> None:
        self.parts: list[tuple[str, str]] = []

    def __iadd__(self, part: tuple[str, str]) -> "_State":
        self.parts.append(part)
        return self


def fake_modules(reply: Callable[[str, str], str], seen: list[tuple[str, str]]) -> dict[str, types.ModuleType]:
    """``sglang`` whose ``@function``'s ``run(**kw)`` returns ``{"answer_1": reply(system, user)}``
    (each (system, user) appended to ``seen``), and a ``tqdm`` that returns its iterable."""
    sgl = types.ModuleType("sglang")

    def function(fn):
        class Program:
            @staticmethod
            def run(**kw):
                state = _State()
                fn(state, **kw)
                texts = dict((role, text) for role, text in state.parts if role in ("system", "user"))
                seen.append((texts["system"], texts["user"]))
                return {"answer_1": reply(texts["system"], texts["user"])}
        return Program

    sgl.function = function
    sgl.system = lambda text: ("system", text)
    sgl.user = lambda text: ("user", text)
    sgl.assistant = lambda gen: ("assistant", gen)
    sgl.gen = lambda name, **kw: ("gen", name)
    sgl.set_default_backend = lambda backend: None
    sgl.RuntimeEndpoint = lambda url: url
    tq = types.ModuleType("tqdm")
    tq.tqdm = lambda it, *a, **k: it
    return {"sglang": sgl, "tqdm": tq}


def load(text: str, reply: Callable[[str, str], str], seen: list[tuple[str, str]]) -> dict:
    """The script's namespace (its functions built on the stand-ins)."""
    saved = {k: sys.modules.get(k) for k in ("sglang", "tqdm")}
    sys.modules.update(fake_modules(reply, seen))
    try:
        ns: dict = {"__name__": "process_vdc_result"}
        exec(compile(text, SCRIPT, "exec"), ns)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return ns
