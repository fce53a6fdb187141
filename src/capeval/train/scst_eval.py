"""The captioner's evaluation at the end of each stage: beam-search captions of the held-out
images, scored with ``capeval.score`` and the caption diagnostics (rep-1..4, length, vocab and,
unless opted out, %Incorrect)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from capeval.train.coco import CaptionedImage
from capeval.train.scst_model import CaptionTransformer, FeatureStore, Vocab


def generate(model: CaptionTransformer, store: FeatureStore, vocab: Vocab, ids: Sequence[str], beam: int,
             batch_size: int = 64) -> dict[str, str]:
    """The best beam's caption of each image id."""
    was = model.training
    model.eval()
    out: dict[str, str] = {}
    for start in range(0, len(ids), batch_size):
        chunk = list(ids[start : start + batch_size])
        seqs, _ = model.beam_search(store.get(chunk).to(next(model.parameters()).device), beam)
        out.update({i: vocab.decode(s[0]) for i, s in zip(chunk, seqs.cpu())})
    model.train(was)
    return out


def evaluate(captions: Mapping[str, str], items: Sequence[CaptionedImage], metrics: str,
             incorrect: bool = True) -> dict[str, float]:
    """System scores of ``captions`` on ``items``: one ``capeval.score`` call plus the diagnostics
    (``incorrect``: with the %Incorrect diagnostic, which needs spaCy's English model)."""
    import capeval

    refs = {it.id: list(it.captions) for it in items}
    cands = {it.id: captions[it.id] for it in items}
    out: dict[str, float] = {}
    if metrics:
        from capeval import registry

        wants = any("images" in registry.get(m).accepts for m in registry.expand(metrics))
        images = {it.id: it.image for it in items} if wants else None
        report = capeval.score(cands, refs, metrics=metrics, **({"images": images} if wants else {}))
        out.update({m: report[m].system for m in report})
    report = diagnostics_scorer(incorrect).score(cands)
    out.update({m: report[m].system for m in report})
    return out


def diagnostics_scorer(incorrect: bool) -> Any:
    """The evaluation's diagnostics scorer; with ``incorrect``, a missing spaCy model is a one-line
    error naming the opt-out (never a silently shorter evaluation)."""
    from capeval.errors import MissingDependencyError
    from capeval.metrics.diagnostics import Diagnostics

    chosen = ["rep-1", "rep-2", "rep-3", "rep-4", "length", "vocab"] + (["incorrect"] if incorrect else [])
    try:
        return Diagnostics(chosen)
    except MissingDependencyError as exc:
        raise MissingDependencyError(f"{exc} -- or set eval_incorrect: false in the captioner config") from None
