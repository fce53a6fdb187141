"""Benchmark protocol objects: what a loader returns and what a benchmark computes.

A :class:`Benchmark` knows its files, citation, protocol text and expected checksums.
``load(root, seed)`` returns a :class:`Loaded`: one or more *settings* (scoring corpora,
e.g. FOIL with 1 or 4 references, the five random reference draws of Pascal-50S), each an
ordered mapping ``key -> ScoreItem``. Every item is scored once per setting and all the
statistics of the benchmark reuse those scores. ``statistics(loaded, scores)`` turns the
per-item scores into :class:`StatSpec` objects whose ``fn(unit_indices)`` computes the
statistic on the full data (``None``) or on a bootstrap resample of units.

Why settings are not deduplicated by text: corpus-level metric statistics (CIDEr-D's
document frequencies) depend on how often each reference list occurs in the corpus the
reference scripts score. Scoring exactly the protocol's items keeps those multiplicities,
so CIDEr-D matches the reference code; rows that share an item (the three expert ratings
of one Flickr8k pair, the with/without-Human THumB subsets) share its score.
"""

from __future__ import annotations


import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping

import numpy as np

from capeval.errors import InputError, ResourceError, UnknownNameError
from capeval.hashing import file_digest
from capeval.result import Signature


@dataclass(frozen=True)
class ScoreItem:
    """One thing to score: a candidate, its references and its image/video (relative name)."""

    candidate: str
    references: tuple[str, ...] = ()
    image: str | None = None
    video: str | None = None
    segment: tuple[float, float] | None = None  # seconds, for video segments


@dataclass
class Setting:
    """A scoring corpus of a benchmark (items scored together, in order)."""

    name: str
    items: dict[str, ScoreItem]
    with_references: bool = True
    description: str = ""


@dataclass
class StatSpec:
    """A statistic of one metric: ``fn(None)`` on all data, ``fn(units)`` on a resample.

    ``n`` is the number of rows (judgments) it uses, ``n_units`` the number of resampling
    units, ``strata`` optional stratum labels per unit. ``bootstrap=False`` for counts.
    ``setting`` names the scoring corpus (for the metric signature).
    """

    name: str
    fn: Callable[[np.ndarray | None], float]
    n: int
    n_units: int
    setting: str
    strata: np.ndarray | None = None
    bootstrap: bool = True
    headline: bool = False


@dataclass
class Loaded:
    """A loaded benchmark: its settings, protocol data, file hashes and notes."""

    benchmark: "Benchmark"
    settings: dict[str, Setting]
    data: Any
    files: dict[str, str]  # relative path -> sha256
    info: dict[str, Any] = field(default_factory=dict)
    root: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # constructor options the protocol fixes per metric group (e.g. the video benchmarks' IDF
    # corpus); the runner applies them under the user's own options, which win
    metric_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # per-item extras of each metric ``{metric: {setting: extras}}``, kept only for benchmarks that
    # set ``wants_extras`` (HAT's localization); ``extras`` is the current metric's, set by the runner
    item_extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def signature(self) -> Signature:
        b = self.benchmark
        params: dict[str, Any] = {"protocol": b.protocol_id}
        params.update({k: v for k, v in sorted(self.options.items())})
        params["files"] = ",".join(f"{Path(p).name}:{h[:12]}" for p, h in sorted(self.files.items()))
        if self.info.get("modified_files"):
            params["data"] = "modified"
        from capeval._version import __version__

        return Signature({"benchmark": b.name, **params, "version": __version__})


# the scale a table's statistics are printed in unless the benchmark names its own (Benchmark.scale)
DEFAULT_SCALE = "correlations and accuracies x100, counts as counted"


