"""Scorers behind ``emscore`` / ``ref-emscore`` and ``pac-s-video`` / ``ref-pac-s-video``.

EMScore (Shi et al., CVPR 2022) with OpenAI CLIP ViT-B/32 by default, and the same formulas
on the PAC-S ViT-B/32 backbone for PAC-S's video evaluation (Sarto et al., CVPR 2023). Item
score: ``full_F``; reference-free = ``(F + coarse) / 2`` of the caption against the video,
reference-based = the mean of that and the same quantity against the references (each in
[-1, 1], in practice about 0.1-0.4 for CLIP; higher is better). System score: mean of items.
The formulas, and where capeval deliberately differs from the reference code, are in
:mod:`capeval.metrics.emscore.formulas`; how videos are read and frames sampled in
:mod:`capeval.io.video`.

PAC-S for video
    No official code for it is public (aimagelab/pacscore, checked at commit bfbc488, has
    image evaluation only: no video, frame or IDF code anywhere). The paper evaluates videos
    with EMScore's formulation on the PAC-S backbone; third-party reproductions swap the CLIP
    model inside EMScore's code. So: EMScore's text handling, i.e. the raw caption *without*
    the ``"A photo depicts"`` prefix of image PAC-S, no ``w`` rescaling (EMScore's formula
    has none; image PAC-S's ``w=2.0`` does not apply), and EMScore's IDF rules and default
    corpus. ``prefix=`` is available for experiments and is recorded in the signature when
    set.
"""

from __future__ import annotations

import math
import os
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import torch

from capeval import truncation
from capeval.errors import InputError
from capeval.io.inputs import check_same_ids, normalize_candidates, normalize_references
from capeval.result import MetricResult, Report, Signature
from capeval.registry import DEFAULTS
from capeval.scorer import ScorerBase
from capeval.metrics.emscore import formulas as em
from capeval.metrics.emscore import features
from capeval.metrics.emscore import idf as idf_mod
from capeval.io import video as vf



def _versions() -> dict[str, str]:
    out = {"torch": torch.__version__.split("+")[0]}
    try:
        import av

        out["av"] = av.__version__
    except ImportError:
        pass
    return out


