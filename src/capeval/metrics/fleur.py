"""FLEUR, RefFLEUR (Lee et al., ACL 2024) and EXPERT (Kim et al., ACL 2025 Findings): LLaVA
rates a caption on a real-number scale 0.0-1.0 and the score is *smoothed* with the model's
own token probabilities (:func:`capeval.judges.answers.smooth`).

- ``fleur`` / ``ref-fleur``: Yebin46/FLEUR ``fleur.py`` / ``reffleur.py``: LLaVA-1.5-13B (fp16;
  here its llava-hf port ``llava-hf/llava-1.5-13b-hf``), conversation ``llava_v1``, image aspect
  ``pad`` (the image padded to a square of CLIP's mean colour), greedy decoding, at most 512
  new tokens; the prompts below (RefFLEUR: the references joined by newlines).
- ``expert``: hjkim811/EXPERT ``expert.py``: the released LoRA ``hjkim811/EXPERT-llava-13b-lora``
  on ``liuhaotian/llava-v1.5-13b``, same template, decoding and smoothing, its scoring prompt;
  ``explanation=True`` asks the official second turn (explanation of Fluency, Relevance,
  Descriptiveness after the score, written back as ``str(score) + "</s>"`` as there) and keeps
  it in ``extras["explanations"]``. The LoRA is in LLaVA's own format: ``capeval convert expert``
  (:mod:`capeval.models.expert_convert`) merges it into the base as LLaVA's
  ``scripts/merge_lora_weights.py`` does and writes the llava-hf layout; pass that folder as
  ``model``, or serve it with vLLM and use ``backend="openai"``.

Captions are whitespace-normalised (``' '.join(caption.split())``) as the official scripts do.
Item score: the smoothed score in [0, 1] (``score_mode="number"``: the number the model wrote);
system = mean. Token probabilities: the transformers backend reads the exact softmax over the
whole vocabulary; a server's ``top_logprobs`` lists only its top alternatives, a missing digit
counts 0 and the digit mass found is in ``extras["digit_mass"]``. An answer without a number,
or outside [0, 1], is an error item (the official scripts skip it); ``unparsed="zero"`` scores 0.
A server that returns no log-probabilities (asked for with ``score_mode="smoothed"``) stops the
run at its first answer with one line naming ``score_mode=number``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from typing import Any, ClassVar, Mapping, Sequence

from capeval.errors import InputError, ResourceError
from capeval.io.inputs import check_same_ids, normalize_candidates, normalize_references
from capeval.judges import answers as ans
from capeval.judges import images as imgs
from capeval.judges import options as jopt
from capeval.judges.backends import Request
from capeval.judges.cache import open_cache
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

FLEUR_SOURCE = "Yebin46/FLEUR@6375a50"
EXPERT_SOURCE = "hjkim811/EXPERT@8e1788a"
#: fleur.py's instruction; {candidate} is the caption
FLEUR_PROMPT = (
    "Your task is to evaluate and rate the caption on a scale of 0.0 to 1.0 based on the given Grading Criteria. "
    "(Print Real Number Score ONLY)\n\nGrading Criteria:\n\n0.0: The caption does not describe the image at all.\n"
    "1.0: The caption accurately and clearly describes the image.\n\nCaption: {candidate}\n\n"
    "Score(Choose a rating from 0.0 to 1.0):"
)
#: reffleur.py's instruction; {reference} is the references joined by "\n"
REF_FLEUR_PROMPT = (
    "Your task is to evaluate and rate the candidate caption on a scale of 0.0 to 1.0 based on the given Grading "
    "Criteria. (Print Real Number Score ONLY)\n\nGrading Criteria:\n\n0.0: The caption does not describe the image "
    "at all.\n1.0: The caption accurately and clearly describes the image.\n\nReference Captions: {reference}\n\n"
    "Candidate Caption: {candidate}\n\nScore(Choose a rating from 0.0 to 1.0):"
)
#: expert.py get_scoring_prompt
EXPERT_PROMPT = "Evaluate the caption and assign a score on a scale of 0.0 to 1.0.\n\nCaption: {caption}\n\nScore (0.0~1.0):"
#: expert.py get_explanation_prompt (its doubled braces are literal braces)
EXPERT_EXPLANATION_PROMPT = (
    "Provide a brief explanation for the score based on three criteria: Fluency, Relevance, and Descriptiveness.\n\n"
    "Caption: {caption}\n\nEvaluation Criteria:\n"
    "- Fluency: Whether the caption is fluent, natural, and grammatically correct.\n"
    "- Relevance: Whether the sentence correctly describes the visual content and be closely relevant to the image.\n"
    "- Descriptiveness: Whether the sentence is a precise, informative caption that describes important details of "
    "the image.\n\nOutput Format:\nFluency: {{Provide explanation here.}}\nRelevance: {{Provide explanation here.}}\n"
    "Descriptiveness: {{Provide explanation here.}}"
)
#: expert.py's pattern, kept as the definition :func:`parse_explanation` follows (not run: its
#: backtracking is cubic in the worst case)
_EXPLANATION = re.compile(r"Fluency:\s*(.*?)\nRelevance:\s*(.*?)\nDescriptiveness:\s*(.*)", re.DOTALL)
UNPARSED = ("error", "zero")
SCORE_MODES = ("smoothed", "number")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render(metric: str, candidate: str, references: Sequence[str] | None = None) -> str:
    """The official instruction for ``metric`` (``fleur``, ``ref-fleur``, ``expert``)."""
    cand = " ".join(candidate.split())
    if metric == "fleur":
        return FLEUR_PROMPT.format(candidate=cand)
    if metric == "ref-fleur":
        if not references:
            raise InputError("ref-fleur needs references")
        return REF_FLEUR_PROMPT.format(reference="\n".join(references), candidate=cand)
    if metric == "expert":
        return EXPERT_PROMPT.format(caption=cand)
    raise InputError(f"unknown LLaVA judge {metric!r}")


def render_explanation(candidate: str) -> str:
    """EXPERT's second-turn prompt."""
    return EXPERT_EXPLANATION_PROMPT.format(caption=" ".join(candidate.split()))


