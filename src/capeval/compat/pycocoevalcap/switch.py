"""``CAPEVAL_AS_PYCOCOEVALCAP=1``: every ``import pycocoevalcap...`` gets capeval's drop-in, no edit.

Installing capeval puts one file in site-packages, ``capeval_as_pycocoevalcap.pth``, whose
single line (:data:`PTH_LINE`) Python's :mod:`site` runs at the start of every interpreter
of that environment. With the variable unset, empty or off the line is one dictionary
lookup and nothing is imported; with it set, it imports this module and calls
:func:`install_from_env`, which puts :class:`SwitchFinder` first on :data:`sys.meta_path`.
From then on ``pycocoevalcap`` and its submodules of :data:`SUBMODULES` resolve to
:mod:`capeval.compat.pycocoevalcap` (the same module objects), even where the real
pycocoevalcap is installed, and without Java. Child processes (``torchrun``, ``accelerate
launch``, multiprocessing) inherit the variable and switch themselves the same way.
The precedent is coverage.py's ``COVERAGE_PROCESS_START`` (a ``.pth`` that acts only when a
variable is set).

Details:

- The top-level ``pycocoevalcap`` module keeps the real package's location (``__path__``,
  ``__spec__.submodule_search_locations``), so METEOR still reads its resources from the
  ``pycocoevalcap==1.2`` wheel (:func:`capeval.metrics.meteor.index_format.source_paths`).
- Submodules the drop-in does not provide (``pycocoevalcap.cider.cider_scorer``,
  ``pycocoevalcap.bleu.bleu_scorer``, ...) load from the real package's files, unchanged:
  none of them starts Java on import.
- Under the switch the drop-in remembers, per process and keyed by content hash, the
  tokenisation and BLEU statistics of recent inputs and shares one METEOR engine
  (:mod:`capeval.compat.pycocoevalcap._memo`): lmms-eval's caption aggregation tokenises
  and scores the same results once per metric.
- Values: ``1 true yes on`` switch on; ``0 false no off`` and empty leave everything as is;
  anything else leaves everything as is and prints one line on stderr.
- ``python -S`` (no :mod:`site`) processes no ``.pth`` file: there the switch is off.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

#: the environment variable that turns the switch on
VARIABLE = "CAPEVAL_AS_PYCOCOEVALCAP"
#: name of the file in site-packages (after setuptools' ``__editable__*.pth`` in sort order,
#: so an editable install's source folder is on ``sys.path`` when it runs)
PTH_NAME = "capeval_as_pycocoevalcap.pth"
#: its one line; ``site`` executes lines that start with ``import``. Unset or off (:data:`OFF`):
#: one dict lookup and a tuple test, nothing imported
PTH_LINE = (
    "import os; os.environ.get('CAPEVAL_AS_PYCOCOEVALCAP', '').strip().lower() not in ('', '0', 'false', 'no', 'off') "
    "and __import__('capeval.compat.pycocoevalcap.switch', fromlist=['_']).install_from_env()"
)
ON = frozenset({"1", "true", "yes", "on"})
OFF = frozenset({"", "0", "false", "no", "off"})
TARGET = "capeval.compat.pycocoevalcap"
#: the packages among the aliased submodules
_PACKAGES = frozenset({"tokenizer", "bleu", "meteor", "rouge", "cider", "spice"})
_reported = False


def _submodules() -> tuple[str, ...]:
    from capeval.compat.pycocoevalcap import SUBMODULES

    return SUBMODULES


def _real_spec() -> importlib.machinery.ModuleSpec | None:
    """The installed pycocoevalcap's spec, found by the path finder alone (never by ours)."""
    try:
        return importlib.machinery.PathFinder.find_spec("pycocoevalcap")
    except (ImportError, ValueError):
        return None


