"""``pycocoevalcap.meteor.meteor.Meteor`` (1.2) on capeval's METEOR 1.5 (no JVM, no subprocess).

The original starts ``java -jar meteor-1.5.jar - - -stdio -l en -norm`` and sends one
``SCORE ||| refs ||| hyp`` line per item, then one ``EVAL`` line: Java answers each item's
score and, last, the *corpus* score computed from the statistics summed over the items
(not the mean of the item scores). The drop-in computes the same with
:class:`capeval.metrics.meteor.Meteor15` (the same ``|||`` handling,
:func:`~capeval.metrics.meteor.pycocoevalcap_fields`; corpus score from the summed
statistics, :func:`~capeval.metrics.meteor.corpus_score`, as capeval's ``meteor`` metric).
``compute_score(gts, res)`` returns ``(float, list of per-item floats)`` in ``gts``'s key
order. Resources (paraphrase table, WordNet synonyms) are read from the installed
``pycocoevalcap==1.2`` wheel and indexed once. Under ``CAPEVAL_AS_PYCOCOEVALCAP`` every
``Meteor()`` of the process shares one engine (:mod:`capeval.compat.pycocoevalcap._memo`). Reference: Denkowski & Lavie 2014;
pycocoevalcap/meteor/meteor.py.
"""

from __future__ import annotations

import threading

from capeval.compat.pycocoevalcap._common import check_keys, collect
from capeval.compat.pycocoevalcap._memo import enabled, shared


class Meteor:
    """METEOR 1.5 (en, -norm) as pycocoevalcap 1.2's Java wrapper returns it."""

    def __init__(self) -> None:
        from capeval._optional import require

        require("pycocoevalcap", extra="meteor", purpose="METEOR 1.5 resources (no Java is run)")
        from capeval.metrics.meteor import Meteor15

        if enabled():  # under the switch: one engine and lock per process (lmms-eval: a Meteor() per call)
            self._meteor, self.lock = shared("meteor", lambda: (Meteor15(), threading.Lock()))
        else:
            self._meteor = Meteor15()
            self.lock = threading.Lock()  # as the original: one compute_score at a time per instance

    def compute_score(self, gts: dict, res: dict) -> tuple[float, list[float]]:
        """(corpus METEOR from summed statistics, per-item METEOR list)."""
        hyps, refs = collect(check_keys(gts, res), gts, res, strict=False)
        with self.lock:
            score, scores = self._meteor.score(hyps, refs)
        return float(score), [float(s) for s in scores]

    def method(self) -> str:
        return "METEOR"
