"""The package's shape: every module imports alone, no import cycle, no private name imported
across packages, modules of one job (size), a light ``import capeval``."""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "capeval"
# developer tools that are run by hand, not imported
NOT_IMPORTED = {"capeval.tokenize._gen_tables", "capeval.cli.__main__"}
MAX_LINES = 420


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _top_level_imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported capeval module, imported names, line) of statements run at import time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend((a.name, [], node.lineno) for a in node.names if a.name.startswith("capeval"))
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([mod] if mod else []))
                if mod.startswith("capeval"):
                    found.append((mod, [a.name for a in node.names], node.lineno))
            elif isinstance(node, (ast.If, ast.Try)):  # module-level conditionals run at import
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)

    visit(tree.body)
    return found


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for name, path in MODULES.items():
        for mod, names, _ in _top_level_imports(name, path):
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in MODULES else mod for n in names] or [mod]
            graph[name].update(t for t in targets if t in MODULES and t != name)
    return graph


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _all_imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every ``import``/``from`` in the file at any depth (functions, methods,
    conditionals), except under ``if TYPE_CHECKING:``, with relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for n in child.orelse:
                    visit(ast.Module(body=[n], type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, []) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                mod = child.module or ""
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    mod = ".".join(base + ([mod] if mod else []))
                found.append((mod, [a.name for a in child.names]))
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere in its code (``from m import sub``
    counts as importing ``m.sub`` when that is a module)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for mod, names in _all_imports(name, path):
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in modules else mod for n in names] or [mod]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return circles


def test_no_import_cycle():
    """No circle in the import graph of src/capeval, function-level imports included: a lazy
    import only hides a circle, it does not remove the shared job that causes it."""
    circles = import_circles(import_graph(MODULES))
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_cycle_check_sees_function_level_imports_and_skips_type_checking(tmp_path):
    pkg = tmp_path / "capeval"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from capeval.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")  # hidden in a function
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from capeval import d\n")
    (pkg / "d.py").write_text("import capeval.c\n")
    modules = {".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): p
               for p in pkg.rglob("*.py")}
    assert import_circles(import_graph(modules)) == [["capeval.a", "capeval.sub.b"]]


def test_no_private_name_imported_across_packages():
    bad = []
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("capeval"):
                source_pkg = node.module if f"{node.module}" in MODULES and MODULES[node.module].name == "__init__.py" \
                    else node.module.rpartition(".")[0]
                for a in node.names:
                    private = a.name.startswith("_") and not a.name.startswith("__")
                    if private and source_pkg != package and node.module != "capeval._version":
                        bad.append(f"{name}:{node.lineno} imports {node.module}.{a.name}")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") and node.value.id in {"vf", "em", "ck", "stats", "registry"}:
                bad.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_modules_hold_one_job():
    big = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in MODULES.items()}
    big = {n: k for n, k in big.items() if k > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them along their jobs): {big}"


@pytest.mark.parametrize("chunk", range(2))
def test_every_module_imports_alone(chunk):
    """Each module in a fresh interpreter: an order-dependent cycle or a missing import shows here."""
    names = [m for m in MODULES if m not in NOT_IMPORTED][chunk::2]

    def run(name: str) -> str | None:
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                              env={"HF_HUB_OFFLINE": "1", "PATH": "", "PYTHONPATH": str(SRC)})
        return None if proc.returncode == 0 else f"{name}: {proc.stderr.strip().splitlines()[-1]}"

    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [f for f in pool.map(run, names) if f]
    assert not failures, "\n".join(failures)


def test_import_capeval_is_light():
    code = ("import sys, capeval, capeval.registry, capeval.options, capeval.evaluator, capeval.functional; "
            "heavy = sorted(m for m in ('torch', 'scipy', 'PIL', 'av', 'transformers', 'pycocoevalcap') if m in sys.modules); "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
