"""WordNet synsets for SPICE, from METEOR 1.5's synonym tables (as SPICE 1.0 reads them).

SPICE's ``SceneGraph.getSynSets(word)`` is ``SynonymDictionary.getSynSets(key) |
getStemSynSets(key)`` on METEOR 1.5's ``synonym/english.{synsets,exceptions}`` (shipped in
SPICE's ``lib/Meteor-1.5.jar``; byte-identical to the files in pycocoevalcap's
``meteor/meteor-1.5.jar``), which is exactly what capeval's METEOR port looks up:
:meth:`capeval.metrics.meteor.synonyms.SynonymDictionary.synsets_of`. The memory-mapped
METEOR index is reused (built on first use, see :mod:`capeval.metrics.meteor.resources`).
"""

from __future__ import annotations

import os

from capeval._optional import require


class WordNetSynsets:
    """Callable ``key -> frozenset of synset ids`` over METEOR 1.5's WordNet tables.

    ``key`` is already normalised (:func:`capeval.metrics.spice.graph.synset_key`).
    ``fingerprint`` names the resource for signatures: the sha256 (first 12 hex digits) of
    the METEOR jar the index was built from.
    """

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None):
        require("pycocoevalcap", extra="meteor", purpose="the WordNet synonym tables SPICE uses (no Java is run)")
        from capeval.metrics.meteor.partial_index import load
        from capeval.metrics.meteor.synonyms import SynonymDictionary

        resources = load(cache_dir)  # with no index yet, the jar's tables only (no paraphrase table)
        self._dictionary = SynonymDictionary(resources)
        self.fingerprint = f"meteor-1.5-wordnet:{resources.jar_sha256()[:12]}"

    def __call__(self, key: str) -> frozenset:
        return self._dictionary.synsets_of(key)
