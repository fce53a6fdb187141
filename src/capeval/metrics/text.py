"""Text metrics' shared base: input validation and PTB tokenisation, then ``_compute``."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from capeval.errors import InputError
from capeval.io.inputs import prepare_text_inputs
from capeval.progress import Progress, make_progress
from capeval.result import MetricResult, Report
from capeval.scorer import ScorerBase


class TextScorer(ScorerBase):
    """Base of reference-based n-gram metrics: validation + PTB tokenisation, shared.

    Subclasses implement :meth:`_compute` on tokenised, space-joined strings.
    ``tokenizer="ptb"`` reproduces pycocoevalcap's PTBTokenizer in pure Python;
    ``tokenizer="none"`` takes the inputs as already tokenised (split on spaces).
    """

    produces: ClassVar[tuple[str, ...]] = ()

    def __init__(self, metrics: Sequence[str] | None = None, tokenizer: str = "ptb"):
        chosen = self._select(metrics)
        if tokenizer not in ("ptb", "none"):
            raise InputError(f"unknown tokenizer {tokenizer!r}; use 'ptb' or 'none'")
        self.metrics = chosen
        self.tokenizer = tokenizer

    # -- public ---------------------------------------------------------------
    def score(
        self,
        candidates: Mapping[Any, Any] | Sequence[str],
        references: Mapping[Any, Any] | None = None,
        *,
        progress: bool | None = False,
        **inputs: Any,
    ) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}``; see the class docs.

        ``progress``: draw a progress bar on stderr (None: only when it is a terminal).
        """
        if inputs:
            raise InputError(f"{type(self).__name__} takes only text; unexpected inputs {sorted(inputs)}")
        cands, refs = prepare_text_inputs(candidates, references, needs_references=True)
        assert refs is not None
        ids = list(cands)
        hyps_tok, refs_tok = self.tokenize(ids, cands, refs, progress)
        with make_progress(len(ids), "/".join(self.metrics)[:24], progress) as bar:
            return Report(self._compute(ids, hyps_tok, refs_tok, bar))

    def tokenize(
        self, ids: list[str], cands: Mapping[str, str], refs: Mapping[str, list[str]], progress: bool | None = False
    ) -> tuple[list[str], list[list[str]]]:
        """Tokenise candidates and references as the COCO evaluation code does."""
        if self.tokenizer == "none":
            return [" ".join(cands[i].split()) for i in ids], [[" ".join(r.split()) for r in refs[i]] for i in ids]
        from capeval.tokenize import ptb_tokenize_batch

        all_refs = [r for i in ids for r in refs[i]]
        with make_progress(len(ids) + len(all_refs), "tokenize", progress) as bar:
            hyps = ptb_tokenize_batch([cands[i] for i in ids], bar.update)
            flat = ptb_tokenize_batch(all_refs, bar.update)
        out: list[list[str]] = []
        pos = 0
        for i in ids:
            n = len(refs[i])
            out.append(flat[pos : pos + n])
            pos += n
        return hyps, out

    def signature_params(self, refs: list[list[str]]) -> dict[str, Any]:
        counts = sorted({len(r) for r in refs})
        nrefs = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        return {"tok": "ptb-corenlp-3.4.1" if self.tokenizer == "ptb" else "none", "nrefs": nrefs}

    # -- for subclasses ----------------------------------------------------------
    def _compute(
        self,
        ids: list[str],
        hyps: list[str],
        refs: list[list[str]],
        progress: Progress,
    ) -> list[MetricResult]:
        raise NotImplementedError
