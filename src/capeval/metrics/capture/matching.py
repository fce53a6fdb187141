"""CAPTURE's matching of visual elements and its weighted F-score (Dong et al. 2024, Sec. 3.2).

As capture-metric 0.1.13 ``CAPTURE.compute_match`` / ``compute_f_score``, read line by line.
For objects and for attributes (all attribute words of a caption, pooled over objects):

1. exact: each candidate element takes the first equal, still unmatched reference element;
2. synonym: each unmatched candidate takes the first unmatched reference that is a substring of
   it or contains it, or shares a WordNet lemma name with it (``synsets`` of both, multi-word
   phrases joined by ``_``; the package's test is IoU > 0 of the two lemma-name sets);
3. soft: the elements left on both sides are embedded by Sentence-BERT and L2-normalised;
   each left candidate adds its best cosine to the candidate-side matches, each left reference
   its best cosine to the reference side.

Precision = candidate-side matches / (n_candidate + eps), recall = reference-side matches /
(n_reference + eps), F1 = 2PR / (P + R + eps). Relations ``(subject, predicate, object)`` match
exactly, then by synonym when all three parts are synonyms in turn, then softly as the texts
``"subject predicate object"``. CAPTURE = (alpha F_obj + beta F_attr + gamma F_rel) /
(alpha + beta + gamma), defaults 0.5, 0.5, 0.2, eps 1e-6; a candidate's score is the mean over
its references. Range [0, 1] up to eps (soft matches of negative cosine can lower it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from capeval.metrics.capture.graphs import Parsed

#: phrases -> their L2-normalised embeddings, one row each
Encode = Callable[[list[str]], np.ndarray]


@lru_cache(maxsize=65536)
def lemma_names(word: str) -> frozenset[str]:
    """Every lemma name of every WordNet synset of ``word`` (all parts of speech)."""
    from nltk.corpus import wordnet

    return frozenset(lemma.name() for synset in wordnet.synsets(word) for lemma in synset.lemmas())


def synonyms(a: str, b: str) -> bool:
    """The package's synonym test (``compute_synonyms_score(a, b) > 0``)."""
    if a in b or b in a:
        return True
    return bool(lemma_names("_".join(a.split())) & lemma_names("_".join(b.split())))


@dataclass
class Matcher:
    """The three matching stages and the F-scores; ``encode`` is needed only for soft matching."""

    alpha: float = 0.5
    beta: float = 0.5
    gamma: float = 0.2
    synonym_matching: bool = True
    soft_matching: bool = True
    eps: float = 1e-6
    encode: Encode | None = None

    def _soft(self, cands: list[str], refs: list[str]) -> tuple[float, float]:
        if not (self.soft_matching and cands and refs):
            return 0.0, 0.0
        if self.encode is None:
            raise ValueError("capture: soft matching needs a phrase encoder")
        feats = self.encode(cands + refs)
        sim = feats[: len(cands)] @ feats[len(cands):].T
        return float(np.sum(np.max(sim, axis=1))), float(np.sum(np.max(sim, axis=0)))

    def match(self, cands: Sequence, refs: Sequence, same: Callable[[object, object], bool]) -> tuple[int, float, float]:
        """(hard matches, candidate-side matches, reference-side matches) of two element lists."""
        used_c: set[int] = set()
        used_r: set[int] = set()
        stages = [lambda c, r: c == r] + ([same] if self.synonym_matching else [])
        for test in stages:
            for i, c in enumerate(cands):
                if i in used_c:
                    continue
                for j, r in enumerate(refs):
                    if j not in used_r and test(c, r):
                        used_c.add(i)
                        used_r.add(j)
                        break
        hard = len(used_c)
        text = (lambda e: e) if not cands or isinstance(cands[0], str) else (lambda e: " ".join(e))
        left_c = [text(c) for i, c in enumerate(cands) if i not in used_c]
        left_r = [text(r) for j, r in enumerate(refs) if j not in used_r]
        soft_c, soft_r = self._soft(left_c, left_r)
        return hard, hard + soft_c, hard + soft_r

    def _f(self, cand_match: float, ref_match: float, n_cand: int, n_ref: int) -> tuple[float, float, float]:
        p, r = cand_match / (n_cand + self.eps), ref_match / (n_ref + self.eps)
        return p, r, 2 * p * r / (p + r + self.eps)

    def f_scores(self, ref: Parsed, cand: Parsed) -> tuple[float, ...]:
        """(CAPTURE, P/R/F1 of objects, attributes, relations) of a candidate against one reference,
        in the package's order."""
        out: list[float] = []
        words_r = [a for v in ref[1].values() for a in v]
        words_c = [a for v in cand[1].values() for a in v]

        def rel_same(c: tuple, r: tuple) -> bool:
            return all(synonyms(x, y) for x, y in zip(c, r))

        for c, r, same in ((cand[0], ref[0], synonyms), (words_c, words_r, synonyms),
                           (list(cand[2]), list(ref[2]), rel_same)):
            _, cm, rm = self.match(c, r, same)
            out.extend(self._f(cm, rm, len(c), len(r)))
        score = (self.alpha * out[2] + self.beta * out[5] + self.gamma * out[8]) / (self.alpha + self.beta + self.gamma)
        return (score, *out)