class Benchmark:
    """Base class of registered benchmarks. Subclasses set the class attributes."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    protocol: ClassVar[str] = ""
    protocol_id: ClassVar[str] = "v1"
    modality: ClassVar[str] = "image"  # "image" or "video"
    # checksum list(s) in capeval/data/checksums for the benchmark's images
    image_checksums: ClassVar[tuple[str, ...]] = ()
    # relative file -> expected sha256 (None: unknown, recorded only)
    files: ClassVar[dict[str, str | None]] = {}
    human_label: ClassVar[str] = "human score"
    # loader options (``capeval bench -B NAME.KEY=VALUE``): a capeval.ranges.Range for a number,
    # a tuple of the allowed values otherwise; :func:`check_loader_options` refuses any other
    loader_options: ClassVar[dict[str, Any]] = {}
    # statistics that read the metrics' per-item extras (``Loaded.extras``)
    wants_extras: ClassVar[bool] = False
    # the scale of the statistics where it is not "correlations and accuracies x100" (printed
    # under every table of the benchmark: text, HTML, and stored with the JSON)
    scale: ClassVar[str] = ""

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        raise NotImplementedError

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        """Statistics from per-item scores (``scores[setting]`` aligned with its items)."""
        raise NotImplementedError

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
        """(human, metric) per row for the report's heatmap, or None."""
        return None

    # -- helpers for subclasses -----------------------------------------------------
    def path(self, root: Path, rel: str, alternatives: Iterable[str] = ()) -> Path:
        """The file ``root/rel`` (or the first existing alternative), or a clear error."""
        tried = [rel, *alternatives]
        for r in tried:
            p = root / r
            if p.is_file():
                return p
        looked = ", ".join(str(root / r) for r in tried)
        raise ResourceError(
            f"{self.name}: missing data file {rel!r} (looked for {looked}); run `capeval download {self.name}` "
            f"(it fetches the files or says where to get them), or pass --data-root DIR / set CAPEVAL_DATA to "
            f"the folder holding the benchmark files"
        )

    def checksum_files(self, root: Path, paths: Mapping[str, Path], info: dict[str, Any]) -> dict[str, str]:
        """sha256 of every file read; compare with the registered hashes (warn on mismatch)."""
        import warnings

        out: dict[str, str] = {}
        modified = []
        for rel, p in paths.items():
            digest = sha256_file(p)
            out[rel] = digest
            expected = self.files.get(rel)
            if expected and expected != digest:
                modified.append(rel)
        if modified:
            info["modified_files"] = modified
            warnings.warn(
                f"{self.name}: {', '.join(modified)} differ from the published release (sha256); "
                "results are marked data:modified in the benchmark signature",
                stacklevel=3,
            )
        return out


def sha256_file(path: Path) -> str:
    return file_digest(path, "sha256")


def collapse(text: str) -> str:
    """Whitespace-collapsed text, as CLIPScore's scripts (``' '.join(s.split())``)."""
    return " ".join(text.split())


def malformed(path: Path, where: str, what: str) -> ResourceError:
    return ResourceError(f"malformed data file {path} ({where}): {what}")


def read_release_json(path: Path) -> Any:
    """A benchmark's JSON file, read within :func:`capeval.io.reading.read_json`'s bounds (size,
    nesting, 4,300-digit integers); what is wrong is a :func:`malformed` data-file error naming
    it (keys repeated in an object are kept as the release's own parser would keep them)."""
    from capeval.errors import InputError
    from capeval.io.reading import read_json

    try:
        return read_json(path, duplicates=True)
    except InputError as exc:
        raise malformed(path, "JSON", str(exc).removeprefix(f"{path}: ")) from None


