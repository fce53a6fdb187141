"""VisCE2 scorer: ``visce2``, ``visce2-vanilla``, ``visce2-ref``, ``visce2-desc``.

VisCE2 (Maeda et al. 2024, Vision Language Model-based Caption Evaluation Method Leveraging
Visual Context Extraction, arXiv 2402.17969) asks a vision-language model two things:

1. per image, a structured *visual context* (objects, their features, their relationships);
2. per caption, given image + context + candidate, a rating from 0 to 100.

Item score = the first integer of the rating answer outside echoes of the scale (the paper's
Sec. 3), clipped to [0, 100] (capeval's choice; clipped answers in ``extras["clipped"]`` and
``extras["n_clipped"]``); ``parse_rule="reference"`` takes the reference code's first integer
with neither (:mod:`.parse`); system score = mean of item scores; higher is better. The ablations
replace the context by nothing (``-vanilla``), the references (``-ref``) or a free
description generated in step 1 (``-desc``). Prompts: :mod:`.prompts`; backends, the on-disk
cache of every generation and the one generation path (request keys, cache lookups, the
backend's batching / concurrency / retries, answers stored as they arrive):
:mod:`capeval.judges` (:func:`capeval.judges.options.answers`), shared with the other judges.

Answers without a number are error items: left out of ``items``, listed in
``extras["errors"]`` with the raw answer (and in ``skipped``); ``unparsed="zero"`` scores them
0 as the reference code does (still listed). Every item's raw answer is in
``extras["answers"]`` and its context/description in ``extras["contexts"]`` /
``extras["descriptions"]``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from capeval.errors import InputError
from capeval.io.inputs import check_same_ids, normalize_candidates, normalize_references
from capeval.judges import images as imgs
from capeval.judges import options as jopt
from capeval.judges.backends import Request
from capeval.judges.cache import open_cache
from capeval.metrics.visce2 import parse, prompts
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

SCORE_MODES = ("first-integer", "expected")


def load_text_table(path: str | os.PathLike[str], option: str) -> tuple[dict[str, str], str]:
    """``({key: text}, sha256)`` of a JSON file mapping item id / image file name / image sha256 -> text."""
    from capeval.hashing import file_digest

    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"visce2 option {option}: file not found: {p}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"visce2 option {option}: cannot read {p} as JSON ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise InputError(f"visce2 option {option}: {p} must hold one JSON object {{item id, image file name or "
                         "image sha256: text}")
    return data, file_digest(p)


class VisCE2(ScorerBase):
    """VisCE2 and its ablations (Maeda et al. 2024); item range [0, 100], higher is better.

    ``backend``: ``"transformers"`` (LLaVA via the llava-hf ports; ``model``, ``device``,
    ``dtype``, ``quantization="4bit"``, ``revision``, ``batch_size``), ``"openai"`` (an
    OpenAI-compatible server; ``model``, ``base_url``, ``api_key``, ``concurrency``,
    ``timeout``, ``max_retries``, ``retry_backoff``, ``max_response_mb``) or a backend object. Decoding:
    ``temperature`` 0 (greedy) by default, the paper's 0.2 as an option, with ``seed``;
    ``max_new_tokens`` 1024 as the reference. ``cache``: True (``<capeval cache>/visce2``),
    a folder, or None; ``refresh=True`` asks every answer again (contexts too) and replaces its
    cache entry (not in the signature, like ``cache``: it does not change how answers are
    scored). ``contexts`` / ``descriptions``: JSON files of precomputed step-1 texts keyed by
    item id, image file name or image sha256. ``unparsed``: ``"error"`` or
    ``"zero"``. ``score_mode``: ``"first-integer"`` or ``"expected"`` (servers with logprobs).
    ``parse_rule``: ``"paper"`` (echoes removed, clipped) or ``"reference"`` (first integer).
    ``pad_to_square`` (default True, both backends): the image padded to a square of the CLIP
    mean colour as LLaVA-1.5's ``expand2square``, so a server sees what LLaVA's own
    preprocessing sees; False sends the image as it is (signature ``pad_to_square``).
    """

    produces: ClassVar[tuple[str, ...]] = tuple(prompts.VARIANTS)

    def __init__(self, metrics: Sequence[str] | None = None, backend: Any = "transformers", model: str | None = None,
                 device: str = "cpu", dtype: str = "auto", quantization: str | None = None, revision: str | None = None,
                 batch_size: int = 8, base_url: str | None = None, api_key: str | None = None, concurrency: int = 4,
                 timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0, temperature: float = 0.0,
                 seed: int | None = 0, max_new_tokens: int = 1024, cache: bool | str | os.PathLike[str] | None = True,
                 contexts: str | os.PathLike[str] | None = None, descriptions: str | os.PathLike[str] | None = None,
                 unparsed: str = "error", score_mode: str = "first-integer", top_logprobs: int = 20,
                 parse_rule: str = "paper", pad_to_square: bool | None = None, max_response_mb: float = 16.0,
                 refresh: bool = False):
        self.metrics = self._select(metrics)
        if unparsed not in parse.UNPARSED:
            raise InputError(f"visce2 option unparsed: expected one of {', '.join(parse.UNPARSED)}, got {unparsed!r}")
        if parse_rule not in parse.RULES:
            raise InputError(f"visce2 option parse_rule: expected one of {', '.join(parse.RULES)}, got {parse_rule!r}")
        if pad_to_square is not None and not isinstance(pad_to_square, bool):
            raise InputError(f"visce2 option pad_to_square: expected true or false, got {pad_to_square!r}")
        if pad_to_square is not None and not isinstance(backend, str):
            raise InputError("visce2 option pad_to_square applies to backend='transformers' or 'openai', "
                             "not to a backend object")
        pad = True if pad_to_square is None else pad_to_square
        self.parse_rule = parse_rule
        if score_mode not in SCORE_MODES:
            raise InputError(f"visce2 option score_mode: expected one of {', '.join(SCORE_MODES)}, got {score_mode!r}")
        self.unparsed = unparsed
        self.score_mode = score_mode
        jopt.check_cache("visce2", cache, refresh)
        self.cache = open_cache(cache, refresh=refresh)
        self.tables: dict[str, tuple[dict[str, str], str] | None] = {
            "context": load_text_table(contexts, "contexts") if contexts else None,
            "description": load_text_table(descriptions, "descriptions") if descriptions else None,
        }
        # the shared layer builds the backend (option ranges checked before any model is loaded)
        self.backend = jopt.make_backend("visce2", backend, model=model, default_model=None, device=device,
                                         dtype=dtype, quantization=quantization, revision=revision,
                                         batch_size=batch_size, base_url=base_url, api_key=api_key,
                                         concurrency=concurrency, timeout=timeout, max_retries=max_retries,
                                         retry_backoff=retry_backoff, temperature=temperature, seed=seed,
                                         max_new_tokens=max_new_tokens, top_logprobs=top_logprobs,
                                         pad_to_square=pad, max_response_mb=max_response_mb)
        if score_mode == "expected" and isinstance(backend, str) and self.backend.name == "transformers":
            raise InputError("visce2 score_mode='expected' needs token log-probabilities: use backend='openai'")

    # -- step 1: one context / description per image ---------------------------------
    def _step1(self, kind: str, metric: str, items: dict[str, tuple[Any, str]], ident: dict[str, Any],
               dec: dict[str, Any], progress: bool | None, stats: dict[str, int]) -> dict[str, str]:
        """``{image digest: text}`` for the images of ``items`` (id -> (image, digest))."""
        prompt = prompts.step1_prompt(metric)
        assert prompt is not None
        table = self.tables[kind]
        out: dict[str, str] = {}
        wanted: dict[str, tuple[str, Request]] = {}  # digest -> (cache key, request)
        for i, (image, dig) in items.items():
            if dig in out or dig in wanted:
                continue
            if table is not None:
                name = os.path.basename(os.fspath(image)) if isinstance(image, (str, os.PathLike)) else None
                text = next((table[0][k] for k in (i, name, dig) if k is not None and k in table[0]), None)
                if text is not None:
                    out[dig] = text
                    stats["from_file"] = stats.get("from_file", 0) + 1
                    continue
            wanted[dig] = (jopt.request_key(kind, dig, prompt, ident, dec), Request(i, image, prompt))
        records, generated, cached = jopt.answers(self.backend, self.cache, kind, wanted, progress, f"visce2 {kind}")
        out.update({dig: r["answer"] for dig, r in records.items()})
        stats["generated"] = stats.get("generated", 0) + generated
        stats["cached"] = stats.get("cached", 0) + cached
        # the reference inserts the decoded answer after .strip(); servers may keep edge whitespace
        return {dig: text.strip() for dig, text in out.items()}

    # -- scoring ---------------------------------------------------------------------
    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``images`` (folder or ``{id: image}``); ``-ref`` also needs references."""
        cands = normalize_candidates(candidates, allow_empty=True)
        refs: dict[str, list[str]] | None = None
        if any(prompts.variant(m).needs_references for m in self.metrics):
            if references is None:
                raise InputError("visce2-ref needs references")
            refs = normalize_references(references)
            check_same_ids(cands, refs)
        good, sources, digests = imgs.usable_items(cands, images, "visce2", skip_bad_items)
        ident, dec = self.backend.identity(), self.backend.decoding()
        items = {i: (sources[i], digests[i]) for i in good}
        step1: dict[str, dict[str, str]] = {}
        step1_stats: dict[str, dict[str, int]] = {}
        for m in self.metrics:
            kind = prompts.variant(m).step1_kind
            if kind is not None and kind not in step1:
                step1_stats[kind] = {}
                step1[kind] = self._step1(kind, m, items, ident, dec, progress, step1_stats[kind])
        want_lp = self.score_mode == "expected"
        wanted: dict[tuple[str, str], tuple[str, Request]] = {}  # (metric, id) -> (rating cache key, request)
        for m in self.metrics:
            kind = prompts.variant(m).step1_kind
            for i in good:
                dig = digests[i]
                text = step1[kind][dig] if kind else None
                prompt = prompts.render_rating(m, cands[i], context=text if kind == "context" else None,
                                               description=text if kind == "description" else None,
                                               references=refs[i] if refs is not None else None)
                wanted[(m, i)] = (jopt.request_key("rating", dig, prompt, ident, dec),
                                  Request(i, sources[i], prompt, logprobs=want_lp))
        answers, generated, cached = jopt.answers(self.backend, self.cache, "rating", wanted, progress,
                                                  "visce2 rating")
        counters: dict[str, Any] = {
            "generated": {**{k: s.get("generated", 0) for k, s in step1_stats.items()}, "rating": generated},
            "cached": {**{k: s.get("cached", 0) for k, s in step1_stats.items()}, "rating": cached},
        }
        from_file = {k: s["from_file"] for k, s in step1_stats.items() if s.get("from_file")}
        if from_file:
            counters["from_file"] = from_file
        usable = set(good)
        skipped_inputs = [i for i in cands if i not in usable]
        results = [self._result(m, good, answers, step1, digests, counters, skipped_inputs, refs)
                   for m in self.metrics]
        return Report(results)

    def _result(self, metric: str, good: list[str], answers: dict[tuple[str, str], dict[str, Any]],
                step1: dict[str, dict[str, str]], digests: dict[str, str], counters: dict[str, Any],
                skipped_inputs: list[str], refs: dict[str, list[str]] | None) -> MetricResult:
        items: dict[str, float] = {}
        raw: dict[str, str] = {}
        errors: dict[str, dict[str, str]] = {}
        first_int: dict[str, float] = {}
        clipped: dict[str, str] = {}
        fallback = 0
        for i in good:
            record = answers[(metric, i)]
            text = record["answer"]
            raw[i] = text
            parsed = parse.parse_answer(text, self.unparsed, self.parse_rule)
            if parsed.clipped:
                clipped[i] = text
            if parsed.error is not None:
                errors[i] = {"answer": text, "error": parsed.error}
            if parsed.score is None:
                continue
            value = parsed.score
            if self.score_mode == "expected":
                first_int[i] = value
                expected = parse.expected_score(text, record.get("logprobs"), parsed)
                if expected is None:
                    fallback += 1
                else:
                    value = expected
            items[i] = value
        extras: dict[str, Any] = {"answers": raw, "errors": errors, "n_errors": len(errors),
                                  "clipped": clipped, "n_clipped": len(clipped), **counters}
        kind = prompts.variant(metric).step1_kind
        if kind:
            extras[f"{kind}s"] = {i: step1[kind][digests[i]] for i in good}
        if self.score_mode == "expected":
            extras["first_integer"] = first_int
            extras["expected_fallback"] = fallback
        skipped = skipped_inputs + [i for i in good if i not in items]
        system = float(sum(items.values()) / len(items)) if items else math.nan
        return MetricResult(metric=metric, system=system, items=items, signature=self.signature(metric, refs),
                            extras=extras, skipped=tuple(skipped))

    def signature(self, metric: str, refs: dict[str, list[str]] | None = None) -> Signature:
        """Everything a VisCE2 score depends on: backend and model, decoding, prompts, parsing."""
        sig = dict(self.backend.signature())
        versions = sig.pop("versions", None)
        params: dict[str, Any] = {**sig, **self.backend.decoding()}
        params.update(prompts.signature_fields(metric, template=sig.get("backend") == "transformers"))
        kind = prompts.variant(metric).step1_kind
        table = self.tables.get(kind) if kind else None
        if kind:
            params["step1"] = f"file:{table[1][:16]}+model" if table else "model"
        if refs is not None and prompts.variant(metric).needs_references:
            n = [len(r) for r in refs.values()]
            params["nrefs"] = str(min(n)) if min(n) == max(n) else f"{min(n)}-{max(n)}"
        params["parse"] = parse.SIGNATURES[self.parse_rule]
        params["unparsed"] = self.unparsed
        params["score"] = self.score_mode
        if self.score_mode == "expected":
            params["top_logprobs"] = getattr(self.backend, "top_logprobs", None)
        if versions:
            params["versions"] = versions
        return Signature.build(metric, **params)
