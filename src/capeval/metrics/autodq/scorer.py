"""AutoDQ through capeval's judge layer (any OpenAI-compatible server or a local chat LLM).

Per item, the steps of ``process_one_sample`` (evaluate_dream_gpt.py:241-274) in its order, each
step a batch over the items still alive (so the requests are those the script sends):

1. the reference's events: from the annotation file (``annotations=``, DREAM-1K's
   ``extra_info.events``), else extracted by the judge from the reference;
2. the candidate's events, extracted by the judge;
3. recall: the reference's events checked against the candidate (entailment prompt);
4. precision: the candidate's events checked against the reference.

An answer the official reader refuses is asked again, up to ``tries`` (10, the script's
``max_retry``) per step, each try its own cache entry; an item still unread is an error item
(``extras["errors"]``, its step and answers), left out of every mean as the script leaves a
failed sample out. Results (fractions in [0, 1]):

- ``autodq-recall`` / ``autodq-precision``: per item hits / events (1.0 for an empty list);
  system = the script's OVERALL: the mean over subtasks (``annotations``: DREAM-1K's five
  sources; without them one group) of each subtask's mean;
- ``autodq-f1``: system = 2rp / (r + p) of those two system values (``count_f1``, NaN when
  both are 0); per item 2rp / (r + p) of the item's own recall and precision (0 when both are
  0; an aid for ranking items, not a number of the script). ``extras["subtasks"]`` holds the
  script's table (F1, recall, precision, success, failed per subtask), ``extras["buckets"]`` its
  tables by the annotation's numbers of subjects, shots and events (``annotations`` only).

Decoding: the script sends no sampling field, so the API's defaults apply: ``temperature`` 1.0
here (sent), no ``seed`` (``seed=N`` sends one), ``max_new_tokens`` 4096 (gpt-3.5-turbo-0125's
output limit, i.e. no limit for the official judge). Judge: the script's ``gpt-35-turbo-0125``
(Azure's name of OpenAI's ``gpt-3.5-turbo-0125``); ``model`` None takes the server's only model.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, ClassVar, Mapping, Sequence

from capeval.errors import InputError
from capeval.judges import options as jopt
from capeval.judges.backends import Request, clean_text
from capeval.judges.cache import open_cache
from capeval.metrics.autodq import official as off
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

LABEL = "autodq"
STEPS = ("reference events", "candidate events", "recall", "precision")


def _check_text(item: str, what: str, text: str) -> None:
    """One line for a text UTF-8 cannot carry (a lone surrogate, ``"\\ud800"`` in JSON): it
    could be neither sent to the judge nor hashed for the cache."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{LABEL}: item {item!r}: the {what} holds a lone surrogate at character {exc.start} "
                         "(not valid Unicode; it cannot be sent to the judge)", item_id=item) from None


