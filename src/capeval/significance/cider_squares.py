"""The squares of CIDEr-D's tf-idf values on resamples, by count and document frequency.

An entry of count ``tf`` whose n-gram has document frequency ``df`` on a resample has the value
``tf * w[df]`` (``w = log N - log max(1, df)``, :func:`.cider_arrays._weights`), and its square
is that value squared by Python's ``pow`` as pycocoevalcap squares it (:func:`.cider_arrays._squares`:
libm's ``pow``, which differs from ``v * v`` in the last bit now and then). A count used by
enough entries gets a row of the table (its squares at every df from 0 to N, computed once);
the others are squared per block (:meth:`capeval.significance.cider_groups._Group`).
"""

from __future__ import annotations

import threading

import numpy as np

from capeval.significance.cider_arrays import _ROW_FACTOR, _TABLE_BUDGET, _squares


class SquaresTable:
    """The rows of squares of one resampling (``n_items`` items, ``weights`` by df, about
    ``samples_hint`` resamples); rows are only added, one caller at a time."""

    def __init__(self, n_items: int, weights: np.ndarray, samples_hint: int):
        self.n = n_items
        self.weights = weights
        self.samples_hint = samples_hint
        self._rows: dict[int, int] = {}  # tf -> row of self._table
        self._lock = threading.Lock()
        self._table = np.zeros((0, n_items + 1), dtype=np.float64)

    def rows_for(self, tf: np.ndarray) -> np.ndarray:
        """Per entry the row of the squares table of its count ``tf`` (-1: squared per block).

        A count gets a row (``N + 1`` squares, computed once) when its entries, over the
        resamples, would need more squares than the row holds; count 1 always has one. The
        groups call it from their threads: one at a time."""
        with self._lock:
            return self._rows_for(tf)

    def plan(self, per_count: np.ndarray) -> None:
        """Give rows to the counts whose entries over all the groups (``per_count[t]``: entries of
        count ``t``) pay for one, before the groups are built: a count with few entries in each
        group but many in all (3 to 6 at 40,000 items) would otherwise be squared per group and
        block (Python's ``pow`` on the group's thread, 640 calls at 40,000 items)."""
        with self._lock:
            self._add_rows(np.asarray(per_count, dtype=np.int64))

    def _rows_for(self, tf: np.ndarray) -> np.ndarray:
        # np.unique's values and counts of the (small, positive) counts, by one bincount
        per_count = np.bincount(tf) if len(tf) else np.zeros(0, dtype=np.int64)
        values = self._add_rows(per_count)
        # one table of the counts present, not a pass over the entries per row
        row_of = np.full(max(values.tolist(), default=0) + 1, -1, dtype=np.int64)
        for t, row in self._rows.items():
            if 0 <= t < len(row_of):
                row_of[t] = row
        return row_of[tf] if len(tf) else np.full(0, -1, dtype=np.int64)

    def _add_rows(self, per_count: np.ndarray) -> np.ndarray:
        """Rows for the counts of ``per_count`` that pay for one (count 1 always); returns the
        counts present."""
        values = np.flatnonzero(per_count)
        counts = per_count[values]
        by_count = sorted(zip(counts.tolist(), values.tolist()), reverse=True)
        want = [int(v) for c, v in by_count if v == 1 or c * self.samples_hint >= _ROW_FACTOR * (self.n + 1)]
        room = max(1, _TABLE_BUDGET // (self.n + 1)) - len(self._rows)
        new = [t for t in want if t not in self._rows][:max(0, min(room, 64 - len(self._rows)))]
        if new:
            # float(t) * w as numpy multiplies them in cider_table_scores, then Python's pow
            rows = np.array([_squares(float(t) * self.weights) for t in new], dtype=np.float64)
            for t in new:
                self._rows[t] = len(self._rows)
            self._table = np.concatenate([self._table, rows]) if len(self._table) else rows
        return values

    @property
    def table(self) -> np.ndarray:
        """The squares table: row ``rows_for(tf)``, column ``df``."""
        return self._table

    @property
    def row_one(self) -> int:
        """The table's row of count 1 (-1 when no entry has count 1)."""
        return self._rows.get(1, -1)
