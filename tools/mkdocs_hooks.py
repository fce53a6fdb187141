"""mkdocs hook: the Sphinx roles some docstrings use (``:class:`~capeval.Report```) become links on
the API page (``mkdocs.yml`` ``hooks:``).

mkdocstrings renders docstrings as Markdown, where a role is left as text before a code span
(``:class:<code>~capeval.Report</code>``). Each such span becomes a link to the object's anchor
when the page documents it (an ``id`` equal to the name, ``capeval.<name>`` or ending in
``.<name>`` and unique), else plain code; ``~`` keeps only the last component as the label,
as in Sphinx. tests/test_docs.py fails on any role left in the built site.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:py:)?(class|meth|func|attr|mod|data|exc|obj):<code>(~?)([\w.]+)(\(\))?</code>")
IDS = re.compile(r"""id=["']([\w.]+)["']""")


def _target(role: str, name: str, ids: set[str]) -> str | None:
    if name in ids:
        return name
    last = name.rsplit(".", 1)[-1]
    ends = sorted(i for i in ids if i.endswith("." + last))
    if role in ("meth", "attr"):  # a member: only an unambiguous one (Evaluator.score is not capeval.score)
        return ends[0] if len(ends) == 1 else None
    if f"capeval.{name}" in ids:
        return f"capeval.{name}"
    return ends[0] if len(ends) == 1 else None


def on_page_content(html: str, **kwargs: Any) -> str:
    ids = set(IDS.findall(html))

    def link(m: re.Match[str]) -> str:
        tilde, name, call = m.group(2), m.group(3), m.group(4) or ""
        label = (name.rsplit(".", 1)[-1] if tilde else name) + call
        target = _target(m.group(1), name, ids)
        code = f"<code>{label}</code>"
        return f"<a href='#{target}'>{code}</a>" if target else code

    return ROLE.sub(link, html)
