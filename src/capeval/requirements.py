"""What each metric needs on this machine, all of it, checked without loading anything.

:func:`requirements` lists, for metric names (and their options, which change what is needed:
another ``backbone`` is another checkpoint, ``parser=spice`` needs spaCy instead of the FACTUAL
model), every :class:`Requirement`: Python packages of the metric's extra, NLTK data, WordNet,
spaCy pipelines, checkpoints of capeval's table, Hugging Face models, data folders, options that
have no default (``chair.annotations``), programs (Java) and servers (never contacted: shown as
unchecked). Each says whether it is present, where it was found or looked for, and the command or
option that provides it. :func:`check` raises one error naming everything that is missing;
``capeval check -m ...`` prints the table.

Nothing here imports torch, transformers, spaCy or a scorer module: packages are found with
``importlib.util.find_spec``, files by their paths (a checkpoint's first bytes are sniffed, never
hashed), Hugging Face models in the hub cache. The options a scorer takes are read from its
source with :mod:`ast`, so an unknown option is refused as ``capeval score`` refuses it.

Where a metric's resources are located lives next to the code that loads them (checkpoint
table, spaCy pipelines, CAPTURE's WordNet and NLTK data, AMBER's and CHAIR's annotation files,
SPICE's jars); this module asks those places, per scorer (:data:`_BY_FACTORY`).
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from capeval.errors import InputError, MissingDependencyError, ResourceError
# the rows and how each is found, and what each scorer needs: re-exported, this module is the public entry
from capeval.requirement_probes import (DISTRIBUTIONS, EXTRAS, KINDS, OPTIONAL, Requirement,  # noqa: F401
                                        _extra_dists, _pip_fix, backbone, checkpoint, clip_vocab, extra_packages,
                                        file_option, hub_model, hub_snapshot, module_present, nltk_data, nltk_find,
                                        nltk_search_path, option, package, server, spacy_model, wordnet)
from capeval.requirement_table import _BY_FACTORY, Finder, _nothing  # noqa: F401


def _module_tree(module: str) -> ast.Module | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return None
    try:
        return ast.parse(Path(origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def init_options(factory: str, _depth: int = 0) -> set[str] | None:
    """The keyword options of a scorer's constructor (``metrics`` left out), read from its source
    (the class's ``__init__``, else its base class's, followed through ``from ... import``);
    None when they cannot be read or any keyword is accepted (``**kwargs``)."""
    module, _, name = factory.partition(":")
    tree = _module_tree(module)
    if tree is None or _depth > 8:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if cls is None:
        for node in tree.body:  # the class imported into this module
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                alias = next(a for a in node.names if (a.asname or a.name) == name)
                relative = "." * node.level + (node.module or "")
                source = importlib.util.resolve_name(relative, module.rpartition(".")[0]) if node.level else node.module
                return init_options(f"{source}:{alias.name}", _depth + 1) if source else None
        return None
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is not None:
        if init.args.kwarg is not None:
            return None
        args = [a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)]
        return {a for a in args[1:] if a != "metrics"}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id not in ("object", "ScorerBase", "Protocol"):
            return init_options(f"{module}:{base.id}", _depth + 1)
    return set()  # ScorerBase has no constructor options


def _targets(names: list[str], options: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``options`` ({metric, alias or group: {key: value}}) keyed by group; a target that is not
    being checked, or a key its scorer does not take, is refused as ``capeval score`` refuses it."""
    from capeval import registry

    specs = registry.metrics()
    groups = {specs[n].group: n for n in names}
    out: dict[str, dict[str, Any]] = {}
    for target, opts in dict(options or {}).items():
        if not isinstance(opts, Mapping):
            raise InputError(f"options of {target} must be a mapping {{key: value}}, got {type(opts).__name__}")
        first = next(iter(opts), "*")
        key = registry.resolve_target(target)
        if key is None:
            raise InputError(f"option {target}.{first}: no metric or group named {target!r}; {registry.known_names()}")
        group = specs[key].group if key in specs else key
        if group not in groups:
            raise InputError(f"option {target}.{first}: {target} is not among the metrics being checked "
                             f"({', '.join(names)}); the option would be ignored")
        spec = specs[groups[group]]
        known = init_options(spec.factory)
        for opt in opts:
            if known is not None and opt not in known:
                raise InputError(f"option {target}.{opt}: {spec.group} has no option {opt!r}; valid options for "
                                 f"{spec.group}: {', '.join(sorted(known)) or 'none'}")
        out.setdefault(group, {}).update(dict(opts))
    return out


