"""Registry of metrics and presets by canonical name.

Pure data: listing metrics never imports torch or any metric module. A spec names its
factory as ``"module:Class"``; specs that share a ``group`` are computed by one scorer
instance (``bleu-1`` ... ``bleu-4`` come from one pass).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Iterable

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

    def build(self, metrics: Iterable[str] | None = None, **options: Any) -> Any:
        """Import the factory lazily and construct the scorer."""
        module_name, _, attr = self.factory.partition(":")
        if self.extra:
            from capeval._optional import require

            module = require(module_name, extra=self.extra, purpose=self.name)
        else:
            module = importlib.import_module(module_name)
        cls = getattr(module, attr)
        kwargs = {**self.kwargs, **options}
        return cls(metrics=tuple(metrics) if metrics else (self.name,), **kwargs)


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
        raise UnknownNameError(
            f"unknown metric {name!r}; known metrics: {', '.join(_METRICS)}; presets: {', '.join(_PRESETS)}"
        )
    return key


def get(name: str) -> MetricSpec:
    """The :class:`MetricSpec` of a metric name or alias."""
    return _METRICS[canonical(name)]


def expand(names: str | Iterable[str]) -> list[str]:
    """Expand presets and comma lists into canonical metric names, keeping order, no repeats."""
    if isinstance(names, str):
        names = [names]
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
        raise UnknownNameError("no metric named")
    return out


def metrics() -> dict[str, MetricSpec]:
    """All registered metric specs by canonical name."""
    return dict(_METRICS)


def presets() -> dict[str, tuple[str, ...]]:
    """Preset name -> metric names (``all`` = every registered metric)."""
    return {**_PRESETS, "all": tuple(_METRICS)}


def groups(names: Iterable[str]) -> dict[tuple[str, str], list[str]]:
    """Group canonical names by (factory, group) so each scorer runs once."""
    out: dict[tuple[str, str], list[str]] = {}
    for n in names:
        spec = _METRICS[n]
        out.setdefault((spec.factory, spec.group), []).append(n)
    return out
