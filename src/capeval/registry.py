"""Registry of metrics and presets by canonical name.

Pure data: listing metrics never imports torch or any metric module. A spec names its
factory as ``"module:Class"``; specs that share a ``group`` are computed by one scorer
instance (``bleu-1`` ... ``bleu-4`` come from one pass).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from capeval.errors import UnknownNameError


@dataclass(frozen=True)
class MetricSpec:
    """How to build a metric: factory import path, group, needs, extra, paper."""

    name: str
    factory: str
    group: str
    description: str
    needs: frozenset[str] = frozenset({"references"})
    extra: str | None = None
    reference: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    higher_is_better: bool = True
    aliases: tuple[str, ...] = ()

    def factory_class(self) -> Any:
        """The scorer class, imported lazily (an error names the extra when it is missing)."""
        module_name, _, attr = self.factory.partition(":")
        if self.extra:
            from capeval._optional import require

            module = require(module_name, extra=self.extra, purpose=self.name)
        else:
            module = importlib.import_module(module_name)
        return getattr(module, attr)

    def build(self, metrics: Iterable[str] | None = None, **options: Any) -> Any:
        """Import the factory lazily and construct the scorer."""
        cls = self.factory_class()
        kwargs = {**self.kwargs, **options}
        return cls(metrics=tuple(metrics) if metrics else (self.name,), **kwargs)

    def option_types(self) -> dict[str, Any] | None:
        """Constructor options of the factory -> type hint (``None`` when any keyword is accepted).

        Read from the factory's signature, so the list can never drift from the code.
        """
        import inspect
        import typing

        cls = self.factory_class()
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


_METRICS: dict[str, MetricSpec] = {}
_ALIASES: dict[str, str] = {}
_PRESETS: dict[str, tuple[str, ...]] = {}

_COCO = "Chen et al. 2015, Microsoft COCO Captions: Data Collection and Evaluation Server"


def register(spec: MetricSpec) -> MetricSpec:
    """Add a metric spec (idempotent for the same name)."""
    _METRICS[spec.name] = spec
    for alias in spec.aliases:
        _ALIASES[alias] = spec.name
    return spec


def register_preset(name: str, metrics: Iterable[str]) -> None:
    _PRESETS[name] = tuple(metrics)


for _n in range(1, 5):
    register(
        MetricSpec(
            name=f"bleu-{_n}",
            factory="capeval.metrics.bleu:Bleu",
            group="bleu",
            description=f"BLEU-{_n}, pycocoevalcap variant ('closest' ref length, corpus brevity penalty); [0, 1]",
            reference="Papineni et al. 2002; " + _COCO,
            aliases=(f"bleu_{_n}", f"bleu{_n}"),
        )
    )
register(
    MetricSpec(
        name="meteor",
        factory="capeval.metrics.meteor_scorer:Meteor",
        group="meteor",
        description="METEOR 1.5 (-l en -norm; exact, stem, synonym, paraphrase), pure Python; [0, 1]",
        reference="Denkowski & Lavie 2014, Meteor Universal",
    )
)
register(
    MetricSpec(
        name="rouge-l",
        factory="capeval.metrics.rouge:RougeL",
        group="rouge-l",
        description="ROUGE-L F-measure (beta 1.2, max precision/recall over references); [0, 1]",
        reference="Lin 2004; " + _COCO,
        aliases=("rouge_l", "rougel"),
    )
)
register(
    MetricSpec(
        name="cider-d",
        factory="capeval.metrics.cider:CiderD",
        group="cider-d",
        description="CIDEr-D (n=4, sigma=6, clipped tf-idf, x10) as pycocoevalcap's Cider; [0, 10]",
        reference="Vedantam et al. 2015, CIDEr: Consensus-based Image Description Evaluation",
        aliases=("cider", "ciderd"),
    )
)
register_preset("coco", ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d"))
register_preset("bleu", ("bleu-1", "bleu-2", "bleu-3", "bleu-4"))


def _load_plugins() -> None:
    """Spec tables of the optional metric families (data only, no heavy imports)."""
    for module in ("capeval.clip.specs", "capeval.video.specs"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not exc.name or not module.startswith(exc.name):
                raise


_load_plugins()


def canonical(name: str) -> str:
    """Canonical metric name for ``name`` (case- and alias-insensitive)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _METRICS:
        raise UnknownNameError(f"unknown metric {name!r}; {known_names()}")
    return key


