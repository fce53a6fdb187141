"""The reference work of a text scoring pass, shared by the systems of one comparison.

``capeval compare`` scores every system on the same references. In the chunked pipeline of
:mod:`capeval.metrics.text` a reference's tokenisation depends only on the references (a
caption's PTB context is the captions after it in its own list, :func:`~capeval.metrics.text.span_texts`),
and the corpus :class:`~capeval.metrics.ngrams.GramIndex` (CIDEr-D's document frequencies)
only on the tokenised references and the chunks. So within
:func:`capeval.significance.keep.sharing` the first system's pass leaves a
:class:`SharedReferences` (its tokenised references, up to the pass's memory budget, and its
corpus index), and a later pass with the same tokenizer, corpus order, chunks, item ids and
reference texts takes them: it skips the corpus pass and tokenises its own candidates only.
Every input of the scoring steps is then the same list of strings or the same index as a
pass of its own would build, so the scores are the same to the last bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class SharedReferences:
    """One pass's reference work: per chunk its tokenised references (None past the memory
    budget: that chunk's references are tokenised again), and the corpus index."""

    def __init__(self, key: tuple, ids: list[str], refs: list[list[str]]):
        self.key = key
        self.ids = ids
        self.refs = refs  # the reference texts, per item in order: what a later pass must match
        self.tokens: list[list[list[str]] | None] = []
        self.corpus: Any = None
        #: later systems' results scored in this pass (keep.score_ahead): (the scorers, the
        #: candidate texts in item order, per scorer its chunks' outputs)
        self.ahead: list[tuple[tuple[Any, ...], list[str], list[list[Any]]]] = []
        #: the references object the pass was given (later passes on it take their results) and
        #: the signature's reference counts
        self.source: Any = None
        self.nrefs = ""

    def matches(self, key: tuple, ids: list[str], refs: list[list[str]]) -> bool:
        """Would a pass with these settings, ids and references build the same work?"""
        return self.corpus is not None and key == self.key and ids == self.ids and refs == self.refs

    def take_ahead(self, scorers: Sequence[Any], texts: list[str]) -> list[list[Any]] | None:
        """The chunk outputs that the first pass computed for these very scorers (the same
        objects: one Evaluator scores every system) on these candidate texts, handed over once;
        None when it did not."""
        for k, (done_by, done_texts, parts) in enumerate(self.ahead):
            if len(done_by) == len(scorers) and all(a is b for a, b in zip(done_by, scorers)) and done_texts == texts:
                del self.ahead[k]
                return parts
        return None

    def tokens_of(self, k: int) -> list[list[str]] | None:
        """Chunk ``k``'s tokenised references, or None (not kept)."""
        return self.tokens[k] if k < len(self.tokens) else None


def find_shared(tokenizer: str, order: int, work: Sequence[tuple[int, int]], ids: list[str],
                refs: Mapping[str, list[str]]) -> tuple[SharedReferences | None, bool]:
    """``(entry, reused)`` for a pass with a corpus pass of ``order``: within
    :func:`~capeval.significance.keep.sharing`, a matching entry of an earlier pass (``reused``
    True) or a new one for this pass to fill and :func:`publish`; outside, ``(None, False)``."""
    from capeval.significance.keep import shared_passes

    store = shared_passes()
    if store is None:
        return None, False
    key = (tokenizer, int(order), tuple(work))
    texts = [refs[i] for i in ids]
    for entry in store:
        if entry.matches(key, ids, texts):
            return entry, True
    return SharedReferences(key, list(ids), texts), False


def publish(entry: SharedReferences, corpus: Any) -> None:
    """Offer a filled entry to the next passes of the :func:`~capeval.significance.keep.sharing` block."""
    from capeval.significance.keep import shared_passes

    store = shared_passes()
    if store is not None:
        entry.corpus = corpus
        corpus.shared_by_passes = True
        store.append(entry)


def ahead_texts(ids: list[str]) -> list[list[str]]:
    """The candidate texts, in the order of ``ids``, of a comparison's later systems that this
    pass may score beside its own (:func:`capeval.significance.keep.score_ahead`): those that
    :func:`taken_ahead` can hand to their own pass (checked by compare, the same ids in the same
    order); the others are scored by their own pass."""
    from capeval.io.inputs import CheckedCandidates
    from capeval.significance.keep import ahead

    return [list(c.values()) for c in ahead() if type(c) is CheckedCandidates and list(c) == ids]


def joint_scores(scorers: Sequence[Any], corpus: Any, tokenizer: str, hyps: list[str],
                 refs: list[list[str]], later: list[list[str]], span: tuple[int, int]) -> tuple[Any, ...]:
    """One chunk scored for the pass's own candidates ``hyps`` and for each later system's
    (``later``: their candidates in item order; ``span``: the chunk's items), on one n-gram
    table of them all (:meth:`capeval.metrics.text_chunks.TextChunk.joint`). A later system's
    candidates are tokenised with the candidates after them as context, as its own pass tokenises them, and every score and
    statistic is the one its own pass computes (``tests/test_joint_tables.py``). Returns
    ``(items, own outputs, [each later system's outputs])``."""
    from capeval.metrics import text_chunks
    from capeval.tokenize import CONTEXT_CAPTIONS

    a, b = span
    tokens = [text_chunks.tokenize_texts(tokenizer, t[a:b], [], t[b:b + CONTEXT_CAPTIONS], [])[0] for t in later]
    pieces = text_chunks.TextChunk.joint([hyps] + tokens, refs)
    for piece in pieces[1:]:
        piece.keeps_reference_pairs = False  # the first system's statistics keep the references' pairs
    outs = [[s.score_chunk(piece, corpus) for s in scorers] for piece in pieces]
    return len(refs), outs[0], outs[1:]


def taken_ahead(scorers: Sequence[Any], candidates: Any, references: Any) -> tuple[list[str], Any, str] | None:
    """``(ids, per scorer its chunks' outputs, nrefs)`` of a later system of a comparison that
    the first system's pass scored (:func:`joint_scores`), handed over once: within
    :func:`~capeval.significance.keep.sharing`, for candidates checked by compare
    (:class:`~capeval.io.inputs.CheckedCandidates`, the same ids in the same order, the same
    texts) on the very references object and scorers of that pass; else None."""
    from capeval.io.inputs import CheckedCandidates
    from capeval.significance.keep import shared_passes

    store = shared_passes()
    if not store or references is None or type(candidates) is not CheckedCandidates:
        return None
    ids = texts = None
    for entry in store:
        if entry.source is not references or not entry.ahead:
            continue
        if ids is None:
            ids, texts = list(candidates), list(candidates.values())
        if ids != entry.ids:
            continue
        parts = entry.take_ahead(scorers, texts)
        if parts is not None:
            return ids, parts, entry.nrefs
    return None
