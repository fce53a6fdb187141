"""CAPability (Liu et al. 2025, What Is a Good Caption? A Comprehensive Visual Caption Benchmark
for Evaluating Both Correctness and Thoroughness, arXiv 2502.14914; ali-vilab/CAPability
``evaluation/eval.py`` at cebb82a) through capeval's judge layer.

Per item of a dimension, the judge (an OpenAI-compatible server; the paper's is
``gpt-4-turbo``, eval.py:37/:519) gets the dimension's system prompt and the user prompt with the
caption and the annotation (:mod:`.prompts`); its reply is read and checked as eval.py does
(:mod:`.parse`). The request is what eval.py's ``call_gpt`` sends (eval.py:90-103): a system
and a user message (plain strings), ``model``, nothing else: no temperature, no max_tokens,
no seed (the server's defaults; ``temperature``/``max_new_tokens``/``seed`` options add them).

Rounds as ``evaluate_scores_by_task`` (eval.py:427-462): every item is asked once; items whose
reply is unparsed or fails the checks are asked again (a new request: each round is its own
cache entry) for up to ``max_retry_times`` (5, the script's default) more rounds, a dimension
stopping once at most ``max_allow_missing`` (5) of its items lack a score. A
``dynamic_object_number`` item asks one prompt per annotated object, in order, and stops at
the first unparsed reply of a round (eval.py:388-394). Items still without a score are error
items (listed in ``extras["errors"]``), left out of the counts as the official script leaves
them out.

Metrics (eval.py:470-508, x100): per dimension ``precision = correct / hit``, ``recall =
correct / all``, ``hit = hit / all``, ``f1``; the system score of ``capability-precision``,
``-recall``, ``-f1``, ``-hit`` is the mean over the dimensions run; per dimension in
``extras["dimensions"]``. Item score: the same quantity over the caption's own scores (all
its dimensions; a caption with no hit has no precision/f1 item).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from capeval.errors import InputError
from capeval.judges import options as jopt
from capeval.judges.backends import Request
from capeval.judges.cache import open_cache, text_sha
from capeval.judges.openai_compat import OpenAICompat
from capeval.metrics.capability import data as D
from capeval.metrics.capability import parse as Q
from capeval.metrics.capability import prompts as P
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

LABEL = "capability"
DEFAULT_MODEL = "gpt-4-turbo"  # eval.py:37 and its --eval_model default (eval.py:519); README: GPT-4-Turbo
METRICS = {"capability-precision": "precision", "capability-recall": "recall", "capability-f1": "f1_score",
           "capability-hit": "hit_rate"}


@dataclass(frozen=True)
class SystemRequest(Request):
    """A text request with its own system message (CAPability's per-dimension system prompt)."""

    system: str = ""


class CapabilityJudge(OpenAICompat):
    """The request of eval.py's ``call_gpt``: ``[{"role": "system", "content": system}, {"role":
    "user", "content": prompt}]`` and ``model``; decoding fields only when given."""

    def __init__(self, model: str | None, *, temperature: float | None = None, seed: int | None = None,
                 max_new_tokens: int | None = None, **kw: Any):
        super().__init__(model, temperature=temperature or 0.0, seed=seed, max_new_tokens=max_new_tokens or 1,
                         pad_to_square=False, label=LABEL, llava_system=False, **kw)
        self.sent = {"temperature": temperature, "max_tokens": max_new_tokens, "seed": seed}

    def identity(self) -> dict[str, Any]:
        ident = {**super().identity(), "template": "server-chat:system+user"}
        ident.pop("pad_to_square", None)
        return ident

    def decoding(self) -> dict[str, Any]:
        return {k: ("server-default" if v is None else v) for k, v in self.sent.items()}

    def messages(self, req: Request) -> list[dict[str, Any]]:
        return [{"role": "system", "content": getattr(req, "system", "")}, {"role": "user", "content": req.prompt}]

    def _call(self, method: str, path: str, body: dict[str, Any] | None, item: str | None) -> Any:
        if body is not None and path == "/chat/completions":  # only what call_gpt sends, plus set options
            body = {"model": body["model"], "messages": body["messages"],
                    **{k: v for k, v in self.sent.items() if v is not None}}
        return super()._call(method, path, body, item)


class CAPability(ScorerBase):
    """CAPability precision / recall / F1 / hit rate (x100, higher is better) over its dimensions.

    ``annotations`` (required): the released annotations, a file or folder
    (:func:`~capeval.metrics.capability.data.load_annotations`); ``dimensions``: ``"all"``
    (every one there) or a comma list. Judge: ``model`` (``gpt-4-turbo``), ``base_url``,
    ``api_key``, ``concurrency``, ``timeout``, ``max_retries`` (HTTP), ``retry_backoff``,
    ``max_response_mb``; ``temperature``, ``seed``, ``max_new_tokens`` (None: not sent, as
    eval.py); ``max_retry_times`` (5) and ``max_allow_missing`` (5) as eval.py's options;
    ``strict_match`` (False, as eval.py's ``__main__``); ``cache``/``refresh`` as every judge.
    """

    produces: ClassVar[tuple[str, ...]] = tuple(METRICS)
    label = LABEL

    def __init__(self, metrics: Sequence[str] | None = None, annotations: str | os.PathLike[str] | None = None,
                 dimensions: str | Sequence[str] | None = "all", backend: Any = "openai",
                 model: str | None = DEFAULT_MODEL, base_url: str | None = None, api_key: str | None = None,
                 concurrency: int = 4, timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0,
                 temperature: float | None = None, seed: int | None = None, max_new_tokens: int | None = None,
                 max_retry_times: int = 5, max_allow_missing: int = 5, strict_match: bool = False,
                 cache: bool | str | os.PathLike[str] | None = True, refresh: bool = False,
                 max_response_mb: float = 16.0):
        self.metrics = self._select(metrics)
        for name, value in (("concurrency", concurrency), ("timeout", timeout), ("max_retries", max_retries),
                            ("retry_backoff", retry_backoff), ("max_response_mb", max_response_mb),
                            ("max_retry_times", max_retry_times), ("max_allow_missing", max_allow_missing)):
            jopt.check_range(LABEL, name, value)
        for name, value in (("temperature", temperature), ("seed", seed), ("max_new_tokens", max_new_tokens)):
            if value is not None:  # None: not sent (the server's default), as eval.py
                jopt.check_range(LABEL, name, value)
        if not isinstance(strict_match, bool):
            raise InputError(f"capability option strict_match: expected true or false, got {strict_match!r}")
        jopt.check_cache(LABEL, cache, refresh)
        self.dimensions = D.parse_dimensions(dimensions)
        if annotations is None:
            raise InputError("capability needs its annotations: -O capability.annotations=FOLDER (the released "
                             "annotations/ folder, or the Hugging Face dataset's files)")
        self.annotations = D.load_annotations(annotations, self.dimensions)
        if isinstance(backend, str):
            if backend.strip().lower() != "openai":
                raise InputError(f"capability option backend: only openai (an OpenAI-compatible server), got {backend!r}")
            backend = CapabilityJudge(model, base_url=base_url, api_key=api_key, concurrency=concurrency,
                                      timeout=timeout, max_retries=max_retries, retry_backoff=retry_backoff,
                                      temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                                      max_response_mb=max_response_mb)
        elif not all(hasattr(backend, a) for a in ("generate", "identity", "decoding", "signature")):
            raise InputError(f"capability option backend: {type(backend).__name__} is not a backend "
                             "(needs generate, identity, decoding, signature)")
        self.backend = backend
        self.max_retry_times, self.max_allow_missing = max_retry_times, max_allow_missing
        self.strict_match = strict_match
        self.cache = open_cache(cache, LABEL, refresh=refresh)

    def _key(self, system: str, prompt: str, attempt: int, ident: Any, dec: Any) -> str:
        return jopt.request_key(LABEL, None, prompt, ident, dec, system=text_sha(system), **{"try": attempt})

    def _round(self, todo: list[tuple[str, str]], captions: Mapping[str, str], attempt: int,
               progress: bool | None) -> tuple[dict[tuple[str, str], list[str]], dict[tuple[str, str], Any], int, int]:
        """One round for ``todo`` ``[(dimension, file_id)]``: ``(replies, parsed-or-why, generated, cached)``;
        a ``dynamic_object_number`` item asks its j-th prompt only when the (j-1)-th parsed."""
        ident, dec = self.backend.identity(), self.backend.decoding()
        rendered = {k: P.render(k[0], captions[k[1]], self.annotations[k[0]][k[1]]["annotation"]) for k in todo}
        replies: dict[tuple[str, str], list[str]] = {k: [] for k in todo}
        values: dict[tuple[str, str], list[Any]] = {k: [] for k in todo}
        failed: dict[tuple[str, str], str] = {}
        generated = cached = 0
        live, j = list(todo), 0
        while live:
            wanted = {k: (self._key(rendered[k][0], rendered[k][1][j], attempt, ident, dec),
                          SystemRequest(k[1], None, rendered[k][1][j], system=rendered[k][0])) for k in live}
            records, n_new, n_cached = jopt.answers(self.backend, self.cache, LABEL, wanted, progress,
                                                    f"capability try {attempt + 1}" + (f" object {j + 1}" if j else ""))
            generated, cached = generated + n_new, cached + n_cached
            still = []
            for k in live:
                text = records[k]["answer"]
                replies[k].append(text)
                value, why = Q.read_reply(text)
                if why is not None:
                    failed[k] = why
                    continue
                values[k].append(value)
                if j + 1 < len(rendered[k][1]):
                    still.append(k)
            live, j = still, j + 1
        out: dict[tuple[str, str], Any] = {}
        for k in todo:
            if k in failed:
                out[k] = Q.Invalid(failed[k])
                continue
            try:
                out[k] = Q.item_score(k[0], values[k], self.annotations[k[0]][k[1]]["annotation"], self.strict_match)
            except Q.Invalid as exc:
                out[k] = exc
        return replies, out, generated, cached

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Any = None, *,
              skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{file_id: caption}`` on the annotated dimensions."""
        from capeval.io.inputs import normalize_candidates, raise_bad_items

        if references is not None:
            raise InputError("capability takes no references: its annotations come from -O capability.annotations")
        captions = normalize_candidates(candidates, allow_empty=True)
        annotated = {fid for rows in self.annotations.values() for fid in rows}
        extra = [i for i in captions if i not in annotated]
        if extra:
            raise InputError(f"caption {extra[0]!r} has no annotation in the dimensions run "
                             f"({', '.join(self.annotations)}); pass those captions only", item_id=extra[0])
        missing = {fid: f"item {fid!r}: no caption (annotated in {d})" for d, rows in self.annotations.items()
                   for fid in rows if fid not in captions}
        raise_bad_items(list(dict.fromkeys([*captions, *missing])), missing, skip_bad_items)
        items = [(d, fid) for d, rows in self.annotations.items() for fid in rows if fid in captions]
        if not items:
            raise InputError("no usable items: every annotated item lacks a caption")
        scores: dict[tuple[str, str], Any] = {}
        last: dict[tuple[str, str], tuple[list[str], str]] = {}
        generated = cached = 0
        for attempt in range(self.max_retry_times + 1):
            todo = []
            for d in self.annotations:
                lacking = [k for k in items if k[0] == d and k not in scores]
                if attempt > 0 and len(lacking) <= self.max_allow_missing:  # eval.py:431
                    continue
                todo += lacking
            if not todo:
                break
            replies, out, n_new, n_cached = self._round(todo, captions, attempt, progress)
            generated, cached = generated + n_new, cached + n_cached
            for k, v in out.items():
                if isinstance(v, Q.Invalid):
                    last[k] = (replies[k], str(v))
                else:
                    scores[k] = v
                    last.pop(k, None)
        return self._report(items, scores, last, captions, generated, cached, list(missing))

    def _report(self, items: list[tuple[str, str]], scores: dict[tuple[str, str], Any],
                last: dict[tuple[str, str], tuple[list[str], str]], captions: Mapping[str, str],
                generated: int, cached: int, skipped: list[str]) -> Report:
        per_dim = {d: {fid: scores[(d, fid)] for (dd, fid) in items if dd == d and (d, fid) in scores}
                   for d in self.annotations}
        dims = {d: {**Q.metrics(Q.flatten(per_dim[d])), "items": sum(1 for k in items if k[0] == d),
                    "errors": sum(1 for k in last if k[0] == d)} for d in self.annotations}
        overall = Q.average(dims)
        pooled: dict[str, list[int]] = {}
        for (d, fid), s in scores.items():
            pooled.setdefault(fid, []).extend(s if isinstance(s, list) else [s])
        errors = {f"{d}/{fid}": {"dimension": d, "item": fid, "error": why, "replies": r}
                  for (d, fid), (r, why) in last.items()}
        extras: dict[str, Any] = {
            "dimensions": dims, "scores": {d: per_dim[d] for d in per_dim}, "errors": errors,
            "n_errors": len(errors), "generated": generated, "cached": cached,
        }
        out = []
        for name in self.metrics:
            key = METRICS[name]
            item_values = {}
            for fid in captions:
                if fid in pooled:
                    v = Q.metrics(pooled[fid])[key]
                    if not math.isnan(v):
                        item_values[fid] = float(v)
            out.append(MetricResult(metric=name, system=float(overall[key]), items=item_values,
                                    signature=self.signature(name), extras=extras, skipped=tuple(skipped)))
        return Report(out)

    def signature(self, name: str = "capability-precision") -> Signature:
        """Judge backend, model and decoding, the prompts' source and sha256 per dimension, the rounds."""
        sig = dict(self.backend.signature())
        versions = sig.pop("versions", None)
        sig.pop("pad_to_square", None)
        params: dict[str, Any] = {**sig, **self.backend.decoding(),
                                  "dimensions": ",".join(self.annotations),
                                  "prompts": P.short_source() + ":"
                                             + ",".join(f"{d}@{P.prompt_sha256(d)[:8]}" for d in self.annotations),
                                  "retry_times": self.max_retry_times, "allow_missing": self.max_allow_missing,
                                  "strict_match": self.strict_match, "parse": "capability-literal-eval"}
        if versions:
            params["versions"] = versions
        return Signature.build(name, **params)
