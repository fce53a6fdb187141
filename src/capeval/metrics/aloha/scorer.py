"""ALOHa (Petryk*, Chan* et al., NAACL 2024, "ALOHa: A New Measure for Hallucination in Captioning
Models"), as DavidMChan/aloha@7da6b90 computes it (``METRICS["aloha"]``).

Per item: an LLM lists the objects of the candidate and, in a second request, of the references
(:mod:`.prompts`; ``gpt-3.5-turbo`` in the paper, temperature 0; here any OpenAI-compatible
server, answers cached); the lists are parsed, detections of the image (when given) join the
reference objects, and every candidate object is matched to a reference object by Hungarian
matching on MPNet cosine similarities (:mod:`.core`, :mod:`.models`). Item score = ALOHa =
min over candidate objects of ALOHa_o (their matched similarity), range [-1, 1] (cosines),
higher is better (fewer hallucinations); system = mean of the items (``aggregate`` of the
official ``np.nanmean``).

Detections: the official ``aloha`` metric adds a sample's ``"detections"`` list (labels) to its
reference objects; its CLI fills them with DETR (``facebook/detr-resnet-50``, threshold 0.9,
``--add-detections``). Give them as ``detections=FILE`` (JSON ``{id: [label, ...]}``, the
``detections`` field of the released sample layout) or a mapping, or have them computed by that
DETR here (``detector="detr"``, ``detector_model``, ``detector_threshold`` 0.9; needs the
images). Without them the references
alone are used (what the official code does without ``--add-detections``: the detector it builds
for an image path is run but its labels are never added, a bug kept out of the way).

Extras per item: ``answers`` (the LLM's raw lists), ``candidate_objects`` / ``reference_objects``
(the parsed slots), ``matches`` (``target_word``, ``ref_word``, ``similarity`` = ALOHa_o of the
best combination), ``localized`` (the candidate object of lowest ALOHa_o: where ALOHa puts the
hallucination) and ``hallucinated`` (objects with ALOHa_o below ``threshold``; without a threshold,
the localized object when the score is below 1).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

from capeval.errors import InputError
from capeval.judges import options as jopt
from capeval.judges.backends import Request
from capeval.judges.cache import open_cache
from capeval.judges.openai_compat import OpenAICompat
from capeval.metrics.aloha import core, prompts
from capeval.metrics.aloha.detect import DETR, THRESHOLD, Detector
from capeval.metrics.aloha.models import EMBEDDER, SPACY_MODEL, SentenceSimilarity, spacy_root_noun
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase


class ObjectParserChat(OpenAICompat):
    """:class:`OpenAICompat` sending ALOHa's chat (system prompt, three examples, the item)."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, pad_to_square=False, llava_system=False, **kw)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "template": f"{prompts.SOURCE}:{prompts.SYSTEM_SHA256[:12]}",
                "pad_to_square": False}

    def messages(self, req: Request) -> list[dict[str, Any]]:
        return prompts.chat(req.prompt)


