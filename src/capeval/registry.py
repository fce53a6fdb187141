"""Every metric and preset by canonical name: plain data, one table, no imports of metric code.

A :class:`MetricSpec` says where the scorer lives (``"module:Class"``), which inputs the
metric needs and which it accepts (the API and the CLI route inputs from these
declarations only), its range and direction, the extra to install, and the paper.
Specs that share a ``group`` are computed by one scorer instance (``bleu-1`` ... ``bleu-4``
come from one pass; ``clip-s`` and ``ref-clip-s`` share one CLIP). Adding a metric = one
module under :mod:`capeval.metrics` + one entry in :data:`_TABLE` (see ``docs/adding-a-metric.md``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Iterable

from capeval.errors import InputError, UnknownNameError
from capeval.registry_baselines import BASELINE_DEFAULTS, BASELINE_SPECS
from capeval.registry_detailed import DETAILED_SPECS
from capeval.registry_hallucination import HALLUCINATION_PRESETS, HALLUCINATION_SPECS
from capeval.registry_judges import JUDGE_SPECS
from capeval.registry_questions import QUESTION_SPECS

#: every input a scorer's ``score`` may take besides the candidates
INPUTS = frozenset({"references", "images", "videos", "segments", "skip_bad_items"})


@dataclass(frozen=True)
class MetricSpec:
    """How to build and feed one metric (data only).

    ``needs``: inputs without which the metric cannot be computed; ``accepts``: every input
    its scorer's ``score`` takes (a superset of ``needs``; default ``needs`` + references). ``range``: ``(low, high)`` of an
    item score, ``high`` may be the name of an option (``"w"``); ``direction``: ``"higher"``
    or ``"lower"`` is better, ``"none"`` for a diagnostic with no better side (correlated as
    it is, like ``"higher"``). ``kwargs``: constructor defaults fixed by the metric's name.
    """

    name: str
    factory: str
    group: str
    description: str
    needs: frozenset[str] = frozenset({"references"})
    accepts: frozenset[str] | None = None
    range: tuple[float, float | str] = (0.0, 1.0)
    direction: str = "higher"
    extra: str | None = None
    reference: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    in_all: bool = True  # False: left out of the ``all`` preset (needs programs outside Python)

    def __post_init__(self) -> None:
        if self.accepts is None:  # default: what it needs, plus references (used when given)
            object.__setattr__(self, "accepts", frozenset(self.needs) | {"references"})
        if not self.needs <= self.accepts <= INPUTS:
            raise ValueError(f"{self.name}: needs {set(self.needs)} must be within accepts {set(self.accepts)} within {set(INPUTS)}")
        if self.direction not in ("higher", "lower", "none"):
            raise ValueError(f"{self.name}: direction must be 'higher', 'lower' or 'none'")

    @property
    def higher_is_better(self) -> bool:
        """False only for ``lower``: the bench negates those scores; ``none`` is taken as it is."""
        return self.direction != "lower"

    @property
    def media(self) -> str | None:
        """``"images"``, ``"videos"`` or None: the medium the metric looks at."""
        return next((m for m in ("images", "videos") if m in self.needs), None)

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


_COCO = "Chen et al. 2015, Microsoft COCO Captions: Data Collection and Evaluation Server"
_HESSEL = "Hessel et al. 2021, CLIPScore: A Reference-free Evaluation Metric for Image Captioning"
_PACS = "Sarto et al. 2023, Positive-Augmented Contrastive Learning for Image and Video Captioning Evaluation"
_PACPP = ("Sarto et al. 2024, PAC-S++: Positive-Augmented Contrastive Learning for Vision-and-Language "
          "Evaluation and Training")
_HICE = "Zeng et al. 2024, HICEScore: A Hierarchical Metric for Image Captioning Evaluation (ACM MM 2024)"
_EMSCORE = "Shi et al. 2022, EMScore: Evaluating Video Captioning via Coarse-Grained and Fine-Grained Embedding Matching"

_TEXT = frozenset({"references"})
_IMAGE_IN = frozenset({"images", "references", "skip_bad_items"})
_VIDEO_IN = frozenset({"videos", "references", "segments", "skip_bad_items"})


def _aliases(name: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a for a in (name.replace("-", ""), name.replace("-", "_")) if a != name))


def _text_specs() -> list[MetricSpec]:
    specs = [
        MetricSpec(
            name=f"bleu-{n}", factory="capeval.metrics.bleu:Bleu", group="bleu",
            description=f"BLEU-{n}, pycocoevalcap variant ('closest' ref length, corpus brevity penalty); [0, 1]",
            reference="Papineni et al. 2002; " + _COCO, aliases=(f"bleu_{n}", f"bleu{n}"),
        )
        for n in range(1, 5)
    ]
    specs += [
        MetricSpec(
            name="meteor", factory="capeval.metrics.meteor.metric:Meteor", group="meteor", extra="meteor",
            description="METEOR 1.5 (-l en -norm; exact, stem, synonym, paraphrase), pure Python; [0, 1]",
            reference="Denkowski & Lavie 2014, Meteor Universal",
        ),
        MetricSpec(
            name="rouge-l", factory="capeval.metrics.rouge:RougeL", group="rouge-l",
            description="ROUGE-L F-measure (beta 1.2, max precision/recall over references); [0, 1]",
            reference="Lin 2004; " + _COCO, aliases=("rouge_l", "rougel"),
        ),
        MetricSpec(
            name="cider-d", factory="capeval.metrics.cider:CiderD", group="cider-d", range=(0.0, 10.0),
            description="CIDEr-D (n=4, sigma=6, clipped tf-idf, x10) as pycocoevalcap's Cider; [0, 10]",
            reference="Vedantam et al. 2015, CIDEr: Consensus-based Image Description Evaluation",
            aliases=("cider", "ciderd"),
        ),
        MetricSpec(
            name="spice", factory="capeval.metrics.spice.scorer:Spice", group="spice", extra="spice",
            description="SPICE 1.0 without Java: F1 of scene-graph tuples (spaCy parse + SPICE's rules, WordNet "
                        "synonyms from METEOR 1.5); [0, 1]",
            reference="Anderson et al. 2016, SPICE: Semantic Propositional Image Caption Evaluation",
        ),
        MetricSpec(
            name="spice-java", factory="capeval.metrics.spice.java:SpiceJava", group="spice-java",
            description="SPICE 1.0 by the official jar (needs Java and Stanford CoreNLP 3.6.0); [0, 1]",
            reference="Anderson et al. 2016, SPICE: Semantic Propositional Image Caption Evaluation",
            aliases=("spice_java", "spicejava"), in_all=False,
        ),
    ]
    return specs


#: defaults that both the registry's descriptions and the scorers read (one source of truth)
DEFAULTS: dict[str, dict[str, Any]] = {
    "clip-s": {"backbone": "openai/ViT-B-32", "w": 2.5},
    "pac-s": {"backbone": "pac-s/ViT-B-32", "w": 2.0},
    # aimagelab/pacscore's released evaluation code scores PAC-S++ with w=2.0; the paper
    # states 2.5 (ViT-B/32) / 3.0 (ViT-L/14), available as w="paper"
    "pac-s++": {"backbone": "pac-s++/ViT-B-32", "w": 2.0},
    "emscore": {"backbone": "openai/ViT-B-32"},
    "pac-s-video": {"backbone": "pac-s/ViT-B-32"},
    # the paper has no w; 2.5 is the scale of its reported numbers and of its 0.5 thresholds
    # (capeval.metrics.hice.explain); regions: SAM through transformers (the paper's MobileSAMv2
    # has no package: regions=mobilesamv2 when installed, regions=grid without weights)
    **BASELINE_DEFAULTS,  # mid, polos
    "hice-s": {"backbone": "alpha-clip/ViT-L-14-grit20m", "w": 2.5, "regions": "sam", "parser": "factual"},
}

_CLIP_FAMILIES = (
    ("clip-s", "clip", "capeval.metrics.clip_score:ClipScore", _HESSEL, "CLIP-S", ""),
    ("pac-s", "pac-s", "capeval.metrics.clip_score:PacScore", _PACS, "PAC-S", ""),
    ("pac-s++", "pac-s++", "capeval.metrics.clip_score:PacScorePlusPlus", _PACPP, "PAC-S++",
     " as aimagelab/pacscore's released evaluation code (option w=paper: the paper's 2.5 for ViT-B/32, "
     "3.0 for ViT-L/14)"),
)

_VIDEO_FAMILIES = (
    ("emscore", "capeval.metrics.emscore.scorer:EMScore", _EMSCORE, "EMScore"),
    ("pac-s-video", "capeval.metrics.emscore.scorer:PacSVideo", _PACS, "PAC-S (video, EMScore formulation)"),
)


def _clip_specs() -> list[MetricSpec]:
    out = []
    for name, group, factory, paper, label, w_note in _CLIP_FAMILIES:
        backbone, w = DEFAULTS[name]["backbone"], f"w={DEFAULTS[name]['w']}{w_note}"
        out.append(MetricSpec(
            name=name, factory=factory, group=group, needs=frozenset({"images"}), accepts=_IMAGE_IN,
            range=(0.0, "w"), extra="clip", reference=paper, aliases=_aliases(name),
            description=f"{label}: w*max(cos(text, image), 0), prompt 'A photo depicts ', {backbone}, {w}; "
                        "higher is better",
        ))
        out.append(MetricSpec(
            name=f"ref-{name}", factory=factory, group=group, needs=frozenset({"images", "references"}),
            accepts=_IMAGE_IN, range=(0.0, "w"), extra="clip", reference=paper,
            aliases=(f"ref{name}".replace("-", ""), f"ref_{name}".replace("-", "_")),
            description=f"Ref{label}: harmonic mean of {label} and max(0, max cos(candidate, reference)); "
                        f"{backbone}, {w}; higher is better",
        ))
    return out


def _hice_specs() -> list[MetricSpec]:
    d = DEFAULTS["hice-s"]
    setup = f"{d['backbone']}, regions={d['regions']}, FACTUAL-parser phrases, w={d['w']}"
    factory = "capeval.metrics.hice.scorer:HiceScore"
    return [
        MetricSpec(
            name="hice-s", factory=factory, group="hice", needs=frozenset({"images"}), accepts=_IMAGE_IN,
            range=(0.0, "w"), extra="clip", reference=_HICE, aliases=_aliases("hice-s"),
            description=f"HICE-S: w*hMean(global image-caption cos, local region-phrase P/R); {setup}; "
                        "higher is better (phrases: `capeval download factual`, or -O hice-s.parser=spice offline)",
        ),
        MetricSpec(
            name="ref-hice-s", factory=factory, group="hice", needs=frozenset({"images", "references"}),
            accepts=_IMAGE_IN, range=(0.0, "w"), extra="clip", reference=_HICE,
            aliases=("refhices", "ref_hice_s"),
            description=f"RefHICE-S: w*hMean(gITC, lITC, gTTC, lTTC) (max over references, pooled reference "
                        f"phrases); {setup}; higher is better",
        ),
    ]


def _video_specs() -> list[MetricSpec]:
    out = []
    for name, factory, paper, label in _VIDEO_FAMILIES:
        backbone = DEFAULTS[name]["backbone"]
        out.append(MetricSpec(
            name=name, factory=factory, group=name, needs=frozenset({"videos"}), accepts=_VIDEO_IN,
            range=(-1.0, 1.0), extra="video", reference=paper, aliases=_aliases(name),
            description=f"{label}: (F + coarse)/2 of caption tokens vs 10 uniformly sampled frames, IDF-weighted; "
                        f"{backbone}; higher is better",
        ))
        out.append(MetricSpec(
            name=f"ref-{name}", factory=factory, group=name, needs=frozenset({"videos", "references"}),
            accepts=_VIDEO_IN, range=(-1.0, 1.0), extra="video", reference=paper,
            aliases=(f"ref{name}".replace("-", ""), f"ref_{name}".replace("-", "_")),
            description=f"{label} with references: mean of the video part and the BERTScore-style reference part "
                        f"(max over references); {backbone}; higher is better",
        ))
    return out


_BRIDGE = ("Sarto et al. 2024, BRIDGE: Bridging Gaps in Image Captioning Evaluation with Stronger Visual Cues "
           "(ECCV 2024)")


def _bridge_specs() -> list[MetricSpec]:
    # in_all=False: no weights were published, it runs only with a trained checkpoint=
    return [MetricSpec(
        name="bridge", factory="capeval.metrics.bridge.scorer:BridgeScore", group="bridge",
        needs=frozenset({"images"}), accepts=_IMAGE_IN, range=(0.0, "w"), extra="train", in_all=False,
        reference=_BRIDGE,
        description="BRIDGE: 0.5*(CLIP-S + w*max(cos(t*, t), 0)), t* = mean of visual pseudo-captions from masked "
                    "template captions; needs checkpoint=PATH (train with `capeval train bridge`), w=2.5; "
                    "higher is better",
    )]


def _diagnostic_specs() -> list[MetricSpec]:
    # candidate-only: references are accepted and ignored; length/vocab have no better side
    # ("higher" only orders them)
    common: dict[str, Any] = dict(factory="capeval.metrics.diagnostics:Diagnostics", group="diagnostics",
                                  needs=frozenset(), accepts=frozenset({"references"}), reference=_PACPP)
    inf = float("inf")
    return [
        *[MetricSpec(name=f"rep-{n}", range=(0.0, inf), direction="lower", aliases=(f"rep{n}", f"rep_{n}"),
                     description=f"Rep-{n}: n-grams minus distinct n-grams per caption, mean (PAC-S++ Table 9; "
                                 "capeval's definition, the authors published none); lower is better", **common)
          for n in range(1, 5)],
        MetricSpec(name="incorrect", range=(0.0, 100.0), direction="lower", extra="spice",
                   description="% of captions whose last word is a preposition, conjunction, determiner or "
                               "possessive (spaCy tag; PAC-S++ Table 9); lower is better", **common),
        MetricSpec(name="length", range=(0.0, inf), direction="none",
                   description="mean words per caption (PTB-tokenised); a diagnostic, no better side", **common),
        MetricSpec(name="vocab", range=(0.0, inf), direction="none",
                   description="distinct words over all captions (per item: of the caption); a diagnostic, "
                               "no better side", **common),
    ]


_TABLE: tuple[MetricSpec, ...] = (*_text_specs(), *_clip_specs(), *_hice_specs(), *_video_specs(),
                                  *_bridge_specs(), *_diagnostic_specs(), *(MetricSpec(**e) for e in (
                                      *JUDGE_SPECS, *BASELINE_SPECS, *HALLUCINATION_SPECS, *DETAILED_SPECS, *QUESTION_SPECS)))

_PRESET_TABLE: dict[str, tuple[str, ...]] = {
    # the COCO caption evaluation's metrics; spice joined because its Kendall tau on
    # Flickr8k-Expert (tau-c) and Flickr8k-CF (tau-b) is within 1.0 point of SPICE's published
    # values (README, "SPICE without Java")
    "coco": ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d", "spice"),
    # the n-gram metrics alone: pycocoevalcap's numbers bit for bit, no spaCy
    "coco-ngram": ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d"),
    "bleu": ("bleu-1", "bleu-2", "bleu-3", "bleu-4"),
    "clip": ("clip-s", "ref-clip-s"),
    "pac": ("pac-s", "ref-pac-s", "pac-s++", "ref-pac-s++"),
    "learned": ("clip-s", "ref-clip-s", "pac-s", "ref-pac-s", "pac-s++", "ref-pac-s++"),
    "hice": ("hice-s", "ref-hice-s"),
    "diagnostics": ("rep-1", "rep-2", "rep-3", "rep-4", "incorrect", "length", "vocab"),
    "video": ("emscore", "ref-emscore", "pac-s-video", "ref-pac-s-video"),
    **HALLUCINATION_PRESETS,
}

_METRICS: dict[str, MetricSpec] = {}
_ALIASES: dict[str, str] = {}
_PRESETS: dict[str, tuple[str, ...]] = {}


def register(spec: MetricSpec) -> MetricSpec:
    """Add a metric spec at run time (plugins, tests); the built-in ones are in :data:`_TABLE`."""
    _METRICS[spec.name] = spec
    for alias in spec.aliases:
        _ALIASES[alias] = spec.name
    return spec


def register_preset(name: str, metrics: Iterable[str]) -> None:
    """Add a preset (a named list of metrics)."""
    _PRESETS[name] = tuple(metrics)


for _spec in _TABLE:
    register(_spec)
for _name, _members in _PRESET_TABLE.items():
    register_preset(_name, _members)


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


def resolve_target(name: str) -> str | None:
    """A metric name, alias or group name -> its canonical metric or group name (None: unknown)."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key in _METRICS or key in {s.group for s in _METRICS.values()}:
        return key
    return None


