"""Validation of metric options, once, before anything is built.

A scorer's options are its constructor's keyword parameters: the names, types and defaults
are read from the signature, so this list can never drift from the code. Options are given
per metric, alias or group (``{"cider-d": {"sigma": 6.0}}``, ``{"clip": {"w": 2.0}}``) or
shared by every scorer that takes them (``device``, ``workers``).
"""

from __future__ import annotations

import inspect
import os
import types
import typing
from typing import Any, Iterable, Mapping

from capeval import registry
from capeval.devices import check_device
from capeval.errors import InputError, shown
from capeval.ranges import metric_range
from capeval.registry import MetricSpec

#: options every scorer that has the stage receives from ``Evaluator(device=..., workers=...)``
SHARED = ("device", "workers")


def option_types(spec: MetricSpec) -> dict[str, Any] | None:
    """Constructor options of the metric's scorer -> type hint (None when any keyword is accepted)."""
    cls = spec.factory_class()
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # an unresolvable annotation: check names only
        hints = {}
    return {
        name: hints.get(name, Any)
        for name, p in params.items()
        if name != "metrics" and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }


def option_defaults(spec: MetricSpec) -> dict[str, Any]:
    """Constructor option -> default value (options without a default are left out)."""
    params = inspect.signature(spec.factory_class()).parameters
    return {n: p.default for n, p in params.items() if n != "metrics" and p.default is not inspect.Parameter.empty}


def accepts_value(hint: Any, value: Any) -> bool | None:
    """Whether ``value`` fits ``hint``: True/False, or None when the hint is beyond this check."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        answers = [accepts_value(a, value) for a in typing.get_args(hint)]
        if True in answers:
            return True
        return None if None in answers else False
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is os.PathLike or hint is os.PathLike:
        return isinstance(value, os.PathLike)
    return None


def _hint_text(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if not hasattr(hint, "__args__") else None
    return text or str(hint).replace("typing.", "")


def check_options(
    metrics: str | Iterable[str] | None, options: Mapping[str, Mapping[str, Any]] | None = None, *, strict: bool = False
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Expand ``metrics`` (None: the default preset) and validate ``options`` before any heavy work.

    Returns ``(canonical metric names, options keyed by canonical metric/group)``. Unknown
    metrics, unknown, ill-typed or out-of-range options and unusable ``device`` values raise
    :class:`~capeval.errors.CapevalError` subclasses with a one-line message. ``strict``:
    also refuse options for registered metrics that are not computed (the CLI does; the
    library ignores them, so one options mapping can serve several calls). Also importable
    as ``capeval.api.check_options``, where it used to live.
    """
    names = registry.expand(metrics)
    checked = validate_options(names, options, others="error" if strict else "ignore")
    for opts in checked.values():
        if "device" in opts:
            opts["device"] = check_device(opts["device"])
    return names, checked


def split_keyword_options(
    options: Mapping[str, Mapping[str, Any]] | None, more: Mapping[str, Any]
) -> tuple[dict[str, Mapping[str, Any]], dict[str, Any]]:
    """``options`` plus keyword arguments -> (per-target options, options shared by every scorer).

    A mapping keyword value is one metric's options (``cider_d={"sigma": 6.0}``), any other
    value is shared (``batch_size=32``). An option given both ways with different values is
    refused (never last-wins).
    """
    per_target: dict[str, Mapping[str, Any]] = dict(options or {})
    shared: dict[str, Any] = {}
    for key, value in more.items():
        if not isinstance(value, Mapping):
            shared[key] = value
            continue
        target = key.replace("_", "-")
        before = per_target.get(target)
        if isinstance(before, Mapping):
            clash = [k for k in value if k in before and before[k] != value[k]]
            if clash:
                raise InputError(f"option {target}.{clash[0]} is given twice with different values "
                                 f"({shown(before[clash[0]])} in options, {shown(value[clash[0]])} as {key}=)")
            value = {**before, **value}
        per_target[target] = value
    return per_target, shared


def validate_options(names: Iterable[str], options: Any, others: str = "error") -> dict[str, dict[str, Any]]:
    """Validate ``options`` ({metric, alias or group: {key: value}}) for the metrics ``names``.

    Returns the options keyed by canonical metric or group name. An unknown target, a
    target not among ``names``, an option the factory does not take or a value of the wrong
    type or outside its declared range (:mod:`capeval.ranges`) raises :class:`InputError`
    naming the option and listing the valid ones (or stating the range). Options
    for a registered metric outside ``names`` raise too (``others="error"``, the CLI: such an
    option would be ignored) or are dropped (``others="ignore"``: one options mapping shared
    by several calls). Imports the factory classes (to read their signatures) but builds
    nothing.
    """
    names = list(names)
    specs = registry.metrics()
    chosen_groups = {specs[n].group: n for n in names}
    out: dict[str, dict[str, Any]] = {}
    for target, opts in dict(options or {}).items():
        first = next(iter(opts), "*") if isinstance(opts, Mapping) else "*"
        key = registry.resolve_target(target)
        if key is None:
            raise InputError(f"option {target}.{first}: no metric or group named {target!r}; {registry.known_names()}")
        if key in chosen_groups:
            spec = specs[chosen_groups[key]]
        elif key in specs and key not in names and specs[key].group in chosen_groups:
            key = specs[key].group  # e.g. ref-clip-s.w with only clip-s: the one scorer takes it
            spec = specs[chosen_groups[key]]
        elif key not in names:
            if others == "ignore":
                continue
            raise InputError(
                f"option {target}.{first}: {target} is not among the metrics being computed ({', '.join(names)}); "
                "the option would be ignored"
            )
        else:
            spec = specs[key]
        if not isinstance(opts, Mapping):
            raise InputError(f"options of {target} must be a mapping {{key: value}}, got {type(opts).__name__}")
        types_ = option_types(spec)
        for opt, value in opts.items():
            if types_ is None:
                continue
            if opt not in types_:
                raise InputError(
                    f"option {target}.{opt}: {spec.group} has no option {opt!r}; "
                    f"valid options for {spec.group}: {', '.join(types_) or 'none'}"
                )
            if accepts_value(types_[opt], value) is False:
                raise InputError(
                    f"option {target}.{opt}: expected {_hint_text(types_[opt])}, got {shown(value)} ({type(value).__name__})"
                )
            bounds = metric_range(spec.group, opt)
            if bounds is not None and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and not bounds.accepts(value):
                raise InputError(f"option {target}.{opt}={shown(value)} out of range: {bounds.describe(opt)}")
        out.setdefault(key, {}).update(dict(opts))
    return out


def takes(spec: MetricSpec, option: str) -> bool:
    """Whether the metric's scorer has the constructor option ``option``."""
    types_ = option_types(spec)
    return types_ is None or option in types_