def known_names() -> str:
    """``known metrics: ...; presets: ...`` for error messages (``all`` included)."""
    return f"known metrics: {', '.join(_METRICS)}; presets: {', '.join(presets())}"


def get(name: str) -> MetricSpec:
    """The :class:`MetricSpec` of a metric name or alias."""
    return _METRICS[canonical(name)]


def expand(names: str | Iterable[str]) -> list[str]:
    """Expand presets and comma lists into canonical metric names, keeping order, no repeats."""
    if isinstance(names, str):
        names = [names]
    names = list(names)
    out: list[str] = []
    for entry in names:
        for part in entry.split(","):
            part = part.strip()
            if not part:
                continue
            key = part.lower()
            all_presets = presets()
            members = all_presets[key] if key in all_presets else (canonical(part),)
            for m in members:
                if m not in out:
                    out.append(m)
    if not out:
        raise UnknownNameError(f"no metric given (metric list {', '.join(map(repr, names)) or 'empty'}); {known_names()}")
    return out


def metrics() -> dict[str, MetricSpec]:
    """All registered metric specs by canonical name."""
    return dict(_METRICS)


def presets() -> dict[str, tuple[str, ...]]:
    """Preset name -> metric names (``all`` = every registered metric)."""
    return {**_PRESETS, "all": tuple(_METRICS)}


def _accepts(hint: Any, value: Any) -> bool | None:
    """Whether ``value`` fits ``hint``: True/False, or None when the hint is beyond this check."""
    import os
    import types
    import typing

    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        answers = [_accepts(a, value) for a in typing.get_args(hint)]
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


def check_options(names: Iterable[str], options: Any, others: str = "error") -> dict[str, dict[str, Any]]:
    """Validate ``options`` ({metric, alias or group: {key: value}}) for the metrics ``names``.

    Returns the options keyed by canonical metric or group name. An unknown target, a
    target not among ``names``, an option the factory does not take or a value of the wrong
    type raises :class:`InputError` naming the option and listing the valid ones. Options
    for a registered metric outside ``names`` raise too (``others="error"``, the CLI: such an
    option would be ignored) or are dropped (``others="ignore"``: one options mapping shared
    by several calls). Imports the factory classes (to read their signatures) but builds
    nothing.
    """
    from capeval.errors import InputError

    names = list(names)
    chosen_groups = {_METRICS[n].group: n for n in names}
    out: dict[str, dict[str, Any]] = {}
    for target, opts in dict(options or {}).items():
        key = str(target).strip().lower()
        first = next(iter(opts), "*") if isinstance(opts, Mapping) else "*"
        if key in chosen_groups:
            spec = _METRICS[chosen_groups[key]]
            canon = key
        else:
            key = _ALIASES.get(key, key)
            if key not in _METRICS and key not in {s.group for s in _METRICS.values()}:
                raise InputError(f"option {target}.{first}: no metric or group named {target!r}; {known_names()}")
            if key in _METRICS and key not in names and _METRICS[key].group in chosen_groups:
                key = _METRICS[key].group  # e.g. ref-clip-s.w with only clip-s: the one scorer takes it
            elif key not in names:
                if others == "ignore":
                    continue
                raise InputError(
                    f"option {target}.{first}: {target} is not among the metrics being computed ({', '.join(names)}); "
                    "the option would be ignored"
                )
            spec = _METRICS[chosen_groups[key]] if key in chosen_groups else _METRICS[key]
            canon = key
        if not isinstance(opts, Mapping):
            raise InputError(f"options of {target} must be a mapping {{key: value}}, got {type(opts).__name__}")
        types_ = spec.option_types()
        for opt, value in opts.items():
            if types_ is None:
                continue
            if opt not in types_:
                raise InputError(
                    f"option {target}.{opt}: {spec.group} has no option {opt!r}; "
                    f"valid options for {spec.group}: {', '.join(types_) or 'none'}"
                )
            if _accepts(types_[opt], value) is False:
                raise InputError(
                    f"option {target}.{opt}: expected {_hint_text(types_[opt])}, got {value!r} ({type(value).__name__})"
                )
        out.setdefault(canon, {}).update(dict(opts))
    return out


def groups(names: Iterable[str]) -> dict[tuple[str, str], list[str]]:
    """Group canonical names by (factory, group) so each scorer runs once."""
    out: dict[tuple[str, str], list[str]] = {}
    for n in names:
        spec = _METRICS[n]
        out.setdefault((spec.factory, spec.group), []).append(n)
    return out
