"""CLAIR (Chan et al., EMNLP 2023, CLAIR: Evaluating Image Captions with Large Language Models).

A text-only LLM reads the candidate and the references and answers, in JSON, how likely
(0-100) it is that both describe the same image, with a reason. The prompt, its "- caption"
lines, the parsing (:func:`capeval.judges.answers.parse_clair`), the 3 tries and the scale
(score / 100) are DavidMChan/clair ``clair.py``'s; decoding is greedy (temperature 0) as there,
``max_tokens`` 1024 (its default). The paper's engine is ChatGPT (``gpt-3.5-turbo``), which
clair.py reaches through grazier's chat engine: the prompt is ONE user message. Here any
OpenAI-compatible server (``backend="openai"``: vLLM, Ollama, llama.cpp, hosted APIs) or a local
chat LLM in ``transformers`` (``backend="transformers"``, ``model=`` folder or hub name:
:mod:`capeval.judges.transformers_text` applies the model's chat template to that one message as
a server does).

Item score = score / 100 (range [0, 1] for answers on the asked scale; not clipped, as the
official code); system = mean. The reason is in ``extras["reasons"]``, the raw answers in
``extras["answers"]``. An answer without a number after all tries is an error item (listed in
``extras["errors"]``, left out of the mean); ``unparsed="zero"`` scores it 0 as the official code.
"""

from __future__ import annotations

import hashlib
import math
import os
from typing import Any, ClassVar, Mapping, Sequence

from capeval.judges import answers as ans
from capeval.judges import options as jopt
from capeval.judges.backends import Request
from capeval.judges.cache import open_cache
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

SOURCE = "DavidMChan/clair@f33f96d/clair.py"
#: ``_CLAIR_PROMPT`` of clair.py (its line continuations joined): the definition of the metric
PROMPT = (
    "You are trying to tell if a candidate set of captions is describing the same image as a reference set of "
    "captions.\n"
    "Candidate set:\n"
    "{candidate_statements}\n"
    "Reference set:\n"
    "{target_statements}\n"
    "On a precise scale from 0 to 100, how likely is it that the candidate set is describing the same image as the "
    "reference set? (JSON format, with a key \"score\", value between 0 and 100, and a key \"reason\" with a string "
    "value.)\n"
)
PROMPT_SHA256 = hashlib.sha256(PROMPT.encode("utf-8")).hexdigest()
UNPARSED = ("error", "zero")
#: why an answer gave no score (the error item's words, before "in the answer after N tries")
_WHY = {"non-finite": "a non-finite score",
        "too-deep": "a JSON object nested too deeply to read (Python's json raises RecursionError)"}


def render(candidates: Sequence[str], references: Sequence[str]) -> str:
    """The prompt for a candidate set and a reference set (one ``"- caption\\n"`` line each)."""
    return PROMPT.format(candidate_statements="".join(f"- {c}\n" for c in candidates),
                         target_statements="".join(f"- {t}\n" for t in references))


