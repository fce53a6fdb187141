"""HAT and nocaps-FOIL (Petryk*, Chan* et al., NAACL 2024, "ALOHa: A New Measure for
Hallucination in Captioning Models"): captions with known hallucinations, as benchmarks of how
well a metric detects and localizes them.

HAT, the HAllucination Test: MS COCO captions annotated by experts for hallucinations.

Release read here: ``hat/hat-trainval.json`` (DavidMChan/aloha ``data/hat-trainval.json``, 400
captions, 135 with a hallucination), a JSON list of samples with the keys this loader reads:
``sample_id``, ``caption``, ``references`` (the image's COCO captions), ``image_path`` (a COCO
val2014 file name), ``contains_hallucination`` (true/false) and ``grounding`` (``[[word, is
hallucinated], ...]`` over the caption's space-separated words). The paper's test split is not
in the repository; this is the released split.

Statistics (the paper's protocol, Sec. 4; the repository ships no evaluation script, so the
details below are ours and named as such):

- ``ap`` (headline): average precision x100 of detecting the captions with a hallucination,
  ranked by the metric's score, lowest first (lower ALOHa / CLIPScore = more likely
  hallucinated; a lower-is-better metric is negated by the runner first). AP is the step-wise
  sum over distinct thresholds of (recall gain) x precision, as ``sklearn.metrics.
  average_precision_score``; NaN when a score is missing (an error item).
- ``la``: localization accuracy x100 over the captions with a hallucination: the share whose
  localized object (the metric's per-item ``localized`` extra: ALOHa's lowest-ALOHa_o object)
  names a hallucinated word of the grounding. Our rule: an object word matches a caption word
  (lower-cased, stripped of punctuation) when equal, when the caption word is its regular
  plural (``+s``, ``+es``, ``y`` -> ``ies``), or when both have the same singular under
  CHAIR's singulariser (Pattern's ``singularize``, :mod:`capeval.metrics.chair.singular`), so
  irregular plurals match too (men/man, people/person, children/child, teeth/tooth,
  knives/knife): the LLM gives singular objects. Only for metrics that localize; a caption
  without a localized object counts as wrong.

nocaps-FOIL (``nocaps-foil/nocaps-val-foil.json``, the repository's ``data/nocaps-val-foil.json``,
2,500 nocaps val images): per image a ``baseline`` caption and its ``foil`` (one object word
replaced: ``replacement = [original, foil]``), the image's ``references`` and its ``domain``
(in-, near-, out-domain). Both captions are scored; ``ap`` ranks all of them (the foils are the
hallucinated ones), ``la`` asks the foil's localized object to name the foil word; both overall
(headline ``ap``) and per domain (``ap_in-domain``, ...).

ALOHa's protocol option in both: ``no_objects="clean"``. The official code leaves a caption
whose LLM answer lists no object at ``-inf`` (no combination), which no AP can rank; its
``_compute_alohao_scores`` would give such a caption 0.0 under ``min`` (``no_objects="branch"``),
which ranks it as the most hallucinated caption, against the comment above that branch ("If no
target objects predicted, no hallucinations"). ``clean`` follows the comment: such a caption
scores 1.0, ranked least likely hallucinated; a caption with objects but references without
any scores 0.0 as in the branch. ``-O aloha.no_objects=branch`` or ``=error`` choose the others.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any, ClassVar, Mapping

import numpy as np

from capeval.bench._common import count_spec
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, collapse, malformed, read_release_json

ALOHA_COMMIT = "7da6b90ebe392228ea532a84d78eab830c2b3cb2"
ANNOTATIONS = "hat/hat-trainval.json"
NOCAPS_FOIL = "nocaps-foil/nocaps-val-foil.json"
DOMAINS = ("in-domain", "near-domain", "out-domain")
_FOIL_KEYS = ("image_path", "references", "baseline", "foil", "replacement", "domain")
_KEYS = ("sample_id", "caption", "references", "image_path", "contains_hallucination", "grounding")


def average_precision(positive: np.ndarray, score: np.ndarray) -> float:
    """AP of ``positive`` (bool) ranked by ``score`` (higher = more likely positive): sum over
    distinct thresholds, high to low, of (recall_k - recall_{k-1}) * precision_k (sklearn's
    rule: tied scores enter together). NaN without positives or with a NaN score."""
    pos, sc = np.asarray(positive, bool), np.asarray(score, float)
    if sc.size == 0 or np.isnan(sc).any() or not pos.any():
        return float("nan")
    order = np.argsort(-sc, kind="mergesort")
    sc, pos = sc[order], pos[order]
    last = np.r_[np.flatnonzero(np.diff(sc)), sc.size - 1]  # the last index of each distinct score
    tp = np.cumsum(pos)[last]
    precision = tp / (last + 1)
    recall = tp / pos.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def _samples(path: Path) -> list[Any]:
    """The release's JSON list of samples (a one-line error naming the file otherwise)."""
    try:
        data = read_release_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise malformed(path, "JSON", str(exc)) from None
    if not isinstance(data, list) or not data:
        raise malformed(path, "top level", "expected a non-empty list of samples")
    return data


