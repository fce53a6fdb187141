"""BRIDGE scorer (Sarto et al. 2024, ECCV, "BRIDGE: Bridging Gaps in Image Captioning Evaluation
with Stronger Visual Cues"), reference-free, from a trained checkpoint.

Per image I and candidate T (Sec. 3.4)::

    template caption of I (captioner or caption file) -> noun chunks -> one replica per chunk
    t*_i = E_T(psi(replica_i, grid(I)))          pseudo-captions, all chunks at inference (Sec. 4.1)
    t*   = (1/N) sum_i t*_i / |t*_i|              mean of the (unit) pseudo-caption embeddings
    BRIDGE(I, T) = 0.5 * [CLIP-S(I, T) + w * max(cos(t*, t), 0)]               Eq. 4
    CLIP-S(I, T) = w * max(cos(v, t), 0)                                         Eq. 1

with t = E_T(prompt + T) (prompt from the checkpoint, CLIP-S's "A photo depicts " by default)
and v = E_V(I). Range [0, w], higher is better; system score = mean of item scores.

Constants: ``w`` = 2.5 — Eq. 1 and 4 name w without a value; 2.5 is CLIP-S's (Hessel et al.
2021), an option. The 0.5 and the clamps are Eq. 4's. ``similarity`` = ``both`` (Eq. 4),
``visual`` (Table 1 "w/o textual similarity" = CLIP-S) or ``textual`` ("w/o visual
similarity" = w * max(cos(t*, t), 0)). Normalising each t*_i before the mean is capeval's
choice (training compares unit vectors). An image whose template has no maskable chunk gets
t* = E_T(template) (counted in ``extras["images_without_chunks"]``).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import torch

from capeval import functional, truncation
from capeval.errors import InputError, ResourceError
from capeval.io.images import image_metric_inputs
from capeval.models.spacy_pipelines import pipeline_version
from capeval.io.inputs import raise_bad_items
from capeval.metrics.bridge import templates as tpl
from capeval.metrics.bridge.checkpoint import check_backbone, read_checkpoint
from capeval.metrics.bridge.mapping import check_clip, image_features, pseudo_captions
from capeval.metrics.bridge.sources import TemplateSource
from capeval.models.clip.embed import embed_texts, l2_normalize
from capeval.progress import make_progress
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

DEFAULT_W = 2.5  # CLIP-S's w (Hessel et al. 2021); Eq. 4 gives none
SIMILARITIES = ("both", "visual", "textual")


def bridge_formula(cos_image: Any, cos_pseudo: Any, w: float = DEFAULT_W, similarity: str = "both") -> Any:
    """Eq. 4: ``0.5 * (w*max(cos_image, 0) + w*max(cos_pseudo, 0))``; range [0, w].

    ``cos_image`` = cos(v, t) (CLIP-S's cosine), ``cos_pseudo`` = cos(t*, t). ``similarity``:
    ``visual`` -> CLIP-S alone, ``textual`` -> w*max(cos_pseudo, 0) (Table 1 ablations).
    """
    visual = functional.clip_s(cos_image, w)
    textual = functional.clip_s(cos_pseudo, w)
    if similarity == "visual":
        return visual
    if similarity == "textual":
        return textual
    return 0.5 * (visual + textual)


class BridgeScore(ScorerBase):
    """BRIDGE (Sarto et al. 2024): CLIP-S combined with the candidate's similarity to visual pseudo-captions.

    ``checkpoint``: a trained BRIDGE file (``capeval train bridge``) or a published name;
    ``backbone``: None = the CLIP named in the checkpoint, or a name/path/loaded backbone
    (checked against the checkpoint unless ``strict_backbone=False``). Template captions:
    ``templates`` (a caption file: id/file name -> caption) or ``captioner`` (transformers
    name/path, default BLIP large; cached per image in ``caption_cache``).
    """

    produces: ClassVar[tuple[str, ...]] = ("bridge",)

    def __init__(self, metrics: Sequence[str] | None = None, checkpoint: str | None = None, backbone: Any = None,
                 device: str = "cpu", w: float = DEFAULT_W, similarity: str = "both", templates: Any = None,
                 captioner: Any = None, caption_cache: Any = True, spacy_model: str = tpl.DEFAULT_SPACY_MODEL,
                 strict_backbone: bool = True, batch_size: int = 32, text_batch_size: int = 256, cache: Any = None,
                 checkpoint_dir: str | None = None):
        self.metrics = self._select(metrics)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not np.isfinite(w) or w <= 0:
            raise InputError(f"bridge option w: expected a positive number, got {w!r}")
        if similarity not in SIMILARITIES:
            raise InputError(f"bridge option similarity={similarity!r}: use one of {', '.join(SIMILARITIES)}")
        if checkpoint is None:
            raise ResourceError("bridge needs trained weights: pass checkpoint=PATH (-O bridge.checkpoint=PATH); "
                                "no official BRIDGE weights are published, train them with `capeval train bridge`")
        self.ckpt = read_checkpoint(checkpoint, checkpoint_dir)
        from capeval.models.clip.backbone import as_backbone

        backbone = as_backbone(backbone, self.ckpt.backbone, device=device)
        if strict_backbone:
            check_backbone(self.ckpt, backbone)
        try:
            check_clip(self.ckpt.config, backbone.model)
        except InputError as exc:
            raise ResourceError(f"BRIDGE checkpoint {self.ckpt.path}: {exc}") from None
        self.backbone = backbone
        self.config = self.ckpt.config
        self.model = self.ckpt.build(str(backbone.device))
        self.w, self.similarity = float(w), similarity
        self.source = TemplateSource(templates, captioner, caption_cache, device=device)
        self.spacy_model = spacy_model
        self.batch_size, self.text_batch_size, self.cache = int(batch_size), int(text_batch_size), cache

    # -- pieces --------------------------------------------------------------------
    def replicas_for(self, template: str | None, chunks: Sequence[tpl.Chunk]) -> list[tpl.Replica]:
        """All replicas of one image: every chunk masked once, or 'a photo of S*' without templates."""
        tok, cfg = self.backbone.tokenizer, self.config
        if cfg.template == "none":
            return [tpl.prompt_replica(tok, cfg.us, context_length=self.backbone.context_length)]
        return tpl.make_replicas(template or "", chunks, tok, cfg.us, self.backbone.context_length)

    @torch.inference_mode()
    def image_parts(self, pixels: torch.Tensor, replicas: Sequence[Sequence[tpl.Replica]]
                    ) -> tuple[np.ndarray, np.ndarray]:
        """``(v (B, D), t* (B, D))`` unit vectors; t* rows of images without replicas are NaN."""
        px = pixels.to(self.backbone.device, torch.float32)
        grid, v = image_features(self.backbone.model, px, self.config.grid)
        flat = [r for rows in replicas for r in rows]
        owners = [k for k, rows in enumerate(replicas) for _ in rows]
        t_star = torch.full_like(v, float("nan"))
        if flat:
            batch = tpl.pack(flat, owners).to(self.backbone.device)
            feats = pseudo_captions(self.backbone.model, self.model.mapping, batch, grid)
            feats = feats / feats.norm(dim=-1, keepdim=True)
            sums = torch.zeros_like(v).index_add_(0, batch.owner, feats)
            counts = torch.bincount(batch.owner, minlength=v.shape[0]).to(v.dtype)[:, None]
            t_star = torch.where(counts > 0, sums / counts.clamp(min=1), t_star)
        return l2_normalize(v.cpu().numpy()), t_star.cpu().numpy()

    # -- scoring -------------------------------------------------------------------
    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``images`` (folder or ``{id: image}``); references are not used."""
        cands, _, ids, sources, bad = image_metric_inputs(candidates, None, images, self.metrics)
        todo = [i for i in ids if i not in bad]
        templates: dict[str, str] = {}
        if self.config.template == "caption" and todo:
            templates, tbad = self.source.get(todo, sources, progress)
            bad.update(tbad)
        todo = [i for i in todo if i not in bad]
        chunk_lists = dict(zip(todo, tpl.noun_chunks([templates[i] for i in todo], self.spacy_model))) \
            if self.config.template == "caption" and todo else {i: [] for i in todo}
        v = np.full((len(todo), self.backbone.embed_dim), np.nan, dtype=np.float32)
        t_star = v.copy()
        n_rep: dict[str, int] = {}
        row_of = {i: k for k, i in enumerate(todo)}
        with make_progress(len(todo), "bridge", progress) as bar:
            for start in range(0, len(todo), self.batch_size):
                part, pixels, reps = [], [], []
                for i in todo[start: start + self.batch_size]:
                    try:
                        pixels.append(self.backbone.load_image(sources[i], i))
                    except InputError as exc:
                        bad[i] = str(exc) if str(exc).startswith("item ") else f"item {i!r}: {exc}"
                        continue
                    part.append(i)
                    reps.append(self.replicas_for(templates.get(i), chunk_lists[i]))
                    n_rep[i] = len(reps[-1])
                if part:
                    rows = [row_of[i] for i in part]
                    v[rows], t_star[rows] = self.image_parts(torch.stack(pixels), reps)
                bar.update(len(todo[start: start + self.batch_size]))
        raise_bad_items(ids, bad, skip_bad_items)
        keep = [k for k, i in enumerate(todo) if i not in bad]
        good = [todo[k] for k in keep]
        if not good:
            raise InputError("no usable items: every item was skipped")
        v, t_star = v[keep], t_star[keep]
        empty = [k for k, i in enumerate(good) if n_rep.get(i, 0) == 0]
        if empty:  # no maskable chunk: the template caption itself stands in for t*
            t_star[empty] = l2_normalize(embed_texts(self.backbone, [templates[good[k]] for k in empty],
                                                     self.text_batch_size, self.cache))
        t_star = l2_normalize(t_star)
        prompt = self.config.prompt
        t = l2_normalize(embed_texts(self.backbone, [prompt + cands[i] for i in good], self.text_batch_size,
                                     self.cache, progress, stats=(txt_stats := {})))
        cos_v, cos_p = np.sum(v * t, axis=1), np.sum(t_star * t, axis=1)
        scores = bridge_formula(cos_v, cos_p, self.w, self.similarity)
        extras = {
            "clip-s": {i: float(s) for i, s in zip(good, functional.clip_s(cos_v, self.w))},
            "pseudo_similarity": {i: float(s) for i, s in zip(good, functional.clip_s(cos_p, self.w))},
            "pseudo_captions": {i: n_rep.get(i, 0) for i in good},
            "images_without_chunks": len(empty),
            **truncation.tally((prompt + cands[i] for i in good), None, txt_stats.get("truncated_texts", set())),
        }
        if templates:
            extras["templates"] = {i: templates[i] for i in good if i in templates}
        items = {i: float(s) for i, s in zip(good, scores)}
        result = MetricResult("bridge", float(np.mean(list(items.values()))), items, self.signature(), extras,
                              tuple(i for i in ids if i in bad))
        return Report([result])

    def signature(self) -> Signature:
        sig = dict(self.backbone.signature)
        cfg = self.config
        params: dict[str, Any] = {"backbone": sig.pop("backbone"), **self.ckpt.signature(), "w": self.w,
                                  "similarity": self.similarity, "prompt": json.dumps(cfg.prompt), "us": cfg.us,
                                  "mapping": f"{cfg.mapping}x{cfg.layers}", "template": cfg.template, "grid": cfg.grid}
        if cfg.template == "caption":
            params.update(templates=self.source.describe(), chunks=f"spacy:{self.spacy_model}-"
                          f"{pipeline_version(self.spacy_model)}", t_star="mean-unit")
        params.update(sig)
        params["versions"] = {"torch": torch.__version__, "numpy": np.__version__}
        return Signature.build("bridge", **params)
