"""Meta-evaluation: correlate metrics with human judgments on registered benchmarks.

>>> import capeval.bench
>>> sorted(capeval.bench.benchmarks())[:3]
['activitynet-foil', 'composite', 'flickr8k-cf']

``capeval.bench.run(["flickr8k-expert"], ["bleu-4", "cider-d"], data_root=...)`` returns a
:class:`BenchRun` — a list of :class:`BenchRecord` (benchmark, metric, statistic, value,
n, ci_low, ci_high, metric_signature, benchmark_signature) with ``comparisons`` (paired
bootstrap tests between metrics), ``benchmarks`` (protocol notes, file hashes, counts)
and ``to_dict()`` for JSON. Statistics are x100 (Kendall/Spearman/Pearson, accuracies).

Benchmarks: flickr8k-expert, flickr8k-cf, pascal-50s, thumb (files in ``../shared/data``
layout), composite, foil (public release files), vatex-eval, activitynet-foil (video).
Importing this package reads no data and imports no metric.
"""

from __future__ import annotations

from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, benchmarks, get_benchmark, register_benchmark
from capeval.bench.runner import BenchRecord, BenchRun, run

def load(name: str, data_root: str | None = None, seed: int = 0, **options) -> Loaded:
    """Load one benchmark's data (verifying files) without scoring anything."""
    from capeval.bench.base import default_data_root

    return get_benchmark(name).load(default_data_root(data_root), seed=seed, **options)


__all__ = [
    "Benchmark",
    "BenchRecord",
    "BenchRun",
    "Loaded",
    "ScoreItem",
    "Setting",
    "StatSpec",
    "benchmarks",
    "get_benchmark",
    "load",
    "register_benchmark",
    "run",
]
