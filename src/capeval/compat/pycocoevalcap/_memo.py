"""The drop-in's per-process memo, on under ``CAPEVAL_AS_PYCOCOEVALCAP`` (:mod:`.switch`).

lmms-eval 0.7.3's caption aggregation (``lmms_eval/tasks/coco_cap/utils.py``,
``coco_aggregation_result``) runs once per metric, seven times on the same results; each
run builds all seven scorers (``Meteor()`` included), tokenises the references and the
candidates (two ``PTBTokenizer.tokenize`` calls) and scores one metric; ``Bleu(4)``
computes the same statistics four times. With the memo on:

- ``PTBTokenizer.tokenize`` keeps its last :data:`ENTRIES` outputs, keyed by a blake2b
  digest of the input's keys (type and ``repr``) and captions, in order;
- ``Bleu.compute_score`` keeps the per-item statistics (lengths, n-gram counts) of its
  last :data:`ENTRIES` inputs, keyed the same way; scores and prints are recomputed;
- every ``Meteor()`` of the process shares one METEOR engine (resources, synonym tables,
  sentence cache) and one lock.

A key is the whole content, so a changed caption, id, order or type is a miss, never a
stale answer; callers get fresh containers (nothing they mutate reaches the memo). Off by
default, so explicit users of :mod:`capeval.compat.pycocoevalcap` see no change.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

#: entries kept per memo (a 5,000-image COCO split's tokenised references are a few MB)
ENTRIES = 4
_on = False
_lock = threading.Lock()
_memos: dict[str, OrderedDict[bytes, Any]] = {}
_shared: dict[str, Any] = {}


def enable(on: bool = True) -> None:
    """Turn the memo on or off (off also forgets everything remembered)."""
    global _on
    with _lock:
        _on = bool(on)
        if not on:
            _memos.clear()
            _shared.clear()


def enabled() -> bool:
    """Whether the memo is on in this process."""
    return _on


def digest(keys: Iterable[Any], texts: Sequence[str], groups: Sequence[int] = ()) -> bytes:
    """blake2b of the keys (type and ``repr``), the group sizes and the texts, each length-prefixed
    (so no two different inputs share a byte stream)."""
    h = hashlib.blake2b(digest_size=32)
    for k in keys:
        b = f"{type(k).__module__}.{type(k).__qualname__}:{k!r}".encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    h.update(b"|groups|" + ",".join(map(str, groups)).encode())
    for t in texts:
        b = t.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


def remember(kind: str, key: bytes, compute: Callable[[], T]) -> T:
    """``compute()``, or the value remembered under ``(kind, key)``; LRU of :data:`ENTRIES`."""
    with _lock:
        memo = _memos.setdefault(kind, OrderedDict())
        if key in memo:
            memo.move_to_end(key)
            return memo[key]
    value = compute()
    with _lock:
        if _on:
            memo = _memos.setdefault(kind, OrderedDict())
            memo[key] = value
            memo.move_to_end(key)
            while len(memo) > ENTRIES:
                memo.popitem(last=False)
    return value


def shared(name: str, make: Callable[[], T]) -> T:
    """One object per process under ``name`` (made on first use)."""
    with _lock:
        if name not in _shared:
            _shared[name] = make()
        return _shared[name]