def _norm(word: str) -> str:
    return word.lower().strip(string.punctuation + " ")


def names_word(obj: str, word: str) -> bool:
    """Whether an object word names a caption word: equal, a regular plural of it, or the same
    singular (irregular plurals: ``man`` names ``men``)."""
    o, w = _norm(obj), _norm(word)
    if not o or not w:
        return False
    if w in (o, o + "s", o + "es") or (o.endswith("y") and w == o[:-1] + "ies"):
        return True
    from capeval.metrics.chair.singular import singularize

    return singularize(w) == singularize(o)


def localized_right(obj: str | None, grounding: list[tuple[str, bool]]) -> bool:
    if not obj:
        return False
    bad = [w for w, flag in grounding if flag]
    return any(names_word(o, w) for o in obj.split() for w in bad)


class HAT(Benchmark):
    name = "hat"
    title = "HAT (HAllucination Test, trainval)"
    citation = "Petryk*, Chan* et al. 2024, ALOHa: A New Measure for Hallucination in Captioning Models (NAACL)"
    protocol = ("Each caption of hat-trainval.json scored with its COCO references (and image). ap: average "
                "precision x100 of the captions with a hallucination ranked by the metric's score, lowest first; "
                "la: x100 share of those captions whose localized object names a hallucinated word of the grounding.")
    protocol_id = "aloha-hat-v1"
    files = {ANNOTATIONS: "18abffb627ef6eb8252e21e2e9bfe55d6431f91056467179d7d17ad87ff8969f"}
    human_label = "contains hallucination (1) or not (0)"
    wants_extras: ClassVar[bool] = True
    release: ClassVar[str] = ANNOTATIONS
    keys: ClassVar[tuple[str, ...]] = _KEYS

    def samples(self, root: Path) -> tuple[Path, list[dict[str, Any]]]:
        """The release file and its samples, each a mapping with :attr:`keys` (else a one-line error)."""
        path = self.path(root, self.release)
        data = _samples(path)
        for n, s in enumerate(data):
            if not isinstance(s, dict) or not set(self.keys) <= set(s):
                raise malformed(path, f"sample {n}", f"expected the keys {', '.join(self.keys)}")
        return path, data

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        path, data = self.samples(root)
        items: dict[str, ScoreItem] = {}
        rows = []
        for n, s in enumerate(data):
            sid = str(s["sample_id"])
            if sid in items:
                raise malformed(path, f"sample {n}", f"sample_id {sid!r} occurs twice")
            refs = s["references"]
            if not isinstance(s["caption"], str) or not isinstance(refs, list) or not refs or \
                    not all(isinstance(r, str) for r in refs):
                raise malformed(path, f"sample {sid}", "caption must be text and references a non-empty list of text")
            if not isinstance(s["contains_hallucination"], bool):
                raise malformed(path, f"sample {sid}", "contains_hallucination must be true or false")
            try:
                grounding = [(str(w), bool(flag)) for w, flag in s["grounding"] if isinstance(flag, bool)]
            except (TypeError, ValueError):
                grounding = None
            if grounding is None or len(grounding) != len(s["grounding"]):
                raise malformed(path, f"sample {sid}", "grounding must be [[word, true/false], ...]")
            items[sid] = ScoreItem(collapse(s["caption"]), tuple(collapse(r) for r in refs), image=str(s["image_path"]))
            rows.append((sid, s["contains_hallucination"], grounding))
        info = {"captions": len(rows), "with_hallucination": sum(r[1] for r in rows)}
        return self.loaded(root, path, items, rows, info)

    def loaded(self, root: Path, path: Path, items: dict[str, ScoreItem], rows: list[Any],
               info: dict[str, Any]) -> Loaded:
        """One setting ``all``; ALOHa's protocol option (module docs); the release's sha256 checked."""
        files = self.checksum_files(root, {self.release: path}, info)
        return Loaded(self, {"all": Setting("all", items, description="the images' references")}, rows, files, info,
                      root, metric_options={"aloha": {"no_objects": "clean"}})

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        if "all" not in scores:
            return []
        rows = loaded.data
        positive = np.array([r[1] for r in rows], bool)
        return detection_stats(loaded, scores["all"], positive, [r[2] for r in rows], "", headline=True)


