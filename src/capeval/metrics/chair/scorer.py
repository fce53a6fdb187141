"""CHAIR (Rohrbach*, Hendricks* et al., EMNLP 2018, "Object Hallucination in Image Captioning"),
as the official ``utils/chair.py`` (LisaAnne/Hallucination@6e4d33c) computes it.

An MSCOCO object mentioned in a caption is hallucinated when it is not among the image's
ground-truth objects: the categories of its COCO instance annotations plus the objects its
COCO reference captions mention (both from the COCO 2014 train+val files,
``-O chair.annotations=DIR``). With ``h_i`` the hallucinated mentions and ``m_i`` all object
mentions of caption ``i`` (see :mod:`capeval.metrics.chair.objects` for how mentions are found):

- ``chair-s``: item ``1 if h_i > 0 else 0``; system = mean (share of captions with a
  hallucination). Range [0, 1], lower is better.
- ``chair-i``: item ``h_i / m_i`` (0 when ``m_i = 0``); system ``sum h_i / sum m_i`` (mentions
  pooled over the corpus, not a mean of items; undefined, NaN, when no caption mentions an
  object). Range [0, 1], lower is better.

Candidate ids are COCO image ids (``391895``) or COCO file names. ``images={id: path}``
(optional) names each candidate's image instead, by its COCO file name (the file is not read:
benchmarks whose item ids are not COCO ids pass their image names, e.g. FOIL's
``COCO_val2014_000000391895.jpg``); an image folder (a string or path) names nothing per
candidate, so the candidate ids are used. Per item, the extras list the hallucinated
``(word, object)`` pairs and the mentioned objects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from capeval.errors import InputError
from capeval.io.inputs import normalize_candidates
from capeval.metrics.chair.objects import ObjectVocabulary, vocabulary
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

#: the official code's pinned libraries, recorded in the signature
TOKENIZER = "nltk-3.2.5-word_tokenize"
SINGULARIZE = "pattern-3.6"


class Chair(ScorerBase):
    """``chair-s`` and ``chair-i`` against COCO 2014 ground truth (see the module docs).

    ``annotations``: the COCO 2014 annotation folder (required); ``variant``: ``official``
    (default) or ``stripped`` (synonym entries stripped of stray spaces); ``cache``: keep the
    compact annotation table in the capeval cache; ``truth_excludes``: ``{item id: caption}``,
    a COCO caption (exact text) left out of that item's ground truth (None: none, the official).
    FOIL's protocol sets it (``capeval bench foil``): a FOIL original is one of its image's COCO
    captions, so without it the original could never be hallucinated, while the references the
    other metrics get leave it out; recorded in the signature as ``truth:coco-minus(n=...)``.
    """

    produces: ClassVar[tuple[str, ...]] = ("chair-s", "chair-i")

    def __init__(self, metrics: Sequence[str] | None = None, annotations: str | None = None,
                 variant: str = "official", cache: bool = True, truth_excludes: Mapping[Any, str] | None = None):
        from capeval.metrics.chair.annotations import load_annotations

        self.metrics = self._select(metrics)
        if not annotations:
            raise InputError("chair needs the COCO 2014 annotation folder: -O chair.annotations=DIR "
                             "(Python: options={'chair': {'annotations': DIR}}) with instances_{train,val}2014.json "
                             "and captions_{train,val}2014.json")
        self.vocab: ObjectVocabulary = vocabulary(variant)
        self.variant = variant
        self.excludes = _check_excludes(truth_excludes)
        self.coco = load_annotations(annotations, cache=cache)
        self._truth: dict[tuple[int, str | None], frozenset[str]] = {}

    def ground_truth(self, image_id: int, leave_out: str | None = None) -> frozenset[str]:
        """The CHAIR objects of one COCO image: its instance categories and its captions' objects
        (without the caption ``leave_out``, exact text, when given)."""
        key = (image_id, leave_out)
        if key not in self._truth:
            objects = {self.vocab.object_of_category(name) for name in self.coco.categories.get(image_id, ())}
            for caption in self.coco.captions.get(image_id, ()):
                if caption != leave_out:
                    objects.update(m.object for m in self.vocab.mentions(caption))
            self._truth[key] = frozenset(objects)
        return self._truth[key]

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, progress: bool | None = False, **_: Any) -> Report:
        """CHAIR of ``{COCO image id or file name: caption}``, or of ``{id: caption}`` with
        ``images={id: COCO image file}``."""
        cands = normalize_candidates(candidates)
        ids = list(cands)
        if isinstance(images, Mapping):
            missing = [i for i in ids if i not in images]
            if missing:
                raise InputError(f"chair: candidate {missing[0]!r} has no entry in images (the mapping names each "
                                 f"candidate's COCO image; {len(missing)} missing)")
            image_ids = [self.coco.image_id(str(images[i])) for i in ids]
        else:
            image_ids = [self.coco.image_id(i) for i in ids]
        sentence, instance, hallucinated, mentioned = [], [], {}, {}
        total_h = total_m = 0
        if self.excludes is not None:
            unknown = [i for i in self.excludes if i not in cands]
            if unknown:
                raise InputError(f"chair option truth_excludes: item {unknown[0]!r} is not among the candidates "
                                 f"({len(unknown)} such)")
        for item, image_id in zip(ids, image_ids):
            truth = self.ground_truth(image_id, None if self.excludes is None else self.excludes.get(item))
            mentions = self.vocab.mentions(cands[item])
            bad = [(m.word, m.object) for m in mentions if m.object not in truth]
            sentence.append(1.0 if bad else 0.0)
            instance.append(len(bad) / len(mentions) if mentions else 0.0)
            hallucinated[item] = bad
            mentioned[item] = [m.object for m in mentions]
            total_h += len(bad)
            total_m += len(mentions)
        params = {"variant": self.variant, "tok": TOKENIZER, "singularize": SINGULARIZE,
                  "coco": f"2014:{self.coco.digest[:12]}"}
        if self.excludes is not None:
            params["truth"] = f"coco-minus(n={len(self.excludes)})"
        extras = {"hallucinated": hallucinated, "objects": mentioned, "mentions": total_m, "hallucinations": total_h}
        out = []
        if "chair-s" in self.metrics:
            system = sum(sentence) / len(sentence) if sentence else math.nan
            out.append(MetricResult("chair-s", system, dict(zip(ids, sentence)),
                                    Signature.build("chair-s", **params), extras))
        if "chair-i" in self.metrics:
            system = total_h / total_m if total_m else math.nan
            out.append(MetricResult("chair-i", system, dict(zip(ids, instance)),
                                    Signature.build("chair-i", **params), extras))
        return Report(out)


def _check_excludes(value: Any) -> dict[str, str] | None:
    """``truth_excludes`` as ``{str item id: caption}``, or a one-line error naming the option."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"chair option truth_excludes: expected {{item id: caption}}, got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, caption in value.items():
        if not isinstance(caption, str):
            raise InputError(f"chair option truth_excludes: item {str(key)!r}: expected a caption (text), "
                             f"got {type(caption).__name__}")
        out[str(key)] = caption
    return out