DEFAULT_PRESET = "coco"  # metrics=None (capeval.score, Evaluator) and `capeval score` without -m


def expand(names: str | Iterable[str] | None) -> list[str]:
    """Expand presets and comma lists into canonical metric names, keeping order, no repeats.

    Args:
        names: a name, preset or comma list, or a list of them; ``None``: the default preset.

    Returns:
        Canonical metric names, in the order given, each once.

    Raises:
        UnknownNameError: an unknown name (the message lists the known ones), or none given.
        InputError: ``names`` is not a string or a list of strings.
    """
    if names is None or isinstance(names, str):
        names = [DEFAULT_PRESET if names is None else names]
    names = list(names) if isinstance(names, Iterable) else [names]
    if any(not isinstance(n, str) for n in names):
        raise InputError(f"metrics must be a name, a comma list or a list of names, got {names!r}")
    out: list[str] = []
    all_presets = presets()
    for part in (p.strip() for entry in names for p in entry.split(",")):
        for m in all_presets.get(part.lower(), ()) or ((canonical(part),) if part else ()):
            if m not in out:
                out.append(m)
    if not out:
        raise UnknownNameError(f"no metric given (metric list {', '.join(map(repr, names)) or 'empty'}); {known_names()}")
    return out


def metrics() -> dict[str, MetricSpec]:
    """All registered metrics: ``{canonical name: MetricSpec}`` (description, inputs, range, direction, extra)."""
    return dict(_METRICS)