class CLAIR(ScorerBase):
    """CLAIR; item range [0, 1] (score / 100), higher is better.

    ``backend="openai"`` (default; ``model``, ``base_url``, ``api_key``, ``concurrency``,
    ``timeout``, ``max_retries``, ``retry_backoff``, ``max_response_mb``), ``"transformers"`` (a local chat LLM:
    ``model`` (required), ``device``, ``dtype``, ``revision``, ``batch_size``) or a backend object. ``temperature``
    0 (the official), ``seed``, ``max_new_tokens`` 1024, ``tries`` 3 (answers without a number
    are asked again; each try is its own cache entry), ``cache`` (True: ``<capeval cache>/clair``,
    a folder, or None), ``refresh`` (True: every answer asked again and its cache entry replaced;
    not in the signature: where an answer comes from does not change how it is scored),
    ``unparsed`` ``"error"`` or ``"zero"``.
    """

    produces: ClassVar[tuple[str, ...]] = ("clair",)
    label = "clair"

    def __init__(self, metrics: Sequence[str] | None = None, backend: Any = "openai", model: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, concurrency: int = 4,
                 timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0,
                 temperature: float = 0.0, seed: int | None = 0, max_new_tokens: int = 1024, tries: int = 3,
                 cache: bool | str | os.PathLike[str] | None = True, unparsed: str = "error",
                 device: str = "cpu", dtype: str = "auto", revision: str | None = None, batch_size: int = 8,
                 max_response_mb: float = 16.0, refresh: bool = False):
        self.metrics = self._select(metrics)
        jopt.check_choice(self.label, "unparsed", unparsed, UNPARSED)
        jopt.check_range(self.label, "tries", tries)
        jopt.check_cache(self.label, cache, refresh)
        self.backend = jopt.make_backend(self.label, backend, model=model, default_model=None, text_only=True,
                                         device=device, dtype=dtype, revision=revision, batch_size=batch_size,
                                         base_url=base_url, api_key=api_key, concurrency=concurrency,
                                         timeout=timeout, max_retries=max_retries, retry_backoff=retry_backoff,
                                         temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                                         pad_to_square=False, max_response_mb=max_response_mb)
        self.tries = tries
        self.unparsed = unparsed
        self.cache = open_cache(cache, "clair", refresh=refresh)

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}``."""
        cands, refs, ids, good = jopt.text_inputs("clair", candidates, references, skip_bad_items)
        ident, dec = self.backend.identity(), self.backend.decoding()
        prompts = {i: render([cands[i]], refs[i]) for i in good}
        parsed: dict[str, ans.ClairAnswer] = {}
        raw: dict[str, list[str]] = {i: [] for i in good}
        why: dict[str, str] = {}  # the last unparsed reading of each item
        generated = cached = 0
        pending = list(good)
        for attempt in range(self.tries):
            wanted = {i: (jopt.request_key("clair", None, prompts[i], ident, dec, **{"try": attempt}),
                          Request(i, None, prompts[i])) for i in pending}
            records, n_new, n_cached = jopt.answers(self.backend, self.cache, "clair", wanted, progress,
                                                    f"clair try {attempt + 1}")
            generated += n_new
            cached += n_cached
            still = []
            for i in pending:
                text = records[i]["answer"]
                raw[i].append(text)
                p = ans.parse_clair(text)
                if p.score is None:
                    still.append(i)
                    why[i] = _WHY.get(p.how, "no number")
                else:
                    parsed[i] = p
            pending = still
            if not pending:
                break
        items: dict[str, float] = {}
        errors: dict[str, dict[str, Any]] = {}
        for i in good:
            if i in parsed:
                items[i] = parsed[i].score / 100.0  # type: ignore[operator]
            else:
                errors[i] = {"answers": raw[i], "error": f"{why[i]} in the answer after {len(raw[i])} tries"}
                if self.unparsed == "zero":
                    items[i] = 0.0
        extras: dict[str, Any] = {
            "answers": {i: raw[i][-1] for i in good},
            "reasons": {i: parsed[i].reason for i in good if i in parsed},
            "read_as": {i: parsed[i].how for i in good if i in parsed},
            "tries": {i: len(raw[i]) for i in good},
            "errors": errors, "n_errors": len(errors),
            "generated": generated, "cached": cached,
        }
        skipped = [i for i in ids if i not in good] + [i for i in good if i not in items]
        system = float(sum(items.values()) / len(items)) if items else math.nan
        return Report([MetricResult(metric="clair", system=system, items=items, signature=self.signature(refs),
                                    extras=extras, skipped=tuple(skipped))])

    def signature(self, refs: dict[str, list[str]] | None = None) -> Signature:
        """Backend and model, decoding, the prompt's sha256, tries, parsing."""
        sig = dict(self.backend.signature())
        versions = sig.pop("versions", None)
        sig.pop("pad_to_square", None)  # no image
        params: dict[str, Any] = {**sig, **self.backend.decoding(), "prompt": f"{SOURCE}@{PROMPT_SHA256[:16]}",
                                  "tries": self.tries, "parse": "clair-json,first-number,finite", "unparsed": self.unparsed}
        params["nrefs"] = jopt.nrefs(refs)
        if versions:
            params["versions"] = versions
        return Signature.build("clair", **params)
