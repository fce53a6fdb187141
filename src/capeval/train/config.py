"""YAML training configs <-> dataclasses, shared by every ``capeval train`` command.

A config file is a YAML mapping whose keys are the config dataclass's fields (nested
mappings are not used: one flat list of settings per trainer). Unknown keys, values of the
wrong type and unreadable files are :class:`~capeval.errors.InputError` naming the file and
the key. Command-line overrides ``KEY=VALUE`` parse VALUE as YAML (``lr=3e-4``,
``mixed_precision=bf16``, ``max_train_images=null``). PyYAML is the only dependency.

YAML aliases (``*name``) are refused and nesting is bounded (:data:`capeval.io.nesting.MAX_DEPTH`):
a flat list of settings needs neither, and an alias bomb (nine levels of ``[*a, *a, ...]``,
a few hundred bytes) would otherwise expand to 9**9 values; both are one error naming the
file (or ``--set`` key) and line. Values quoted in errors are shortened
(:func:`capeval.errors.shown`).
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping, TypeVar

from capeval._optional import require
from capeval.errors import InputError, shown
from capeval.options import accepts_value

T = TypeVar("T")


def _yaml() -> Any:
    return require("yaml", extra="train", purpose="training configs (pip install pyyaml)")


def _loader(yaml: Any) -> Any:
    """A SafeLoader that refuses aliases and nesting deeper than MAX_DEPTH while composing,
    before anything is built (PyYAML's composer recurses once per level: a RecursionError
    with thousands of traceback lines otherwise)."""
    from capeval.io.nesting import MAX_DEPTH

    class Refused(yaml.composer.ComposerError):  # type: ignore[misc, name-defined]
        pass

    class ConfigLoader(yaml.SafeLoader):  # type: ignore[misc, name-defined]
        depth = 0
        refused = Refused

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise Refused(None, None, f"alias *{event.anchor} refused (aliases are not accepted in a config: "
                              "write the value out)", event.start_mark)
            if self.depth >= MAX_DEPTH:
                raise Refused(None, None, f"nested more than {MAX_DEPTH} levels deep (lists/mappings inside "
                              "each other); refused", event.start_mark)
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return ConfigLoader


def _safe_load(yaml: Any, text: str, source: str, lines: bool = True) -> Any:
    """``yaml.safe_load(text)`` through :func:`_loader`; its refusals name ``source`` (and the line)."""
    loader = _loader(yaml)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except loader.refused as exc:
        at = f" line {exc.problem_mark.line + 1}" if lines else ""
        raise InputError(f"{source}{at}: {exc.problem}") from None


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The mapping in a YAML file (an empty file is ``{}``); errors name the file and line."""
    yaml = _yaml()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"config file not found: {path}") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise InputError(f"config file {path} cannot be read: {exc}") from None
    try:
        data = _safe_load(yaml, text, f"config file {path}")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"config file {path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"config file {path}: expected a mapping of settings, got {type(data).__name__}")
    return data


def _fits(hint: Any, value: Any) -> bool:
    """Whether a setting's value fits its type: containers and unions here, the scalar types by
    the metric options' own check (``capeval.options.accepts_value``); other hints pass."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(a, value) for a in typing.get_args(hint))
    if origin in (list, tuple):
        return isinstance(value, (list, tuple))
    if origin is dict:
        return isinstance(value, dict)
    return accepts_value(hint, value) is not False


def build(cls: type[T], data: Mapping[str, Any], source: str = "config") -> T:
    """``cls(**data)`` after checking every key and value type against ``cls``'s fields."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise InputError(f"{source}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                         f"known: {', '.join(names)}")
    data = dict(data)
    for key, value in data.items():
        if isinstance(value, str) and _looks_numeric(value) and _fits(hints[key], 1.0) and not _fits(hints[key], ""):
            data[key] = value = float(value)  # YAML 1.1 reads 1e-4 (no dot) as a string
        if not _fits(hints[key], value):
            hint = hints[key]
            expected = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
            expected = expected or str(hint).replace("typing.", "").replace("NoneType", "None")
            raise InputError(f"{source}: setting {key}={shown(value)} should be {expected}")
    values = {k: (float(v) if hints[k] is float and isinstance(v, int) else v) for k, v in data.items()}
    return cls(**values)


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``["lr=3e-4", "seed=1"]`` -> ``{"lr": 0.0003, "seed": 1}`` (values parsed as YAML)."""
    yaml = _yaml()
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {pair!r}: expected KEY=VALUE, e.g. lr=1e-4")
        try:
            out[key.strip()] = _safe_load(yaml, value, f"--set {key.strip()}", lines=False) if value.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = value
    return out


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_config(cls: type[T], path: str | os.PathLike[str] | None = None, overrides: Mapping[str, Any] | None = None,
                **settings: Any) -> T:
    """A ``cls`` from a YAML file, then ``overrides``, then keyword settings (later wins)."""
    data: dict[str, Any] = read_yaml(path) if path is not None else {}
    data.update(overrides or {})
    data.update(settings)
    return build(cls, data, str(path) if path is not None else "config")


def to_dict(config: Any) -> dict[str, Any]:
    """The config as a plain dict (what checkpoints and ``config.yaml`` in a run folder record)."""
    return dataclasses.asdict(config)


def dump_yaml(config: Any) -> str:
    """The config as YAML text (keys in field order)."""
    return _yaml().safe_dump(to_dict(config), sort_keys=False, allow_unicode=True)


def config_from_args(cls: type[T], args: Any) -> T | None:
    """The settings of a ``capeval train`` command: ``--config FILE``, then ``--set K=V``
    overrides and ``--output-dir``; None once ``--print-config`` has printed them."""
    overrides = parse_overrides(args.set)
    if args.output_dir:
        overrides["output_dir"] = args.output_dir
    cfg = load_config(cls, args.config, overrides)
    if args.print_config:
        print(dump_yaml(cfg), end="")
        return None
    return cfg


def runtime_problems(cfg: Any) -> list[str]:
    """What is wrong with the settings every training command shares (``mixed_precision``,
    ``accelerate``, ``temperature``), as phrases for one error line."""
    problems = range_problems(cfg)
    if cfg.mixed_precision not in ("no", "bf16", "fp16"):
        problems.append(f"mixed_precision={shown(cfg.mixed_precision)} (no, bf16 or fp16)")
    if cfg.accelerate not in ("auto", "yes", "no"):
        problems.append(f"accelerate={shown(cfg.accelerate)} (auto, yes or no)")
    return problems


def range_problems(cfg: Any) -> list[str]:
    """Every numeric setting of ``cfg`` outside its declared range (``capeval.ranges.TRAIN_RANGES``
    under ``cfg.RANGES``; None means "not set" and passes), as ``"lr=0 out of range: ..."``."""
    from capeval.ranges import TRAIN_RANGES

    declared = TRAIN_RANGES[type(cfg).RANGES]
    problems = []
    for f in dataclasses.fields(cfg):
        value, bounds = getattr(cfg, f.name), declared.get(f.name)
        if bounds is not None and value is not None and not bounds.accepts(value):
            problems.append(f"{f.name}={shown(value)} out of range: {bounds.describe(f.name)}")
    return problems
