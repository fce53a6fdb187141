"""The actor of the Ray engine: an Evaluator built once, scoring one shard per call.

Plain Python (no Ray import): :mod:`capeval.engines.ray_engine` wraps :class:`ShardWorker`
with ``ray.remote``, and the tests can drive it in-process.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capeval import truncation
from capeval.engines.shards import encode, write_shard
from capeval.engines.storage import ShardDir
from capeval.gc_pause import gc_paused
from capeval.io.uris import fetch_media


def text_groups(scorers: Mapping[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """Text scorers by tokenizer (each group shares one tokenisation per shard), in order."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for key, s in scorers.items():
        out.setdefault(s.tokenizer, []).append((key, s))
    return out


class ShardWorker:
    """Scores shards with ``text_names`` (the streamable n-gram metrics, through their
    ``score_chunk``) and ``other_names`` (any other metric, through ``Evaluator.score``).

    Built once per actor: backbones load once and are shared by the two evaluators.
    ``fault``: ``(shard, marker file)``, a test hook: the first time shard ``shard`` is
    scored (the marker does not exist yet), the process exits abruptly, as a killed worker;
    shard ``-1``: the process exits when asked whether it is ready (a worker lost while building).
    """

    def __init__(self, text_names: Sequence[str], other_names: Sequence[str],
                 options: Mapping[str, Mapping[str, Any]] | None, fault: tuple[int, str] | None = None):
        from capeval.errors import CapevalError
        from capeval.evaluator import Evaluator
        from capeval.models.cache import ModelCache

        self.init_error: CapevalError | None = None
        self.text = self.other = None
        try:
            cache = ModelCache()
            self.text = Evaluator(list(text_names), options=options, cache=cache) if text_names else None
            self.other = Evaluator(list(other_names), options=options, cache=cache) if other_names else None
        except CapevalError as exc:  # e.g. a checkpoint that cannot be loaded: reported by ready()
            self.init_error = exc
        from capeval import registry

        self.other_takes_refs = "references" in registry.accepted_inputs(other_names)
        self.groups = text_groups(self.text.scorers) if self.text else {}
        self.corpus: dict[str, Any] = {}
        self.fault = fault

    def ready(self) -> int:
        """The worker's process id, once built; the one-line error of a failed build."""
        if self.fault is not None and self.fault[0] == -1:
            os._exit(1)
        if self.init_error is not None:
            raise self.init_error
        return os.getpid()

    def count_shard(self, orders: dict[str, int], text_task: tuple | None, candidates: dict[str, str] | None,
                    references: dict[str, list[str]] | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """One shard's part of the corpus statistics (the corpus pass): n-gram document
        frequencies of its references per tokenizer (``orders``: tokenizer -> n-gram order;
        ``text_task``: the references with their following context) and, when
        ``candidates`` are given, the IDF counts of :meth:`count_idf`."""
        from capeval.metrics.ngrams import GramIndex
        from capeval.metrics.text import tokenize_texts

        text: dict[str, Any] = {}
        for tokenizer, order in orders.items():
            assert text_task is not None
            _, refs = tokenize_texts(tokenizer, *text_task)
            text[tokenizer] = GramIndex(order).part(refs)
        idf = self.count_idf(candidates, references) if candidates is not None else {}
        return text, idf

    def count_idf(self, candidates: dict[str, str], references: dict[str, list[str]] | None) -> dict[str, Any]:
        """IDF counts of one shard for each EMScore-family scorer whose table depends on the
        call (the corpus pass; merged in shard order by the driver)."""
        from capeval.metrics.emscore.idf import scorer_counts

        refs = references if self.other_takes_refs else None
        return {key: scorer_counts(s, candidates, refs) for key, s in self.idf_scorers().items()}

    def idf_scorers(self) -> dict[str, Any]:
        """The scorers with a ``use_idf`` hook (EMScore and its PAC-S video variant)."""
        if self.other is None:
            return {}
        return {key: s for key, s in self.other.scorers.items() if hasattr(s, "use_idf")}

    def set_corpus(self, corpus: dict[str, Any]) -> int:
        """Keep the corpus statistics (broadcast once per actor): ``{"text": {tokenizer:
        GramIndex}, "idf": {scorer key: (Idf, signature text) or None}}``."""
        self.corpus = corpus.get("text", {})
        scorers = self.idf_scorers()
        for key, table in corpus.get("idf", {}).items():
            scorers[key].use_idf(table)
        return len(corpus)

    def score(
        self, k: int, out_dir: str, ids: list[str], text_task: tuple | None,
        candidates: dict[str, str], references: dict[str, list[str]] | None, inputs: dict[str, Any],
        skip_bad_items: bool, digest: str = "",
    ) -> tuple[int, int]:
        """Score shard ``k`` (items ``ids``) and write its Parquet file; returns ``(k, items)``.

        ``inputs``: ``images``/``videos`` (a folder, or ``{id: path or URI}``: URIs are fetched
        into a temporary folder first) and ``segments``; ``digest``: the shard's inputs
        (:func:`capeval.engines.sources.shard_digest`), kept in the file for ``resume``."""
        if self.fault is not None and self.fault[0] == k and not Path(self.fault[1]).exists():
            Path(self.fault[1]).write_text(f"crashed on shard {k}\n")
            os._exit(1)
        columns: dict[str, np.ndarray] = {}
        parts: dict[str, Any] = {}
        if self.groups:
            assert text_task is not None
            with gc_paused():  # as score_text: many small acyclic objects
                self._score_text(ids, text_task, columns, parts)
        other: dict[str, Any] = {}
        if self.other is not None:
            with tempfile.TemporaryDirectory(prefix="capeval-fetch-") as tmp:
                media = fetch_media(inputs, Path(tmp), skip_bad_items)
                if skip_bad_items:
                    media["skip_bad_items"] = True
                refs = references if self.other_takes_refs else None
                with truncation.deferred():  # the driver says it once for the merged run
                    report = self.other.score(candidates, refs, **media)
            for name, r in report.items():
                items = r.items
                columns[name] = np.array([items.get(i, np.nan) for i in ids], dtype=np.float64)
                other[name] = {
                    "system": encode(float(r.system)),
                    "extras": encode(_plain(r.extras)),
                    "skipped": list(r.skipped),
                    "signature": encode(dict(r.signature.fields)),
                }
        write_shard(ShardDir(out_dir), k, ids, columns,
                    {"parts": parts, "other": other, "inputs_sha": digest})
        return k, len(ids)

    def _score_text(self, ids: list[str], task: tuple, columns: dict[str, np.ndarray], parts: dict[str, Any]) -> None:
        from capeval.metrics.text import TextChunk, tokenize_texts

        for tokenizer, scorers in self.groups.items():
            hyps, refs = tokenize_texts(tokenizer, *task)
            piece = TextChunk(hyps, refs)
            for key, s in scorers:
                out = s.score_chunk(piece, self.corpus.get(tokenizer))
                parts[key] = encode(out)
                # the shard's own per-item values, for the file's columns (system: in the driver)
                for r in s.merge(ids, [out], "0"):
                    columns[r.metric] = np.array(list(r.items.values()), dtype=np.float64)


def _plain(value: Any) -> Any:
    """Frozen mappings/tuples of a result's extras as plain dicts/lists (JSON-able)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