class EMScore(ScorerBase):
    """EMScore (reference-free) and EMScore with references, on a CLIP backbone.

    Options: ``backbone`` (checkpoint name, path, or a loaded ``ClipBackbone``), ``device``,
    ``n_frames`` (10, VATEX-EVAL's uniform sampling; ``None`` = every frame, as
    ``EMScorer.score`` on video files), ``idf`` (the corpus of the IDF table, recorded in
    the signature: ``True``/``"auto"``, the default, does what the official
    ``EMScorer.score`` does: the reference sentences whenever references are passed to
    :meth:`score`, flattened per candidate, for *both* metrics (the reference-free part
    too), else the candidates; ``"references"``; ``"candidates"``; ``False``/``"none"`` =
    weight 1 for every token; or a list of sentences = a fixed corpus, such as the training
    captions that EMScore's VATEX-EVAL and ActivityNet-FOIL scripts use and that
    ``capeval bench`` passes for those benchmarks), ``batch_size`` (texts/items per
    batch), ``frame_batch_size``, ``prefix`` (prepended to every caption; none by default),
    ``fps`` (frame rate of frame folders / arrays / frame lists, needed only to cut segments
    of them: frame ``i`` is at ``i / fps``; video files use their own timestamps).

    Needs ``videos=`` (folder or ``{id: video}``) at :meth:`score`; the ``ref-`` metric also
    references. ``segments={id: (start_s, end_s)}`` scores those items on a time window of
    their video: ``n_frames`` are sampled uniformly from the frames with ``start <= t <= end``
    (rule, timestamps and clamping in :mod:`capeval.io.video`); each video file is
    decoded once and each of its frames embedded at most once per call, however many
    segments use it. Extras per item: fine-grained ``precision``/``recall``/``f`` and ``coarse``
    (with ``video_``/``ref_`` prefixes for the reference-based metric), ``total_frames`` (T),
    ``segment_frames`` (frames in the window, segment items only), and counters ``n_truncated`` (captions cut at the
    backbone's context, 77 tokens for CLIP, ``[EOT]`` kept; the reference code errors instead;
    split into ``truncated_candidates``/``truncated_references`` as every text encoder reports
    them, :mod:`capeval.truncation`), ``n_zero_idf`` and ``n_negative_max`` (see
    :mod:`capeval.metrics.emscore.formulas`).
    """

    produces: ClassVar[tuple[str, ...]] = ("emscore", "ref-emscore")
    default_backbone: ClassVar[str] = DEFAULTS["emscore"]["backbone"]
    variant: ClassVar[str] = "emscore"

    def __init__(
        self,
        metrics: Sequence[str] | None = None,
        backbone: Any = None,
        device: str = "cpu",
        n_frames: int | None = vf.DEFAULT_N_FRAMES,
        idf: bool | str | Sequence[str] = True,
        batch_size: int = 64,
        frame_batch_size: int = 64,
        prefix: str = "",
        checkpoint_dir: str | None = None,
        tokenizer: str | None = None,
        fps: float | str | None = None,
        workers: int | None = None,
    ):
        self.metrics = self._select(metrics)
        if workers is not None and (isinstance(workers, bool) or int(workers) < 1):
            raise InputError(f"workers must be a positive integer, got {workers!r}")
        self.workers = int(workers) if workers is not None else 2  # video decoding threads
        if n_frames is not None:
            vf.sample_indices(1, n_frames)  # validates
        self.n_frames = n_frames
        self.idf = idf_mod.check_idf(idf)
        if int(batch_size) < 1 or int(frame_batch_size) < 1:
            raise InputError("batch sizes must be positive")
        self.batch_size = int(batch_size)
        self.frame_batch_size = int(frame_batch_size)
        if not isinstance(prefix, str):
            raise InputError(f"prefix must be a string, got {type(prefix).__name__}")
        self.prefix = prefix
        if fps is not None:
            try:
                ok = vf.exact_fraction(fps) > 0
            except (TypeError, ValueError, ZeroDivisionError):
                ok = False
            if not ok:
                raise InputError(f"fps must be a positive number (frames per second), got {fps!r}")
        self.fps = fps
        self.backbone = self._load_backbone(backbone, device, checkpoint_dir, tokenizer)
        self.shared_idf: tuple[em.Idf, str] | None = None  # set by use_idf

    # -- construction helpers ------------------------------------------------------------
    def fit(self, references: Mapping[Any, Any] | Sequence[Sequence[str]]) -> "EMScore":
        """Fix the IDF table to the sentences of ``references`` (``{id: [ref, ...]}`` or a list of
        lists), in order, as ``idf="references"`` would build it from a call's own references."""
        if not isinstance(references, Mapping):
            references = {str(k): list(v) for k, v in enumerate(references)}
        refs = normalize_references(references)
        self.idf = idf_mod.check_idf([r for rs in refs.values() for r in rs])
        self.shared_idf = None
        return self

    def use_idf(self, table: tuple[em.Idf, str] | None) -> None:
        """Score with ``table`` (IDF, signature text) counted over a whole corpus split into
        parts (:func:`capeval.metrics.emscore.idf.scorer_counts`); None: back to per call."""
        self.shared_idf = table

    def _load_backbone(self, backbone: Any, device: str, checkpoint_dir: str | None, tokenizer: str | None) -> Any:
        if backbone is not None and not isinstance(backbone, (str, os.PathLike)):
            if not hasattr(backbone, "encode_text_tokens"):
                raise InputError(f"backbone must be a checkpoint name, a path or a ClipBackbone, got {type(backbone).__name__}")
            return backbone
        from capeval.models.clip.backbone import load_backbone

        return load_backbone(backbone or self.default_backbone, device=device or "cpu",
                             checkpoint_dir=checkpoint_dir, tokenizer=tokenizer)

    @property
    def _names(self) -> tuple[str, str]:
        return self.produces[0], self.produces[1]

    # -- scoring --------------------------------------------------------------------------
    def score(
        self,
        candidates: Mapping[Any, Any] | Sequence[str],
        references: Mapping[Any, Any] | None = None,
        *,
        videos: Any = None,
        segments: Mapping[Any, Any] | None = None,
        skip_bad_items: bool = False,
        progress: bool | None = False,
        **inputs: Any,
    ) -> Report:
        """Score ``{id: caption}`` against each item's video (and ``{id: [reference, ...]}``).

        ``segments``: ``{id: (start_s, end_s)}`` for items scored on a time window of their
        video (see the class notes); other items use the whole video.
        """
        if inputs:
            raise InputError(f"{type(self).__name__}: unexpected inputs {sorted(inputs)}")
        free_name, ref_name = self._names
        want_ref = ref_name in self.metrics
        cands = normalize_candidates(candidates)
        refs: dict[str, list[str]] | None = None
        # the official scorer takes its IDF corpus from the references whenever they are given
        if want_ref or self.idf == "references" or (self.idf == "auto" and references is not None):
            if references is None:
                raise InputError(f"{ref_name if want_ref else 'idf=references'} needs references; none were given")
            refs = normalize_references(references)
            check_same_ids(cands, refs)
        index = vf.as_video_index(videos)
        seg_in = self._check_segments(segments, cands)

        # 1. videos: sample, embed each unique frame of each source once
        skipped: list[str] = []
        video_of: dict[str, tuple[Any, Any]] = {}  # item -> unit = (source key, window)
        sources: dict[Any, Any] = {}
        windows: dict[Any, dict[tuple[Any, Any], Any]] = {}
        owners: dict[tuple[Any, Any], str] = {}
        for item in cands:
            try:
                src = vf.resolve_source(index, item)
                window = vf.parse_segment(seg_in[item], item) if item in seg_in else None
            except InputError:
                if not skip_bad_items:
                    raise
                skipped.append(item)
                continue
            key = vf.source_key(src)
            sources.setdefault(key, src)
            unit = (key, window)
            windows.setdefault(key, {})[unit] = window
            owners.setdefault(unit, item)
            video_of[item] = unit
        feats, sampled, failed = self._embed_videos(sources, windows, owners, skip_bad_items, progress)
        for item, unit in list(video_of.items()):
            if unit in failed:
                skipped.append(item)
                del video_of[item]
        totals = {u: s.total for u, s in sampled.items()}
        ids = [i for i in cands if i in video_of]
        skipped_set = set(skipped)
        skipped = [i for i in cands if i in skipped_set]

        # 2. texts: tokenise and embed each unique text once
        cand_text = {i: self.prefix + cands[i] for i in ids}
        ref_text = {i: [self.prefix + r for r in refs[i]] for i in ids} if refs is not None else {}
        texts = list(dict.fromkeys([*cand_text.values(), *(r for rs in ref_text.values() for r in rs)]))
        tok_ids, truncated = self._tokenize(texts)
        tok_feats = self._embed_texts(texts, tok_ids)

        results: list[MetricResult] = []
        base_sig = self._signature_params(bool(seg_in))
        idf, idf_desc = self._idf_table(refs is not None, ids, cand_text, ref_text, tok_ids)
        if free_name in self.metrics:
            v = self._video_part(ids, cand_text, video_of, feats, tok_ids, tok_feats, idf)
            cut = truncation.tally((cand_text[i] for i in ids), None, truncated)
            n_trunc = cut[truncation.CANDIDATES]
            extras = {
                **cut,
                "precision": _per_item(ids, v["P"]), "recall": _per_item(ids, v["R"]),
                "f": _per_item(ids, v["F"]), "coarse": _per_item(ids, v["coarse"]),
                "total_frames": {i: totals[video_of[i]] for i in ids},
                **self._segment_extras(ids, video_of, sampled),
                "n_truncated": n_trunc, "n_zero_idf": int(v["zero_idf"].sum()),
                "n_negative_max": int(v["negative"].sum()),
            }
            scores = v["full"]
            sig = Signature.build(free_name, **base_sig, idf=idf_desc, versions=_versions())
            results.append(self._result(free_name, ids, scores, sig, extras, skipped))
        if want_ref:
            assert refs is not None
            v = self._video_part(ids, cand_text, video_of, feats, tok_ids, tok_feats, idf)
            r = self._ref_part(ids, cand_text, ref_text, tok_ids, tok_feats, idf)
            scores = (v["full"] + r["full"]) / 2
            cut = truncation.tally((cand_text[i] for i in ids), (ref_text[i] for i in ids), truncated)
            n_trunc = cut[truncation.CANDIDATES] + cut[truncation.REFERENCES]
            extras = {
                **cut,
                "video_precision": _per_item(ids, v["P"]), "video_recall": _per_item(ids, v["R"]),
                "video_f": _per_item(ids, v["F"]), "video_coarse": _per_item(ids, v["coarse"]),
                "ref_precision": _per_item(ids, r["P"]), "ref_recall": _per_item(ids, r["R"]),
                "ref_f": _per_item(ids, r["F"]), "ref_coarse": _per_item(ids, r["coarse"]),
                "total_frames": {i: totals[video_of[i]] for i in ids},
                **self._segment_extras(ids, video_of, sampled),
                "n_truncated": n_trunc,
                "n_zero_idf": int((v["zero_idf"] | r["zero_idf"]).sum()),
                "n_negative_max": int((v["negative"] | r["negative"]).sum()),
            }
            counts = sorted({len(refs[i]) for i in ids}) or [0]
            nrefs = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
            sig = Signature.build(ref_name, **base_sig, idf=idf_desc, nrefs=nrefs, versions=_versions())
            results.append(self._result(ref_name, ids, scores, sig, extras, skipped))
        return Report(results)

    # -- steps ----------------------------------------------------------------------------
    def _check_segments(self, segments: Mapping[Any, Any] | None, cands: Mapping[str, str]) -> dict[str, Any]:
        """``segments`` with str keys; every id must be a candidate id (values parsed later)."""
        if segments is None:
            return {}
        if not isinstance(segments, Mapping):
            raise InputError(f"segments must be a mapping {{id: (start_s, end_s)}}, got {type(segments).__name__}")
        out: dict[str, Any] = {}
        for key, value in segments.items():
            k = str(key)
            if k in out:
                raise InputError(f"segment id {k!r} appears twice (ids are compared as strings)", k)
            if k not in cands:
                raise InputError(f"segments has id {k!r}, which is not a candidate id", k)
            out[k] = value
        return out

    @staticmethod
    def _segment_extras(ids: list[str], video_of: dict[str, Any], sampled: dict[Any, Any]) -> dict[str, Any]:
        counts = {i: sampled[video_of[i]].window_frames for i in ids if video_of[i][1] is not None}
        return {"segment_frames": counts} if counts else {}

    def _signature_params(self, with_segments: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"variant": f"{self.variant}:full_F"}
        params.update(self.backbone.signature)
        params.update({
            "frames": self.n_frames if self.n_frames is not None else "all",
            "sampling": vf.SAMPLING,
            "decode": "pyav:rgb24",
            "tokens": "sot..eot",
            "prefix": repr(self.prefix) if self.prefix else None,
            "segments": vf.SEGMENT_RULE if with_segments else None,
            "fps": str(self.fps) if with_segments and self.fps is not None else None,
        })
        return params

    def _result(self, name: str, ids: list[str], scores: torch.Tensor, sig: Signature,
                extras: dict[str, Any], skipped: list[str]) -> MetricResult:
        values = [float(x) for x in scores.tolist()]
        system = float(np.mean(values)) if values else math.nan
        return MetricResult(name, system, dict(zip(ids, values)), sig, extras, tuple(skipped))

    def _tokenize(self, texts: list[str]) -> tuple[dict[str, list[int]], set[str]]:
        out: dict[str, list[int]] = {}
        cut: set[str] = set()
        for t in texts:  # one at a time to know which were truncated
            ids, n = self.backbone.tokenize([t])
            out[t] = list(ids[0])
            if n:
                cut.add(t)
        return out, cut

    def _embed_texts(self, texts: list[str], tok_ids: dict[str, list[int]]) -> dict[str, torch.Tensor]:
        return features.token_features(self.backbone, texts, tok_ids, self.batch_size)

    def _embed_videos(self, sources: dict[Any, Any], windows: dict[Any, dict[Any, Any]],
                      owners: dict[Any, str], skip: bool, progress: bool | None,
                      ) -> tuple[dict[Any, torch.Tensor], dict[Any, vf.SampledFrames], set[Any]]:
        return features.frame_features(
            self.backbone, sources, windows, owners, n_frames=self.n_frames, fps=self.fps,
            frame_batch_size=self.frame_batch_size, workers=self.workers, skip=skip, progress=progress,
            desc="/".join(self.metrics)[:24])

    def _idf_table(self, have_refs: bool, ids: list[str], cand_text: dict[str, str],
                   ref_text: dict[str, list[str]], tok_ids: dict[str, list[int]]) -> tuple[em.Idf, str]:
        """The IDF table of this call and its description for the signature."""
        if self.shared_idf is not None:
            return self.shared_idf
        mode = self.idf
        if isinstance(mode, tuple):
            return idf_mod.corpus_idf(self.backbone, self.prefix, mode, self._tokenize)
        source = mode if mode != "auto" else ("references" if have_refs else "candidates")
        if source == "references":
            corpus_ids = [tok_ids[r] for i in ids for r in ref_text[i]]
        elif source == "candidates":
            corpus_ids = [tok_ids[cand_text[i]] for i in ids]
        else:
            corpus_ids = []
        return idf_mod.idf_table(source, corpus_ids, self.backbone.context_length)

    def _video_part(self, ids: list[str], cand_text: dict[str, str], video_of: dict[str, Any],
                    feats: dict[Any, torch.Tensor], tok_ids: dict[str, list[int]],
                    tok_feats: dict[str, torch.Tensor], idf: em.Idf) -> dict[str, torch.Tensor]:
        parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("P", "R", "F", "coarse", "zero_idf", "negative")}
        for start in range(0, len(ids), self.batch_size):
            chunk = ids[start : start + self.batch_size]
            texts = [cand_text[i] for i in chunk]
            tok, tmask = em.pad_stack([tok_feats[t] for t in texts])
            w, _ = em.pad_stack([torch.tensor(idf.weights(tok_ids[t]), dtype=torch.float32) for t in texts])
            frames, fmask = em.pad_stack([feats[video_of[i]] for i in chunk])
            m = em.video_match(tok, tmask, w, frames, fmask)
            eot = torch.stack([tok_feats[t][-1] for t in texts])
            coarse = em.cosine(eot, em.video_embedding(frames, fmask))
            for k, x in (("P", m.P), ("R", m.R), ("F", m.F), ("coarse", coarse),
                         ("zero_idf", m.zero_idf), ("negative", m.negative_max)):
                parts[k].append(x)
        out = {k: torch.cat(v) if v else torch.zeros(0) for k, v in parts.items()}
        out["full"] = em.full_score(out["F"], out["coarse"])
        return out

    def _ref_part(self, ids: list[str], cand_text: dict[str, str], ref_text: dict[str, list[str]],
                  tok_ids: dict[str, list[int]], tok_feats: dict[str, torch.Tensor],
                  idf: em.Idf) -> dict[str, torch.Tensor]:
        pairs = [(k, cand_text[i], r) for k, i in enumerate(ids) for r in ref_text[i]]
        n = len(ids)
        cols: dict[str, list[torch.Tensor]] = {k: [] for k in ("P", "R", "F", "coarse", "zero_idf", "negative")}
        groups: list[int] = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start : start + self.batch_size]
            c_tok, c_mask = em.pad_stack([tok_feats[c] for _, c, _ in chunk])
            r_tok, r_mask = em.pad_stack([tok_feats[r] for _, _, r in chunk])
            c_w, _ = em.pad_stack([torch.tensor(idf.weights(tok_ids[c]), dtype=torch.float32) for _, c, _ in chunk])
            r_w, _ = em.pad_stack([torch.tensor(idf.weights(tok_ids[r]), dtype=torch.float32) for _, _, r in chunk])
            m = em.text_match(c_tok, c_mask, c_w, r_tok, r_mask, r_w)
            coarse = em.cosine(torch.stack([tok_feats[c][-1] for _, c, _ in chunk]),
                               torch.stack([tok_feats[r][-1] for _, _, r in chunk]))
            for k, x in (("P", m.P), ("R", m.R), ("F", m.F), ("coarse", coarse),
                         ("zero_idf", m.zero_idf), ("negative", m.negative_max)):
                cols[k].append(x)
            groups.extend(g for g, _, _ in chunk)
        if not pairs:
            empty = torch.zeros(0)
            return {k: empty for k in ("P", "R", "F", "coarse", "full")} | {
                "zero_idf": empty.bool(), "negative": empty.bool()}
        g = torch.tensor(groups)
        out = {k: em.group_max(torch.cat(cols[k]), g, n) for k in ("P", "R", "F", "coarse")}
        out["zero_idf"] = em.group_any(torch.cat(cols["zero_idf"]), g, n)
        out["negative"] = em.group_any(torch.cat(cols["negative"]), g, n)
        out["full"] = em.full_score(out["F"], out["coarse"])
        return out


class PacSVideo(EMScore):
    """PAC-S for video: EMScore's formulas on the PAC-S ViT-B/32 backbone (no prefix, no w)."""

    produces: ClassVar[tuple[str, ...]] = ("pac-s-video", "ref-pac-s-video")
    default_backbone: ClassVar[str] = DEFAULTS["pac-s-video"]["backbone"]
    variant: ClassVar[str] = "pac-s-video"


def _per_item(ids: list[str], values: torch.Tensor) -> dict[str, float]:
    return {i: float(v) for i, v in zip(ids, values.tolist())}
