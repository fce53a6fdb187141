"""``CiderDTokens``: CIDEr-D of token-id captions on their device, exact, for SCST / GRPO rewards.

>>> reward = CiderDTokens(train_refs, pad_id=tok.pad_token_id, eos_id=tok.eos_token_id)  # doctest: +SKIP
>>> r = reward.table(sequences, items)           # [B] float64 on sequences.device

``train_refs[i]`` is item i's references as lists of token ids (the captioner's own tokenizer,
no special tokens). Document frequencies are fixed from them once, as :meth:`capeval.Reward.fit`
fixes them from word references: ``df(g)`` = items whose references hold n-gram ``g``, ``N`` =
items. The score is pycocoevalcap 1.2's ``CiderScorer.compute_cider`` (cider_scorer.py) on the
same tokens written as words: per order n (1..4) a caption's vector holds
``tf * (log N - log max(1, df))`` for each distinct n-gram (``counts2vec``); against each
reference r of the item ``val_n = sum_g min(v_c(g), v_r(g)) v_r(g)``, divided by the two norms
when both are non-zero, times ``e ** (-(l_c - l_r)^2 / (2 sigma^2))`` with ``l`` the number of
*bigrams* (``sim``); the score is ``10 * mean_n(sum_r val_n) / |R|``.

Exactness: in float64 on the CPU the scores equal ``capeval.Reward({"cider-d": 1}, fit=...)`` on
the words (ids written as words) bit for bit, because every step is pycocoevalcap's: weights
and the length penalty come from the same numpy / Python expressions (tables built on the host),
squares are libm ``pow(x, 2)`` as there (a table per (weight, tf), since ``x * x`` differs in the
last bit for about one value in a thousand), and every sum runs in its order: over a caption's
n-grams in first-position order (a sequential ``cumsum`` over positions, zeros elsewhere), over
references in order, over orders left to right. On CUDA the position sums are a parallel scan:
equal within a few units in the last place. In float32 (``dtype=torch.float32``) within 1e-5.

Syncs and compilation: one host sync per call to check that ``items`` are in range
(``check_items=False``: none). Tables are built on the host when the caption length T grows
past the largest seen (shape-dependent, so once per T under ``torch.compile``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from capeval.reward.token_grams import TokenReward, check_range, take


class CiderDTokens(TokenReward):
    """CIDEr-D (pycocoevalcap 1.2's) of ``[B, T]`` token-id captions against fixed training references.

    Args:
        references: per item, a non-empty list of references, each a list (or 1-D tensor) of
            token ids, without padding or special tokens; fixes the document frequencies.
        pad_id: padding id; a caption ends at its first ``pad_id`` (any int64).
        eos_id: end-of-sequence id; a caption also ends at its first ``eos_id`` (None: only pad).
        n: n-gram orders, 1..7 (4: CIDEr-D).
        sigma: length-penalty width, > 0 (6.0: pycocoevalcap cider_scorer.py).
        dtype: ``torch.float64`` (exact) or ``torch.float32`` (within 1e-5).
        max_elements: rows x T x references per chunk (working set), >= 1024.
        check_items: check ``items`` (one host sync per call).

    Raises:
        InputError: a bad reference or option (one line naming it).
    """

    def __init__(self, references: Any, pad_id: int = 0, n: int = 4, sigma: float = 6.0, *,
                 eos_id: int | None = None, dtype: Any = torch.float64, max_elements: int = 1 << 22,
                 check_items: bool = True):
        check_range("sigma", sigma)
        super().__init__(references, pad_id=pad_id, eos_id=eos_id, n=n, dtype=dtype,
                         max_elements=max_elements, check_items=check_items)
        self.sigma = float(sigma)
        ix = self.index
        log_n = np.log(float(ix.n_items))
        # capeval.metrics.cider.cider_table_scores' expression (pycocoevalcap: ref_len - log(max(1, df)))
        self._weights = [log_n - np.log(np.maximum(1.0, df.astype(np.float64))) for df in ix.df]
        unseen = float((log_n - np.log(np.maximum(1.0, np.zeros(1))))[0])
        self._classes = np.unique(np.concatenate([*self._weights, [unseen]]))
        self._class_of = [np.searchsorted(self._classes, w) for w in self._weights]
        self._unseen_class = int(np.searchsorted(self._classes, unseen))
        self._ref_norms = self._reference_norms()
        lengths = ix.ref_lengths - 1 if n >= 2 else np.zeros_like(ix.ref_lengths)
        self._ref_bigrams = np.maximum(lengths, 0)  # pycocoevalcap's length: the bigram count
        self._span = 0  # tf / length-difference tables cover 0..span
        self._squares = np.zeros((len(self._classes), 1))
        self._penalty = np.ones(1)

    def _reference_norms(self) -> np.ndarray:
        """[items, R, n] norms of the references' vectors, summed in first-position order."""
        ix, rows, n = self.index, self.index.rows, self.n
        weight = np.concatenate(self._weights)
        offset = np.concatenate([[0], np.cumsum([len(w) for w in self._weights])[:-1]])
        val = rows.tf.astype(np.float64) * weight[offset[rows.order] + rows.gid]
        uniq, inv = np.unique(val, return_inverse=True)
        squares = np.array([v**2 for v in uniq.tolist()], dtype=np.float64)[inv]  # libm pow, as pycocoevalcap
        order = np.lexsort((rows.first, rows.order, rows.ref))
        n_refs = len(ix.item_of)
        sums = np.bincount(rows.ref[order] * n + rows.order[order], weights=squares[order], minlength=n_refs * n)
        out = np.zeros((ix.n_items, ix.max_refs, n))
        out[ix.item_of, ix.slot] = np.sqrt(sums.reshape(n_refs, n))
        return out

    def _grow(self, t: int) -> None:
        """Extend the host tables (squares per (weight, tf), length penalties) to cover T = ``t``."""
        span = max(t, int(self.index.ref_lengths.max()))
        if span <= self._span:
            return
        tf = np.arange(span + 1, dtype=np.float64)
        if self.dtype == torch.float64:  # float32 squares with x * x
            self._squares = np.array([[v**2 for v in (tf * w).tolist()] for w in self._classes.tolist()])
        two_s2 = 2 * self.sigma**2
        self._penalty = np.array([np.e ** (-(float(d) ** 2) / two_s2) for d in range(span + 1)])
        self._span = span
        for tabs in self._tables.values():
            tabs.update(self._grown(tabs["entry_keys"].device))

    def _grown(self, device: torch.device) -> dict[str, Any]:
        return {"squares": torch.as_tensor(self._squares.reshape(-1), device=device),
                "penalty": torch.as_tensor(self._penalty, dtype=self.dtype, device=device)}

    def _device_tables(self, device: torch.device) -> dict[str, Any]:
        out = super()._device_tables(device)
        out["class_weights"] = torch.as_tensor(self._classes, dtype=self.dtype, device=device)
        # index gid + 1: slot 0 is the class of an n-gram in no reference (df 0)
        out["classes"] = [torch.as_tensor(np.concatenate([[self._unseen_class], c]).astype(np.int64), device=device)
                          for c in self._class_of]
        out["ref_norms"] = torch.as_tensor(self._ref_norms, dtype=self.dtype, device=device)
        out["ref_bigrams"] = torch.as_tensor(self._ref_bigrams, device=device)
        out.update(self._grown(device))
        return out

    def _hit_sums(self, items: torch.Tensor, k: int, gid: torch.Tensor, first: torch.Tensor, vh: torch.Tensor,
                  w: torch.Tensor, tabs: dict[str, Any]) -> torch.Tensor:
        """``[B, R]`` sums over positions of ``min(vh, vr) * vr``, on the CPU: the hits only.

        The same sums as the dense form (terms off the hits are +0.0, which leaves a sum of
        non-negative values as it is): each row's hits packed left in position order, then one
        sequential ``cumsum`` per (row, reference) over at most the row's hit count.
        """
        b, t = gid.shape
        at, entry = self.item_hits(items, k + 1, gid, first, tabs)
        r = tabs["entry_tf"].shape[1]
        if at.shape[0] == 0:
            return torch.zeros(b, r, dtype=self.dtype)
        vr = torch.index_select(tabs["entry_tf"], 0, entry).to(self.dtype)
        vr = vr * torch.index_select(w.view(-1), 0, at)[:, None]
        term = torch.minimum(torch.index_select(vh.view(-1), 0, at)[:, None], vr) * vr  # [H, R]
        row = torch.div(at, t, rounding_mode="floor")
        counts = torch.bincount(row, minlength=b)
        width = int(counts.max())
        start = counts.cumsum(0) - counts
        slot = row * width + (torch.arange(at.shape[0]) - torch.index_select(start, 0, row))
        packed = torch.zeros(b * width, r, dtype=self.dtype).index_copy_(0, slot, term)
        return packed.view(b, width, r).cumsum(dim=1)[:, -1]

    def table(self, candidates: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """CIDEr-D ``[B]`` (``dtype``) of ``candidates`` ``[B, T]`` against the references of ``items`` ``[B]``."""
        if isinstance(candidates, torch.Tensor) and candidates.dim() == 2:
            self._grow(candidates.shape[1])
        return super().table(candidates, items)

    __call__ = table

    def _chunk(self, cand: torch.Tensor, items: torch.Tensor, tabs: dict[str, Any]) -> torch.Tensor:
        b, t = cand.shape
        dt, n = self.dtype, self.n
        g = self.grams(cand, tabs)
        width = self._span + 1
        vals, norms = [], []
        for k in range(n):
            gid, first, tf = g["gid"][k], g["first"][k], g["tf"][k]
            # the n-gram's weight class (its distinct value of log N - log max(1, df)); -1 (unseen): df 0
            cls = take(tabs["classes"][k], gid + 1)
            w = take(tabs["class_weights"], cls)
            vh = torch.where(first, tf.to(dt) * w, 0)
            if dt == torch.float64:
                sq = torch.where(first, take(tabs["squares"], cls * width + tf), 0)
            else:
                sq = vh * vh
            norms.append(_sqrt(sq.cumsum(dim=1)[:, -1]))  # sequential over positions on the CPU
            if cand.device.type == "cpu" and not torch.compiler.is_compiling():
                vals.append(self._hit_sums(items, k, gid, first, vh, w, tabs))
                continue
            rtf, _ = self.item_tf(items, k + 1, gid, first, tabs)
            vr = rtf.to(dt) * w[..., None]  # 0 off the hits, so their terms are +0.0 (vh >= 0)
            vals.append((torch.minimum(vh[..., None], vr) * vr).cumsum(dim=1)[:, -1])  # [B, R]
        val = torch.stack(vals, dim=2)  # [B, R, n]
        nh = torch.stack(norms, dim=1)[:, None, :]
        nr = take(tabs["ref_norms"], items)
        ok = (nh != 0) & (nr != 0)
        val = torch.where(ok, val / torch.where(ok, nh * nr, 1), val)
        lc = (g["length"] - 1).clamp(min=0) if n >= 2 else torch.zeros_like(g["length"])
        delta = (lc[:, None] - tabs["ref_bigrams"][items]).abs()
        val = val * take(tabs["penalty"], delta)[..., None]
        total = val[:, 0]
        for r in range(1, val.shape[1]):  # references in order (empty slots add +0.0)
            total = total + val[:, r]
        mean = total[:, 0]
        for k in range(1, n):  # numpy's mean of n < 8 values: a left-to-right sum
            mean = mean + total[:, k]
        mean = mean / n
        return mean / tabs["ref_counts"][items].to(dt) * 10.0


def _sqrt(x: torch.Tensor) -> torch.Tensor:
    """Correctly rounded square root (as numpy's, pycocoevalcap's ``np.sqrt``).

    torch's vectorised CPU kernel is within one unit in the last place but not correctly rounded
    (about 1 value in 100 differs), so float64 on the CPU goes through numpy on the same memory
    (no copy, no sync); CUDA's ``sqrt`` and compiled C++ are IEEE already.
    """
    if x.dtype == torch.float64 and x.device.type == "cpu" and not torch.compiler.is_compiling():
        return torch.from_numpy(np.sqrt(x.detach().contiguous().numpy()))
    return torch.sqrt(x)

