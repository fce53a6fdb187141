"""``Reward``: any capeval metric, or a weighted mix, as a batched reward for SCST.

>>> reward = capeval.Reward({"cider-d": 1.0}, fit=train_references)   # doctest: +SKIP
>>> r = reward(captions, references)         # torch.FloatTensor, one reward per caption

Built once: an :class:`~capeval.Evaluator` underneath (every backbone loaded once through its
:class:`~capeval.models.cache.ModelCache`), CIDEr-D document frequencies fixed once by
:meth:`Reward.fit` from the training references (the usual SCST setting; unfitted, each call
uses the statistics of its own references, as ``capeval.score`` does). Per call::

    reward_i = sum_m weight_m * score_m(caption_i, ...)      in input order

where ``score_m`` is metric ``m``'s per-item score, the number ``capeval.score`` gives for the
same caption (CLIP-family metrics: the same embeddings and formula, see below). Nothing is
read from or written to disk per call.

CLIP-S / PAC-S / PAC-S++ and their ``ref-`` variants are computed here with the scorer's own
backbone, prompt and ``w`` (``capeval.metrics.clip_score``), so that image embeddings can be
given precomputed (``image_embeddings=``) or kept in memory by image id across steps
(:meth:`Reward.precompute`, or automatically the first time an id is seen with ``images=``).
An empty caption (a beam that ended at once) gets 0 from these metrics, where ``capeval.score``
refuses it.

Token-id rewards for SCST / GRPO on the device (no strings, no host round trip):
:class:`~capeval.reward.cider_tokens.CiderDTokens`, :class:`~capeval.reward.bleu_tokens.BleuTokens`
and :func:`~capeval.reward.baseline.group_baseline` (see docs/training-loop.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from capeval import registry
from capeval.errors import InputError
from capeval.evaluator import Evaluator
from capeval.io.inputs import normalize_references

if TYPE_CHECKING:  # numpy (and torch) load when a reward is computed: `import capeval` stays light
    import numpy as np

_CLIP_MODULE = "capeval.metrics.clip_score:"

# token-id rewards (torch on the candidates' device), imported on first use: `import capeval` stays light
_LAZY = {"CiderDTokens": "capeval.reward.cider_tokens", "BleuTokens": "capeval.reward.bleu_tokens",
         "group_baseline": "capeval.reward.baseline"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'capeval.reward' has no attribute {name!r}")


def parse_weights(metrics: Mapping[str, float] | str | Iterable[str]) -> dict[str, float]:
    """``{"pac-s++": 1, "cider": 0.5}`` or ``"cider-d,clip-s"`` -> ``{canonical name: weight}``.

    Presets expand to their members, each with the preset's weight; a plain list weighs 1.
    """
    pairs = metrics.items() if isinstance(metrics, Mapping) else ((m, 1.0) for m in registry.expand(metrics))
    out: dict[str, float] = {}
    for name, weight in pairs:
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise InputError(f"reward weight of {name!r} must be a finite number, got {weight!r}")
        for member in registry.expand(name):
            if member in out:
                raise InputError(f"metric {member!r} appears twice in the reward")
            out[member] = float(weight)
    return out


class Reward:
    """A weighted sum of capeval metrics, scored per batch: ``Reward(metrics)(captions, ...)``.

    For self-critical training: one reward per caption, the metrics' models loaded once.

    Args:
        metrics: ``{name: weight}``, or names (weight 1).
        fit: references to fix corpus statistics once (CIDEr-D document frequencies;
            ``{id: [ref, ...]}`` or a list of lists).
        device: as :class:`~capeval.Evaluator`.
        options: as :class:`~capeval.Evaluator`.
        cache: as :class:`~capeval.Evaluator`.
        **more: keyword options, as :class:`~capeval.Evaluator`.

    Raises:
        InputError: a weight that is not a finite number, or a bad metric option.
    """

    def __init__(self, metrics: Mapping[str, float] | str | Iterable[str], *, fit: Any = None,
                 device: str | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
                 cache: Any = None, **more: Any):
        self.weights = parse_weights(metrics)
        self.evaluator = Evaluator(list(self.weights), device=device, options=options, cache=cache, **more)
        self.groups = [(members, registry.get(members[0])) for members in registry.groups(self.evaluator.names).values()]
        self._images: dict[str, dict[str, np.ndarray]] = {}  # backbone signature hash -> {image id: row}
        if fit is not None:
            self.fit(fit)

    @property
    def loads(self) -> int:
        """Backbones loaded so far (stays put after construction)."""
        return self.evaluator.loads

    @property
    def needs_references(self) -> bool:
        return any("references" in registry.get(m).needs for m in self.weights)

    def fit(self, references: Mapping[Any, Any] | Sequence[Sequence[str]]) -> Reward:
        """Fix corpus statistics (CIDEr-D document frequencies) from training references, once."""
        self.evaluator.fit(references)
        return self

    # -- image embeddings kept in memory -------------------------------------------------------
    def _clip_scorers(self) -> list[Any]:
        return [self.evaluator.scorers[members[0]] for members, spec in self.groups
                if spec.factory.startswith(_CLIP_MODULE)]

    def precompute(self, images: Mapping[Any, Any], batch_size: int | None = None,
                   progress: bool | None = False) -> None:
        """Embed ``{image id: image}`` with every CLIP backbone of the reward, once, kept in memory."""
        from capeval.models.clip.embed import embed_images

        for scorer in self._clip_scorers():
            store = self._images.setdefault(scorer.backbone.signature_hash, {})
            todo = [str(k) for k in images if str(k) not in store]
            srcs = {str(k): v for k, v in images.items()}
            if todo:
                rows = embed_images(scorer.backbone, [srcs[k] for k in todo], batch_size or scorer.batch_size,
                                    None, progress, names=todo, workers=scorer.workers)
                store.update(zip(todo, rows))

    def image_embeddings(self, image_ids: Sequence[Any], metric: str | None = None) -> np.ndarray:
        """The kept (N, D) raw image embeddings of ``image_ids`` for ``metric``'s backbone (default: the only one)."""
        import numpy as np

        scorer = self._one_clip_scorer(metric)
        store = self._images.get(scorer.backbone.signature_hash, {})
        missing = [i for i in map(str, image_ids) if i not in store]
        if missing:
            raise InputError(f"image {missing[0]!r}: no embedding kept (call precompute or pass images=)", missing[0])
        return np.stack([store[str(i)] for i in image_ids])

    def _one_clip_scorer(self, metric: str | None) -> Any:
        if metric is not None:
            name = registry.canonical(metric)
            for members, _ in self.groups:
                if name in members:
                    return self.evaluator.scorers[members[0]]
            raise InputError(f"metric {metric!r} is not part of this reward")
        scorers = {s.backbone.signature_hash: s for s in self._clip_scorers()}
        if len(scorers) != 1:
            raise InputError(f"this reward has {len(scorers)} CLIP backbones: name the metric")
        return next(iter(scorers.values()))

    # -- scoring -----------------------------------------------------------------------------
    def scores(self, candidates: Sequence[str], references: Sequence[Sequence[str]] | Mapping[Any, Any] | None = None,
               *, image_ids: Sequence[Any] | None = None, images: Any = None,
               image_embeddings: Any = None, progress: bool | None = False) -> dict[str, np.ndarray]:
        """Per-metric item scores (float64 arrays in input order) of one batch.

        ``candidates``: N captions. ``references``: N lists (one per caption), or
        ``{image id: [refs]}`` with ``image_ids``. ``image_ids``: N ids (beams of one image
        repeat its id); ``images``: ``{image id: image}`` (with ``image_ids``) or N images;
        ``image_embeddings``: (N, D) raw embeddings, or ``{image id: vector}``, for the reward's
        one CLIP backbone.
        """
        import numpy as np

        if isinstance(candidates, str) or not isinstance(candidates, Sequence):
            raise InputError("reward candidates must be a list of captions")
        n = len(candidates)
        if n == 0:
            return {m: np.zeros(0) for m in self.weights}
        ids = [str(k) for k in range(n)]
        if image_ids is not None and len(image_ids) != n:
            raise InputError(f"{len(image_ids)} image ids for {n} captions")
        cands = {i: c for i, c in zip(ids, candidates)}
        refs = self._references(references, ids, image_ids)
        if images is not None and image_ids is not None:
            images = ({str(k): v for k, v in images.items()} if isinstance(images, Mapping)
                      else {str(k): v for k, v in zip(image_ids, images)})
        out: dict[str, np.ndarray] = {}
        text: dict[str, list[Any]] = {}
        from capeval.io.inputs import empty_candidates_expected
        from capeval.metrics.text import TextScorer, score_text

        for members, spec in self.groups:
            scorer = self.evaluator.scorers[members[0]]
            if spec.factory.startswith(_CLIP_MODULE):
                out.update(self._clip(scorer, members, candidates, refs, image_ids, images, image_embeddings))
            elif isinstance(scorer, TextScorer):
                text.setdefault(scorer.tokenizer, []).append(scorer)
            else:
                kw: dict[str, Any] = {}
                if "images" in spec.accepts and images is not None:
                    kw["images"] = (dict(zip(ids, images)) if image_ids is None
                                    else {i: images[str(k)] for i, k in zip(ids, image_ids)})
                with empty_candidates_expected():  # an empty sample's reward is 0, step after step, unsaid
                    report = scorer.score(cands, refs if "references" in spec.accepts else None, progress=progress,
                                          **kw)
                out.update({m: np.array([report[m].items[i] for i in ids]) for m in members})
        if text:
            if refs is None:
                raise InputError(f"{', '.join(s.metrics[0] for g in text.values() for s in g)} needs references")
            for scorers in text.values():
                with empty_candidates_expected():
                    results = score_text(scorers, cands, refs, progress=progress)
                out.update({m: np.array([r.items[i] for i in ids]) for m, r in results.items() if m in self.weights})
        return {m: out[m] for m in self.weights}

    def __call__(self, candidates: Sequence[str], references: Any = None, **inputs: Any) -> Any:
        """Rewards of one batch: a float32 ``torch.Tensor`` of N weighted sums (see :meth:`scores`)."""
        import numpy as np
        import torch

        per_metric = self.scores(candidates, references, **inputs)
        total = np.zeros(len(candidates))
        for m, w in self.weights.items():
            total += w * per_metric[m]
        return torch.as_tensor(total, dtype=torch.float32)

    def _references(self, references: Any, ids: list[str], image_ids: Sequence[Any] | None
                    ) -> dict[str, list[str]] | None:
        if references is None:
            return None
        if isinstance(references, Mapping):
            if image_ids is None:
                raise InputError("references given by image id need image_ids=")
            by_image = normalize_references(references)
            missing = [str(k) for k in image_ids if str(k) not in by_image]
            if missing:
                raise InputError(f"image {missing[0]!r}: no references", missing[0])
            return {i: by_image[str(k)] for i, k in zip(ids, image_ids)}
        if len(references) != len(ids):
            raise InputError(f"{len(references)} reference lists for {len(ids)} captions")
        return normalize_references(dict(zip(ids, references)))

    def _image_rows(self, scorer: Any, n: int, image_ids: Sequence[Any] | None, images: Any,
                    given: Any) -> np.ndarray:
        """(N, D) raw image embeddings: given, kept in memory, or embedded now (and kept by id)."""
        import numpy as np

        if given is not None and not isinstance(given, Mapping):
            rows = given.detach().cpu().numpy() if hasattr(given, "detach") else np.asarray(given)
            if rows.shape != (n, scorer.backbone.embed_dim):
                raise InputError(f"image_embeddings: expected shape ({n}, {scorer.backbone.embed_dim}), got {rows.shape}")
            return rows.astype(np.float32, copy=False)
        if image_ids is None:
            if given is not None:
                raise InputError("image_embeddings by image id need image_ids=")
            if images is None:
                raise InputError(f"{scorer.metrics[0]} needs images, image ids or image embeddings")
            from capeval.models.clip.embed import embed_images

            if len(images) != n:
                raise InputError(f"{len(images)} images for {n} captions")
            return embed_images(scorer.backbone, list(images), scorer.batch_size, None, False, workers=scorer.workers)
        store = self._images.setdefault(scorer.backbone.signature_hash, {})
        if given is not None:
            store = {**store, **{str(k): np.asarray(v, dtype=np.float32) for k, v in given.items()}}
        keys = [str(k) for k in image_ids]
        new = list(dict.fromkeys(k for k in keys if k not in store))
        if new:
            if images is None:
                raise InputError(f"image {new[0]!r}: no embedding kept and no images= given", new[0])
            lost = [k for k in new if k not in images]
            if lost:
                raise InputError(f"image {lost[0]!r}: not in images=", lost[0])
            self.precompute({k: images[k] for k in new})
        return np.stack([store[k] for k in keys])

    def _clip(self, scorer: Any, members: list[str], candidates: Sequence[str], refs: dict[str, list[str]] | None,
              image_ids: Any, images: Any, given: Any) -> dict[str, np.ndarray]:
        import numpy as np

        from capeval import functional
        from capeval.models.clip.embed import embed_texts, l2_normalize

        n = len(candidates)
        ref_metrics = [m for m in members if m.startswith("ref-")]
        if ref_metrics and refs is None:
            raise InputError(f"{', '.join(ref_metrics)} needs references")
        img = l2_normalize(self._image_rows(scorer, n, image_ids, images, given))
        # the same text list as the scorer's (candidates, then every reference) -> the same numbers
        texts = [scorer.prompt + c for c in candidates]
        lists = list(refs.values()) if refs is not None and ref_metrics else []
        texts += [scorer.prompt + r for rs in lists for r in rs]
        txt = l2_normalize(embed_texts(scorer.backbone, texts, scorer.text_batch_size))
        cand = txt[:n]
        empty = np.array([not c.strip() for c in candidates])
        clip = functional.clip_s(np.sum(cand * img, axis=1), scorer.w)
        out: dict[str, np.ndarray] = {}
        base = [m for m in members if not m.startswith("ref-")]
        if base:
            out[base[0]] = np.where(empty, 0.0, clip.astype(np.float64))
        if ref_metrics:
            best = np.empty(n)
            pos = n
            for k, rs in enumerate(lists):
                best[k] = np.max(txt[pos : pos + len(rs)] @ cand[k])
                pos += len(rs)
            ref_score = functional.harmonic_mean(clip, functional.positive_part(best))
            out[ref_metrics[0]] = np.where(empty, 0.0, np.asarray(ref_score, dtype=np.float64))
        return out