class _AliasLoader(importlib.abc.Loader):
    """Loads ``pycocoevalcap[.sub]``: the top level as an alias package, a submodule as the
    drop-in's own module object (put in ``sys.modules`` during ``exec_module``; the import
    system returns what ``sys.modules`` holds after it, language reference 5.4.1)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # the default module; a submodule's is replaced in exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        if name == "pycocoevalcap":
            target = importlib.import_module(TARGET)
            module.__doc__ = target.__doc__
            module.__capeval_alias__ = True  # type: ignore[attr-defined]  # install() sees it
            module.install = target.install  # type: ignore[attr-defined]
            return
        sys.modules[name] = importlib.import_module(TARGET + name[len("pycocoevalcap"):])


class SwitchFinder(importlib.abc.MetaPathFinder):
    """Resolves ``pycocoevalcap`` and its submodules to :mod:`capeval.compat.pycocoevalcap`."""

    def __init__(self) -> None:
        self._loader = _AliasLoader()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "pycocoevalcap" and not fullname.startswith("pycocoevalcap."):
            return None
        if fullname == "pycocoevalcap":
            real = _real_spec()
            spec = importlib.machinery.ModuleSpec(fullname, self._loader, is_package=True,
                                                  origin=real.origin if real else None)
            # the real location: METEOR's resource lookup (find_spec) and pkgutil see the wheel
            spec.submodule_search_locations = list(real.submodule_search_locations or []) if real else []
            return spec
        sub = fullname[len("pycocoevalcap."):]
        if sub in _submodules():
            return importlib.machinery.ModuleSpec(fullname, self._loader, is_package=sub in _PACKAGES)
        real = _real_spec()  # a helper the drop-in does not provide: the original file
        if real is None or not real.submodule_search_locations:
            return None
        parent = os.path.join(list(real.submodule_search_locations)[0], *sub.split(".")[:-1])
        return importlib.machinery.PathFinder.find_spec(fullname, [parent])


def active() -> bool:
    """True when this process's imports of pycocoevalcap are switched (a :class:`SwitchFinder`
    is on ``sys.meta_path``)."""
    return any(isinstance(f, SwitchFinder) for f in sys.meta_path)


def install_finder() -> None:
    """Put a :class:`SwitchFinder` first on ``sys.meta_path`` (once) and turn the drop-in's
    per-process memo on. Modules imported from the real pycocoevalcap before keep it."""
    from capeval.compat.pycocoevalcap._memo import enable

    if not active():
        sys.meta_path.insert(0, SwitchFinder())
    enable(True)


def install_from_env() -> bool:
    """What the ``.pth`` line calls when :data:`VARIABLE` is non-empty: switch on for an
    on-value, nothing for an off-value, one line on stderr for anything else."""
    global _reported
    value = os.environ.get(VARIABLE, "").strip().lower()
    if value in ON:
        install_finder()
        return True
    if value not in OFF and not _reported:  # site may run the line twice (lib64 -> lib in a venv)
        _reported = True
        print(f"capeval: {VARIABLE}={os.environ.get(VARIABLE)!r} is neither 1/true/yes/on nor 0/false/no/off: "
              "pycocoevalcap is NOT switched to capeval", file=sys.stderr)
    return False


def hook_files() -> list[str]:
    """Paths of :data:`PTH_NAME` in this interpreter's site-packages folders (normally one)."""
    import site

    dirs: list[str] = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # old virtualenv's site.py
        pass
    user = getattr(site, "ENABLE_USER_SITE", False) and site.getusersitepackages()
    if user:
        dirs.append(user)
    return [p for p in (os.path.join(d, PTH_NAME) for d in dict.fromkeys(dirs)) if os.path.isfile(p)]


def status() -> dict[str, Any]:
    """For ``capeval info``: the variable, whether it acts in this process, the hook file and
    where ``import pycocoevalcap`` resolves (without importing it)."""
    value = os.environ.get(VARIABLE)
    on = active()
    hooks = hook_files()
    real = _real_spec()
    out: dict[str, Any] = {
        "variable": VARIABLE,
        "value": value,
        "active": on,
        "hook": hooks[0] if hooks else None,
        "pycocoevalcap_resolves_to": TARGET if on else ("pycocoevalcap" if real else None),
    }
    if (value or "").strip().lower() in ON and not on:
        out["problem"] = (f"{VARIABLE} is set but the switch is not active: {PTH_NAME} is not in site-packages "
                          "(reinstall capeval with pip) or Python runs without site (-S)")
    return out