class ALOHa(ScorerBase):
    """ALOHa; item range [-1, 1], higher is better (see the module docs).

    ``backend`` ``"openai"`` (``model``, ``base_url``, ``api_key``, ``concurrency``, ``timeout``,
    ``max_retries``, ``retry_backoff``, ``max_response_mb``) or a backend object; ``temperature`` 0
    and no seed (the official request), ``max_new_tokens`` 1024 (the official sends none);
    ``cache``; ``refresh`` (True: every answer asked again, its cache entry replaced); ``embedder``
    (sentence-transformers name or folder, or a callable ``list[str] -> array``); ``spacy_model`` (name, folder or a loaded ``nlp``); ``detections``; ``aggregate``
    ``min`` (``mean``: the official option); ``unmatched``, ``no_objects``, ``empty_slots`` (quirk options, see
    :mod:`.core`; ``clean``: a caption with no object is not hallucinated, 1.0); ``min_object_length`` 3;
    ``max_combinations`` (100,000: an item whose answers make more object combinations is an error item);
    ``max_objects`` (1,000: an item whose candidate or reference answer lists more objects is an
    error item, before spaCy or the embedder sees any); ``threshold`` (None) for ``hallucinated``;
    ``detector`` (None or ``"detr"``), ``detector_model``, ``detector_threshold``.
    """

    produces: ClassVar[tuple[str, ...]] = ("aloha",)
    label = "aloha"

    def __init__(self, metrics: Sequence[str] | None = None, backend: Any = "openai", model: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, concurrency: int = 4,
                 timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0,
                 temperature: float = 0.0, seed: int | None = None, max_new_tokens: int = 1024,
                 cache: bool | str | os.PathLike[str] | None = True, embedder: Any = EMBEDDER,
                 spacy_model: Any = SPACY_MODEL, detections: Any = None, aggregate: str = "min",
                 unmatched: str = "official", no_objects: str = "error", empty_slots: str = "truncate",
                 min_object_length: int = 3, max_combinations: int = 100_000, max_objects: int = 1000,
                 threshold: float | None = None, detector: str | None = None, detector_model: str = DETR,
                 detector_threshold: float = THRESHOLD, device: str = "cpu", max_response_mb: float = 16.0,
                 refresh: bool = False):
        self.metrics = self._select(metrics)
        jopt.check_choice(self.label, "aggregate", aggregate, core.AGGREGATES)
        jopt.check_choice(self.label, "unmatched", unmatched, core.UNMATCHED)
        jopt.check_choice(self.label, "no_objects", no_objects, core.NO_OBJECTS)
        jopt.check_choice(self.label, "empty_slots", empty_slots, core.EMPTY_SLOTS)
        jopt.check_range(self.label, "min_object_length", min_object_length)
        jopt.check_range(self.label, "max_combinations", max_combinations)
        jopt.check_range(self.label, "max_objects", max_objects)
        if threshold is not None:
            jopt.check_range(self.label, "threshold", threshold)
        jopt.check_cache(self.label, cache, refresh)
        for name, value in (("concurrency", concurrency), ("timeout", timeout), ("max_retries", max_retries),
                            ("retry_backoff", retry_backoff), ("temperature", temperature), ("seed", seed),
                            ("max_new_tokens", max_new_tokens), ("max_response_mb", max_response_mb)):
            jopt.check_range(self.label, name, value)
        if isinstance(backend, str):
            if backend.strip().lower() != "openai":
                raise InputError(f"aloha option backend: expected openai or a backend object, got {backend!r}")
            backend = ObjectParserChat(model, base_url=base_url, api_key=api_key, concurrency=concurrency,
                                       timeout=timeout, max_retries=max_retries, retry_backoff=retry_backoff,
                                       temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                                       label=self.label, max_response_mb=max_response_mb)
        self.backend = jopt.make_backend(self.label, backend, model=None, default_model=None)
        self.similarity = embedder if isinstance(embedder, SentenceSimilarity) else (
            SentenceSimilarity(encode=embedder) if callable(embedder) else SentenceSimilarity(str(embedder), device))
        self._spacy = spacy_model
        self._root: Callable[[str], str | None] | None = None
        self.detections = _load_detections(detections)
        jopt.check_choice(self.label, "detector", detector, (None, "detr"))
        jopt.check_range(self.label, "detector_threshold", detector_threshold)
        if detector is not None and self.detections is not None:
            raise InputError("aloha: give detections=FILE or detector=detr, not both")
        self.detector = Detector(detector_model, detector_threshold, device) if detector else None
        self.aggregate, self.unmatched, self.no_objects = aggregate, unmatched, no_objects
        self.empty_slots = empty_slots
        self.min_object_length, self.threshold = min_object_length, threshold
        self.max_combinations, self.max_objects = max_combinations, max_objects
        self.cache = open_cache(cache, "aloha", refresh=refresh)

    def root_noun(self, text: str) -> str | None:
        if self._root is None:  # loaded on first use: a run with every answer cached still needs it
            self._root = spacy_root_noun(self._spacy)
        return self._root(text)

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Mapping[Any, Any] | None = None, skip_bad_items: bool = False,
              progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}`` (``images``: ``{id: path}``,
        read only with ``detector="detr"``)."""
        if self.detector is not None and images is None and references is not None:
            raise InputError("aloha detector=detr needs the images (--images DIR)")
        dets = self.detections
        cands, refs, ids, good = jopt.text_inputs(
            "aloha", candidates, references, skip_bad_items,
            None if dets is None else lambda ids: {i: f"item {i!r}: no entry in the detections" for i in ids
                                                   if i not in dets})
        detections = self.detections
        if self.detector is not None:
            paths = {str(k): v for k, v in dict(images or {}).items()}
            missing = [i for i in good if i not in paths]
            if missing:
                raise InputError(f"aloha detector=detr: item {missing[0]!r} has no image", missing[0])
            detections = self.detector.detect({i: paths[i] for i in good})
        ident, dec = self.backend.identity(), self.backend.decoding()
        wanted = {}
        for i in good:
            for side, prompt in (("candidate", prompts.candidate_turn(cands[i])),
                                 ("references", prompts.references_turn(refs[i]))):
                key = jopt.request_key("aloha", None, json.dumps(prompts.chat(prompt)), ident, dec)
                wanted[(i, side)] = (key, Request(i, None, prompt))
        records, generated, cached = jopt.answers(self.backend, self.cache, "aloha", wanted, progress, "aloha objects")
        items: dict[str, float] = {}
        ex: dict[str, dict[str, Any]] = {k: {} for k in ("answers", "candidate_objects", "reference_objects",
                                                         "matches", "localized", "hallucinated")}
        errors: dict[str, dict[str, str]] = {}
        for i in good:
            answer = {side: records[(i, side)]["answer"] for side in ("candidate", "references")}
            listed = max(core.count_alternatives(answer["candidate"], False, self.min_object_length),
                         core.count_alternatives(answer["references"], True, self.min_object_length))
            if listed > self.max_objects:  # spaCy, the embedder and the matching grow with them (hours, memory)
                errors[i] = {"error": f"an answer lists {listed} objects, over max_objects={self.max_objects}",
                             "answer": answer["candidate"]}
                continue
            target = core.parse_objects(answer["candidate"], False, None, self.min_object_length)
            ref_slots = core.parse_objects(answer["references"], True, self.root_noun, self.min_object_length)
            if detections is not None:
                ref_slots += [[d] for d in core.dedupe(detections[i])]
                ex.setdefault("detections", {})[i] = detections[i]
            ex["answers"][i], ex["candidate_objects"][i], ex["reference_objects"][i] = answer, target, ref_slots
            n = core.count_combinations(target, self.empty_slots) * core.count_combinations(ref_slots, self.empty_slots)
            if n > self.max_combinations:  # the official code would enumerate them all (hours, memory)
                errors[i] = {"error": f"{n} object combinations, over max_combinations={self.max_combinations}",
                             "answer": answer["references"]}
                continue
            how = (self.similarity, self.aggregate, self.unmatched, self.empty_slots)
            score, matches = core.best(target, ref_slots, *how)
            self.similarity.forget()
            if matches is None and self.no_objects in ("branch", "clean"):
                score, matches = core.no_combination_score(target, ref_slots, *how, clean=self.no_objects == "clean")
            if matches is None:
                side = "the candidate" if next(core.combinations(target, self.empty_slots), None) is None \
                    else "the references"
                errors[i] = {"error": f"no object combination in {side}'s answer (the official score is -inf); "
                                      "-O aloha.no_objects=branch scores it", "answer": answer["candidate"]}
                continue
            items[i] = score
            ex["matches"][i] = matches
            ex["localized"][i] = core.localize(matches)
            ex["hallucinated"][i] = self._hallucinated(score, matches, ex["localized"][i])
        extras: dict[str, Any] = {**ex, "errors": errors, "n_errors": len(errors), "generated": generated,
                                  "cached": cached}
        skipped = [i for i in ids if i not in good] + [i for i in good if i not in items]
        system = math.fsum(items.values()) / len(items) if items else math.nan
        return Report([MetricResult(metric="aloha", system=system, items=items, signature=self.signature(refs),
                                    extras=extras, skipped=tuple(skipped))])

    def _hallucinated(self, score: float, matches: list[dict[str, Any]], localized: str | None) -> list[str]:
        if self.threshold is None:
            return [localized] if localized is not None and score < 1.0 else []
        return [str(m["target_word"]) for m in matches if float(m["similarity"]) < self.threshold]

    def signature(self, refs: dict[str, list[str]] | None = None) -> Signature:
        """Backend and model, decoding, the prompts' sha256, embedder, parser, quirk options."""
        sig = dict(self.backend.signature())
        versions = sig.pop("versions", None)
        sig.pop("pad_to_square", None)
        params: dict[str, Any] = {**sig, **self.backend.decoding(),
                                  "prompt": f"{prompts.SOURCE}@{prompts.SYSTEM_SHA256[:12]}+{prompts.EXAMPLES_SHA256[:12]}",
                                  "embedder": self.similarity.name,
                                  "spacy": self._spacy if isinstance(self._spacy, str) else "custom",
                                  "aggregate": self.aggregate, "unmatched": self.unmatched,
                                  "no_objects": self.no_objects, "empty_slots": self.empty_slots,
                                  "min_object_length": self.min_object_length,
                                  "max_combinations": self.max_combinations, "max_objects": self.max_objects,
                                  "detections": self._detections_id, "threshold": self.threshold}
        params["nrefs"] = jopt.nrefs(refs)
        if versions:
            params["versions"] = versions
        return Signature.build("aloha", **params)

    @property
    def _detections_id(self) -> str:
        if self.detector is not None:
            return f"detr:{self.detector.name}@{self.detector.threshold:g}"
        if self.detections is None:
            return "none"
        blob = json.dumps(self.detections, sort_keys=True).encode("utf-8")
        return "sha256:" + hashlib.sha256(blob).hexdigest()[:12]


def _load_detections(value: Any) -> dict[str, list[str]] | None:
    """``{id: [label, ...]}`` from a JSON file or a mapping; a one-line error naming the entry."""
    if value is None:
        return None
    where = "detections"
    if isinstance(value, (str, os.PathLike)):
        where = str(value)
        try:
            value = json.loads(Path(value).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"aloha option detections: cannot read {where} ({exc.strerror})") from None
        except ValueError as exc:
            raise InputError(f"aloha option detections: {where} is not JSON ({exc})") from None
    if not isinstance(value, Mapping):
        raise InputError(f"aloha option detections: expected {{id: [label, ...]}} in {where}")
    out: dict[str, list[str]] = {}
    for k, labels in value.items():
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise InputError(f"aloha option detections: entry {str(k)!r} of {where} is not a list of labels")
        out[str(k)] = labels
    return out
