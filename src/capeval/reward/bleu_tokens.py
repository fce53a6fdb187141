"""``BleuTokens``: per-sentence BLEU-1..n of token-id captions on their device (pycocoevalcap's variant).

>>> bleu = BleuTokens(train_refs, pad_id=tok.pad_token_id, eos_id=tok.eos_token_id)  # doctest: +SKIP
>>> b = bleu.table(sequences, items)              # [B, 4]: BLEU-1..4 per caption

pycocoevalcap 1.2 ``BleuScorer.compute_score(option="closest")`` (bleu/bleu_scorer.py), the
per-sentence list it returns: with ``c_k`` the clipped k-gram matches (``cook_test``: each
distinct k-gram counts ``min(tf, max over the item's references of its tf)``), ``g_k =
max(0, len - k + 1)``, ``tiny = 1e-15``, ``small = 1e-9``::

    p = 1; for k in 1..n: p *= (c_k + tiny) / (g_k + small); BLEU-k = p ** (1 / k)
    ratio = (len + tiny) / (reflen + small); if ratio < 1: BLEU-k *= exp(1 - 1 / ratio)

with ``reflen`` the reference length closest to the caption's (ties: the shorter,
``_single_reflen``). Counts and lengths are integers, exact; the products and quotients are
pycocoevalcap's float64 operations in its order; the ``** (1 / k)`` and ``exp`` are torch's,
within one unit in the last place of libm's (float64 results within 1e-14 relative).
One host sync per call when ``check_items`` (the default); none otherwise.
"""

from __future__ import annotations

from typing import Any

import torch

from capeval.reward.token_grams import TokenReward

_TINY = 1e-15  # bleu_scorer.py compute_score: "so that if guess is 0 still return 0"
_SMALL = 1e-9


class BleuTokens(TokenReward):
    """Per-sentence BLEU-1..n (pycocoevalcap's) of ``[B, T]`` token-id captions; ``table`` gives ``[B, n]``.

    Args:
        references: per item, a non-empty list of references (lists or 1-D tensors of token ids,
            without padding or special tokens).
        pad_id: padding id; a caption ends at its first ``pad_id``.
        eos_id: a caption also ends at its first ``eos_id`` (None: only pad).
        n: largest order, 1..7 (4: BLEU-4).
        dtype: ``torch.float64`` or ``torch.float32``.
        max_elements: rows x T x references per chunk (working set), >= 1024.
        check_items: check ``items`` (one host sync per call).

    Raises:
        InputError: a bad reference or option (one line naming it).
    """

    def __init__(self, references: Any, pad_id: int = 0, n: int = 4, *, eos_id: int | None = None,
                 dtype: Any = torch.float64, max_elements: int = 1 << 22, check_items: bool = True):
        super().__init__(references, pad_id=pad_id, eos_id=eos_id, n=n, dtype=dtype,
                         max_elements=max_elements, check_items=check_items)
        self._tail = (n,)

    def _chunk(self, cand: torch.Tensor, items: torch.Tensor, tabs: dict[str, Any]) -> torch.Tensor:
        dt = self.dtype
        g = self.grams(cand, tabs)
        length = g["length"]
        # closest reference length, the shorter on a tie: min over (|l - len|, l)
        lens = tabs["ref_lengths"][items]
        slots = torch.arange(lens.shape[1], device=cand.device)
        real = slots[None, :] < tabs["ref_counts"][items][:, None]
        key = torch.where(real, (lens - length[:, None]).abs() * (1 << 32) + lens, torch.iinfo(torch.int64).max)
        reflen = lens.gather(1, key.argmin(dim=1, keepdim=True))[:, 0]
        out = []
        p = torch.ones_like(length, dtype=dt)
        for k in range(self.n):
            rtf, _ = self.item_tf(items, k + 1, g["gid"][k], g["first"][k], tabs)
            correct = torch.minimum(g["tf"][k], rtf.amax(dim=2)).sum(dim=1)  # tf is 0 off first positions
            guess = (length - k).clamp(min=0)
            p = p * ((correct.to(dt) + _TINY) / (guess.to(dt) + _SMALL))
            out.append(p if k == 0 else p ** (1.0 / (k + 1)))
        bleu = torch.stack(out, dim=1)
        ratio = (length.to(dt) + _TINY) / (reflen.to(dt) + _SMALL)
        brevity = torch.where(ratio < 1, torch.exp(1 - 1 / ratio), 1.0)
        return torch.where((ratio < 1)[:, None], bleu * brevity[:, None], bleu)
