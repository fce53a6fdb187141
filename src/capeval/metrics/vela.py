"""VELA (Matsuda et al., EMNLP 2025, "VELA: An LLM-Hybrid-as-a-Judge Approach for Evaluating Long
Image Captions"), run through the authors' own package.

What VELA is. The paper (Section 3): an R2C-LLM branch feeds a prompt made of the candidate and
the references to a text-only LLM (Qwen2.5-3B) in one forward pass and keeps ``[mean_i h_i ;
h_M]`` of the last hidden states; an I2C-Align branch takes Long-CLIP features of image and
candidate and keeps ``[|h_img - h_cand| ; h_img * h_cand]``; a linear layer and a sigmoid give
three scores (Descriptiveness, Relevance, Fluency). The released model (the regressor
configuration the authors' group's kit lays over its VELA clone: ``VELARegressor``,
``Qwen/Qwen2.5-3B-Instruct`` with LoRA r=4, alpha=16 on ``q_proj``/``v_proj``, Long-CLIP
``BeichenZhang/LongCLIP-L`` ``longclip-L.pt``, an 8-dimensional mode embedding, weights
``Ka2ukiMatsuda/vela`` ``vela_regressor.safetensors``) is told the perspective (``desc``, ``rel``,
``flu``) and returns one score per item.

Why capeval runs the authors' code instead of a transcription: the model code of
github.com/Ka2ukiMatsuda/VELA could not be read where this was written; the prompt (the paper's
appendix), how the mode embedding enters the head, the features' normalisation and the
checkpoint's parameter names are unknown, so a faithful re-implementation on capeval's Long-CLIP
backbone and local-model path could not be made or checked. This scorer therefore drives the
package exactly as the reproduction kit of the VELA authors' group does
(github.com/YuigaWada/CaptionEvalKit-for-VLMs, ``capevalkit/metrics/vela_metric.py`` at 23f154b,
VELA submodule at 75f4ff5): ``vela.load_pretrained_model(cfg_path=, device=)``,
``dataloader.vela_collate_fn.VELACollateFn(model.cfg, device=)`` over samples ``{imgid, img (RGB),
refs, cand, mode, score}``, ``model.move_batch_to_device``, ``model(**batch)``, the output clamped
to [0, 1] (``clamp=True``, as the kit does; ``clamp=False`` keeps the raw output). Install it with
``git clone --recursive https://github.com/Ka2ukiMatsuda/VELA && pip install -e VELA`` and pass
``repo=`` (the clone; its ``configs/config.yaml`` is the default ``config``, its relative paths
are read from there). The weights are downloaded by the package. Item score in [0, 1], higher is
better; system = mean of items.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from capeval.errors import InputError, ResourceError
from capeval.io.inputs import check_same_ids, normalize_candidates, normalize_references
from capeval.judges import images as imgs
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

SOURCE = "Ka2ukiMatsuda/VELA (the authors' package, driven as CaptionEvalKit-for-VLMs@23f154b does)"
PERSPECTIVES = ("desc", "rel", "flu")  # Descriptiveness, Relevance, Fluency (the package's modes)
CHECKPOINTS = {  # what the package loads (the kit's asset table): informational, capeval downloads none
    "llm": "Qwen/Qwen2.5-3B-Instruct",
    "long_clip": "BeichenZhang/LongCLIP-L/longclip-L.pt",
    "regressor": "Ka2ukiMatsuda/vela/vela_regressor.safetensors",
}
_INSTALL = ("install the VELA authors' package: git clone --recursive https://github.com/Ka2ukiMatsuda/VELA && "
            "pip install -e VELA, then pass -O vela.repo=VELA")
#: the install instructions of the authors' package, for ``capeval check``
INSTALL_HINT = _INSTALL


def load_package(repo: str | os.PathLike[str] | None) -> tuple[Any, Any]:
    """``(vela.load_pretrained_model, dataloader.vela_collate_fn.VELACollateFn)`` of the authors'
    package (``repo`` put first on ``sys.path`` when given); a one-line error when absent."""
    if repo is not None:
        where = Path(repo).expanduser()
        if not where.is_dir():
            raise InputError(f"vela option repo={str(repo)!r}: no such folder (a clone of Ka2ukiMatsuda/VELA)")
        if str(where) not in sys.path:
            sys.path.insert(0, str(where))
    try:
        from dataloader.vela_collate_fn import VELACollateFn
        from vela import load_pretrained_model
    except ImportError as exc:
        raise ResourceError(f"vela: the authors' package is not importable ({exc}); {_INSTALL}") from None
    return load_pretrained_model, VELACollateFn


class VelaScore(ScorerBase):
    """VELA through the authors' package; item range [0, 1] (``clamp=True``), higher is better.

    ``perspective``: ``desc``, ``rel`` or ``flu`` (required: the paper scores each perspective
    separately and names no default); ``repo``: the clone of Ka2ukiMatsuda/VELA; ``config``: the
    package's configuration (default ``configs/config.yaml`` of ``repo``); ``batch_size``: items per
    forward pass (the kit's default 8); ``device``; ``model``/``collate``: an already built model and
    collate function (tests, notebooks)."""

    produces: ClassVar[tuple[str, ...]] = ("vela",)

    def __init__(self, perspective: str | None = None, repo: str | os.PathLike[str] | None = None,
                 config: str | os.PathLike[str] = "configs/config.yaml", batch_size: int = 8, device: str = "cpu",
                 clamp: bool = True, model: Any = None, collate: Any = None, metrics: Sequence[str] | None = None):
        self.metrics = self._select(metrics)
        if perspective not in PERSPECTIVES:
            raise InputError(f"vela option perspective={perspective!r}: give one of {', '.join(PERSPECTIVES)} "
                             "(-O vela.perspective=desc; capeval bench longcap-arena sets it)")
        self.perspective, self.batch_size, self.device, self.clamp = perspective, int(batch_size), device, bool(clamp)
        self.repo = None if repo is None else Path(repo).expanduser()
        cfg = Path(config)
        self.config = cfg if cfg.is_absolute() or self.repo is None else self.repo / cfg
        if model is None:
            load, collate_cls = load_package(repo)
            if not self.config.is_file():
                raise InputError(f"vela option config={str(self.config)!r}: no such file (the package's configs/"
                                 "config.yaml; give repo= or an absolute path)")
            with self._in_repo():
                model = load(cfg_path=str(self.config), device=device)
                collate = collate_cls(model.cfg, device=device)
        elif collate is None:
            raise InputError("vela: a model given without its collate function (collate=)")
        self.model, self.collate = model, collate

    @classmethod
    def preflight(cls, options: Mapping[str, Any]) -> None:
        """Before anything loads: the perspective is one of the package's and the package imports."""
        if options.get("perspective") not in PERSPECTIVES:
            raise InputError(f"vela option perspective={options.get('perspective')!r}: give one of "
                             f"{', '.join(PERSPECTIVES)} (-O vela.perspective=desc; capeval bench longcap-arena sets it)")
        if options.get("model") is None:
            load_package(options.get("repo"))

    @contextlib.contextmanager
    def _in_repo(self):
        # the package reads paths relative to its clone (the Long-CLIP checkpoint, the config's
        # data paths); the working directory is process-wide, so only the calls into it move there
        with contextlib.chdir(self.repo) if self.repo is not None else contextlib.nullcontext():
            yield

    def signature(self) -> Signature:
        fields: dict[str, Any] = {"metric": "vela", "perspective": self.perspective, "clamp": self.clamp,
                                  "source": SOURCE}
        if self.config.is_file():
            from capeval.hashing import file_digest

            fields["config"] = f"{self.config.name}:{file_digest(self.config, 'sha256')[:12]}"
        fields["weights"] = ",".join(CHECKPOINTS.values())
        return Signature(fields)

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``references`` ``{id: [caption, ...]}`` and ``images``."""
        import torch

        cands = normalize_candidates(candidates, allow_empty=True)
        if references is None:
            raise InputError("vela needs references (its LLM branch reads them beside the candidate)")
        refs = normalize_references(references)
        check_same_ids(cands, refs)
        good, sources, _ = imgs.usable_items(cands, images, "vela", skip_bad_items)
        items: dict[str, float] = {}
        raw: dict[str, float] = {}
        from capeval.progress import make_progress

        with make_progress(len(good), "vela", progress) as bar, torch.no_grad(), self._in_repo():
            for start in range(0, len(good), self.batch_size):
                ids = good[start:start + self.batch_size]
                samples = [{"imgid": _image_name(sources[i], i), "img": imgs.to_pil(sources[i], i), "refs": refs[i],
                            "cand": cands[i], "mode": self.perspective, "score": 0.0} for i in ids]
                batch, _ = self.collate(samples)
                out = self.model(**self.model.move_batch_to_device(batch, self.device)).float().reshape(-1)
                if out.numel() != len(ids):
                    raise ResourceError(f"vela: the package returned {out.numel()} scores for {len(ids)} items")
                for i, value in zip(ids, out.tolist()):
                    raw[i] = float(value)
                    items[i] = min(1.0, max(0.0, raw[i])) if self.clamp and math.isfinite(raw[i]) else raw[i]
                bar.update(len(ids))
        extras: dict[str, Any] = {"perspective": self.perspective}
        if self.clamp:
            extras["clamped"] = sum(raw[i] != items[i] for i in items)
        system = float(sum(items.values()) / len(items)) if items else math.nan
        skipped = tuple(i for i in cands if i not in items)
        return Report([MetricResult(metric="vela", system=system, items=items, signature=self.signature(),
                                    extras=extras, skipped=skipped)])


def _image_name(image: Any, item: str) -> str:
    """The sample's ``imgid``: the image file's name (the kit's ``Path(image_path).name``), else the item id."""
    return Path(image).name if isinstance(image, (str, os.PathLike)) else item
