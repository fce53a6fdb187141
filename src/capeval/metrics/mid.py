"""MID: Mutual Information Divergence (Kim et al., NeurIPS 2022) for image captioning.

Gaussian point-wise mutual information of CLIP features. A Gaussian is fitted to the
*real* pairs (reference caption ``x``, image ``y``) and their concatenation ``z = [x, y]``;
a candidate ``x0`` with its image ``y0`` scores::

    PMI(x0; y0) = I(X; Y) + (D2_x(x0) + D2_y(y0) - D2_z([x0, y0])) / 2
    I(X; Y)     = (log det S_x + log det S_y - log det S_z) / 2
    D2_v(u)     = (u - mu_v)^T (S_v + eps*I)^-1 (u - mu_v)

with the means ``mu`` and unbiased covariances ``S`` (divisor N-1) of the real pairs
(naver-ai/mid.metric ``metrics/mid.py``, ``_compute_pmi`` with ``reduction=False``), in
float64, log-determinants as the sum of the logs of the singular values, the inverse of
``S + eps*I`` (eps only in the inverse, as the official ``robust_inv``). Unbounded (real
line); higher is better. System score: the official ``reduction=True`` expectation::

    I(X; Y) + (tr(S_x^-1 C_x0) + tr(S_y^-1 S_y) - tr(S_z^-1 C_z0)) / 2

where ``C_x0``, ``C_z0`` are the candidates' second moments about the *real* means with
divisor M-1 (as the official code; it is not the mean of the item scores).

Roles for captioning: the generated modality is the text, the condition the image. With
``reference="first"`` (default) each item's first reference is its real sample, which is the
official ``_compute_pmi(x=first references, y=images, x0=candidates)`` call exactly; with
``reference="all"`` every (reference, image) pair enters the estimate (capeval's extension,
recorded in the signature). Features: CLIP ViT-B/32 (the official code's default
``EVAL_MODEL``; ``feature=512``), no prompt, L2-normalised in float32 then cast to float64
(mid.metric ``main.py``). ``limit`` (official: 30000): the official ``_compute_pmi`` keeps the
first ``limit`` real pairs and drops as many candidates from the end (its system score covers
only the first ``limit``); :func:`gaussian_pmi` does the same, and the scorer refuses a set of
more than ``limit`` items with a one-line error (raise ``limit`` to score them all) rather than
leave items unscored. ``eps``: the official code never passes one (``robust_inv(a)`` with its
default 0), so ``eps=0`` is the faithful value; ``eps > 0`` is the ridge its docs suggest.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from capeval import truncation
from capeval.errors import InputError
from capeval.io.images import image_metric_inputs
from capeval.ranges import check_option
from capeval.registry import DEFAULTS
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase



def gaussian_pmi(x: Any, y: Any, x0: Any, y0: Any | None = None, eps: float = 0.0,
                 limit: int | None = 30000, cut_candidates: bool = True) -> tuple[np.ndarray, float]:
    """``(per-candidate PMI, official expectation)`` of candidates ``x0`` (with conditions ``y0``).

    ``x``, ``y``: real pairs, ``(N, d_x)`` and ``(N, d_y)``; ``x0``: ``(M, d_x)``; ``y0``:
    ``(M, d_y)``, default ``y[:M]`` (the official pairing). Everything in float64 (torch).
    Needs ``N > d_x + d_y`` real pairs for a full-rank joint covariance. ``N > limit``: the
    first ``limit`` real pairs are kept and, as the official ``_compute_pmi``, the last
    ``N - limit`` candidates dropped (``cut_candidates=False``: all candidates kept).
    """
    import torch

    t = [torch.as_tensor(np.asarray(a), dtype=torch.float64) for a in (x, y, x0)]
    x, y, x0 = t
    excess = x.shape[0] - limit if limit is not None else 0
    if excess > 0:
        x, y = x[:limit], y[:limit]
        if cut_candidates:  # official: x0 = x0[:-excess]
            x0 = x0[: max(x0.shape[0] - excess, 0)]
            y0 = None if y0 is None else np.asarray(y0)[: x0.shape[0]]
    n, m = x.shape[0], x0.shape[0]
    y0 = y[:m] if y0 is None else torch.as_tensor(np.asarray(y0), dtype=torch.float64)
    if y.shape[0] != n or y0.shape[0] != m or x0.shape[1] != x.shape[1] or y0.shape[1] != y.shape[1]:
        raise InputError(f"mid: feature shapes do not pair up: x {tuple(x.shape)}, y {tuple(y.shape)}, "
                         f"x0 {tuple(x0.shape)}, y0 {tuple(y0.shape)}")
    dim = x.shape[1] + y.shape[1]
    if n <= dim:
        raise InputError(f"mid: the Gaussian of {dim}-d joint features needs more than {dim} real (reference, image) "
                         f"pairs, got {n}; score a larger set (or reference=all)")
    if m < 2:
        raise InputError("mid: needs at least 2 candidates (the system score's covariance divides by M-1)")
    z, z0 = torch.cat([x, y], 1), torch.cat([x0, y0], 1)
    mx, my = x.mean(0, keepdim=True), y.mean(0, keepdim=True)
    mz = torch.cat([mx, my], 1)
    sx, sy, sz = (_cov(a - mu, n) for a, mu in ((x, mx), (y, my), (z, mz)))
    mi = (_logdet(sx) + _logdet(sy) - _logdet(sz)) / 2
    ix, iy, iz = (_inv(s, eps) for s in (sx, sy, sz))
    dx0, dy0, dz0 = x0 - mx, y0 - my, z0 - mz
    items = mi + (_mahal(dx0, ix) + _mahal(dy0, iy) - _mahal(dz0, iz)) / 2
    system = mi + ((ix @ _cov(dx0, m)).trace() + (iy @ sy).trace() - (iz @ _cov(dz0, m)).trace()) / 2
    return items.numpy(), float(system)


def _cov(centred: Any, n: int) -> Any:
    return centred.T @ centred / (n - 1)


def _logdet(s: Any) -> Any:
    # the official log_det: sum of log singular values (= log det for a covariance matrix)
    import torch

    return torch.linalg.svdvals(s).log().sum()


def _inv(s: Any, eps: float) -> Any:
    import torch

    return torch.linalg.inv(s + eps * torch.eye(s.shape[0], dtype=s.dtype))


def _mahal(d: Any, inv: Any) -> Any:
    return ((d @ inv) * d).sum(1)  # diag(d inv d^T) without the M x M matrix


class Mid(ScorerBase):
    """MID (Kim et al. 2022): Gaussian PMI of CLIP (candidate, image) given (reference, image) pairs.

    Unbounded, higher is better. Needs images and references; the Gaussian is estimated on
    the scored set itself, so item scores depend on the set (the signature records its size).
    """

    produces: ClassVar[tuple[str, ...]] = ("mid",)
    default_backbone: ClassVar[str] = DEFAULTS["mid"]["backbone"]

    def __init__(self, metrics: Sequence[str] | None = None, backbone: Any = None, device: str = "cpu",
                 reference: str = "first", eps: float = 0.0, limit: int = 30000, batch_size: int = 64,
                 text_batch_size: int = 256, cache: Any = None, lora: str = "effective",
                 workers: int | None = None):
        self.metrics = self._select(metrics)
        if reference not in ("first", "all"):
            raise InputError(f"mid option reference: expected 'first' or 'all', got {reference!r}")
        for name, value in (("eps", eps), ("limit", limit), ("batch_size", batch_size),
                            ("text_batch_size", text_batch_size)):
            check_option("mid", name, value)  # declared in capeval.ranges
        self.reference, self.eps, self.limit = reference, float(eps), int(limit)
        self.batch_size, self.text_batch_size, self.cache, self.workers = batch_size, text_batch_size, cache, workers
        from capeval.models.clip.backbone import as_backbone

        self.backbone = as_backbone(backbone, self.default_backbone, device=device, lora=lora)

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``images`` and ``references`` (both required)."""
        from capeval.models.clip.embed import embed_texts, embed_usable_images, l2_normalize

        if references is None:
            raise InputError("mid needs references (the Gaussian is fitted to the (reference, image) pairs)")
        cands, refs, ids, sources, bad = image_metric_inputs(candidates, references, images, self.metrics,
                                                             needs_references=True)
        n = sum(1 for i in ids if i not in bad)
        if n > self.limit:  # checked before any image is embedded
            raise InputError(f"mid: {n} items exceed limit={self.limit}: the official code fits the Gaussian to the "
                             f"first {self.limit} pairs and scores only the first {self.limit} candidates; score at "
                             f"most {self.limit} items per call or raise -O mid.limit to {n}")
        good, img = embed_usable_images(self.backbone, ids, sources, bad, self.batch_size, self.cache, progress,
                                        skip_bad_items, self.workers)
        img = l2_normalize(img).astype(np.float64)
        real = [[refs[i][0]] if self.reference == "first" else list(refs[i]) for i in good]
        texts = [cands[i] for i in good] + [r for rs in real for r in rs]
        txt = l2_normalize(embed_texts(self.backbone, texts, self.text_batch_size, self.cache, progress,
                                       stats=(txt_stats := {})))
        txt = txt.astype(np.float64)
        x0, x = txt[: len(good)], txt[len(good):]
        y = np.repeat(img, [len(rs) for rs in real], axis=0)
        # candidates <= limit here; reference=all may hold more real pairs: the first limit are kept
        items, system = gaussian_pmi(x, y, x0, img, eps=self.eps, limit=self.limit, cut_candidates=False)
        result = MetricResult(
            metric="mid", system=system, items={i: float(s) for i, s in zip(good, items)},
            signature=self.signature(len(good), min(len(x), self.limit)),
            extras={"estimation_pairs": min(len(x), self.limit),  # references: those the Gaussian reads
                    **truncation.tally((cands[i] for i in good), real, txt_stats.get("truncated_texts", set()))},
            skipped=tuple(i for i in ids if i in bad))
        return Report([result])

    def signature(self, n_items: int, n_pairs: int) -> Signature:
        import torch

        sig = dict(self.backbone.signature)
        params: dict[str, Any] = {"backbone": sig.pop("backbone"), "reference": self.reference, "eps": self.eps,
                                  "limit": self.limit, "fit": f"scored-set(items={n_items},pairs={n_pairs})",
                                  "dtype": "float64", "prompt": '""'}
        params.update(sig)
        params["versions"] = {"torch": torch.__version__, "numpy": np.__version__}
        return Signature.build("mid", **params)


