"""A chunk of consecutive items of a text pass: its texts with their tokenisation context, their
PTB tokenisation, and the n-gram tables the metrics of the chunk share.

The PTB step of pycocoevalcap tokenises all candidates (then all references) in one call, so a
caption's tokenisation may depend on the captions after it (:data:`capeval.tokenize.CONTEXT_CAPTIONS`
of them): a span's texts come with those (:func:`span_texts`), and the chunked pipeline of
:mod:`capeval.metrics.text` gives every caption the tokens one call over the whole set gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class TextChunk:
    """Consecutive items, tokenised: ``hyps[i]`` and ``refs[i]`` (space-joined tokens) of item i.

    :meth:`table` is the n-gram table (:class:`~capeval.metrics.ngrams.NgramTable`) of the
    chunk, built once for all the metrics that read it (BLEU, CIDEr-D).
    """

    def __init__(self, hyps: list[str], refs: list[list[str]]):
        self.hyps = hyps
        self.refs = refs
        self._tables: dict[int, Any] = {}
        #: the chunk whose table this one's is a view of (:meth:`joint`), and its candidates' span there
        self._joint: tuple["TextChunk", int, int] | None = None
        #: whether scorers keep the references' (item, n-gram) pairs with this chunk's statistics
        #: (False: the chunk of another system of a comparison, on the same references, keeps them)
        self.keeps_reference_pairs = True

    def __len__(self) -> int:
        return len(self.refs)

    def table(self, n: int) -> Any:
        """The chunk's n-gram table up to order ``n`` (cached)."""
        t = self._tables.get(n)
        if t is None:
            if self._joint is not None:
                whole, lo, hi = self._joint
                t = self._tables[n] = whole.table(n).view(lo, hi)
                return t
            from capeval.metrics.ngrams import NgramTable

            t = self._tables[n] = NgramTable(self.hyps, self.refs, n)
        return t

    @staticmethod
    def joint(candidate_lists: Sequence[list[str]], refs: list[list[str]]) -> list["TextChunk"]:
        """One chunk per list of candidates, all of the same items (``refs``), whose n-gram
        tables are views of one table of every list (:meth:`~capeval.metrics.ngrams.NgramTable.view`):
        the references' sentences and n-grams are numbered and counted once for all the lists."""
        whole = TextChunk([h for hyps in candidate_lists for h in hyps], refs)
        out = []
        at = 0
        for hyps in candidate_lists:
            if len(hyps) != len(refs):
                raise ValueError(f"TextChunk.joint: {len(hyps)} candidates for {len(refs)} items")
            piece = TextChunk(hyps, refs)
            piece._joint = (whole, at, at + len(hyps))
            out.append(piece)
            at += len(hyps)
        return out


def tokenize_span(
    tokenizer: str, ids: Sequence[str], cands: Mapping[str, str] | None, refs: Mapping[str, list[str]],
    a: int, b: int, on_progress: Any = None,
) -> tuple[list[str], list[list[str]]]:
    """Tokenised candidates (``[]`` when ``cands`` is None) and references of ``ids[a:b]``.

    The PTB step gives every caption the captions after it as context, as one
    pycocoevalcap call over all candidates (then all references) would.
    """
    return tokenize_texts(tokenizer, *span_texts(ids, cands, refs, a, b), on_progress)


def span_texts(
    ids: Sequence[str], cands: Mapping[str, str] | None, refs: Mapping[str, list[str]], a: int, b: int
) -> tuple[list[str] | None, list[list[str]], list[str], list[str]]:
    """(candidates or None, references, following candidates, following references) of ``ids[a:b]``."""
    from capeval.tokenize import CONTEXT_CAPTIONS

    span = ids[a:b]
    after = ids[b : b + CONTEXT_CAPTIONS]
    hyps = [cands[i] for i in span] if cands is not None else None
    next_hyps = [cands[i] for i in after] if cands is not None else []
    return hyps, [refs[i] for i in span], next_hyps, [r for i in after for r in refs[i]][:CONTEXT_CAPTIONS]


def tokenize_texts(
    tokenizer: str, hyps: list[str] | None, refs: list[list[str]], next_hyps: list[str], next_refs: list[str],
    on_progress: Any = None,
) -> tuple[list[str], list[list[str]]]:
    """Tokenise one span's texts (:func:`span_texts`), each caption with its following context."""
    flat = [r for rs in refs for r in rs]
    if tokenizer == "none":
        hyps_tok = [" ".join(h.split()) for h in hyps] if hyps is not None else []
        flat = [" ".join(r.split()) for r in flat]
    else:
        from capeval.tokenize import ptb_tokenize_batch

        hyps_tok = ptb_tokenize_batch(hyps, on_progress, next_hyps) if hyps is not None else []
        flat = ptb_tokenize_batch(flat, on_progress, next_refs)
    out: list[list[str]] = []
    pos = 0
    for rs in refs:
        out.append(flat[pos : pos + len(rs)])
        pos += len(rs)
    return hyps_tok, out