class AutoDQ(ScorerBase):
    """DREAM-1K AutoDQ; recall, precision, F1 in [0, 1], higher is better.

    Judge options as CLAIR's (``backend``, ``model``, ``base_url``, ``api_key``, ``concurrency``,
    ``timeout``, ``max_retries``, ``retry_backoff``, ``max_response_mb``; ``device``, ``dtype``,
    ``revision``, ``batch_size`` for ``backend="transformers"``), ``temperature`` (1.0), ``seed``
    (None), ``max_new_tokens`` (4096), ``tries`` (10), ``annotations`` (a DREAM-1K jsonl: the
    references, their events and the subtasks come from it), ``cache`` / ``refresh``.
    """

    produces: ClassVar[tuple[str, ...]] = ("autodq-f1", "autodq-recall", "autodq-precision")
    label = LABEL

    def __init__(self, metrics: Sequence[str] | None = None, backend: Any = "openai", model: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, concurrency: int = 4,
                 timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0,
                 temperature: float = 1.0, seed: int | None = None, max_new_tokens: int = 4096,
                 tries: int = off.OFFICIAL_TRIES, annotations: str | os.PathLike[str] | None = None,
                 cache: bool | str | os.PathLike[str] | None = True, refresh: bool = False,
                 device: str = "cpu", dtype: str = "auto", revision: str | None = None, batch_size: int = 8,
                 max_response_mb: float = 16.0):
        self.metrics = self._select(metrics)
        jopt.check_range(LABEL, "tries", tries)
        jopt.check_cache(LABEL, cache, refresh)
        if annotations is not None and not isinstance(annotations, (str, os.PathLike)):
            raise InputError(f"{LABEL} option annotations: expected a file (DREAM-1k.jsonl), got {annotations!r}")
        self.backend = jopt.make_backend(LABEL, backend, model=model, default_model=None, text_only=True,
                                         device=device, dtype=dtype, revision=revision, batch_size=batch_size,
                                         base_url=base_url, api_key=api_key, concurrency=concurrency,
                                         timeout=timeout, max_retries=max_retries, retry_backoff=retry_backoff,
                                         temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                                         pad_to_square=False, max_response_mb=max_response_mb)
        self.tries = tries
        self.annotations = None
        if annotations is not None:
            from capeval.metrics.autodq.dream1k import load

            self.annotations = load(annotations)
        self.cache = open_cache(cache, LABEL, refresh=refresh)

    # -- inputs ------------------------------------------------------------------------
    def _inputs(self, candidates: Any, references: Any, skip_bad_items: bool) -> tuple[
            dict[str, str], dict[str, str], dict[str, tuple[str, ...] | None], dict[str, str], list[str], list[str]]:
        """(candidates, reference text, reference events or None, subtask, ids, usable ids)."""
        from capeval.io.inputs import normalize_candidates, raise_bad_items

        if self.annotations is None:
            if references is None:
                raise InputError(f"{LABEL} needs references (-r) or the DREAM-1K annotation file "
                                 f"(-O {LABEL}.annotations=DREAM-1k.jsonl; capeval download dream-1k)")
            cands, refs, ids, good = jopt.text_inputs(LABEL, candidates, references, skip_bad_items)
            many = next((i for i in ids if len(refs[i]) != 1), None)
            if many is not None:
                raise InputError(f"{LABEL}: item {many!r} has {len(refs[many])} references; AutoDQ compares with one "
                                 "description (DREAM-1K has one per video)", item_id=many)
            return cands, {i: refs[i][0] for i in ids}, {i: None for i in ids}, {i: "all" for i in ids}, ids, good
        if references is not None:
            raise InputError(f"{LABEL}: references come from annotations={self.annotations.path}; "
                             "give references or the annotation file, not both")
        cands = normalize_candidates(candidates, allow_empty=True)
        ids = list(cands)
        recs = self.annotations.records
        unknown = next((i for i in ids if i not in recs), None)
        if unknown is not None:
            raise InputError(f"{LABEL}: candidate {unknown!r} is not a video of {self.annotations.path} "
                             f"(ids are the records' 'vid', e.g. {next(iter(recs))!r})", item_id=unknown)
        bad = {i: f"item {i!r}: caption is empty" for i in ids if not cands[i].strip()}
        raise_bad_items(ids, bad, skip_bad_items)
        good = [i for i in ids if i not in bad]
        if not good:
            raise InputError("no usable items: every item was skipped")
        return (cands, {i: recs[i].reference for i in ids}, {i: recs[i].events for i in ids},
                {i: recs[i].subtask for i in ids}, ids, good)

    # -- one step: a prompt per item, asked up to `tries` times -------------------------
    def _step(self, name: str, prompts: Mapping[str, str], read: Callable[[str, str], tuple[Any, str]],
              progress: bool | None, log: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        ident, dec = self.backend.identity(), self.backend.decoding()
        done: dict[str, Any] = {}
        raw: dict[str, list[str]] = {i: [] for i in prompts}
        why: dict[str, str] = {}
        pending = list(prompts)
        for attempt in range(self.tries):
            if not pending:
                break
            wanted = {i: (jopt.request_key(LABEL, None, prompts[i], ident, dec, **{"try": attempt}),
                          Request(i, None, prompts[i])) for i in pending}
            records, n_new, n_cached = jopt.answers(self.backend, self.cache, LABEL, wanted, progress,
                                                    f"autodq {name} try {attempt + 1}")
            log["generated"] += n_new
            log["cached"] += n_cached
            still = []
            for i in pending:
                text = records[i]["answer"]
                raw[i].append(text)
                value, reason = read(i, text)
                if value is None:
                    still.append(i)
                    why[i] = reason
                else:
                    done[i] = value
            pending = still
        errors = {i: {"step": name, "answers": raw[i], "error": f"{name}: {why[i]} (after {len(raw[i])} tries)"}
                  for i in pending}
        return done, errors

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference]}`` (or the annotation file's references)."""
        cands, refs, ref_events, subtask, ids, good = self._inputs(candidates, references, skip_bad_items)
        for i in good:
            for what, text in (("caption", cands[i]), ("reference", refs[i]),
                               *(("event", e) for e in ref_events[i] or ())):
                _check_text(i, what, text)
        pred = {i: cands[i].lower() for i in good}  # process_one_sample, line 243
        resp = {i: refs[i].lower() for i in good}
        log: dict[str, Any] = {"generated": 0, "cached": 0}
        errors: dict[str, dict[str, Any]] = {}

        def events_of(_i: str, text: str) -> tuple[Any, str]:
            return off.read_events(text)

        gt = {i: list(ref_events[i]) for i in good if ref_events[i] is not None}
        todo = [i for i in good if ref_events[i] is None]
        got, err = self._step(STEPS[0], {i: off.extract_prompt(off.extraction_input(refs[i])) for i in todo},
                              events_of, progress, log)
        gt.update(got)
        errors.update(err)
        alive = [i for i in good if i not in errors]
        cand_events, err = self._step(STEPS[1], {i: off.extract_prompt(off.extraction_input(cands[i])) for i in alive},
                                      events_of, progress, log)
        errors.update(err)
        alive = [i for i in alive if i not in errors]
        sent: dict[str, dict[str, list[Any]]] = {"recall": gt, "precision": cand_events}
        scores: dict[str, dict[str, float]] = {}
        for step, desc, other in (("recall", pred, resp), ("precision", resp, pred)):
            events = sent[step]
            prompts = {i: off.entail_prompt(desc[i], events[i], other[i]) for i in alive}
            found, err = self._step(step, prompts,
                                    lambda i, text, ev=events: off.read_relationships(text, len(ev[i])),
                                    progress, log)
            errors.update(err)
            scores[step] = {i: off.hit_score(found[i], len(events[i])) for i in found}
            alive = [i for i in alive if i not in errors]
        rp = {i: (scores["recall"][i], scores["precision"][i]) for i in alive}
        summary = off.summarize(rp, subtask, [i for i in good if i in errors])
        extras_common: dict[str, Any] = {
            "events_reference": {i: gt[i] for i in good if i in gt},
            # a Python literal may spell a lone surrogate ('\\ud800'): U+FFFD here, as in answers
            "events_candidate": clean_text({i: cand_events[i] for i in good if i in cand_events}),
            "subtasks": summary["subtasks"], "success": summary["success"], "failed": summary["failed"],
            "errors": errors, "n_errors": len(errors), "generated": log["generated"], "cached": log["cached"],
        }
        counts = {} if self.annotations is None else {i: self.annotations.records[i].extra for i in rp}
        if counts and all(len(c) == 3 for c in counts.values()):  # the annotation's n_subjects, n_shots, n_events
            extras_common["buckets"] = off.summarize_buckets(rp, counts)
        skipped = tuple(i for i in ids if i not in rp)
        sig = self.signature()
        out = []
        for metric in self.metrics:
            if metric == "autodq-recall":
                items, system = {i: rp[i][0] for i in rp}, summary["recall"]
            elif metric == "autodq-precision":
                items, system = {i: rp[i][1] for i in rp}, summary["precision"]
            else:
                items = {i: (2 * r * p / (r + p) if r + p > 0 else 0.0) for i, (r, p) in rp.items()}
                system = summary["f1"]
            extras = {**extras_common, "recall": {i: rp[i][0] for i in rp}, "precision": {i: rp[i][1] for i in rp}}
            out.append(MetricResult(metric=metric, system=float(system) if not math.isnan(system) else math.nan,
                                    items=items, signature=Signature.build(metric, **sig), extras=extras,
                                    skipped=skipped))
        return Report(out)

    def signature(self) -> dict[str, Any]:
        """Backend and judge model, decoding, the two prompts' sha256, tries, the rules, the annotations."""
        sig = dict(self.backend.signature())
        versions = sig.pop("versions", None)
        sig.pop("pad_to_square", None)  # no image
        params: dict[str, Any] = {
            **sig, **self.backend.decoding(),
            "prompts": f"{off.SOURCE}@extract:{off.EXTRACT_SHA256[:16]},entail:{off.ENTAIL_SHA256[:16]}",
            "tries": self.tries, "hit": "entailment", "aggregate": "mean-of-subtask-means",
        }
        if self.annotations is not None:
            params["annotations"] = f"sha256:{self.annotations.sha256[:16]}"
        if versions:
            params["versions"] = versions
        return params
