"""CLIP-S / RefCLIP-S, PAC-S / RefPAC-S and PAC-S++ / RefPAC-S++ scorers.

Reference-free (Hessel et al. 2021, CLIPScore; Sarto et al. 2023, PAC-S; Sarto et al.
2024, PAC-S++)::

    score(c, v) = w * max(cos(E_t(prompt + c), E_i(v)), 0)           range [0, w], higher is better

Reference-based::

    t = max(0, max_r cos(E_t(prompt + c), E_t(prompt + r)))
    ref-score = 2 * score * t / (score + t), and 0 when score + t = 0   range [0, w), higher is better

The reference code (clipscore, pacscore) divides by zero when both parts are 0 (NaN) and
does not clamp ``t``; capeval clamps ``t`` at 0 as the paper's formula says and defines the
score as 0 in that case. System score = mean of item scores. Inputs: candidates and images
(plus references for the ``ref-`` variants). Prompt ``"A photo depicts "`` before every
candidate and reference; CLIP BPE, 77 tokens with EOT kept; images resized (shorter side,
bicubic), centre-cropped, normalised with the checkpoint's mean/std; fp32.

w: CLIP-S 2.5 (clipscore), PAC-S 2.0 (pacscore ``evaluation/pac_score/pac_score.py``,
``PACScore(..., w=2.0)``). PAC-S++: 2.0 by default, as the released evaluation code that
reproduces the published numbers (``compute_correlations_pac++.py`` calls
``compute_correlations.compute_scores``, which calls ``PACScore(..., w=2.0)``); the PAC-S++
paper states 2.5 for ViT-B/32 and 3.0 for ViT-L/14, available as ``w="paper"``. ``w`` also
takes any positive number (``w="code"`` names the default). w never changes the ranking of
the reference-free score, but it does change the ``ref-`` variant (the harmonic mean weighs
the image part by w). The signature records the number used; for PAC-S++ also the choice
(``w_from=code|paper|user``).

SigLIP / SigLIP 2 (PAC-S++ journal Table 8): ``backbone`` = a hub name or folder
(:mod:`capeval.models.clip.siglip`; its own tokenizer, 64 padded tokens, and image processor,
the same prompt and formula); a PAC-S / PAC-S++ model trained on it by ``capeval train pacs``
is ``checkpoint=FILE`` (on ``backbone``, else on the backbone the file records) or
``backbone=FILE`` (:mod:`capeval.models.clip.siglip_pacs`); the signature then names the
backbone, its weights' sha256, the checkpoint and its sha256. The journal gives no ``w`` for
SigLIP: the family's default stands (``w="paper"`` is refused on SigLIP).
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from capeval import functional, truncation
from capeval.models.clip.embed import embed_texts, embed_usable_images, l2_normalize
from capeval.errors import InputError
from capeval.io.images import image_metric_inputs
from capeval.result import MetricResult, Report, Signature
from capeval.registry import DEFAULTS
from capeval.scorer import ScorerBase

PROMPT = "A photo depicts "


class _ClipFamilyScorer(ScorerBase):
    """Shared machinery; subclasses set ``produces``, the default backbone and ``w``."""

    produces: ClassVar[tuple[str, ...]] = ()
    default_backbone: ClassVar[str] = ""
    default_w: ClassVar[float] = 2.5
    signature_w_from: ClassVar[bool] = False  # record where w came from (families with a disputed w)
    checkpoint_owns_backbone: ClassVar[bool] = True  # checkpoint= merges into a backbone (evaluator: not shared)

    def __init__(self, metrics: Sequence[str] | None = None, backbone: Any = None, device: str = "cpu",
                 w: float | str | None = None, prompt: str = PROMPT, batch_size: int = 64, text_batch_size: int = 256,
                 cache: Any = None, lora: str = "effective", workers: int | None = None,
                 checkpoint: str | os.PathLike[str] | None = None):
        self.metrics = self._select(metrics)
        self.workers = workers  # image decoding threads; None: min(4, cores)
        if checkpoint is not None:  # a SigLIP PAC-S file: on ``backbone``, else on the one it records
            from capeval.models.clip.siglip_pacs import load_siglip_checkpoint

            backbone = load_siglip_checkpoint(checkpoint, backbone, device=device)
        else:
            from capeval.models.clip.backbone import as_backbone

            backbone = as_backbone(backbone, self.default_backbone, device=device, lora=lora)
        self.backbone = backbone
        self.w, self.w_from = self._resolve_w(w)
        self.prompt = prompt
        self.batch_size = batch_size
        self.text_batch_size = text_batch_size
        self.cache = cache

    def _resolve_w(self, w: Any) -> tuple[float, str]:
        """``(w, where it came from)``: the family default, or a positive number given by the user."""
        if w is None or (isinstance(w, str) and w.strip().lower() in ("code", "default")):
            return self.default_w, "code"
        value = _positive_number(w)
        if value is None:
            raise InputError(f"{self.produces[0]} option w: expected a positive number or 'code', got {w!r}")
        return value, "user"

    # -- scoring ------------------------------------------------------------------
    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``images`` (folder or ``{id: image}``) and optional references."""
        cands, refs, ids, sources, bad = image_metric_inputs(candidates, references, images, self.metrics)
        good, img = embed_usable_images(self.backbone, ids, sources, bad, self.batch_size, self.cache, progress,
                                        skip_bad_items, self.workers, stats=(img_stats := {}))
        img = l2_normalize(img)
        texts = [self.prompt + cands[i] for i in good]
        n_ref = [len(refs[i]) for i in good] if refs is not None else []
        if refs is not None:
            texts += [self.prompt + r for i in good for r in refs[i]]
        txt = l2_normalize(embed_texts(self.backbone, texts, self.text_batch_size, self.cache, progress,
                                       stats=(txt_stats := {})))
        cand = txt[: len(good)]
        clip = functional.clip_s(np.sum(cand * img, axis=1), self.w)
        cut = txt_stats.get("truncated_texts", set())
        cut_counts = truncation.tally((self.prompt + cands[i] for i in good),
                                      None if refs is None else ([self.prompt + r for r in refs[i]] for i in good), cut)
        counters = {
            truncation.CANDIDATES: cut_counts[truncation.CANDIDATES],
            "unique_images": img_stats.get("unique_images", 0),
            "unique_texts": txt_stats.get("unique_texts", 0),
        }
        skipped = [i for i in ids if i in bad]
        results = []
        base = self.metrics[0].removeprefix("ref-")
        if base in self.metrics:
            items = {i: float(s) for i, s in zip(good, clip)}
            results.append(self._result(base, items, counters, skipped, None))
        if refs is not None:
            ref_feats = txt[len(good):]
            best = np.empty(len(good))  # float64 on purpose: the ref- arithmetic stays in float64
            pos = 0
            for k, n in enumerate(n_ref):
                best[k] = np.max(ref_feats[pos : pos + n] @ cand[k])
                pos += n
            sims = functional.positive_part(best)
            ref_score = functional.harmonic_mean(clip, sims)  # functional.ref_clip_s, reusing clip
            extras = dict(counters)
            extras[truncation.REFERENCES] = cut_counts[truncation.REFERENCES]
            extras[base] = {i: float(s) for i, s in zip(good, clip)}
            extras["ref_similarity"] = {i: float(s) for i, s in zip(good, sims)}
            items = {i: float(s) for i, s in zip(good, ref_score)}
            results.append(self._result("ref-" + base, items, extras, skipped, n_ref))
        return Report([r for m in self.metrics for r in results if r.metric == m])

    def _result(self, metric: str, items: dict[str, float], extras: dict[str, Any], skipped: list[str],
                n_ref: list[int] | None) -> MetricResult:
        return MetricResult(metric=metric, system=float(np.mean(list(items.values()))), items=items,
                            signature=self.signature(metric, n_ref), extras=extras, skipped=tuple(skipped))

    def signature(self, metric: str, n_ref: list[int] | None = None) -> Signature:
        import torch

        sig = dict(self.backbone.signature)
        params: dict[str, Any] = {"backbone": sig.pop("backbone"), "w": self.w, "prompt": json.dumps(self.prompt)}
        if self.signature_w_from:
            params["w_from"] = self.w_from
        if n_ref:
            lo, hi = min(n_ref), max(n_ref)
            params["nrefs"] = str(lo) if lo == hi else f"{lo}-{hi}"
        params.update(sig)
        params["versions"] = {"torch": torch.__version__, "numpy": np.__version__}
        return Signature.build(metric, **params)


