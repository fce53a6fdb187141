"""No silent last-wins on the command line (issue 47 item 1).

argparse's plain ``store`` keeps the last of repeated options: ``score -m bleu-4 -m rouge-l``
scored ROUGE-L alone. After the parser is built, :func:`enforce` walks every (sub)parser and
gives each option a meaning when repeated:

- a list option (``nargs='+'`` / ``'*'``, such as ``--items`` or ``compare -c``) accumulates: each
  use extends the list, the first replacing the default;
- a comma list (``-m``, declared with ``action=CommaList``) accumulates too: ``-m a -m b,c`` is
  ``-m a,b,c``;
- any other value option is refused when given twice, as an argparse usage error naming it;
- flags (``store_true``, ``count``, ...) and ``append`` options (``-O``, ``-B``, ``--set``) are left
  as they are: a flag repeated means the same, and ``append`` already accumulates.
"""

from __future__ import annotations

import argparse
import weakref
from typing import Any, Sequence


class _OncePerParse(argparse.Action):
    """Remembers the namespace it last wrote to, so a second use within one parse is known (a
    namespace is not hashable; a weak reference to it is the parse's identity)."""

    _last: Any = None

    def _seen(self, namespace: argparse.Namespace) -> bool:
        seen = self._last is not None and self._last() is namespace
        self._last = weakref.ref(namespace)
        return seen


class StoreOnce(_OncePerParse, argparse._StoreAction):
    """``store``, refused when the option is given a second time."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if self._seen(namespace):
            raise argparse.ArgumentError(self, "given more than once; give it once")
        setattr(namespace, self.dest, values)


class ExtendList(_OncePerParse, argparse._StoreAction):
    """A list option whose uses add up (the first replacing the default)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Sequence[Any],
                 option_string: str | None = None) -> None:
        before = list(getattr(namespace, self.dest) or []) if self._seen(namespace) else []
        setattr(namespace, self.dest, before + list(values))


class CommaList(_OncePerParse, argparse._StoreAction):
    """A comma-separated list in one string whose uses add up: ``-m a -m b,c`` -> ``"a,b,c"``
    (the first use replacing the default)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if self._seen(namespace) and getattr(namespace, self.dest):
            values = f"{getattr(namespace, self.dest)},{values}"
        setattr(namespace, self.dest, values)


def enforce(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every option of ``parser`` and its subparsers a repeat meaning (module docstring)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                enforce(sub)
        elif action.option_strings and type(action) is argparse._StoreAction:
            action.__class__ = ExtendList if action.nargs in ("+", "*") else StoreOnce
    return parser
