"""Puts ``capeval_as_pycocoevalcap.pth`` at the root of capeval's wheels (everything else: pyproject.toml).

A ``.pth`` file runs only from a site-packages folder, i.e. the wheel's purelib root;
setuptools has no declarative way there (``data-files`` lands under ``sys.prefix``). So:

- ``build_py`` writes it into ``build_lib``'s root: ``pip install .`` and built wheels;
- ``editable_wheel`` (PEP 660, ``pip install -e .``) adds it to the editable wheel with its
  RECORD line: that build never copies ``build_lib`` into the wheel.

The file's name and line come from ``src/capeval/compat/pycocoevalcap/switch.py``
(``PTH_NAME``, ``PTH_LINE``), read without importing capeval (the build has only setuptools).
See docs/pycocoevalcap.md, "Inside lmms-eval and VLMEvalKit, no edit".
"""

from __future__ import annotations

import ast
import base64
import hashlib
import os
import zipfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

SWITCH = Path(__file__).resolve().parent / "src" / "capeval" / "compat" / "pycocoevalcap" / "switch.py"


def pth_file() -> tuple[str, bytes]:
    """(file name, content) of the switch's ``.pth``, from the constants in switch.py."""
    found = {}
    for node in ast.parse(SWITCH.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign):
            node = ast.Assign(targets=[node.target], value=node.value)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("PTH_NAME", "PTH_LINE"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["PTH_NAME"], (found["PTH_LINE"] + "\n").encode()


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        name, data = pth_file()
        os.makedirs(self.build_lib, exist_ok=True)
        Path(self.build_lib, name).write_bytes(data)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, pth_file()[0])]


class EditableWheelWithPth(editable_wheel):
    def run(self) -> None:
        super().run()
        name, data = pth_file()
        for wheel in Path(self.dist_dir).glob("*.editable-*.whl"):
            add_to_wheel(wheel, name, data)


def add_to_wheel(wheel: Path, name: str, data: bytes) -> None:
    """Rewrite ``wheel`` with ``name`` at its root and its line in ``*.dist-info/RECORD``."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename == name:
                continue
            payload = src.read(item.filename)
            if item.filename.endswith(".dist-info/RECORD"):
                payload = payload.rstrip(b"\n") + f"\n{name},sha256={digest},{len(data)}\n".encode()
            dst.writestr(item, payload)
        dst.writestr(name, data)
    tmp.replace(wheel)


if __name__ == "__main__":  # setuptools' build backend runs this file as __main__; tests import pth_file
    setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