def judgment(value: Any, path: Path, where: str, what: str, low: float, high: float, integer: bool = False) -> float:
    """One human judgment of a data file as a float: a finite number on its dataset's documented
    scale ``[low, high]`` (a whole number there when ``integer``), else a one-line
    :class:`ResourceError` naming the file and row (``where``). A NaN, an infinity or a value
    off the scale is refused at load, so it never reaches a statistic."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise malformed(path, where, f"{what} must be a number, got {value!r:.40}") from None
    if isinstance(value, bool) or not math.isfinite(number) or not low <= number <= high or (
            integer and not number.is_integer()):
        scale = (f"a whole number from {low:g} to {high:g}" if integer else f"a number in [{low:g}, {high:g}]")
        raise malformed(path, where, f"{what} must be {scale} (the dataset's scale), got {value!r:.40}")
    return number


# -- registry -----------------------------------------------------------------------

#: benchmark name -> "module:Class": plain data, the module is imported when a benchmark is used
CATALOG: dict[str, str] = {
    "flickr8k-expert": "capeval.bench.flickr8k:Flickr8kExpert",
    "flickr8k-cf": "capeval.bench.flickr8k:Flickr8kCF",
    "pascal-50s": "capeval.bench.pascal:Pascal50S",
    "thumb": "capeval.bench.thumb:THumB",
    "composite": "capeval.bench.composite:Composite",
    "foil": "capeval.bench.foil:Foil",
    "vatex-eval": "capeval.bench.video_benchmarks:VatexEval",
    "activitynet-foil": "capeval.bench.video_benchmarks:ActivityNetFoil",
    "polaris": "capeval.bench.polaris:Polaris",
    "nebula": "capeval.bench.polaris:Nebula",
    "detailcaps": "capeval.bench.detailcaps:DetailCaps",
    "caparena": "capeval.bench.caparena:CapArena",
    "longcap-arena": "capeval.bench.longcap_arena:LongCapArena",
    "hat": "capeval.bench.hat:HAT",
    "nocaps-foil": "capeval.bench.hat:NocapsFoil",
}

_BENCHMARKS: dict[str, Benchmark] = {}


def check_loader_options(benches: Iterable["Benchmark"], bench_options: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Validate ``{benchmark: {option: value}}`` against each benchmark's ``loader_options``, before any loading.

    Returns the options keyed by canonical benchmark name. An unknown benchmark, one not being
    run, an unknown option or a value out of its range raises a one-line :class:`InputError`.
    """
    from capeval.ranges import Range

    chosen = {b.name: b for b in benches}
    out: dict[str, dict[str, Any]] = {}
    for target, opts in dict(bench_options or {}).items():
        first = next(iter(opts), "*") if isinstance(opts, Mapping) else "*"
        try:
            name = get_benchmark(str(target)).name
        except UnknownNameError as exc:
            raise InputError(f"bench option {target}.{first}: {exc}") from None
        if name not in chosen:
            raise InputError(f"bench option {target}.{first}: {name} is not among the benchmarks being run "
                             f"({', '.join(chosen)}); the option would be ignored")
        if not isinstance(opts, Mapping):
            raise InputError(f"bench options of {target} must be a mapping {{key: value}}, got {type(opts).__name__}")
        declared = chosen[name].loader_options
        for key, value in opts.items():
            if key not in declared:
                raise InputError(f"bench option {target}.{key}: {name} has no loader option {key!r}; valid loader "
                                 f"options for {name}: {', '.join(declared) or 'none'}")
            rule = declared[key]
            if isinstance(rule, Range):
                if not rule.accepts(value):
                    raise InputError(f"bench option {target}.{key}={value!r} out of range: {rule.describe(key)}")
            elif value not in rule:
                raise InputError(f"bench option {target}.{key}={value!r}: use one of {', '.join(map(str, rule))}")
        out.setdefault(name, {}).update(opts)
    return out


def register_benchmark(bench: Benchmark) -> Benchmark:
    """Add a benchmark instance at run time (plugins, tests); the built-in ones are in :data:`CATALOG`."""
    _BENCHMARKS[bench.name] = bench
    return bench


def benchmarks() -> dict[str, Benchmark]:
    """All benchmarks by name (catalogue order, then run-time registrations)."""
    import importlib

    out: dict[str, Benchmark] = {}
    for name, target in CATALOG.items():
        if name not in _BENCHMARKS:
            module, _, attr = target.partition(":")
            _BENCHMARKS[name] = getattr(importlib.import_module(module), attr)()
        out[name] = _BENCHMARKS[name]
    return {**out, **_BENCHMARKS}


def get_benchmark(name: str) -> Benchmark:
    known = benchmarks()
    key = name.strip().lower()
    if key not in known:
        raise UnknownNameError(f"unknown benchmark {name!r}; known benchmarks: {', '.join(known)}")
    return known[key]


def default_data_root(data_root: str | os.PathLike[str] | None) -> Path:
    """``data_root``, else ``$CAPEVAL_DATA``, else ``<capeval cache>/data`` (where ``capeval download``
    puts benchmark files): one meaning of CAPEVAL_DATA for the loaders, the downloads and the tests."""
    if data_root is None:
        from capeval.paths import data_home

        home = data_home()
        if not home.is_dir():
            raise InputError(f"no benchmark data folder: run `capeval download <benchmark>` (files go to {home}), "
                             "pass --data-root DIR (data_root=...) or set CAPEVAL_DATA")
        return home
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise ResourceError(f"benchmark data folder not found: {root}")
    return root
