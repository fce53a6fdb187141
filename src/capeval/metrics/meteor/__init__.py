"""METEOR 1.5 in pure Python (numpy only), matching pycocoevalcap 1.2's Java METEOR.

Reference: M. Denkowski and A. Lavie, "Meteor Universal: Language Specific Translation
Evaluation for Any Target Language", WMT 2014.

>>> from capeval.metrics.meteor import Meteor15      # doctest: +SKIP
>>> corpus, per_item = Meteor15().score(["a dog runs"], [["a dog is running"]])

Resources (paraphrase table, WordNet synonyms) come from the installed
``pycocoevalcap==1.2`` and are indexed once by :func:`prepare`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capeval.metrics.meteor.engine import Meteor15, pycocoevalcap_fields
    from capeval.metrics.meteor.index_build import prepare
    from capeval.metrics.meteor.resources import resource_info
    from capeval.metrics.meteor.stats import MeteorScore, MeteorStats, compute, corpus_score, segment_score

#: each name's module, imported at the first use of the name: the package's other modules (the
#: kernel build and trust rules that CIDEr-D's compiled resampling kernels share) are imported
#: without the engine (20 ms that capeval compare paid between its scoring and its resamples)
_WHERE = {
    "Meteor15": "engine",
    "pycocoevalcap_fields": "engine",
    "prepare": "index_build",
    "resource_info": "resources",
    "MeteorStats": "stats",
    "MeteorScore": "stats",
    "compute": "stats",
    "corpus_score": "stats",
    "segment_score": "stats",
}

__all__ = [
    "Meteor15",
    "MeteorStats",
    "MeteorScore",
    "compute",
    "corpus_score",
    "segment_score",
    "prepare",
    "resource_info",
    "pycocoevalcap_fields",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