_FLUENCY, _RELEVANCE, _DESCRIPTIVENESS = "Fluency:", "\nRelevance:", "\nDescriptiveness:"


_SPACES = re.compile(r"\s*")


def _space_run(text: str, at: int) -> int:
    """How many whitespace characters (what ``\\s`` matches) start at ``at`` (one greedy run: linear)."""
    m = _SPACES.match(text, at)
    return m.end() - at if m else 0


def parse_explanation(answer: str) -> dict[str, str] | None:
    """``{"fluency", "relevance", "descriptiveness"}`` as expert.py's ``parse_explanation`` (None: no match).

    That is ``re.search(r"Fluency:\\s*(.*?)\\nRelevance:\\s*(.*?)\\nDescriptiveness:\\s*(.*)",
    answer, re.DOTALL)`` with each group stripped (:data:`_EXPLANATION`), whose backtracking is
    cubic on an answer of many ``Fluency:`` / ``\\nRelevance:`` and no ``\\nDescriptiveness:``.
    Here the same match is found with a few linear scans, following the regex's order of
    trials: the first ``Fluency:`` (a later one can only see fewer markers after it); after it,
    the greedy ``\\s*`` then the lazy group try every ``\\nRelevance:`` from the end of the
    whitespace run on (the first one with a ``\\nDescriptiveness:`` after it wins), and only
    when none does, the one that begins at the run's last character (its ``\\n``; an earlier
    one cannot start inside a run of whitespace, its second character being a letter); then
    ``\\nDescriptiveness:`` the same way; the last group runs to the end. The stripped groups do
    not depend on how much whitespace ``\\s*`` took.
    """
    last_d = answer.rfind(_DESCRIPTIVENESS)
    f = answer.find(_FLUENCY)
    if last_d < 0 or f < 0:
        return None

    def marker(token: str, at: int, limit: int) -> int:
        """Where the regex matches ``token`` after ``at`` (``\\s*`` then a lazy group), at most
        ``limit``; -1: nowhere."""
        run = _space_run(answer, at)
        k = answer.find(token, at + run, limit + len(token))
        if k >= 0:
            return k
        if run and answer.startswith(token, at + run - 1) and at + run - 1 <= limit:
            return at + run - 1
        return -1

    p = f + len(_FLUENCY)
    r = marker(_RELEVANCE, p, last_d - len(_RELEVANCE))  # a \nDescriptiveness: must follow it
    if r < 0:
        return None
    q = r + len(_RELEVANCE)
    d = marker(_DESCRIPTIVENESS, q, last_d)
    if d < 0:  # cannot happen (last_d >= q): kept for safety
        return None
    return {"fluency": answer[p:r].strip(), "relevance": answer[q:d].strip(),
            "descriptiveness": answer[d + len(_DESCRIPTIVENESS):].strip()}