def presets() -> dict[str, tuple[str, ...]]:
    """The metric presets: ``{preset: (metric, ...)}`` (``all``: every metric that runs in Python alone)."""
    return {**_PRESETS, "all": tuple(n for n, s in _METRICS.items() if s.in_all)}


def groups(names: Iterable[str]) -> dict[tuple[str, str], list[str]]:
    """Group canonical names by (factory, group) so each scorer runs once."""
    out: dict[tuple[str, str], list[str]] = {}
    for n in names:
        spec = _METRICS[n]
        out.setdefault((spec.factory, spec.group), []).append(n)
    return out


def accepted_inputs(names: Iterable[str]) -> frozenset[str]:
    """Every input (``references``, ``images``, ...) that one of the metrics ``names`` reads."""
    return frozenset().union(*(_METRICS[n].accepts for n in names))


def check_inputs_used(given: Iterable[str], names: Iterable[str]) -> None:
    """An input that none of the metrics ``names`` reads is a mistake: a one-line :class:`InputError`."""
    names = list(names)
    stray = sorted(set(given) - accepted_inputs(names) - {"skip_bad_items"})
    if stray:
        raise InputError(f"{', '.join(stray)} given, but none of the metrics {', '.join(names)} uses them")


def check_references(names: Iterable[str], given: bool) -> None:
    """Metrics that need references, run without any: one line naming them and ``-r``."""
    needing = [n for n in names if "references" in _METRICS[n].needs]
    if needing and not given:
        raise InputError(f"{', '.join(needing)} need{'s' if len(needing) == 1 else ''} references and none were "
                         "given: pass -r/--references FILE (references= from Python), or choose reference-free "
                         "metrics (capeval list: needs -)")
