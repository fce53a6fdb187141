"""BERT-S++ scorer (Yi, Deng & Hu, ACL 2020; PAC-S++ journal Table 1 "BERT-S++").

Defaults are the official code's (ck0123/improved-bertscore-for-image-captioning-evaluation
@ b837055, ``run_metric.py``; the paper gives no other values): ``bert-base-uncased``
(l. 147), its first 8 layers (l. 153: the encoder is cut to ``layer[:8]`` and the last kept
layer's output is the embedding, ``bert_score/utils.py`` l. 33-39), idf over every caption of
the call (l. 11-18, 159), ``THRESHOLD = 0.4`` for both the matches among references and the
scores (l. 161, 173), the repository's ``stop_word_list.txt`` (l. 160; fetched by
``capeval download bertscore++``, sha256-checked, never shipped). Formulas:
:mod:`capeval.metrics.bertscore.plusplus`. Range [0, 1]; higher is better.

Not the official code's, by construction: its BERT is pytorch-pretrained-bert 0.6.2's, capeval
runs the same weights through transformers' ``BertModel``; it embeds each caption alone,
capeval batches the distinct captions sorted by length with an attention mask (float32
differences ~1e-7); it keeps float32 cosines, capeval float64 (the float32 idf weights are
kept as the official code pads them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from capeval import truncation
from capeval.errors import InputError, ResourceError
from capeval.io.inputs import prepare_text_inputs
from capeval.metrics.bertscore import formulas, plusplus
from capeval.metrics.bertscore.model import Embedder, layer_count, locate, weights_sha256
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

NAME = "bertscore++"
DEFAULT_MODEL = "bert-base-uncased"  # run_metric.py l. 147
DEFAULT_LAYERS = 8  # run_metric.py l. 153
DEFAULT_THRESHOLD = 0.4  # run_metric.py l. 161 (and the literal 0.4 of l. 173)
STOP_WORDS_ENTRY = "bertscore++/stop-words"  # the official stop_word_list.txt in the checkpoint table


def stop_words_path(path: str | os.PathLike[str] | None) -> Path:
    """The stop-word file: ``path``, else the official list fetched by ``capeval download``."""
    if path is not None:
        if not os.path.isfile(os.fspath(path)):
            raise InputError(f"{NAME} option stop_words: no file {os.fspath(path)!r}")
        return Path(os.fspath(path))
    from capeval.models.clip.checkpoints import get_checkpoint, local_path

    entry = get_checkpoint(STOP_WORDS_ENTRY)
    found = local_path(entry)
    if not found.is_file():
        raise ResourceError(f"{NAME}: the official stop-word list is not on this machine: run `capeval download "
                            f"{NAME}` once online, or give a file with -O {NAME}.stop_words=PATH")
    return found


def read_stop_words(path: Path) -> frozenset[str]:
    """One word a line, stripped (``get_stop_word_list``, run_metric.py l. 137-142)."""
    try:
        with open(path, encoding="utf-8") as f:
            return frozenset(line.strip() for line in f)
    except (OSError, UnicodeDecodeError) as exc:
        raise ResourceError(f"{NAME}: cannot read the stop-word file {path} ({type(exc).__name__})") from None


class BertScorePlusPlus(ScorerBase):
    """BERT-S++ against references; item score in [0, 1], system = mean of the items.

    Options: ``model`` (hub name or a folder saved with ``save_pretrained``; default
    bert-base-uncased), ``num_layers`` (0..the model's layers; default 8), ``idf`` (default
    true; false weighs every token 1), ``threshold`` (cosine threshold, [0, 1], default 0.4),
    ``stop_words`` (a file, one word a line; default the official list), ``batch_size``
    (sentences per forward pass, 1..4096), ``device``.
    """

    produces: ClassVar[tuple[str, ...]] = (NAME,)

    def __init__(self, metrics: Sequence[str] | None = None, model: str | None = None,
                 num_layers: int = DEFAULT_LAYERS, idf: bool = True, threshold: float = DEFAULT_THRESHOLD,
                 stop_words: str | None = None, batch_size: int = 64, device: str = "cpu"):
        from capeval.hashing import file_digest
        from capeval.ranges import check_option

        self.metrics = self._select(metrics)
        for opt, value in (("num_layers", num_layers), ("threshold", threshold), ("batch_size", batch_size)):
            check_option(NAME, opt, value)  # declared in capeval.ranges
        if not isinstance(idf, bool):
            raise InputError(f"{NAME} option idf: expected true or false, got {idf!r}")
        self.model_name = os.fspath(model) if model is not None else DEFAULT_MODEL
        self.idf, self.threshold = idf, float(threshold)
        path = stop_words_path(stop_words)  # before the weights: a missing list fails fast
        self.stop, self.stop_sha256 = read_stop_words(path), file_digest(path)
        folder = locate(self.model_name, NAME, DEFAULT_MODEL)
        total = layer_count(folder)
        if not 0 <= num_layers <= total:
            raise InputError(f"{NAME} option num_layers: expected 0..{total} for {self.model_name}, got {num_layers}")
        self.num_layers = num_layers
        self.sha256 = weights_sha256(folder)
        self.embedder = Embedder(folder, self.model_name, num_layers, device=device, batch_size=batch_size,
                                 metric=NAME)
        tok = self.embedder.tokenizer
        if tok.cls_token_id is None or tok.sep_token_id is None:
            raise InputError(f"{NAME}: the tokenizer of {self.model_name} has no [CLS]/[SEP] tokens (a BERT "
                             "tokenizer is expected)")

    def _tokens(self, text: str, what: str) -> tuple[list[str], tuple[int, ...]]:
        """Word pieces and ids ``[CLS] + pieces + [SEP]`` (``collate_idf``, bert_score/utils.py l. 89-90)."""
        tok = self.embedder.tokenizer
        pieces = list(tok.tokenize(text))
        ids = (tok.cls_token_id, *tok.convert_tokens_to_ids(pieces), tok.sep_token_id)
        if len(ids) > self.embedder.max_length:
            raise InputError(f"{NAME}: {what} has {len(ids)} word pieces with [CLS]/[SEP]; {self.model_name} "
                             f"takes at most {self.embedder.max_length}")
        return pieces, ids

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}``."""
        cands, refs = prepare_text_inputs(candidates, references, needs_references=True,
                                          allow_empty_candidates=False)
        assert refs is not None
        ids = list(cands)
        enc: dict[str, tuple[list[str], tuple[int, ...]]] = {}
        docs: list[tuple[int, ...]] = []  # every caption of the call is an idf document (repeats too)
        for i in ids:
            for what, text in [*((f"reference of {i!r}", r) for r in refs[i]), (f"candidate {i!r}", cands[i])]:
                if text not in enc:
                    enc[text] = self._tokens(text, what)
                docs.append(enc[text][1])
        distinct = list(dict.fromkeys(t[1] for t in enc.values()))
        embs = {k: np.asarray(e, dtype=np.float64) for k, e in zip(distinct, self.embedder.embed(distinct))}
        embs = {k: e / np.linalg.norm(e, axis=-1, keepdims=True) for k, e in embs.items()}
        idf_of = None
        if self.idf:
            table, unseen = formulas.idf_table(docs)
            pieces = {p for t in enc.values() for p in t[0]}
            convert = self.embedder.tokenizer.convert_tokens_to_ids
            idf_of = {p: float(np.float32(table.get(convert(p), unseen))) for p in pieces}  # padded as torch.float
        items: dict[str, float] = {}
        full: dict[str, float] = {}
        content: dict[str, float] = {}
        for i in ids:
            c_pieces, c_ids = enc[cands[i]]
            r_enc = [enc[r] for r in refs[i]]
            s, fulls, contents = plusplus.item_score(embs[c_ids], c_pieces, [embs[r[1]] for r in r_enc],
                                                     [r[0] for r in r_enc], idf_of, self.stop, self.threshold)
            items[i], full[i], content[i] = s, float(np.mean(fulls)), float(np.mean(contents))
        # nothing is ever cut: a caption past the model's limit is refused in _tokens (as the official code fails)
        extras = {"idf_recall": full, "content_recall": content, "unique_texts": len(distinct),
                  **truncation.tally((), (), ())}
        n_ref = [len(refs[i]) for i in ids]
        result = MetricResult(NAME, float(np.mean(list(items.values()))), items, self.signature(n_ref), extras=extras)
        return Report([result])

    def signature(self, n_ref: list[int] | None = None) -> Signature:
        import torch
        import transformers

        params: dict[str, Any] = {"model": self.model_name, "layer": self.num_layers, "sha256": self.sha256[:16],
                                  "idf": "captions" if self.idf else "no", "threshold": self.threshold,
                                  "stopwords": self.stop_sha256[:12],
                                  "trunc": truncation.policy(self.embedder.max_length, "refuse")}
        if n_ref:
            lo, hi = min(n_ref), max(n_ref)
            params["nrefs"] = str(lo) if lo == hi else f"{lo}-{hi}"
        params["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
        return Signature.build(NAME, **params)
