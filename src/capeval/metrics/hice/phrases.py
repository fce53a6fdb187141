"""Phrases of a caption for HICE-S's local matching (Zeng et al. 2024, Sec. 3.2.2).

A *phrase parser* turns captions into short texts, one per fact, that the Alpha-CLIP text
tower embeds (f_{C,m} = C_t(r_{C,m})). Anything with ``phrases(captions) -> list[list[str]]``
and ``signature_fields() -> dict`` works; two are built in:

- ``"factual"`` (default): the paper's choice (Zeng et al. 2024, Sec. 4.1: "TextGraphParser",
  FACTUAL [26]), the FACTUAL flan-t5 parser ``lizhuang144/flan-t5-base-VG-factual-sg``
  (:mod:`capeval.metrics.hice.factual`); needs transformers and the model's weights
  (``capeval download factual``; missing weights are a one-line error naming the command
  and the offline alternative).
- ``"spice"`` (offline, no weights): capeval's SPICE scene-graph parser (spaCy, no Java;
  :mod:`capeval.metrics.spice.parser`), raw captions PTB-tokenised first. Its
  :meth:`~capeval.metrics.spice.caption_graph.CaptionGraph.phrases` gives ``"man ride horse"``
  per relation, ``"brown horse"`` per attribute and, with ``objects="unrelated"`` (default),
  the objects that are in no relation or attribute, so "a dog." still has a phrase.
  ``objects="none"`` keeps relations and attributes only (closest to the paper's triples);
  ``"all"`` adds every object. Needs the ``spice`` extra. Its phrases are not the paper's, so
  its scores are not HICE-S as published (the signature says ``parser:spacy-...``).

:func:`phrases_or_caption` applies the "no phrase" rule: a caption without any phrase is
its own single phrase.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from capeval.errors import InputError

PARSERS = ("spice", "factual")
OBJECT_MODES = ("unrelated", "all", "none")


@runtime_checkable
class PhraseParser(Protocol):
    """Captions -> phrases; ``signature_fields`` says what the phrases depend on."""

    def phrases(self, captions: Sequence[str]) -> list[list[str]]: ...

    def signature_fields(self) -> dict[str, Any]: ...


class SpicePhrases:
    """Phrases from capeval's SPICE scene-graph parser (:class:`~capeval.metrics.spice.parser.SceneGraphParser`)."""

    name = "spice"

    def __init__(self, spacy_model: str | None = None, objects: str = "unrelated"):
        from capeval._optional import require

        if objects not in OBJECT_MODES:
            raise InputError(f"hice-s option phrase_objects={objects!r}: use one of {', '.join(OBJECT_MODES)}")
        require("spacy", extra="spice", purpose="hice-s parser='spice' (the default parser='factual' uses "
                "transformers instead)")
        from capeval.metrics.spice.parser import DEFAULT_MODEL, SceneGraphParser

        self.parser = SceneGraphParser(spacy_model or DEFAULT_MODEL, tokenize=True)
        self.objects = objects

    def signature_fields(self) -> dict[str, Any]:
        return {**self.parser.signature_fields(), "phrase_objects": self.objects}

    def phrases(self, captions: Sequence[str]) -> list[list[str]]:
        """Phrases of each caption (each distinct caption parsed once, batched)."""
        return [g.phrases(self.objects) for g in self.parser.scene_graphs(list(captions))]


def make_parser(parser: Any = "factual", model: str | None = None, objects: str = "unrelated",
                device: str = "cpu", checkpoint_dir: str | None = None) -> Any:
    """A phrase parser by name (``"factual"``, the default, or ``"spice"``) or a given object with ``phrases``.

    ``model``: the spaCy pipeline (``"spice"``, default ``en_core_web_sm``) or the FACTUAL
    checkpoint (``"factual"``, default ``lizhuang144/flan-t5-base-VG-factual-sg``).
    """
    if not isinstance(parser, str):
        if not (hasattr(parser, "phrases") and hasattr(parser, "signature_fields")):
            raise InputError(f"hice-s option parser: expected {' or '.join(map(repr, PARSERS))} or an object with "
                             f"phrases() and signature_fields(), got {type(parser).__name__}")
        return parser
    key = parser.strip().lower()
    if key == "spice":
        return SpicePhrases(model, objects)
    if key == "factual":
        from capeval.metrics.hice.factual import DEFAULT_CHECKPOINT, FactualParser

        return FactualParser(model or DEFAULT_CHECKPOINT, device=device, checkpoint_dir=checkpoint_dir)
    raise InputError(f"hice-s option parser={parser!r}: use one of {', '.join(PARSERS)}")


def phrases_or_caption(phrases: Sequence[str], caption: str) -> tuple[list[str], bool]:
    """``(phrases, fallback)``: the phrases, or ``[caption]`` and True when there is none."""
    kept = [p for p in dict.fromkeys(p.strip() for p in phrases) if p]
    return (kept, False) if kept else ([caption], True)
