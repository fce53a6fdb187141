"""CIDEr-D's length penalty of every (candidate, reference) pair of an n-gram table, as
pycocoevalcap computes it: ``np.e ** (-(delta ** 2) / (2 * sigma ** 2))`` on Python floats, with
``delta`` the candidate's length minus the reference's (a sentence's length: its number of
bigrams, counted with their counts). One definition for the scorer
(:func:`capeval.metrics.cider.cider_table_scores`) and the resampling's statistics
(:func:`capeval.significance.cider_arrays.chunk_statistics`), computed once for a table and its
views (``NgramTable.shared_cache``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def sentence_lengths(table: Any) -> np.ndarray:
    """Every sentence's length (float64: the sum of its bigram counts), once per table and its views."""
    cached = table.shared_cache.get("cider-lengths")
    if cached is None:
        cached = table.shared_cache["cider-lengths"] = np.bincount(
            table.ent_sent, weights=np.where(table.ent_order == 1, table.ent_tf, 0), minlength=table.n_sent)
    return cached


def slot_penalties(table: Any, sigma: float) -> np.ndarray:
    """The length penalty (float64) of each (item, reference) slot of ``table``'s candidates,
    once per table view (the candidates of a view are its ``hyp_sid``)."""
    key = ("cider-penalties", id(table.hyp_sid), sigma)
    cached = table.shared_cache.get(key)
    if cached is not None and cached[0] is table.hyp_sid:
        return cached[1]
    length = sentence_lengths(table)
    delta = (length[table.hyp_sid[table.slot_item]] - length[table.slot_sid]).tolist()
    factor = {d: np.e ** (-(d**2) / (2 * sigma**2)) for d in set(delta)}
    out = np.array([factor[d] for d in delta], dtype=np.float64)
    table.shared_cache[key] = (table.hyp_sid, out)  # the array held: its id names no other meanwhile
    return out
