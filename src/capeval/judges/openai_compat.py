"""VisCE2 through any OpenAI-compatible chat server (vLLM, llama.cpp server, Ollama, hosted APIs).

Each request of the LLaVA judges (FLEUR, RefFLEUR, EXPERT, VisCE2) is a system message holding
``llava_v1``'s system line, then one user message: the image as a base64 data URL, then the
rendered prompt text (the reference puts ``<image>`` before the text); the server applies its
model's chat template, which for the llava-hf ports renders ``conv_llava_v1.get_prompt()``
byte for byte (:meth:`OpenAICompat.messages`). CLAIR's text-only prompt is one user message.
Standard library only (``http.client`` + threads, :mod:`.transport`).

- image: by default (``pad_to_square=True``) a non-square image is padded to a square of
  CLIP's mean colour, (122, 116, 104), as LLaVA-1.5's ``expand2square`` does before its
  processor (a server that gives the raw image to the llava-hf processor resizes and
  centre-crops it, cutting its edges off), and sent as PNG: the pixels the transformers
  backend feeds its processor.
  ``pad_to_square=False`` sends the file as it is (e.g. for LLaVA-1.6 servers, whose
  any-resolution preprocessing takes the raw image). Recorded in the signature.
- base URL: option, else ``$CAPEVAL_VISCE2_BASE_URL``, ``$OPENAI_BASE_URL``, else
  ``http://localhost:8000/v1`` (vLLM's default; Ollama: ``http://localhost:11434/v1``); one
  with credentials (``user:password@``) is refused, never printed;
- model: option, else ``$CAPEVAL_VISCE2_MODEL``, else the server's only model (``GET /models``);
- API key: option, else ``$CAPEVAL_VISCE2_API_KEY``, ``$OPENAI_API_KEY`` (none: no header);
- ``concurrency`` requests in flight; ``timeout`` seconds for the whole request (connect to
  last byte); answers over ``max_response_mb`` (16) are refused. 429, 5xx, timeouts, broken
  answers (reset, truncated, not HTTP) and malformed JSON are retried ``max_retries`` times
  with exponential backoff (``retry_backoff * 2**attempt`` seconds, or the server's
  ``Retry-After``). One-line errors at once: 401/403, an unknown model, a redirect (never
  followed: the API key would go along), an answer over the cap, a host name that does not
  resolve, and a refused connection before the server has ever answered (nothing listens:
  no use retrying; after an answer, a refusal is a restart and is retried).
- answer text: lone UTF-16 surrogates (``"\\ud800"`` in the JSON) become U+FFFD.
- decoding: ``temperature`` (0: greedy), ``seed`` (sent; servers that honour it, e.g. vLLM
  and OpenAI, are then reproducible when sampling), ``max_tokens``.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence

from capeval.errors import InputError, ResourceError, shown
from capeval.judges import transport
from capeval.judges.backends import Answer, Request, clean_text
from capeval.judges.images import data_url, mean_fill
from capeval.judges.templates import llava_v1_id, llava_v1_system

DEFAULT_BASE_URL = "http://localhost:8000/v1"
#: the largest answer read (MB): 20 top log-probs for 1,024 tokens are about 2 MB of JSON
DEFAULT_MAX_RESPONSE_MB = 16.0
_URL_MEMO = 64  # encoded images kept (a few MB at COCO sizes)
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MODEL_MISSING = re.compile(r"model.*(not found|does not exist|not exist|unknown|no such)|"
                            r"(unknown|invalid) model|not a valid model", re.IGNORECASE | re.DOTALL)


class _Retry(Exception):
    """A transient failure: try again after ``delay`` (None: the backoff schedule)."""

    def __init__(self, why: str, delay: float | None = None):
        super().__init__(why)
        self.why = why
        self.delay = delay


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _server_message(body: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body itself (one line)."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
        err = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(err, dict):
            found = err.get("message") or err.get("detail") or err
            text = found if isinstance(found, str) else shown(found, 200)  # bounded, never deep
        elif isinstance(err, str):
            text = err
    except (ValueError, RecursionError):  # not JSON, or nested too deep for the parser: the text
        pass
    return _one_line(text)


def _big_int(digits: str) -> int | float:
    """An integer literal of a server's JSON: ``int`` up to 4,000 digits, beyond that the float
    it rounds to (``inf``): ``int()`` refuses more than 4,300 digits and is quadratic below."""
    return int(digits) if len(digits) <= 4000 else float(digits)


def _json_answer(text: str) -> Any:
    """``json.loads(text)``; an answer holding an integer of thousands of digits (which
    ``json`` refuses: Python's int-string conversion limit) is read again with those integers as
    floats, so one absurd number in a field capeval does not read does not fail the answer."""
    try:
        return json.loads(text)
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
    return json.loads(text, parse_int=_big_int)


class OpenAICompat:
    """Client of an OpenAI-compatible ``/chat/completions`` endpoint (see the module docstring)."""

    name = "openai"
    #: more sampling fields sent with every request and part of :meth:`decoding` (CapArena-Auto's top_p)
    extra_body: dict[str, Any] = {}

    def __init__(self, model: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
                 concurrency: int = 4, timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0,
                 temperature: float = 0.0, seed: int | None = 0, max_new_tokens: int = 1024, top_logprobs: int = 20,
                 pad_to_square: bool = True, label: str = "visce2", max_response_mb: float = DEFAULT_MAX_RESPONSE_MB,
                 llava_system: bool = True):
        self.label = label  # the metric named in errors and environment variables
        #: send llava_v1's system line first (the LLaVA judges; not CLAIR's text-only prompt)
        self.llava_system = bool(llava_system)
        env = os.environ
        prefix = f"CAPEVAL_{label.upper().replace('-', '_')}_"
        source, url = next(((s, u) for s, u in (("option base_url", base_url), ("$" + prefix + "BASE_URL",
                                  env.get(prefix + "BASE_URL")), ("$OPENAI_BASE_URL", env.get("OPENAI_BASE_URL")))
                            if u), ("default", DEFAULT_BASE_URL))
        try:
            self.base_url = transport.parse_base_url(url, label, source)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        self.model = model or env.get(prefix + "MODEL") or None
        self.api_key = api_key or env.get(prefix + "API_KEY") or env.get("OPENAI_API_KEY") or None
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key.isprintable()
                                         or not self.api_key.isascii()):
            raise InputError(f"{self.label} api_key holds a line break, a control or a non-ASCII character "
                             "(it is sent as an HTTP header)")  # the key itself is never printed
        for name, value, low in (("concurrency", concurrency, 1), ("max_retries", max_retries, 0),
                                 ("max_new_tokens", max_new_tokens, 1), ("top_logprobs", top_logprobs, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(f"{self.label} option {name}: expected an integer >= {low}, got {value!r}")
        for name, value in (("timeout", timeout), ("retry_backoff", retry_backoff), ("temperature", temperature),
                            ("max_response_mb", max_response_mb)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (name in ("timeout", "max_response_mb") and value == 0):
                raise InputError(f"{self.label} option {name}: expected a "
                                 f"{'positive' if name in ('timeout', 'max_response_mb') else 'non-negative'} "
                                 f"number, got {value!r}")
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.retry_backoff = float(retry_backoff)
        self.temperature = float(temperature)
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.top_logprobs = top_logprobs
        self.pad_to_square = bool(pad_to_square)
        self.pad_fill = mean_fill() if self.pad_to_square else None
        self.max_response_bytes = int(max_response_mb * 2**20)
        self._reached = False  # whether the server has answered once (then a refused connection is retried)
        self.requests_sent = 0  # HTTP attempts, retries included (for benchmarks and tests)
        self._lock = threading.Lock()
        self._urls: dict[tuple[str, int, int], str] = {}

    # -- identity ------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "base_url": self.base_url, "model": self.resolve_model(),
                "template": f"server-chat+system:{llava_v1_id()}" if self.llava_system else "server-chat",
                "pad_to_square": f"clip-mean{self.pad_fill}".replace(" ", "") if self.pad_fill else False}

    def decoding(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "seed": self.seed, "max_new_tokens": self.max_new_tokens,
                **self.extra_body}

    def signature(self) -> dict[str, Any]:
        return dict(self.identity())

    def resolve_model(self) -> str:
        """The model name; asks the server (``GET /models``) when none was given and it serves one."""
        if self.model:
            return self.model
        names = self.list_models()
        if len(names) == 1:
            self.model = names[0]
            return self.model
        raise InputError(f"{self.label}: no model given and the server at {self.base_url} serves "
                         f"{len(names)} models ({', '.join(names[:10]) or 'none'}): pass model=... or set CAPEVAL_" + self.label.upper().replace('-', '_') + "_MODEL")

    def list_models(self) -> list[str]:
        """Model ids served at ``base_url`` (``GET /models``); errors are one line."""
        body = self._call("GET", "/models", None, item=None)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ResourceError(f"{self.label}: {self.base_url}/models returned no model list")
        return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]

    # -- generation ----------------------------------------------------------------
    def generate(self, requests: Sequence[Request], on_answer: Callable[[int, Answer], None],
                 progress: Any = None) -> None:
        """Send every request, ``concurrency`` at a time; ``on_answer(index, answer)`` runs in the worker.

        The first fatal error (authentication, unknown model, retries exhausted) cancels the
        requests not yet started and is raised once those in flight have finished (their
        answers are delivered, so a cache keeps them).
        """
        if not requests:
            return
        model = self.resolve_model()
        stop = threading.Event()  # set by the first failure: the workers send nothing more

        def work(index: int) -> None:
            if stop.is_set():
                return
            req = requests[index]
            try:
                answer = self.ask(req, model)
                on_answer(index, answer)
            except BaseException:
                stop.set()
                raise
            if progress is not None:
                with self._lock:
                    progress.update(1)

        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests)), thread_name_prefix=f"capeval-{self.label}")
        futures = []
        try:
            futures = [pool.submit(work, i) for i in range(len(requests))]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f in done and f.exception() is not None]
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
        finally:
            # on an error or Ctrl-C: drop the requests not started, let those in flight finish
            pool.shutdown(wait=True, cancel_futures=True)

    def ask(self, req: Request, model: str) -> Answer:
        """One chat completion for ``req`` (with retries)."""
        body: dict[str, Any] = {
            "model": model,
            "messages": self.messages(req),
            "temperature": self.temperature,
            "max_tokens": self.max_new_tokens,
            "n": 1,
            "stream": False,
        }
        body.update(self.extra_body)
        if self.seed is not None:
            body["seed"] = self.seed
        if req.logprobs and self.top_logprobs > 0:
            body["logprobs"] = True
            body["top_logprobs"] = self.top_logprobs
        data = self._call("POST", "/chat/completions", body, item=req.item)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ResourceError(f"{self.label}: item {req.item!r}: the server's answer has no choices[0].message.content "
                                f"({_one_line(shown(data, 200))})") from None
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ResourceError(f"{self.label}: item {req.item!r}: message.content is {type(content).__name__}, not text "
                                f"({_one_line(shown(content, 120))})")
        logprobs = None
        lp = choice.get("logprobs") if isinstance(choice, dict) else None
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):
            logprobs = lp["content"]
        return Answer(content, logprobs)

    def messages(self, req: Request) -> list[dict[str, Any]]:
        """The chat messages of ``req``: for the LLaVA judges (``llava_system``) first a system
        message with ``llava_v1``'s system line, then the image (if any) before the text of the
        first user turn, then the earlier turns of ``req.history``, then ``req.prompt``.

        The system line is what ``conv_llava_v1.get_prompt()`` begins with; the llava-hf chat
        templates (``chat_template.json`` since the 2024 "Fix system message" revision) print a
        system message's text parts, each followed by a space, before ``USER: <image>\n``, so
        the server renders the official prompt. It goes as a list of text parts: a template that
        iterates the content parts reads nothing from a plain string.
        """
        turns = [u for u, _ in req.history] + [req.prompt]
        out: list[dict[str, Any]] = []
        if self.llava_system:
            out.append({"role": "system", "content": [{"type": "text", "text": llava_v1_system()}]})
        for k, user in enumerate(turns):
            if k == 0 and req.image is not None:
                out.append({"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": self._data_url(req)}},
                    {"type": "text", "text": user},
                ]})
            else:  # text-only judges (CLAIR) send the plain string, as chat-only servers expect
                out.append({"role": "user", "content": user})
            if k < len(req.history):
                out.append({"role": "assistant", "content": req.history[k][1]})
        return out

    def _data_url(self, req: Request) -> str:
        """The image as a data URL; for files remembered per (path, size, mtime) for the last
        ``_URL_MEMO`` images, since every caption of an image sends the same (padded, encoded) pixels."""
        if not isinstance(req.image, (str, os.PathLike)):
            return data_url(req.image, req.item, self.pad_fill)
        try:
            st = os.stat(req.image)
        except OSError:
            return data_url(req.image, req.item, self.pad_fill)  # names the item in its error
        key = (os.fspath(req.image), st.st_size, st.st_mtime_ns)
        with self._lock:
            url = self._urls.pop(key, None)
            if url is not None:
                self._urls[key] = url  # most recent last
                return url
        url = data_url(req.image, req.item, self.pad_fill)
        with self._lock:
            self._urls[key] = url
            while len(self._urls) > _URL_MEMO:
                self._urls.pop(next(iter(self._urls)))
        return url

    def _call(self, method: str, path: str, body: dict[str, Any] | None, item: str | None) -> Any:
        """One API call with retries; returns the parsed JSON."""
        url = self.base_url + path
        what = f"item {item!r}" if item is not None else f"{method} {path}"
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return self._once(method, url, body, what)
            except _Retry as retry:
                last = retry.why
                if attempt == self.max_retries:
                    break
                delay = retry.delay if retry.delay is not None else self.retry_backoff * (2 ** attempt)
                # jitter (up to 10%) spreads the retries of concurrent requests
                time.sleep(delay * (1.0 + 0.1 * random.random()))
        raise ResourceError(f"{self.label}: {what}: {url} failed after {self.max_retries + 1} attempts: "
                            f"{self._hide(last)}")

    def _once(self, method: str, url: str, body: dict[str, Any] | None, what: str) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        with self._lock:
            self.requests_sent += 1
        try:
            reply = transport.send(method, url, data, headers, self.timeout, self.max_response_bytes, self.label)
        except transport.TransportError as exc:
            self._transport_error(exc, url, what)
        self._reached = True  # the server answered: a refused connection later is a restart, retried
        if not 200 <= reply.status < 300:
            self._http_error(reply, url, what)
        try:
            return clean_text(_json_answer(reply.body.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _Retry(f"malformed JSON in the answer ({_one_line(reply.body[:80].decode('utf-8', 'replace'))!r})") from None

    def _transport_error(self, exc: Any, url: str, what: str) -> None:
        """A retry for what a later attempt may not meet (timeouts, broken answers, a restarting
        server), else one line at once: nothing listens or the name does not resolve (no use
        waiting 30 s), or the answer is over the size cap (it would be again)."""
        if exc.kind == "refused" and not self._reached:
            raise ResourceError(f"{self.label}: cannot connect to {self.base_url} (connection refused): is the server "
                                f"running? Start it, or point -O {self.label}.base_url=URL at it") from None
        if exc.kind == "dns":
            raise ResourceError(f"{self.label}: cannot reach {self.base_url}: {exc.why}; check "
                                f"-O {self.label}.base_url") from None
        if exc.kind == "too-large":
            raise ResourceError(f"{self.label}: {what}: {url}: {exc.why}") from None
        if exc.kind == "refused":
            raise _Retry("connection refused (the server answered before; restarting?)") from None
        raise _Retry(exc.why) from None

    def _http_error(self, reply: Any, url: str, what: str) -> None:
        body = reply.body
        msg = self._hide(_server_message(body) if body else (reply.reason or ""))
        status = reply.status
        if 300 <= status < 400:  # following it would send the API key wherever it points
            where = reply.headers.get("location")
            raise ResourceError(f"{self.label}: {url} answered HTTP {status}, a redirect to "
                                f"{transport.origin(where) if where else 'nowhere'}; redirects are not followed "
                                f"(the API key would go along): set -O {self.label}.base_url to the final "
                                "address") from None
        if status in (401, 403):
            raise ResourceError(f"{self.label}: {url} refused the request (HTTP {status}: {msg}); check the API key "
                                "(option api_key, $CAPEVAL_" + self.label.upper().replace("-", "_") + "_API_KEY or $OPENAI_API_KEY)") from None
        if status in (400, 404, 422) and self.model and _MODEL_MISSING.search(msg):
            raise ResourceError(f"{self.label}: model {self.model!r} not found at {self.base_url} (HTTP {status}: {msg})"
                                f"{self._available()}") from None
        if status == 404:
            raise ResourceError(f"{self.label}: {url} not found (HTTP 404: {msg}); is base_url right? "
                                "(vLLM: http://HOST:8000/v1, Ollama: http://HOST:11434/v1)") from None
        if status in RETRY_STATUS:
            delay = None
            retry_after = reply.headers.get("retry-after")
            if retry_after:
                try:
                    delay = min(max(float(retry_after), 0.0), 60.0)
                except ValueError:
                    pass
            raise _Retry(f"HTTP {status}: {msg}", delay) from None
        raise ResourceError(f"{self.label}: {what}: HTTP {status} from {url}: {msg}") from None

    def _hide(self, text: str) -> str:
        """``text`` (a server's words) with the API key masked: a server may echo it back."""
        return text.replace(self.api_key, "***") if self.api_key else text

    def _available(self) -> str:
        """``"; the server has: a, b"`` (best effort, empty on any failure)."""
        try:
            names = self.list_models()
        except Exception:  # already reporting an error; the list is only a hint
            return ""
        return f"; the server has: {', '.join(names[:10])}" if names else ""
