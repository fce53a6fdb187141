"""CIDEr-D of one system of a comparison, on resamples and on mixed item sets.

The resamples' work is shared by the systems of a comparison
(:class:`~capeval.significance.cider_resample.CiderResampling`); this is the per-system face that
:mod:`capeval.significance.paired` calls (the :class:`~capeval.significance.paired.Statistic`
protocol).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from capeval.significance.cider_arrays import CiderChunk

if TYPE_CHECKING:
    from capeval.significance.cider_resample import CiderResampling


class CiderStatistic:
    """CIDEr-D of one system on resamples (``resampled``) and on mixed item sets (``mixed``)."""

    def __init__(self, chunks: list[CiderChunk], items: np.ndarray, shared: CiderResampling | None):
        self.n = len(items)
        self.items = np.asarray(items, dtype=np.float64)
        self.shared = shared
        #: the system's n-gram tables, until the shared resampling has built its groups from them (then None)
        self.chunks: list[CiderChunk] | None = list(chunks)
        self.n_ord = chunks[0].n_ord if chunks else 4
        self.ref_counts = (np.concatenate([c.ref_counts for c in chunks]) if chunks
                           else np.zeros(0, dtype=np.int64))
        if shared is not None:
            shared.register(self)

    def score(self) -> float:
        return float(np.mean(self.items))

    def prepare_counts(self, counts: np.ndarray) -> None:
        """Work on a block's multiplicities that may be done as soon as they are drawn
        (:meth:`CiderResampling.prepare_counts`)."""
        if self.shared is not None:
            self.shared.prepare_counts(counts)

    def start_resamples(self) -> None:
        """The shared resampling's set-up (its threads, its groups), done before the first block is
        needed (:func:`capeval.significance.paired.bootstrap_scores` calls it while the block is
        drawn, and :meth:`end_resamples` after the last)."""
        if self.shared is not None:
            self.shared.open_threads()
            self.shared.build_groups()

    def end_resamples(self) -> None:
        """The shared resampling's threads stopped (idempotent)."""
        if self.shared is not None:
            self.shared.close_threads()

    def item_scores(self, counts: np.ndarray) -> np.ndarray:
        """``(k, N)`` item scores on each resample (an item not drawn scores 0)."""
        if self.shared is None:
            raise ValueError("CiderStatistic.item_scores needs the shared CiderResampling")
        return self.shared.item_scores(self, np.asarray(counts, dtype=np.float64))

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        return self.resampled_later(counts)()

    def resampled_later(self, counts: np.ndarray) -> Any:
        """:meth:`resampled` as a call giving the scores, its last step done beside the next
        block's work (:meth:`CiderResampling.resampled_later`)."""
        if self.shared is None:
            raise ValueError("CiderStatistic.resampled needs the shared CiderResampling")
        return self.shared.resampled_later(self, np.asarray(counts, dtype=np.float64))

    def mixed(self, take_self: np.ndarray, other: "CiderStatistic") -> np.ndarray:
        # the approximate randomisation swaps outputs; the references, hence df, do not change
        return (take_self @ self.items + (~take_self) @ other.items) / self.n