def detection_stats(loaded: Loaded, scores: np.ndarray, positive: np.ndarray, groundings: list[Any], suffix: str,
                    headline: bool = False, rows: np.ndarray | None = None) -> list[StatSpec]:
    """``ap``/``la``/``localized`` over ``rows`` (all when None) of the setting ``all``."""
    sel = np.arange(len(positive)) if rows is None else np.asarray(rows)
    sc = -np.asarray(scores, float)[sel]  # lowest score first: the most likely hallucinated
    pos = positive[sel]
    out = [StatSpec("ap" + suffix, lambda u: 100.0 * average_precision(pos if u is None else pos[u],
                                                                       sc if u is None else sc[u]),
                    n=int(sel.size), n_units=int(sel.size), setting="all", headline=headline)]
    localized = (loaded.extras.get("all") or {}).get("localized")
    if isinstance(localized, Mapping):
        keys = list(loaded.settings["all"].items)
        right = np.array([localized_right(localized.get(keys[k]), groundings[k]) for k in sel], float)
        hal = np.flatnonzero(pos)

        def la(units: np.ndarray | None) -> float:
            chosen = hal if units is None else units[pos[units]]
            return 100.0 * float(right[chosen].mean()) if chosen.size else float("nan")

        out.append(StatSpec("la" + suffix, la, n=int(hal.size), n_units=int(sel.size), setting="all"))
        if not suffix:
            out.append(count_spec("localized", float(sum(localized.get(k) is not None for k in keys)), len(keys),
                                  "all"))
    return out


class NocapsFoil(HAT):
    name = "nocaps-foil"
    title = "nocaps-FOIL (nocaps val, one object word replaced)"
    protocol = ("Each baseline caption and its foil of nocaps-val-foil.json scored with the image's references. ap: "
                "average precision x100 of the foils among all captions ranked by the metric's score, lowest "
                "first; la: x100 share of foils whose localized object names the foil word; overall and per domain.")
    protocol_id = "aloha-nocaps-foil-v1"
    files = {NOCAPS_FOIL: "ec15966bbaf4ba7faa5cb3eb6a5ebbd4b38bc3345de42b7f0e5f6cc333f642ca"}
    human_label = "foil (1) or original (0)"
    release = NOCAPS_FOIL
    keys = _FOIL_KEYS

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        path, data = self.samples(root)
        items: dict[str, ScoreItem] = {}
        rows = []
        for n, s in enumerate(data):
            refs, rep = s["references"], s["replacement"]
            texts = [s["baseline"], s["foil"], *(refs if isinstance(refs, list) else [None])]
            if not isinstance(refs, list) or not refs or not all(isinstance(t, str) for t in texts):
                raise malformed(path, f"sample {n}", "baseline, foil must be text and references a non-empty list of text")
            if not (isinstance(rep, list) and len(rep) == 2 and all(isinstance(w, str) for w in rep)):
                raise malformed(path, f"sample {n}", "replacement must be [original word, foil word]")
            if s["domain"] not in DOMAINS:
                raise malformed(path, f"sample {n}", f"domain must be one of {', '.join(DOMAINS)}")
            r = tuple(collapse(x) for x in refs)
            items[f"{n}/baseline"] = ScoreItem(collapse(s["baseline"]), r, image=str(s["image_path"]))
            items[f"{n}/foil"] = ScoreItem(collapse(s["foil"]), r, image=str(s["image_path"]))
            rows.append((s["domain"], rep[1]))
        info = {"pairs": len(rows), **{d: sum(r[0] == d for r in rows) for d in DOMAINS}}
        return self.loaded(root, path, items, rows, info)

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        rows = loaded.data
        if "all" not in scores:
            return []
        positive = np.tile([False, True], len(rows))  # items alternate baseline, foil
        groundings = [g for _, word in rows for g in ([], [(w, True) for w in word.split()])]
        domains = np.repeat([d for d, _ in rows], 2)
        out = detection_stats(loaded, scores["all"], positive, groundings, "", headline=True)
        for d in DOMAINS:
            out += detection_stats(loaded, scores["all"], positive, groundings, "_" + d,
                                   rows=np.flatnonzero(domains == d))
        return out
