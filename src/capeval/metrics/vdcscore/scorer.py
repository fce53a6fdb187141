"""VDCscore (Chai et al., ICLR 2025, "AuroraCap: Efficient, Performant Video Detailed Captioning and
a New Benchmark"): an LLM answers VDC's ground-truth questions from the candidate caption alone,
then judges each answer against the ground-truth answer.

What ``post_eval/process_vdc_result.py`` of rese1f/aurora (commit 2bf68d5) does, followed here:

- step 1 (lines 232-242): for every question of the video (the QA file of one dimension,
  :mod:`.qa`), :func:`~.prompts.answer_user` with the candidate caption, the system text
  :data:`~.prompts.ANSWER_SYSTEM`; the reply is the predicted answer;
- step 2 (lines 244-250): :func:`~.prompts.judge_user` with the question, the ground-truth answer
  and the predicted answer, system :data:`~.prompts.JUDGE_SYSTEM`; the reply is read with
  ``ast.literal_eval`` (:mod:`.reply`);
- per video (lines 253-260): mean ``float(score)`` and share of ``pred == 'yes'``; a video with a
  bad reply is left out (the script's ``except``), here an error item (``extras["errors"]``);
- lines 262-265: ``if tp_score and tp_acc`` keeps only videos whose mean score AND accuracy are
  both non-zero: a video whose every answer was judged ``no`` is left out of both means.
  ``zeros="drop"`` (default) does so and lists those videos in ``extras["dropped_zero"]``;
  ``zeros="keep"`` (an option, named in the signature) averages them too;
- lines 269-270: ``vdcscore`` = mean video score (0-5), ``vdcscore-acc`` = mean video accuracy
  (0-1; the README prints it x100).

Decoding: SGLang's ``gen("answer_1", max_tokens=256)`` with the frontend's defaults
(``SglSamplingParams``: temperature 1.0, top_p 1.0): sampled, no seed; so are the defaults here
(``temperature=1.0``, ``top_p=1.0``, ``max_new_tokens=256``, ``seed=None``). The judge model of the
paper and the README is ``meta-llama/Llama-3.1-8B-Instruct`` served by SGLang, whose frontend
renders both turns with its ``llama-3-instruct`` template: by default (``template="llama-3-instruct"``)
that very text goes to the server's ``/completions`` (vLLM, SGLang, llama.cpp); ``template="chat"``
sends a system and a user message to ``/chat/completions`` instead (other judge models, chat-only
APIs), where the server's template renders them (Llama-3.1's adds two date lines to the system turn).

Every request is cached per (model, prompt, decoding) as it arrives: an interrupted run resumes,
a rerun sends nothing, ``refresh=True`` asks again. Two identical requests (the same caption and
question) are asked once; the script, sampling, would ask twice.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from capeval.errors import InputError, ResourceError, shown
from capeval.judges import options as jopt
from capeval.judges.backends import Answer, Request
from capeval.judges.cache import open_cache, text_sha
from capeval.judges.openai_compat import OpenAICompat
from capeval.metrics.vdcscore import prompts, qa as qa_files
from capeval.metrics.vdcscore.reply import MAX_DEPTH, MAX_OPERATORS, MAX_REPLY_CHARS, score_video
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ZEROS = ("drop", "keep")
TEMPLATES = ("llama-3-instruct", "chat")


@dataclass(frozen=True)
class ChatRequest(Request):
    """A :class:`Request` with its own system text (the two steps have different ones)."""

    system: str = ""


class VDCJudge(OpenAICompat):
    """:class:`OpenAICompat` for the two VDCscore steps, ``top_p`` sent.

    ``template="llama-3-instruct"``: the text SGLang's frontend sends for the paper's Llama-3
    judge (:func:`~.prompts.llama3_prompt`), as one ``/completions`` prompt; ``"chat"``: a
    system and a user message to ``/chat/completions``, rendered by the server's chat template.
    """

    def __init__(self, *args: Any, top_p: float = 1.0, template: str = "llama-3-instruct", **kw: Any):
        super().__init__(*args, pad_to_square=False, label="vdcscore", llava_system=False, **kw)
        self.extra_body = {"top_p": top_p}
        self.template = template

    def identity(self) -> dict[str, Any]:
        how = "server-chat:system+user" if self.template == "chat" else "completions:sglang-llama-3-instruct"
        return {**super().identity(), "template": how, "pad_to_square": False}

    def messages(self, req: Request) -> list[dict[str, Any]]:
        return [{"role": "system", "content": getattr(req, "system", "")}, {"role": "user", "content": req.prompt}]

    def ask(self, req: Request, model: str) -> Answer:
        if self.template == "chat":
            return super().ask(req, model)
        body: dict[str, Any] = {"model": model, "prompt": prompts.llama3_prompt(getattr(req, "system", ""), req.prompt),
                                "temperature": self.temperature, "max_tokens": self.max_new_tokens, "n": 1,
                                "stream": False, **self.extra_body}
        if self.seed is not None:
            body["seed"] = self.seed
        data = self._call("POST", "/completions", body, item=req.item)
        try:
            text = data["choices"][0]["text"]
        except (KeyError, IndexError, TypeError):
            raise ResourceError(f"vdcscore: item {req.item!r}: the server's answer has no choices[0].text "
                                f"({shown(data, 200)})") from None
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise ResourceError(f"vdcscore: item {req.item!r}: choices[0].text is {type(text).__name__}, not text")
        return Answer(text)


class VDCscore(ScorerBase):
    """``vdcscore`` (mean judge score, 0-5) and ``vdcscore-acc`` (share of "yes", 0-1); higher is better.

    ``qa``: a VDC question file (``.jsonl``); ``dimension``: camera, short, background,
    main_object or detailed (without ``qa``: the file ``capeval download vdc`` fetched). Server:
    ``model`` (default :data:`DEFAULT_MODEL`), ``base_url``, ``api_key``, ``concurrency``,
    ``timeout``, ``max_retries``, ``retry_backoff``, ``max_response_mb``; decoding ``temperature``
    1.0, ``top_p`` 1.0, ``max_new_tokens`` 256, ``seed`` None (the script's); ``cache`` (True:
    ``<capeval cache>/vdcscore``, a folder, or None), ``refresh``; ``zeros`` ``"drop"`` (the
    script) or ``"keep"``; ``template`` ``"llama-3-instruct"`` (the text SGLang's frontend sends the
    paper's judge, through ``/completions``) or ``"chat"`` (the server's chat template, for other
    judge models and chat-only APIs).
    """

    produces: ClassVar[tuple[str, ...]] = ("vdcscore", "vdcscore-acc")
    label = "vdcscore"

    def __init__(self, metrics: Sequence[str] | None = None, qa: str | os.PathLike[str] | None = None,
                 dimension: str | None = None, model: str | None = DEFAULT_MODEL, base_url: str | None = None,
                 api_key: str | None = None, concurrency: int = 4, timeout: float = 120.0, max_retries: int = 5,
                 retry_backoff: float = 1.0, temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None,
                 max_new_tokens: int = 256, cache: bool | str | os.PathLike[str] | None = True,
                 refresh: bool = False, zeros: str = "drop", max_response_mb: float = 16.0,
                 template: str = "llama-3-instruct"):
        self.metrics = self._select(metrics)
        jopt.check_choice(self.label, "zeros", zeros, ZEROS)
        jopt.check_choice(self.label, "template", template, TEMPLATES)
        for name, value in (("concurrency", concurrency), ("timeout", timeout), ("max_retries", max_retries),
                            ("retry_backoff", retry_backoff), ("temperature", temperature), ("top_p", top_p),
                            ("seed", seed), ("max_new_tokens", max_new_tokens), ("max_response_mb", max_response_mb)):
            jopt.check_range(self.label, name, value)
        jopt.check_cache(self.label, cache, refresh)
        path, dim = qa_files.locate(qa, dimension)
        self.qa = qa_files.load(path, dim)
        if qa is None and self.qa.sha256 != qa_files.RELEASE[dim]:
            raise InputError(f"vdcscore: {path} is not the released {dim}.jsonl (sha256 {self.qa.sha256[:16]}..., "
                             f"expected {qa_files.RELEASE[dim][:16]}...): run `capeval download vdc` again")
        self.backend = VDCJudge(model, base_url=base_url, api_key=api_key, concurrency=concurrency, timeout=timeout,
                                max_retries=max_retries, retry_backoff=retry_backoff, temperature=temperature,
                                seed=seed, max_new_tokens=max_new_tokens, top_p=top_p,
                                max_response_mb=max_response_mb, template=template)
        self.zeros = zeros
        self.cache = open_cache(cache, self.label, refresh=refresh)

    def _ask(self, step: str, system: str, texts: dict[tuple[str, int], str], progress: bool | None
             ) -> tuple[dict[tuple[str, int], str], int, int]:
        """The replies to ``texts`` (``{(video, question index): user text}``) through the cache."""
        ident, dec = self.backend.identity(), self.backend.decoding()
        wanted = {slot: (jopt.request_key(self.label, None, text, ident, dec, step=step,
                                          system=text_sha(system)),
                         ChatRequest(slot[0], None, text, system=system)) for slot, text in texts.items()}
        records, n_new, n_cached = jopt.answers(self.backend, self.cache, self.label, wanted, progress,
                                                f"vdcscore {step}")
        return {slot: records[slot]["answer"] for slot in texts}, n_new, n_cached

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{video_id: caption}`` against the questions of the QA file (``references`` are not read)."""
        from capeval.io.inputs import normalize_candidates, raise_bad_items

        cands = normalize_candidates(candidates, allow_empty=True)
        ids = list(cands)
        bad = {i: f"video {i!r}: no questions in the {self.qa.dimension} QA file" for i in ids
               if i not in self.qa.questions}
        raise_bad_items(ids, bad, skip_bad_items)
        good = [i for i in ids if i not in bad]
        if not good:
            raise InputError("no usable items: no candidate video has questions in the QA file")
        questions = {i: self.qa.questions[i] for i in good}
        step1 = {(i, k): prompts.answer_user(cands[i], q) for i in good for k, (q, _) in enumerate(questions[i])}
        responses, new1, hit1 = self._ask("answer", prompts.ANSWER_SYSTEM, step1, progress)
        step2 = {(i, k): prompts.judge_user(q, a, responses[(i, k)]) for i in good
                 for k, (q, a) in enumerate(questions[i])}
        replies, new2, hit2 = self._ask("judge", prompts.JUDGE_SYSTEM, step2, progress)
        videos = {i: score_video(questions[i], [responses[(i, k)] for k in range(len(questions[i]))],
                                 [replies[(i, k)] for k in range(len(questions[i]))]) for i in good}
        errors = {i: {"error": v.error, "replies": [replies[(i, k)][:2000] for k in range(len(questions[i]))]}
                  for i, v in videos.items() if v.error}
        dropped = {i: {"score": v.score, "acc": v.acc} for i, v in videos.items()
                   if not v.error and self.zeros == "drop" and not (v.score and v.acc)}  # script line 262
        kept = [i for i in good if i not in errors and i not in dropped]
        extras: dict[str, Any] = {
            "dimension": self.qa.dimension, "qa": {i: list(videos[i].records) for i in good},
            "errors": errors, "n_errors": len(errors), "dropped_zero": dropped, "n_dropped_zero": len(dropped),
            "qa_replaced": list(self.qa.replaced), "generated": new1 + new2, "cached": hit1 + hit2,
            "requests": {"answer": new1, "judge": new2},
        }
        skipped = tuple(i for i in ids if i not in kept)
        results = []
        for metric, attr in (("vdcscore", "score"), ("vdcscore-acc", "acc")):
            if metric not in self.metrics:
                continue
            items = {i: float(getattr(videos[i], attr)) for i in kept}
            system = _mean([items[i] for i in kept])
            results.append(MetricResult(metric=metric, system=system, items=items, signature=self.signature(metric),
                                        extras=extras, skipped=skipped))
        return Report(results)

    def signature(self, metric: str = "vdcscore") -> Signature:
        """Judge model and server, decoding, the two prompts' sha256, the dimension and QA file, ``zeros``."""
        sig = dict(self.backend.signature())
        sig.pop("pad_to_square", None)
        params: dict[str, Any] = {
            **sig, **self.backend.decoding(),
            "prompts": f"{prompts.SOURCE}@answer:{prompts.ANSWER_SHA256[:16]},judge:{prompts.JUDGE_SHA256[:16]}",
            "dimension": self.qa.dimension, "qa": self.qa.sha256[:16],
            "parse": f"literal_eval<={MAX_REPLY_CHARS},depth<={MAX_DEPTH},ops<={MAX_OPERATORS},finite",
            "zeros": self.zeros,
        }
        return Signature.build(metric, **params)


def _mean(values: list[float]) -> float:
    """The script's ``sum(values) / len(values)`` (line 269: the built-in ``sum``), NaN for no values."""
    return sum(values) / len(values) if values else math.nan
