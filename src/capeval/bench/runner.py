"""``capeval.bench.run``: score benchmarks with metrics, compute statistics, CIs and paired tests."""

from __future__ import annotations

import itertools
import math
import os
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from capeval import registry
from capeval.bench import statistics as stats
from capeval.bench.base import DEFAULT_SCALE, Benchmark, Loaded, check_loader_options, default_data_root, get_benchmark
from capeval.errors import InputError
from capeval.progress import make_progress


@dataclass(frozen=True)
class BenchRecord:
    """One number: a statistic of a metric on a benchmark, with its CI and signatures."""

    benchmark: str
    metric: str
    statistic: str
    value: float
    n: int
    ci_low: float | None
    ci_high: float | None
    metric_signature: str
    benchmark_signature: str

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("value", "ci_low", "ci_high"):
            v = d[k]
            d[k] = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        return d


class BenchRun(list):
    """The list of :class:`BenchRecord` of a run, plus paired tests, benchmark notes and plots."""

    def __init__(self, records: Iterable[BenchRecord] = ()):
        super().__init__(records)
        self.comparisons: list[dict[str, Any]] = []
        self.benchmarks: dict[str, dict[str, Any]] = {}
        self.plots: list[dict[str, Any]] = []
        self.config: dict[str, Any] = {}

    def get(self, benchmark: str, metric: str, statistic: str) -> BenchRecord:
        for r in self:
            if (r.benchmark, r.metric, r.statistic) == (benchmark, metric, statistic):
                return r
        raise KeyError((benchmark, metric, statistic))

    def to_dict(self) -> dict[str, Any]:
        """Everything the run holds, as JSON types: ``capeval report`` renders the HTML from it."""
        return {
            "results": [r.to_dict() for r in self],
            "comparisons": self.comparisons,
            "benchmarks": self.benchmarks,
            "config": self.config,
            "plots": self.plots,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BenchRun":
        """The run saved by :meth:`to_dict` (``capeval bench --out``); a missing value (null) is NaN."""
        nan = float("nan")
        out = cls(BenchRecord(**{**r, "value": nan if r["value"] is None else r["value"]}) for r in data["results"])
        out.comparisons = list(data.get("comparisons", []))
        out.benchmarks = dict(data.get("benchmarks", {}))
        out.config = dict(data.get("config", {}))
        out.plots = list(data.get("plots", []))
        return out

    def table(self) -> str:
        """A plain-text table of the records (the CLI prints it); ``paper``: the published value
        (x100) where the registry of :mod:`capeval.bench.published` has one."""
        from capeval.bench.published import published

        rows = [("benchmark", "metric", "statistic", "value", "95% CI", "n", "paper")]
        for r in self:
            ci = "" if r.ci_low is None or math.isnan(r.ci_low) else f"[{r.ci_low:.2f}, {r.ci_high:.2f}]"
            val = "nan" if math.isnan(r.value) else (f"{r.value:.0f}" if r.statistic.startswith("ties") else f"{r.value:.2f}")
            found = published(r.benchmark, r.metric, r.statistic, r.benchmark_signature)
            rows.append((r.benchmark, r.metric, r.statistic, val, ci, str(r.n), "" if found is None else f"{found[0]:.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(7)]
        lines = []
        for k, row in enumerate(rows):
            cells = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
            lines.append("  ".join(cells).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines += [f"{name}: {meta.get('scale') or DEFAULT_SCALE}" for name, meta in self.benchmarks.items()]
        return "\n".join(lines)


def provenance() -> dict[str, str]:
    """capeval's version and the run's date (UTC, minutes), stored with a run and shown in its reports."""
    from datetime import datetime, timezone

    from capeval._version import __version__

    return {"version": __version__, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def _derive_seed(seed: int, *parts: str) -> int:
    return (int(seed) * 1_000_003 + zlib.crc32("/".join(parts).encode())) % (2**32)


def check_bench_settings(**settings: Any) -> None:
    """Refuse a run setting (``confidence``, ``bootstrap``, ...) outside its range in :data:`capeval.ranges.BENCH_RANGES`."""
    from capeval.ranges import BENCH_RANGES

    for key, value in settings.items():
        if not BENCH_RANGES[key].accepts(value):
            raise InputError(f"{key}={value!r} out of range: {BENCH_RANGES[key].describe(key)}")


def expand_benchmarks(names: str | Iterable[str]) -> list[Benchmark]:
    if isinstance(names, str):
        names = [names]
    out: list[Benchmark] = []
    for entry in names:
        for part in str(entry).split(","):
            if part.strip():
                b = get_benchmark(part)
                if b not in out:
                    out.append(b)
    if not out:
        raise InputError("no benchmark named")
    return out


def _heatmap(human: np.ndarray, metric: np.ndarray, bins: int = 10) -> dict[str, Any]:
    ok = ~(np.isnan(human) | np.isnan(metric))
    human, metric = human[ok], metric[ok]
    levels = np.unique(human)
    if levels.size > 12:
        edges_h = np.unique(np.quantile(human, np.linspace(0, 1, 9)))
        hbin = np.clip(np.searchsorted(edges_h, human, side="right") - 1, 0, len(edges_h) - 2)
        labels = [f"{edges_h[i]:.2g}-{edges_h[i + 1]:.2g}" for i in range(len(edges_h) - 1)]
    else:
        hbin = np.searchsorted(levels, human)
        labels = [f"{v:g}" for v in levels]
    lo, hi = (float(metric.min()), float(metric.max())) if metric.size else (0.0, 1.0)
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    mbin = np.clip(np.searchsorted(edges, metric, side="right") - 1, 0, bins - 1)
    counts = np.zeros((len(labels), bins), dtype=int)
    np.add.at(counts, (hbin, mbin), 1)
    return {"human_levels": labels, "metric_edges": [float(e) for e in edges], "counts": counts.tolist()}


def run(
    benchmarks: str | Sequence[str],
    metrics: str | Sequence[str],
    data_root: str | os.PathLike[str] | None = None,
    *,
    images: str | os.PathLike[str] | None = None,
    videos: str | os.PathLike[str] | None = None,
    seed: int = 0,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    bench_options: Mapping[str, Mapping[str, Any]] | None = None,
    verify_media: bool = True,
    progress: bool | None = False,
    explain: str | os.PathLike[str] | None = None,
    explain_worst: int = 10,
) -> BenchRun:
    """Meta-evaluate ``metrics`` on ``benchmarks``; returns a :class:`BenchRun` (a list of records).

    ``data_root`` defaults to ``$CAPEVAL_DATA``. ``images`` / ``videos``: folders of the
    benchmark media, required by image/video-conditioned metrics (verified against the
    published MD5 lists where there are some). ``bootstrap``: number of seeded resamples
    for the confidence intervals and the paired tests (0: none). ``options``: metric
    constructor options as in :func:`capeval.score`; ``bench_options``: per-benchmark
    loader options (e.g. ``{"pascal-50s": {"refs": "fixed"}}``). Same inputs and seed give
    identical numbers. ``explain``: a folder where metrics that explain their scores (HICE-S)
    write the explanations of their ``explain_worst`` worst-scored items per benchmark and
    setting (``<folder>/<benchmark>/<setting>/<metric>/``); listed in the run's benchmark
    entries under ``explanations`` and linked from the HTML report.
    """
    from capeval.models.cache import ModelCache

    models = ModelCache()  # every benchmark's evaluators share the loaded backbones
    benches = expand_benchmarks(benchmarks)
    bench_options = check_loader_options(benches, bench_options)
    check_bench_settings(bootstrap=bootstrap, confidence=confidence, seed=seed, explain_worst=explain_worst)
    names = registry.expand(metrics)
    specs = {m: registry.get(m) for m in names}
    # fail before any loading/scoring when media are needed but not given
    for b in benches:
        for m, spec in specs.items():
            if "images" in spec.needs:
                if b.modality != "image":
                    raise InputError(f"metric {m} needs images; benchmark {b.name} is a {b.modality} benchmark")
                if images is None:
                    raise InputError(
                        f"metric {m} needs the images of benchmark {b.name}: pass --images DIR (images=...) "
                        f"with the benchmark's image files"
                    )
            if "videos" in spec.needs:
                if b.modality != "video":
                    raise InputError(f"metric {m} needs videos; benchmark {b.name} is an {b.modality} benchmark")
                if videos is None:
                    raise InputError(f"metric {m} needs the videos of benchmark {b.name}: pass --videos DIR (videos=...)")
    root = default_data_root(data_root)
    out = BenchRun()
    out.config = {"seed": seed, "bootstrap": bootstrap, "confidence": confidence, "metrics": names,
                  "benchmarks": [b.name for b in benches], **provenance()}
    with make_progress(len(benches) * (1 + len(names)), "bench", progress) as bar:
        for b in benches:
            bar.desc = f"bench {b.name}: loading"
            loaded = b.load(root, seed=seed, **dict(bench_options.get(b.name, {})))
            loaded.options.setdefault("seed", seed)
            bar.desc = f"bench {b.name}: scoring {len(loaded.settings)} setting(s) with {len(names)} metric(s)"
            bar.update(1)
            explain_dir = Path(explain) / b.name if explain is not None else None
            scores, sigs, explained = _score_benchmark(loaded, names, specs, models, options, images, videos,
                                                       verify_media, explain_dir, explain_worst, progress)
            out.benchmarks[b.name] = {
                "title": b.title,
                "citation": b.citation,
                "protocol": b.protocol,
                "signature": str(loaded.signature),
                "files": loaded.files,
                "info": loaded.info,
                "settings": {s: len(st.items) for s, st in loaded.settings.items()},
                "scale": b.scale or DEFAULT_SCALE,
            }
            if explained:
                out.benchmarks[b.name]["explanations"] = explained
            dists: dict[str, dict[str, np.ndarray]] = {}
            full_values: dict[str, dict[str, float]] = {}
            for m in names:
                bar.desc = f"bench {b.name}: statistics of {m}"
                bar.update(1)
                if not scores.get(m):
                    out.benchmarks[b.name].setdefault("skipped_metrics", {})[m] = "no applicable setting (needs references)"
                    continue
                loaded.extras = loaded.item_extras.get(m, {})
                for spec in b.statistics(loaded, scores[m]):
                    value = float(spec.fn(None))
                    lo = hi = None
                    if bootstrap and spec.bootstrap:
                        resamples = stats.iter_resamples(
                            spec.n_units, bootstrap, _derive_seed(seed, b.name), spec.strata
                        )
                        dist = stats.bootstrap_distribution(spec.fn, resamples)
                        lo, hi = stats.percentile_ci(dist, confidence)
                        if spec.headline:
                            dists.setdefault(spec.name, {})[m] = dist
                            full_values.setdefault(spec.name, {})[m] = value
                    out.append(
                        BenchRecord(
                            benchmark=b.name,
                            metric=m,
                            statistic=spec.name,
                            value=value,
                            n=spec.n,
                            ci_low=lo,
                            ci_high=hi,
                            metric_signature=sigs[m].get(spec.setting, next(iter(sigs[m].values()), "")),
                            benchmark_signature=str(loaded.signature),
                        )
                    )
                plot = b.plot_data(loaded, scores[m])
                if plot is not None:
                    out.plots.append({"benchmark": b.name, "metric": m, "human_label": b.human_label, **_heatmap(*plot)})
            for stat_name, by_metric in dists.items():
                for ma, mb in itertools.combinations([m for m in names if m in by_metric], 2):
                    t = stats.paired_test_from_distributions(
                        full_values[stat_name][ma] - full_values[stat_name][mb], by_metric[ma], by_metric[mb], confidence
                    )
                    out.comparisons.append(
                        {
                            "benchmark": b.name,
                            "statistic": stat_name,
                            "metric_a": ma,
                            "metric_b": mb,
                            "delta": t.delta,
                            "ci_low": t.ci_low,
                            "ci_high": t.ci_high,
                            "p_value": t.p_value,
                            "n_resamples": t.n_resamples,
                            "test": "paired bootstrap over items (same resamples for both metrics)",
                        }
                    )
    return out


def _score_benchmark(
    loaded: Loaded,
    names: list[str],
    specs: Mapping[str, Any],
    models: Any,
    options: Mapping[str, Mapping[str, Any]] | None,
    images: Any,
    videos: Any,
    verify_media: bool,
    explain_dir: Path | None = None,
    explain_worst: int = 10,
    progress: bool | None = False,
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, str]], dict[str, dict[str, list[dict[str, Any]]]]]:
    """Score every setting once per metric group: ``{metric: {setting: scores}}``, signatures,
    and ``{metric: {setting: [worst items' explanation files]}}`` when ``explain_dir`` is set.

    Scores of a metric whose registry entry says lower is better are negated, so that every
    statistic reads "agrees with humans" the same way for every metric.
    """
    from capeval.bench.media import resolve_media
    from capeval.evaluator import Evaluator

    b = loaded.benchmark
    options = _with_protocol_options(options, loaded.metric_options)
    need_images = any("images" in specs[m].needs for m in names)
    need_videos = any("videos" in specs[m].needs for m in names)
    image_paths = video_paths = None
    if need_images:
        wanted = {it.image for st in loaded.settings.values() for it in st.items.values() if it.image}
        image_paths = resolve_media(b.name, wanted, images, b.image_checksums, "image", verify_media)
    if need_videos:
        wanted = {it.video for st in loaded.settings.values() for it in st.items.values() if it.video}
        video_paths = resolve_media(b.name, wanted, videos, (), "video", verify_media)
    scores: dict[str, dict[str, np.ndarray]] = {m: {} for m in names}
    sigs: dict[str, dict[str, str]] = {m: {} for m in names}
    evaluators: dict[tuple[str, ...], Evaluator] = {}
    explained: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for sname, setting in loaded.settings.items():
        keys = list(setting.items)
        with_refs = [m for m in names if "references" in specs[m].needs]
        without = [m for m in names if "references" not in specs[m].needs]
        groups = []
        if with_refs and setting.with_references:
            groups.append((with_refs, True))
        if without:
            groups.append((without, False))
        for members, use_refs in groups:
            cands = {k: setting.items[k].candidate for k in keys}
            refs = {k: list(setting.items[k].references) for k in keys} if use_refs else None
            inputs: dict[str, Any] = {}
            if image_paths is not None and any("images" in specs[m].needs for m in members):
                inputs["images"] = {k: image_paths[setting.items[k].image] for k in keys}
            elif any("images" in specs[m].accepts and "images" not in specs[m].needs for m in members):
                # metrics that identify an image by its name without reading it (CHAIR: the COCO
                # file name) get the benchmark's image names when no image folder is in play
                named = {k: setting.items[k].image for k in keys if setting.items[k].image}
                if len(named) == len(keys):
                    inputs["images"] = named
            if video_paths is not None and any("videos" in specs[m].needs for m in members):
                inputs["videos"] = {k: video_paths[setting.items[k].video] for k in keys}
                segs = {k: setting.items[k].segment for k in keys if setting.items[k].segment is not None}
                if segs:
                    inputs["segments"] = segs
            key = tuple(members)
            if key not in evaluators:
                evaluators[key] = Evaluator(members, options=options, cache=models)
            # the metrics' own steps (tokenising, scoring) report under the run's progress setting
            report = evaluators[key].score(cands, refs, progress=progress, **inputs)
            for m in members:
                res = report[m]
                sign = 1.0 if specs[m].higher_is_better else -1.0
                scores[m][sname] = sign * np.array([res.items.get(k, float("nan")) for k in keys], dtype=float)
                sigs[m][sname] = str(res.signature)
                if b.wants_extras:
                    loaded.item_extras.setdefault(m, {})[sname] = res.extras
            if explain_dir is not None:
                from capeval.bench.explanations import explain_worst as explain_items

                found = explain_items(evaluators[key], members, report, specs, cands, refs, inputs,
                                      explain_dir / (sname or "all"), explain_worst)
                for m, rows in found.items():
                    explained.setdefault(m, {})[sname or "all"] = rows
    return scores, sigs, explained


def _with_protocol_options(
    user: Mapping[str, Mapping[str, Any]] | None, protocol: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The user's metric options plus the protocol's where the user set none (user wins)."""
    merged = {k: dict(v) for k, v in (user or {}).items()}
    for group, fixed in protocol.items():
        slot = merged.setdefault(group, {})
        for key, value in fixed.items():
            slot.setdefault(key, value)
    return merged