class ClipScore(_ClipFamilyScorer):
    """CLIP-S and RefCLIP-S (Hessel et al. 2021, CLIPScore): OpenAI ViT-B/32, w = 2.5; range [0, 2.5]."""

    produces = ("clip-s", "ref-clip-s")
    default_backbone = DEFAULTS["clip-s"]["backbone"]
    default_w = DEFAULTS["clip-s"]["w"]


class PacScore(_ClipFamilyScorer):
    """PAC-S and RefPAC-S (Sarto et al. 2023): PAC-S fine-tuned CLIP ViT-B/32, w = 2.0; range [0, 2]."""

    produces = ("pac-s", "ref-pac-s")
    default_backbone = DEFAULTS["pac-s"]["backbone"]
    default_w = DEFAULTS["pac-s"]["w"]


class PacScorePlusPlus(_ClipFamilyScorer):
    """PAC-S++ and RefPAC-S++ (Sarto et al. 2024): LoRA-tuned CLIP; range [0, w].

    ``w``: 2.0 by default (``"code"``: aimagelab/pacscore's released evaluation, whose
    ``compute_correlations_pac++.py`` scores with ``PACScore(..., w=2.0)``); ``"paper"``:
    the PAC-S++ paper's 2.5 for ViT-B/32 and 3.0 for ViT-L/14; or any positive number.
    """

    produces = ("pac-s++", "ref-pac-s++")
    default_backbone = DEFAULTS["pac-s++"]["backbone"]
    default_w = DEFAULTS["pac-s++"]["w"]
    signature_w_from = True
    paper_w: ClassVar[dict[str, float]] = {"ViT-B-32": 2.5, "ViT-L-14": 3.0}

    def _resolve_w(self, w: Any) -> tuple[float, str]:
        if isinstance(w, str) and w.strip().lower() == "paper":
            arch = _vit_arch(self.backbone)
            if arch not in self.paper_w:
                raise InputError(
                    f"pac-s++ option w='paper': the PAC-S++ paper gives w only for ViT-B/32 (2.5) and ViT-L/14 "
                    f"(3.0); this backbone is {arch}: pass a number instead")
            return self.paper_w[arch], "paper"
        if isinstance(w, str) and _positive_number(w) is None and w.strip().lower() not in ("code", "default"):
            raise InputError(f"pac-s++ option w: expected a positive number, 'code' (2.0) or 'paper' "
                             f"(2.5 ViT-B/32, 3.0 ViT-L/14), got {w!r}")
        return super()._resolve_w(w)


def _positive_number(value: Any) -> float | None:
    """``value`` as a finite positive float (numbers or numeric strings), else None."""
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if np.isfinite(out) and out > 0 else None


def _vit_arch(backbone: Any) -> str:
    """``"ViT-B-32"``/``"ViT-L-14"`` from the checkpoint table, else from the model's shape."""
    arch = str(backbone.signature.get("arch", ""))
    if arch in ("ViT-B-32", "ViT-L-14"):
        return arch
    cfg = getattr(getattr(backbone, "model", None), "config", None)
    if cfg is not None and hasattr(cfg, "vision_width") and not getattr(cfg, "keep_positions", 0):
        # capeval's CLIP (SigLIP: transformers' config); a Long-CLIP is none of the paper's backbones
        shape = (cfg.patch_size, cfg.vision_width, cfg.vision_layers, cfg.text_width, cfg.text_layers)
        if shape == (32, 768, 12, 512, 12):
            return "ViT-B-32"
        if shape == (14, 1024, 24, 768, 12):
            return "ViT-L-14"
    return arch or "unknown"
