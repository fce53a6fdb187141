"""METEOR 1.5 in pure Python (numpy only), matching pycocoevalcap 1.2's Java METEOR.

Reference: M. Denkowski and A. Lavie, "Meteor Universal: Language Specific Translation
Evaluation for Any Target Language", WMT 2014.

>>> from capeval.metrics.meteor import Meteor15      # doctest: +SKIP
>>> corpus, per_item = Meteor15().score(["a dog runs"], [["a dog is running"]])

Resources (paraphrase table, WordNet synonyms) come from the installed
``pycocoevalcap==1.2`` and are indexed once by :func:`prepare`.
"""

from __future__ import annotations

from capeval.metrics.meteor.engine import Meteor15, pycocoevalcap_fields
from capeval.metrics.meteor.index_build import prepare
from capeval.metrics.meteor.resources import resource_info
from capeval.metrics.meteor.stats import MeteorScore, MeteorStats, compute, corpus_score, segment_score

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
