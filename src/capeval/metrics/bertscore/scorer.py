"""BERTScore scorer (Zhang et al., ICLR 2020, "BERTScore: Evaluating Text Generation with BERT").

Defaults are the bert-score package's (0.3.13) for English: ``roberta-large``, layer 17, no
idf, no baseline rescaling. Item score = F1 (max over the references); P and R are per-item
extras; system score = mean of the item F1s. Range [-1, 1] (about [0.8, 1] raw with
roberta-large; rescaling spreads it and may leave [-1, 1]). Formulas:
:mod:`capeval.metrics.bertscore.formulas`.

One difference from the package, by construction: the package pads every batch of 64 pairs
and multiplies the similarity matrix by the padding mask before its row/column maxima, so a
token whose cosines with the other sentence are all negative gets 0 instead of its largest
cosine when the pair is shorter than the longest of its batch (a result that depends on the
batch). capeval takes the maxima over the real tokens only. With roberta-large, whose
layer-17 cosines are positive, the two agree.

Empty candidates: the package's ``sent_encode`` fails on them with transformers 5; capeval
refuses them with a one-line error naming the item.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from capeval import truncation
from capeval.errors import InputError
from capeval.io.inputs import prepare_text_inputs
from capeval.metrics.bertscore import formulas
from capeval.metrics.bertscore.baseline import package_baseline, read_baseline
from capeval.metrics.bertscore.model import DEFAULT_LAYERS, DEFAULT_MODEL, Embedder, layer_count, locate, \
    weights_sha256
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

#: the languages whose default model capeval knows (bert_score's ``lang2model``: en -> roberta-large)
LANG_MODELS = {"en": DEFAULT_MODEL}


class BertScore(ScorerBase):
    """BERTScore P/R/F1 against references (max over references); item score F1.

    Options: ``model`` (hub name or a local folder; default roberta-large for ``lang="en"``),
    ``num_layers`` (0..the model's layers; default 17 for roberta-large, required otherwise),
    ``idf`` (idf weights over the references of the call, or those given to :meth:`fit`),
    ``rescale_with_baseline`` (the package's baseline file for ``lang``/``model``, or
    ``baseline_path``), ``lang``, ``batch_size`` (1..4096 sentences per forward pass),
    ``device``.
    """

    produces: ClassVar[tuple[str, ...]] = ("bertscore",)

    def __init__(self, metrics: Sequence[str] | None = None, model: str | None = None, num_layers: int | None = None,
                 idf: bool = False, rescale_with_baseline: bool = False, lang: str = "en",
                 baseline_path: str | None = None, batch_size: int = 64, device: str = "cpu"):
        self.metrics = self._select(metrics)
        _check_options(model, num_layers, lang, batch_size, baseline_path, rescale_with_baseline)
        self.model_name = os.fspath(model) if model is not None else LANG_MODELS[lang]
        self.lang, self.idf, self.rescale = lang, bool(idf), bool(rescale_with_baseline)
        if num_layers is None:
            if self.model_name not in DEFAULT_LAYERS:
                raise InputError(f"bertscore option num_layers: required for model {self.model_name!r} (capeval "
                                 f"knows the default layer of {', '.join(f'{m}: {n}' for m, n in DEFAULT_LAYERS.items())})")
            num_layers = DEFAULT_LAYERS[self.model_name]
        folder = locate(self.model_name)
        total = layer_count(folder)
        if not 0 <= num_layers <= total:
            raise InputError(f"bertscore option num_layers: expected 0..{total} for {self.model_name}, got {num_layers}")
        self.num_layers = num_layers
        self.baseline, self.baseline_file = None, None
        if self.rescale:  # read before the weights: a missing baseline fails fast
            path = baseline_path or package_baseline(lang, self.model_name)
            self.baseline, self.baseline_file = read_baseline(path, num_layers), os.fspath(path)
        self.sha256 = weights_sha256(folder)
        self.embedder = Embedder(folder, self.model_name, num_layers, device=device, batch_size=batch_size)
        self._fitted: tuple[dict[int, float], float] | None = None
        self._fitted_n = 0

    def fit(self, references: Mapping[Any, Any] | Sequence[Sequence[str]]) -> "BertScore":
        """Fix the idf table to the reference sentences ``references`` (only with ``idf=True``);
        fitting on a call's own references gives that call's unfitted numbers."""
        refs = references.values() if isinstance(references, Mapping) else references
        docs = [self.embedder.encode(r) for group in refs for r in ([group] if isinstance(group, str) else group)]
        self._fitted, self._fitted_n = formulas.idf_table(docs), len(docs)
        return self

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}``."""
        cands, refs = prepare_text_inputs(candidates, references, needs_references=True,
                                          allow_empty_candidates=False)
        assert refs is not None
        ids = list(cands)
        enc: dict[str, tuple[int, ...]] = {}
        for text in [cands[i] for i in ids] + [r for i in ids for r in refs[i]]:
            if text not in enc:
                enc[text] = tuple(self.embedder.encode(text))
        distinct = list(dict.fromkeys(enc.values()))  # each distinct token sequence embedded once
        embs = dict(zip(distinct, self.embedder.embed(distinct)))
        if self.idf:
            table = self._fitted or formulas.idf_table(enc[r] for i in ids for r in refs[i])
        else:
            table = None
        special = self.embedder.special
        weights = {t: formulas.token_weights(t, table, special) for t in distinct}
        prf = np.empty((len(ids), 3))
        for k, i in enumerate(ids):
            c = enc[cands[i]]
            pairs = [formulas.greedy_match(embs[c], embs[enc[r]], weights[c], weights[enc[r]]) for r in refs[i]]
            prf[k] = np.max(np.array(pairs), axis=0)  # P, R, F each maximised over the references
        if self.baseline is not None:
            prf = (prf - self.baseline.astype(np.float64)) / (1 - self.baseline.astype(np.float64))
        max_len = self.embedder.max_length
        cut = {t for t, e in enc.items() if self.embedder.was_cut(t, e)}
        extras = {
            **truncation.tally((cands[i] for i in ids), (refs[i] for i in ids), cut),
            "precision": {i: float(v) for i, v in zip(ids, prf[:, 0])},
            "recall": {i: float(v) for i, v in zip(ids, prf[:, 1])},
            "texts_at_max_length": sum(1 for t in enc.values() if len(t) >= max_len),
            "unique_texts": len(distinct),
        }
        items = {i: float(v) for i, v in zip(ids, prf[:, 2])}
        n_ref = [len(refs[i]) for i in ids]
        result = MetricResult("bertscore", float(np.mean(prf[:, 2])), items, self.signature(n_ref), extras=extras)
        return Report([result])

    def signature(self, n_ref: list[int] | None = None) -> Signature:
        import torch
        import transformers

        params: dict[str, Any] = {"model": self.model_name, "layer": self.num_layers, "sha256": self.sha256[:16]}
        if self.idf:
            params["idf"] = f"fitted(n={self._fitted_n})" if self._fitted else "references"
        else:
            params["idf"] = "no"
        if self.baseline is not None:
            from capeval.hashing import file_digest

            params["rescale"] = f"{os.path.basename(self.baseline_file or '')}:{file_digest(self.baseline_file)[:12]}"
        else:
            params["rescale"] = "no"
        params["lang"] = self.lang
        params["trunc"] = truncation.policy(self.embedder.max_length, "keep-first+special")
        if n_ref:
            lo, hi = min(n_ref), max(n_ref)
            params["nrefs"] = str(lo) if lo == hi else f"{lo}-{hi}"
        params["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
        return Signature.build("bertscore", **params)


def _check_options(model: Any, num_layers: Any, lang: Any, batch_size: Any, baseline_path: Any,
                   rescale: Any) -> None:
    """Declared ranges, checked before anything is loaded."""
    from capeval.ranges import check_option

    check_option("bertscore", "num_layers", num_layers)  # declared in capeval.ranges
    check_option("bertscore", "batch_size", batch_size)
    if not isinstance(lang, str) or (model is None and lang not in LANG_MODELS):
        raise InputError(f"bertscore option lang: without a model, expected one of {', '.join(LANG_MODELS)}, "
                         f"got {lang!r} (give -O bertscore.model=NAME for another language)")
    if not lang or "/" in lang or lang.startswith("."):
        raise InputError(f"bertscore option lang: expected a language code like 'en', got {lang!r}")
    if baseline_path is not None:
        if not rescale:
            raise InputError("bertscore option baseline_path: given without rescale_with_baseline=true; it would be "
                             "ignored")
        if not os.path.isfile(os.fspath(baseline_path)):
            raise InputError(f"bertscore option baseline_path: no file {baseline_path!r}")
