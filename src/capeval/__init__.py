"""capeval: caption evaluation the way the literature does it, reproducibly and fast.

``import capeval`` stays light (numpy at most); model-based metrics load their
dependencies lazily when first used.

>>> import capeval
>>> report = capeval.score({"1": "a dog runs fast"}, {"1": ["a dog is running", "the dog runs"]},
...                        metrics="bleu-1")
>>> round(report["bleu-1"].system, 4)
0.75
"""

from __future__ import annotations

from capeval._version import __version__
from capeval.api import load, scene_graph_parser, scene_graphs, score
from capeval.evaluator import Evaluator
from capeval.errors import (
    CapevalError,
    InputError,
    MissingDependencyError,
    ResourceError,
    UnknownNameError,
)
from capeval.registry import expand as expand_metrics
from capeval.registry import metrics as list_metrics
from capeval.registry import presets as list_presets
from capeval.models.download import download
from capeval.result import MetricResult, Report, Signature
from capeval.reward import Reward
from capeval.significance import compare
from capeval.scorer import Batch, Scorer

__all__ = [
    "__version__",
    "load",
    "score",
    "compare",
    "scene_graphs",
    "scene_graph_parser",
    "Evaluator",
    "Reward",
    "Batch",
    "download",
    "expand_metrics",
    "list_metrics",
    "list_presets",
    "MetricResult",
    "Report",
    "Signature",
    "Scorer",
    "CapevalError",
    "InputError",
    "MissingDependencyError",
    "ResourceError",
    "UnknownNameError",
]