class _LlavaJudge(ScorerBase):
    """Shared body of FLEUR and EXPERT (see the module docstring); ``refresh=True`` asks every
    answer again and replaces its cache entry (not in the signature: it does not change how an
    answer is scored)."""

    label: ClassVar[str] = ""
    default_model: ClassVar[str | None] = None
    source: ClassVar[str] = ""

    def __init__(self, metrics: Sequence[str] | None = None, backend: Any = "transformers", model: str | None = None,
                 device: str = "cpu", dtype: str = "auto", quantization: str | None = None,
                 revision: str | None = None, batch_size: int = 8, base_url: str | None = None,
                 api_key: str | None = None, concurrency: int = 4, timeout: float = 120.0, max_retries: int = 5,
                 retry_backoff: float = 1.0, temperature: float = 0.0, seed: int | None = 0,
                 max_new_tokens: int = 512, top_logprobs: int = 20,
                 cache: bool | str | os.PathLike[str] | None = True, unparsed: str = "error",
                 score_mode: str = "smoothed", pad_to_square: bool = True, explanation: bool = False,
                 max_response_mb: float = 16.0, refresh: bool = False):
        self.metrics = self._select(metrics)
        jopt.check_choice(self.label, "unparsed", unparsed, UNPARSED)
        jopt.check_choice(self.label, "score_mode", score_mode, SCORE_MODES)
        jopt.check_cache(self.label, cache, refresh)
        for name, value in (("pad_to_square", pad_to_square), ("explanation", explanation)):
            if not isinstance(value, bool):
                raise InputError(f"{self.label} option {name}: expected true or false, got {value!r}")
        if explanation and self.label != "expert":
            raise InputError(f"{self.label} option explanation applies to expert only")
        if isinstance(backend, str) and backend.strip().lower() == "transformers" and model is None \
                and self.default_model is None:
            raise InputError("expert backend='transformers' needs model=<the folder `capeval convert expert --out "
                             "FOLDER` writes> (the release hjkim811/EXPERT-llava-13b-lora is a LoRA in LLaVA's "
                             "own format over liuhaotian/llava-v1.5-13b; see docs/judges.md)")
        if score_mode == "smoothed" and top_logprobs == 0 and isinstance(backend, str) and backend == "openai":
            raise InputError(f"{self.label} score_mode='smoothed' needs top_logprobs >= 1")
        self.backend = jopt.make_backend(self.label, backend, model=model, default_model=self.default_model,
                                         device=device, dtype=dtype, quantization=quantization, revision=revision,
                                         batch_size=batch_size, base_url=base_url, api_key=api_key,
                                         concurrency=concurrency, timeout=timeout, max_retries=max_retries,
                                         retry_backoff=retry_backoff, temperature=temperature, seed=seed,
                                         max_new_tokens=max_new_tokens, top_logprobs=top_logprobs,
                                         pad_to_square=pad_to_square, native_vocab=True,
                                         max_response_mb=max_response_mb)
        self.unparsed = unparsed
        self.score_mode = score_mode
        self.explanation = explanation
        self.cache = open_cache(cache, self.label, refresh=refresh)

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``images`` (folder or ``{id: image}``); ``ref-fleur`` also needs references."""
        cands = normalize_candidates(candidates, allow_empty=True)
        refs: dict[str, list[str]] | None = None
        if "ref-fleur" in self.metrics:
            if references is None:
                raise InputError("ref-fleur needs references")
            refs = normalize_references(references)
            check_same_ids(cands, refs)
        good, sources, digests = imgs.usable_items(cands, images, self.label, skip_bad_items)
        ident, dec = self.backend.identity(), self.backend.decoding()
        want_lp = self.score_mode == "smoothed"
        wanted: dict[tuple[str, str], tuple[str, Request]] = {}
        for m in self.metrics:
            for i in good:
                prompt = render(m, cands[i], refs[i] if refs is not None else None)
                wanted[(m, i)] = (jopt.request_key("rating", digests[i], prompt, ident, dec),
                                  Request(i, sources[i], prompt, logprobs=want_lp))
        records, generated, cached = jopt.answers(self.backend, self.cache, "rating", wanted, progress,
                                                  f"{self.label} rating", self._needs_logprobs if want_lp else None)
        counters = {"generated": generated, "cached": cached}
        results = []
        for m in self.metrics:
            items, extras = self._items(m, good, records)
            extras.update(counters)
            if self.explanation:
                extras.update(self._explain(m, good, cands, items, extras, sources, digests, ident, dec, progress))
            usable = set(good)
            skipped = [i for i in cands if i not in usable] + [i for i in good if i not in items]
            system = float(sum(items.values()) / len(items)) if items else math.nan
            results.append(MetricResult(metric=m, system=system, items=items, signature=self.signature(m, refs),
                                        extras=extras, skipped=tuple(skipped)))
        return Report(results)

    def _needs_logprobs(self, record: dict[str, Any]) -> None:
        """Stop at the first answer without the token log-probabilities the smoothing reads (a
        server that ignores ``logprobs``): every item would be an error item."""
        if record.get("logprobs") is not None:
            return
        where = getattr(self.backend, "base_url", None)
        asked = getattr(self.backend, "top_logprobs", None)
        raise ResourceError(
            f"{self.label}: item {record.get('item')!r}: the server{' at ' + where if where else ''} returned no token "
            f"log-probabilities (asked: logprobs=true, top_logprobs={asked}), which score_mode=smoothed reads; serve the "
            "model where /v1/chat/completions returns them (vLLM does, up to its --max-logprobs, 20 by default) or "
            f"pass -O {self.label}.score_mode=number (the written number, no smoothing)")

    def _items(self, metric: str, good: list[str],
               records: dict[Any, dict[str, Any]]) -> tuple[dict[str, float], dict[str, Any]]:
        items: dict[str, float] = {}
        raw: dict[str, str] = {}
        numbers: dict[str, float] = {}
        mass: dict[str, list[float]] = {}
        notes: dict[str, list[str]] = {}
        errors: dict[str, dict[str, str]] = {}
        for i in good:
            record = records[(metric, i)]
            text = record["answer"]
            raw[i] = text
            if self.score_mode == "number":
                number = ans.fleur_number(text)
                ok = number is not None and 0.0 <= number <= 1.0
                result = ans.Smoothed(number if ok else None, number,
                                      None if ok else ("no number in the answer" if number is None
                                                       else f"the number {number:g} is outside [0, 1]"))
            else:
                result = ans.smooth(text, record.get("logprobs"))
            if result.number is not None:
                numbers[i] = result.number
            if result.mass:
                mass[i] = list(result.mass)
            if result.notes:
                notes[i] = list(result.notes)
            if result.score is None:
                errors[i] = {"answer": text, "error": result.error or "unreadable"}
                if self.unparsed == "zero":
                    items[i] = 0.0
                continue
            items[i] = float(result.score)
        extras: dict[str, Any] = {"answers": raw, "numbers": numbers, "errors": errors, "n_errors": len(errors)}
        if self.score_mode == "smoothed":
            extras["digit_mass"] = mass
            extras["min_digit_mass"] = min((x for v in mass.values() for x in v), default=math.nan)
            if notes:
                extras["notes"] = notes
        return items, extras

    def _explain(self, metric: str, good: list[str], cands: dict[str, str], items: dict[str, float],
                 extras: dict[str, Any], sources: dict[str, Any], digests: dict[str, str], ident: Any, dec: Any,
                 progress: bool | None) -> dict[str, Any]:
        """EXPERT's second turn: the explanation, after the score written back as ``str(score) + "</s>"``."""
        wanted: dict[str, tuple[str, Request]] = {}
        for i in good:
            if i not in items or i in extras["errors"]:
                continue  # the official code stops at the scoring turn for these
            history = ((render(metric, cands[i]), f"{items[i]!r}</s>"),)
            prompt = render_explanation(cands[i])
            blob = json.dumps({"history": history, "prompt": prompt}, ensure_ascii=False)
            wanted[i] = (jopt.request_key("explanation", digests[i], blob, ident, dec),
                         Request(i, sources[i], prompt, history=history))
        records, _, _ = jopt.answers(self.backend, self.cache, "explanation", wanted, progress, "expert explanation")
        texts = {i: r["answer"] for i, r in records.items()}
        return {"explanation_answers": texts, "explanations": {i: parse_explanation(t) for i, t in texts.items()}}

    def signature(self, metric: str, refs: dict[str, list[str]] | None = None) -> Signature:
        """Backend and model, decoding, the prompt's sha256, parsing and smoothing."""
        sig = dict(self.backend.signature())
        versions = sig.pop("versions", None)
        prompt, name = {"fleur": (FLEUR_PROMPT, "fleur.py"), "ref-fleur": (REF_FLEUR_PROMPT, "reffleur.py"),
                        "expert": (EXPERT_PROMPT, "expert.py")}[metric]
        params: dict[str, Any] = {**sig, **self.backend.decoding(),
                                  "prompt": f"{self.source}/{name}@{_sha(prompt)[:16]}",
                                  "score": self.score_mode, "unparsed": self.unparsed}
        if self.score_mode == "smoothed" and sig.get("backend") != "transformers":
            params["top_logprobs"] = getattr(self.backend, "top_logprobs", None)
        if self.explanation:
            params["explanation"] = f"{_sha(EXPERT_EXPLANATION_PROMPT)[:16]}"
        if refs is not None and metric == "ref-fleur":
            n = [len(r) for r in refs.values()]
            params["nrefs"] = str(min(n)) if min(n) == max(n) else f"{min(n)}-{max(n)}"
        if versions:
            params["versions"] = versions
        return Signature.build(metric, **params)


class FLEUR(_LlavaJudge):
    """FLEUR and RefFLEUR (Lee et al. 2024); item range [0, 1], higher is better."""

    produces: ClassVar[tuple[str, ...]] = ("fleur", "ref-fleur")
    label = "fleur"
    default_model = "llava-hf/llava-1.5-13b-hf"
    source = FLEUR_SOURCE


class EXPERT(_LlavaJudge):
    """EXPERT (Kim et al. 2025); item range [0, 1], higher is better."""

    produces: ClassVar[tuple[str, ...]] = ("expert",)
    label = "expert"
    default_model = None
    source = EXPERT_SOURCE
