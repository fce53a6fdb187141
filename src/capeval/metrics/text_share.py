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

    def matches(self, key: tuple, ids: list[str], refs: list[list[str]]) -> bool:
        """Would a pass with these settings, ids and references build the same work?"""
        return self.corpus is not None and key == self.key and ids == self.ids and refs == self.refs

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
