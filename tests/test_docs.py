"""The documentation site builds with ``mkdocs build --strict``: a broken link, a page missing
from the nav or a docstring mkdocstrings cannot render fails the test suite (and so CI)."""

from __future__ import annotations

import os
import re
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
    api = (tmp_path / "site" / "api.html").read_text(encoding="utf-8")  # use_directory_urls: false
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


def test_api_page_renders_links_and_sections_not_roles(tmp_path):
    """The API page shows links where docstrings say ``:class:`~capeval.Report``` (no role left
    anywhere in the built site) and Args / Returns / Raises sections on the public API; the
    pages are ``name.html`` files, so the site works opened from disk."""
    import re

    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        require_module(module, f"{module} is not installed (pip install '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "true"}
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    import html as html_lib

    # any role left in what a reader sees: the page's text with tags stripped, whatever follows the
    # role (a code span, a backquote, or a span cut by a line break in the docstring)
    role = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj):")
    for page in site.rglob("*.html"):
        markup = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(encoding="utf-8"), flags=re.S)
        text = html_lib.unescape(re.sub(r"<[^>]+>", "", markup))
        found = role.search(text)
        assert not found, f"{page.name}: {text[max(0, found.start() - 80):found.end() + 40]!r}"
    api = (site / "api.html").read_text(encoding="utf-8")
    assert "<a href='#capeval.Report'><code>Report</code></a>" in api
    def sections(name: str) -> list[str]:  # the section titles of one object, up to the next object
        part = api.split(f'<h2 id="{name}"', 1)[1].split("<h2 id=", 1)[0]
        return re.findall(r'<span class="doc-section-title">(\w+):</span>', part)

    for name in ("capeval.score", "capeval.load", "capeval.scene_graphs", "capeval.download",
                 "capeval.expand_metrics"):
        assert sections(name)[:3] == ["Parameters", "Returns", "Raises"], (name, sections(name))
    assert sections("capeval.Evaluator")[:2] == ["Parameters", "Raises"]
    assert "Attributes" in sections("capeval.MetricResult")
    assert (site / "bench.html").is_file() and not (site / "bench" / "index.html").exists()


def test_index_links_every_page_of_the_site():
    """docs/index.md, the site's home, links every page of mkdocs.yml's nav (a newcomer finds
    CHAIR, compare or the training loop from it)."""
    nav = re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w/.-]+\.md)\)", index))
    missing = [page for page in nav if page != "index.md" and page not in linked]
    assert nav and not missing, missing