# -- the whole list --------------------------------------------------------------------------


def _merge(found: list[Requirement]) -> list[Requirement]:
    """One row per (kind, name): the metrics that need it joined, a package's extras joined."""
    rows: dict[tuple[str, str], Requirement] = {}
    for r in found:
        key = (r.kind, r.name)
        if key not in rows:
            rows[key] = r
            continue
        old = rows[key]
        metrics = tuple(dict.fromkeys(old.metrics + r.metrics))
        extras = tuple(dict.fromkeys(old.extras + r.extras))
        merged = replace(old, metrics=metrics, extras=extras, optional=old.optional and r.optional,
                         note=old.note if not (old.optional and not r.optional) else "")
        if old.kind == "package" and extras:
            dist = next((d for d, m in DISTRIBUTIONS.items() if m == old.name), old.name)
            merged = replace(merged, fix=_pip_fix(extras, dist))
        rows[key] = merged
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(rows.values(), key=lambda r: (order.get(r.kind, len(KINDS)), not r.missing))


def requirements(metrics: str | Iterable[str] | None, options: Mapping[str, Any] | None = None) -> list[Requirement]:
    """Every requirement of ``metrics`` (names, presets, comma lists; None: the default preset)
    under ``options`` (as ``capeval.score``'s, keyed by metric, alias or group; objects given as
    options, e.g. a loaded backbone, need nothing). Nothing is loaded, imported or contacted.

    Raises:
        UnknownNameError: an unknown metric. InputError: an option for a metric not checked, or
        one its scorer does not take.
    """
    from capeval import registry

    names = registry.expand(metrics)
    by_group = _targets(names, options)
    found: list[Requirement] = []
    for (factory, group), members in registry.groups(names).items():
        opts = {**registry.get(members[0]).kwargs, **by_group.get(group, {})}
        for m in members:
            opts.update(by_group.get(m, {}))
        for extra in dict.fromkeys(registry.get(m).extra for m in members if registry.get(m).extra):
            needing = tuple(m for m in members if registry.get(m).extra == extra)  # amber's yes/no metrics: none
            found += [replace(r, metrics=needing) for r in extra_packages(extra)]
        # a finder may name the members that need a row (AMBER's generative metrics); else all of them
        found += [r if r.metrics else replace(r, metrics=tuple(members))
                  for r in _BY_FACTORY.get(factory, _nothing)(members, opts)]
    return _merge(found)


class RequirementsMissing(MissingDependencyError, ResourceError):
    """What the metrics need and this machine lacks, all of it (``missing``: the requirements);
    both a :class:`MissingDependencyError` and a :class:`ResourceError`."""

    def __init__(self, message: str, missing: list[Requirement]):
        super().__init__(message)
        self.missing = missing


def missing_message(missing: list[Requirement]) -> str:
    """One line: how many are missing, for which metrics, and each with its fix (``; ``-separated)."""
    from capeval.registry import metrics as registered

    order = {n: i for i, n in enumerate(registered())}
    metrics = sorted(dict.fromkeys(m for r in missing for m in r.metrics), key=lambda m: order.get(m, len(order)))
    count = f"{len(missing)} requirement{'s' if len(missing) != 1 else ''}"
    return f"{count} missing for {', '.join(metrics)}: " + "; ".join(r.describe() for r in missing)


def check(metrics: str | Iterable[str] | None, options: Mapping[str, Any] | None = None) -> list[Requirement]:
    """:func:`requirements`, raising one :class:`RequirementsMissing` that names every missing
    requirement with its fix (one line) when any is missing; returns the list otherwise."""
    found = requirements(metrics, options)
    missing = [r for r in found if r.missing]
    if missing:
        raise RequirementsMissing(missing_message(missing), missing)
    return found
