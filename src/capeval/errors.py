"""Exceptions raised by capeval. All derive from :class:`CapevalError`."""

from __future__ import annotations


class CapevalError(Exception):
    """Base class of every error capeval raises on purpose."""


class InputError(CapevalError, ValueError):
    """Bad user input; ``item_id`` names the offending item when there is one."""

    def __init__(self, message: str, item_id: str | None = None):
        super().__init__(message)
        self.item_id = item_id


class UnknownNameError(CapevalError, KeyError):
    """A metric, preset, benchmark or checkpoint name that is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class MissingDependencyError(CapevalError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class ResourceError(CapevalError, RuntimeError):
    """A model checkpoint, data file or resource is missing, corrupt or has the wrong hash."""


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` for an error message, at most ``limit`` characters: nested or shared
    containers (a YAML alias bomb expands to 9**9 elements) are cut while being formatted,
    never expanded first."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother = 3, limit, limit
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 4
    text = r.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
