"""HICE-S and RefHICE-S scorer (Zeng et al., ACM MM 2024, "HICEScore").

Per item (image I, candidate C, references R_h), with Alpha-CLIP encoders C_v, C_t and every
cosine clipped at 0 (formulas in :mod:`capeval.functional.hice`)::

    gITC = cos(C_v(I, full mask), C_t(C))                      Eq. 2
    lITC = hMean(P, R) over regions {A_n} x phrases of C       Eq. 4-6
    gTTC = refs-combined cos(C_t(r), C_t(C)), r in R_h         Eq. 3
    lTTC = hMean(P, R) over phrases of R_h x phrases of C      Eq. 7-9
    hice-s     = w * hMean(gITC, lITC)                         Eq. 10    range [0, w], higher is better
    ref-hice-s = w * hMean(gITC, lITC, gTTC, lTTC)             Eq. 11    range [0, w], higher is better

Choices where the paper is silent (all options, all in the signature):

- ``w`` = 2.5 (the paper has none): the scale of its reported numbers and of its 0.5
  thresholds (see :mod:`.explain`); hMean is homogeneous, so w never changes a ranking.
- ``prompt`` = "" : Eq. 2-3 embed the caption itself (CLIP-S's "A photo depicts " is optional).
- ``refs`` = "max": gTTC over several references is the max cosine (RefCLIP-S), or "mean".
- ``ref_phrases`` = "pool": lTTC matches against one set F_{R_h} of all references' phrases
  (each distinct phrase once), as the paper's notation and SPICE's pooling; "max" / "mean":
  lTTC per reference, then combined.
- No phrase -> the whole caption is the one phrase (its embedding is the global one);
  no region -> the full image is the one region; negative cosines -> 0 before max/mean.
- Regions: ``regions="sam"`` (transformers' SAM, default checkpoint ``facebook/sam-vit-base``,
  SAM's own everything-mode defaults) because the paper's MobileSAMv2 has no package and no
  hub weights (``regions="mobilesamv2"`` runs it when installed); ``"grid"`` is a no-weights
  fallback whose scores are not HICE-S as published. ``region_options`` go to the backend.
- Phrases: ``parser="factual"`` (default), the paper's FACTUAL flan-t5 parser (Sec. 4.1,
  ``parser_model`` = hub name or folder, default ``lizhuang144/flan-t5-base-VG-factual-sg``,
  fetched by ``capeval download factual``); ``"spice"`` (capeval's SPICE scene-graph parser,
  offline, no weights) is an option whose scores are not HICE-S as published.
- Alpha-CLIP masks: ``crop`` geometry (the mask resized and centre-cropped as the image; in
  the signature with the backbone), see :mod:`capeval.models.clip.alpha_mask`.
System score: mean of item scores. Extras: ``parts`` (every part, on the w scale), counters,
and with ``explanations=True`` (default) per-item ``explanations`` (schema in :mod:`.explain`); with
``explain_dir`` (or :meth:`HiceScore.explain`) each item's ``<id>.json`` and ``<id>.png`` are
written there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from capeval import truncation
from capeval.errors import InputError, ResourceError
from capeval.functional import hice as F
from capeval.io.images import image_metric_inputs
from capeval.io.inputs import raise_bad_items
from capeval.metrics.hice import explain as ex
from capeval.metrics.hice.phrases import make_parser, phrases_or_caption
from capeval.metrics.hice.visual import RegionEmbedder, source_key
from capeval.models.clip.embed import embed_texts, l2_normalize
from capeval.models.regions.base import settings_hash
from capeval.progress import make_progress
from capeval.registry import DEFAULTS
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

IMAGE_CHUNK = 8  # images segmented and embedded together (bounds memory: masks live one chunk)


class HiceScore(ScorerBase):
    """HICE-S and RefHICE-S (Zeng et al. 2024) with an Alpha-CLIP backbone; range [0, w], higher is better."""

    produces: ClassVar[tuple[str, ...]] = ("hice-s", "ref-hice-s")
    default_backbone: ClassVar[str] = DEFAULTS["hice-s"]["backbone"]

    def __init__(self, metrics: Sequence[str] | None = None, backbone: Any = None, device: str = "cpu",
                 regions: Any = DEFAULTS["hice-s"]["regions"], region_options: dict[str, Any] | None = None,
                 max_regions: int | None = None, parser: Any = DEFAULTS["hice-s"]["parser"], parser_model: str | None = None,
                 phrase_objects: str = "unrelated", refs: str = "max", ref_phrases: str = "pool",
                 w: float = DEFAULTS["hice-s"]["w"], prompt: str = "", incorrect_below: float = 0.5,
                 unmentioned_below: float = 0.5, explanations: bool = True, explain_dir: str | None = None,
                 batch_size: int = 32, text_batch_size: int = 256, cache: Any = None,
                 checkpoint_dir: str | None = None):
        self.metrics = self._select(metrics)
        if refs not in F.REF_MODES:
            raise InputError(f"hice-s option refs={refs!r}: use one of {', '.join(F.REF_MODES)}")
        if ref_phrases not in ("pool",) + F.REF_MODES:
            raise InputError(f"hice-s option ref_phrases={ref_phrases!r}: use pool, max or mean")
        for name, value in (("w", w), ("incorrect_below", incorrect_below), ("unmentioned_below", unmentioned_below)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0 \
                    or (name == "w" and value == 0):
                raise InputError(f"hice-s option {name}={value!r}: expected a {'positive' if name == 'w' else 'non-negative'} number")
        if max_regions is not None and (isinstance(max_regions, bool) or not isinstance(max_regions, int) or max_regions < 1):
            raise InputError(f"hice-s option max_regions={max_regions!r}: expected a positive integer or None")
        self.w, self.prompt = float(w), prompt
        self.refs, self.ref_phrases = refs, ref_phrases
        self.incorrect_below, self.unmentioned_below = float(incorrect_below), float(unmentioned_below)
        self.explanations, self.explain_dir = bool(explanations), explain_dir
        self.text_batch_size, self.cache = text_batch_size, cache
        # the parser first: a missing FACTUAL model is reported before Alpha-CLIP and SAM load
        self.parser = make_parser(parser, parser_model, phrase_objects, device, checkpoint_dir)
        from capeval.models.clip.backbone import as_backbone

        backbone = as_backbone(backbone, self.default_backbone, device=device, checkpoint_dir=checkpoint_dir)
        if not all(hasattr(backbone, a) for a in ("encode_images_with_masks", "load_mask", "full_alpha")):
            raise InputError(f"hice-s needs an Alpha-CLIP backbone (e.g. {self.default_backbone}); "
                             f"{getattr(backbone, 'name', type(backbone).__name__)} is a plain CLIP")
        self.backbone = backbone
        self.regions = self._region_backend(regions, dict(region_options or {}), device)
        self.embedder = RegionEmbedder(backbone, self.regions, batch_size, cache, max_regions)
        self.max_regions = max_regions
        self._signatures: dict[tuple[str, str], Signature] = {}

    @classmethod
    def preflight(cls, options: Mapping[str, Any]) -> None:
        """Before any model loads: the default FACTUAL parser's model must be on this machine
        (one-line :class:`ResourceError` naming ``capeval download factual`` and ``parser=spice``)."""
        parser = options.get("parser", DEFAULTS["hice-s"]["parser"])
        if isinstance(parser, str) and parser.strip().lower() == "factual":
            from capeval.metrics.hice.factual import DEFAULT_CHECKPOINT, check_available

            check_available(options.get("parser_model") or DEFAULT_CHECKPOINT, options.get("checkpoint_dir"))

    def _region_backend(self, regions: Any, options: dict[str, Any], device: str) -> Any:
        if not isinstance(regions, str):
            if not (hasattr(regions, "masks") and hasattr(regions, "settings")):
                raise InputError(f"hice-s option regions: expected a backend name or an object with masks() and "
                                 f"settings(), got {type(regions).__name__}")
            return regions
        from capeval.models.regions import region_backend

        key = regions.strip().lower()
        if key == "sam":
            options.setdefault("device", device)
        mask_cache = self.cache
        if self.cache not in (None, False, True):
            mask_cache = Path(self.cache) / "regions"
        try:
            return region_backend(key, cache=mask_cache, **options)
        except ResourceError as exc:
            raise ResourceError(f"hice-s regions={key!r}: {exc} (regions='grid' needs no weights, but its scores "
                                "are not HICE-S as published)") from exc

    # -- signature ------------------------------------------------------------------------
    def signature(self, metric: str, n_ref: list[int] | None = None) -> Signature:
        """Everything the numbers depend on: backbone, regions, parser, modes, w, prompt, thresholds, versions."""
        key = (metric, f"{min(n_ref)}-{max(n_ref)}" if n_ref else "")
        if key not in self._signatures:
            self._signatures[key] = self._build_signature(metric, n_ref)
        return self._signatures[key]

    def _build_signature(self, metric: str, n_ref: list[int] | None) -> Signature:
        import PIL
        import torch

        sig = dict(self.backbone.signature)
        settings = self.regions.settings()
        params: dict[str, Any] = {"backbone": sig.pop("backbone"), "w": self.w, "prompt": json.dumps(self.prompt),
                                  "regions": settings.get("backend", getattr(self.regions, "name", "custom")),
                                  "regions_sha": settings_hash(settings)[:16],
                                  "regions_checkpoint": settings.get("checkpoint"),
                                  "max_regions": self.max_regions or "all"}
        params.update(self.parser.signature_fields())
        if metric.startswith("ref-"):
            params.update({"refs": self.refs, "ref_phrases": self.ref_phrases})
            if n_ref:
                lo, hi = min(n_ref), max(n_ref)
                params["nrefs"] = str(lo) if lo == hi else f"{lo}-{hi}"
        params["thresholds"] = f"incorrect<{self.incorrect_below:g},unmentioned<{self.unmentioned_below:g}"
        params.update(sig)
        versions = {"torch": torch.__version__, "numpy": np.__version__, "pillow": PIL.__version__}
        try:
            import transformers

            versions["transformers"] = transformers.__version__
        except ImportError:
            pass
        params["versions"] = versions
        return Signature.build(metric, **params)

    # -- scoring ----------------------------------------------------------------------------
    def explain(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
                      *, images: Any, out_dir: str | os.PathLike[str], skip_bad_items: bool = False,
                      progress: bool | None = False) -> Report:
        """:meth:`score`, also writing each item's ``<id>.json`` and ``<id>.png`` into ``out_dir``."""
        return self._score(candidates, references, images, skip_bad_items, progress, os.fspath(out_dir))

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``images`` (folder or ``{id: image}``) and optional references."""
        return self._score(candidates, references, images, skip_bad_items, progress, self.explain_dir)

    def _score(self, candidates: Any, references: Any, images: Any, skip_bad_items: bool, progress: bool | None,
               explain_dir: str | None) -> Report:
        cands, refs, ids, sources, bad = image_metric_inputs(candidates, references, images, self.metrics)
        raise_bad_items(ids, bad, skip_bad_items)
        good = [i for i in ids if i not in bad]
        if not good:
            raise InputError("no usable items: every item was skipped")
        # every distinct caption parsed once, every distinct text embedded once
        texts = list(dict.fromkeys([cands[i] for i in good] + [r for i in good for r in (refs or {}).get(i, [])]))
        parsed = dict(zip(texts, self.parser.phrases(texts)))
        phrase_sets = {t: phrases_or_caption(parsed[t], t) for t in texts}
        all_texts = list(dict.fromkeys(texts + [p for t in texts for p in phrase_sets[t][0]]))
        feats = l2_normalize(embed_texts(self.backbone, [self.prompt + t for t in all_texts], self.text_batch_size,
                                         self.cache, progress, stats=(txt_stats := {})))
        emb = dict(zip(all_texts, feats))
        by_image: dict[Any, list[str]] = {}
        for i in good:
            by_image.setdefault(source_key(sources[i]), []).append(i)
        out: dict[str, dict[str, Any]] = {}
        explanations: dict[str, dict[str, Any]] = {}
        keys = list(by_image)
        with make_progress(len(keys), "hice images", progress) as bar:
            for start in range(0, len(keys), IMAGE_CHUNK):
                chunk = keys[start: start + IMAGE_CHUNK]
                pils, labels, owners = self._open(chunk, by_image, sources, bad, skip_bad_items)
                irs = self.embedder.embed(pils, labels, keep_masks=explain_dir is not None) if pils else []
                for pil, ir, items in zip(pils, irs, owners):
                    for i in items:
                        parts, expl = self._item(i, cands[i], (refs or {}).get(i), ir, emb, phrase_sets, sources[i])
                        out[i] = parts
                        if self.explanations or explain_dir is not None:
                            explanations[i] = expl
                        if explain_dir is not None:
                            ex.write(explain_dir, expl, pil, ir.masks or [])
                bar.update(len(chunk))
        good = [i for i in ids if i in out]
        if not good:
            raise InputError("no usable items: every item was skipped")
        cut = txt_stats.get("truncated_texts", set())
        ref_lists = None if refs is None else ([self.prompt + r for r in refs[i]] for i in good)
        parser_cut = getattr(self.parser, "cut", set())  # FACTUAL's 64-token input (the SPICE parser cuts nothing)
        counters = {"unique_texts": txt_stats.get("unique_texts", 0),
                    "truncated_texts": txt_stats.get("truncated", 0),
                    **truncation.tally((self.prompt + cands[i] for i in good), ref_lists, cut),
                    **truncation.tally((cands[i] for i in good), None if refs is None else (refs[i] for i in good),
                                       parser_cut, part="parser"),
                    "phrase_fallbacks": sum(1 for i in good if phrase_sets[cands[i]][1]),
                    **{f"region_{k}": v for k, v in self.embedder.stats.items()}}
        skipped = tuple(i for i in ids if i in bad)
        n_ref = [len(refs[i]) for i in good] if refs is not None else None
        results = []
        for metric in self.metrics:
            items = {i: out[i][metric] for i in good}
            extras: dict[str, Any] = {"scale": f"w*max(cos,0), w={self.w:g}", **counters,
                                      "parts": {i: {k: v for k, v in out[i].items() if k not in self.produces}
                                                for i in good}}
            if explanations and metric == self.metrics[0]:  # once per report, not once per metric
                extras["explanations"] = {i: explanations[i] for i in good}
            results.append(MetricResult(metric, float(np.mean(list(items.values()))), items,
                                        self.signature(metric, n_ref if metric.startswith("ref-") else None),
                                        extras, skipped))
        return Report(results)

    def _open(self, chunk: list[Any], by_image: dict[Any, list[str]], sources: dict[str, Any], bad: dict[str, str],
              skip: bool) -> tuple[list[Any], list[str], list[list[str]]]:
        """Decoded PIL images of a chunk, their labels and item lists; undecodable images make bad items."""
        from capeval.models.clip.preprocess import open_image

        pils, labels, owners = [], [], []
        for key in chunk:
            items = by_image[key]
            try:
                pil = open_image(sources[items[0]], items[0])
                pil.load()
                if pil.size[0] < 1 or pil.size[1] < 1:
                    raise InputError(f"empty image ({pil.size[0]}x{pil.size[1]})")
            except InputError as exc:
                msg = str(exc)
                for i in items:
                    bad[i] = msg if msg.startswith("item ") else f"item {i!r}: {msg}"
                if not skip:
                    raise InputError(bad[items[0]], items[0]) from None
                continue
            pils.append(pil)
            labels.append(items[0])
            owners.append(items)
        return pils, labels, owners

    def _item(self, i: str, caption: str, refs: list[str] | None, ir: Any, emb: dict[str, np.ndarray],
              phrase_sets: dict[str, tuple[list[str], bool]], source: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """(parts and scores on the w scale, explanation) of one item."""
        w = self.w
        cand = emb[caption]
        phrases, phrase_fallback = phrase_sets[caption]
        fc = np.stack([emb[p] for p in phrases])
        g_itc = float(ir.global_emb @ cand)
        m = F.set_match(ir.region_emb @ fc.T)
        parts: dict[str, Any] = {"g_itc": w * float(F.clipped(g_itc)), "l_itc": w * m.f,
                                 "precision": w * m.precision, "recall": w * m.recall,
                                 "hice-s": float(F.hice_s(g_itc, m.f, w))}
        ttc: dict[str, Any] = dict.fromkeys(("g_ttc", "l_ttc", "ttc_precision", "ttc_recall", "ref-hice-s"))
        if refs is not None:
            g_ttc = F.combine_refs(F.clipped([float(emb[r] @ cand) for r in refs]), self.refs)
            if self.ref_phrases == "pool":
                pooled = list(dict.fromkeys(p for r in refs for p in phrase_sets[r][0]))
                lm = F.set_match(np.stack([emb[p] for p in pooled]) @ fc.T)
                l_ttc, tp, tr = lm.f, lm.precision, lm.recall
            else:
                per = [F.set_match(np.stack([emb[p] for p in phrase_sets[r][0]]) @ fc.T) for r in refs]
                l_ttc = F.combine_refs([x.f for x in per], self.ref_phrases)
                tp = F.combine_refs([x.precision for x in per], self.ref_phrases)
                tr = F.combine_refs([x.recall for x in per], self.ref_phrases)
            ttc = {"g_ttc": w * g_ttc, "l_ttc": w * l_ttc, "ttc_precision": w * tp, "ttc_recall": w * tr,
                   "ref-hice-s": float(F.ref_hice_s(g_itc, m.f, g_ttc, l_ttc, w))}
            parts.update(ttc)
        phrase_rows = [{"index": k, "text": p, "precision": w * float(m.column_best[k]),
                        "best_region": int(m.column_arg[k]), "correct": bool(w * m.column_best[k] >= self.incorrect_below)}
                       for k, p in enumerate(phrases)]
        region_rows = [{"index": n, "bbox": list(ir.bboxes[n]), "area": int(ir.areas[n]), "quality": float(ir.scores[n]),
                        "recall": w * float(m.row_best[n]), "best_phrase": int(m.row_arg[n]),
                        "mentioned": bool(w * m.row_best[n] >= self.unmentioned_below)}
                       for n in range(len(ir.bboxes))]
        expl = {
            "schema": ex.SCHEMA_VERSION, "id": i, "caption": caption,
            "image": os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<memory>",
            "image_size": list(ir.size), "references": list(refs) if refs is not None else None,
            "scale": {"w": w, "formula": "w*max(cos,0)"},
            "thresholds": {"incorrect_below": self.incorrect_below, "unmentioned_below": self.unmentioned_below},
            "scores": {k: parts.get(k) for k in ("hice-s", "g_itc", "l_itc", "precision", "recall")} | ttc,
            "phrases": phrase_rows, "phrase_fallback": phrase_fallback,
            "regions": region_rows, "region_fallback": bool(ir.fallback),
            "incorrect": [p["text"] for p in phrase_rows if not p["correct"]],
            "unmentioned": [r["index"] for r in region_rows if not r["mentioned"]],
            "signature": str(self.signature("hice-s")),
        }
        return parts, expl
