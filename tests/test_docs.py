"""The documentation site builds with ``mkdocs build --strict``: a broken link, a page missing
from the nav or a docstring mkdocstrings cannot render fails the test suite (and so CI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _reference import require_module

ROOT = Path(__file__).resolve().parents[1]


def test_site_builds_strict_and_offline(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        require_module(module, f"{module} is not installed (pip install '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "true"}
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "capeval.score" in api and "Evaluator" in api  # the reference was generated from docstrings
    for page in (tmp_path / "site").rglob("*.html"):  # no web fonts fetched by readers of an offline site
        assert "fonts.googleapis.com" not in page.read_text(encoding="utf-8"), page


def test_every_docs_page_is_in_the_nav():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for n in node:
                yield from pages(n)
        elif isinstance(node, dict):
            for n in node.values():
                yield from pages(n)

    listed = set(pages(nav))
    present = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert listed == present


def test_spice_page_names_the_categories_the_output_uses():
    """The docs name SPICE's tuple categories as the result's extras (and SPICE's Java) do:
    ``Cardinality``, not ``Count``."""
    import re

    from capeval.metrics.spice.tuples import CATEGORIES

    text = (ROOT / "docs" / "metrics" / "spice.md").read_text(encoding="utf-8")
    listed = re.search(r"per-category breakdown\n\((.*?)[:;]", text, re.S)
    assert listed, "docs/metrics/spice.md must list the categories after 'per-category breakdown'"
    assert {w.strip() for w in listed.group(1).split(",")} == set(CATEGORIES)
