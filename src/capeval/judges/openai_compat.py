"""VisCE2 through any OpenAI-compatible chat server (vLLM, llama.cpp server, Ollama, hosted APIs).

Each request of the LLaVA judges (FLEUR, RefFLEUR, EXPERT, VisCE2) is a system message holding
``llava_v1``'s system line, then one user message: the image as a base64 data URL, then the
rendered prompt text (the reference puts ``<image>`` before the text); the server applies its
model's chat template, which for the llava-hf ports renders ``conv_llava_v1.get_prompt()``
byte for byte (:meth:`OpenAICompat.messages`). CLAIR's text-only prompt is one user message.
Standard library only (``urllib`` + threads).

- image: by default (``pad_to_square=True``) a non-square image is padded to a square of
  CLIP's mean colour, (122, 116, 104), as LLaVA-1.5's ``expand2square`` does before its
  processor (a server that gives the raw image to the llava-hf processor resizes and
  centre-crops it, cutting its edges off), and sent as PNG: the pixels the transformers
  backend feeds its processor.
  ``pad_to_square=False`` sends the file as it is (e.g. for LLaVA-1.6 servers, whose
  any-resolution preprocessing takes the raw image). Recorded in the signature.
- base URL: option, else ``$CAPEVAL_VISCE2_BASE_URL``, ``$OPENAI_BASE_URL``, else
  ``http://localhost:8000/v1`` (vLLM's default; Ollama: ``http://localhost:11434/v1``);
- model: option, else ``$CAPEVAL_VISCE2_MODEL``, else the server's only model (``GET /models``);
- API key: option, else ``$CAPEVAL_VISCE2_API_KEY``, ``$OPENAI_API_KEY`` (none: no header);
- ``concurrency`` requests in flight; ``timeout`` seconds per request; 429, 5xx, timeouts,
  refused connections and malformed JSON are retried ``max_retries`` times with exponential
  backoff (``retry_backoff * 2**attempt`` seconds, or the server's ``Retry-After``);
  401/403 and an unknown model stop the run at once with a one-line error.
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
import urllib.error
import urllib.request
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence

from capeval.errors import InputError, ResourceError
from capeval.judges.backends import Answer, Request
from capeval.judges.images import data_url, mean_fill
from capeval.judges.templates import llava_v1_id, llava_v1_system

DEFAULT_BASE_URL = "http://localhost:8000/v1"
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
            text = str(err.get("message") or err.get("detail") or err)
        elif isinstance(err, str):
            text = err
    except ValueError:
        pass
    return _one_line(text)


class OpenAICompat:
    """Client of an OpenAI-compatible ``/chat/completions`` endpoint (see the module docstring)."""

    name = "openai"

    def __init__(self, model: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
                 concurrency: int = 4, timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0,
                 temperature: float = 0.0, seed: int | None = 0, max_new_tokens: int = 1024, top_logprobs: int = 20,
                 pad_to_square: bool = True, label: str = "visce2", llava_system: bool = True):
        self.label = label  # the metric named in errors and environment variables
        #: send llava_v1's system line first (the LLaVA judges; not CLAIR's text-only prompt)
        self.llava_system = bool(llava_system)
        env = os.environ
        prefix = f"CAPEVAL_{label.upper().replace('-', '_')}_"
        self.base_url = (base_url or env.get(prefix + "BASE_URL") or env.get("OPENAI_BASE_URL")
                         or DEFAULT_BASE_URL).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise InputError(f"{self.label} base_url must start with http:// or https://, got {self.base_url!r}")
        self.model = model or env.get(prefix + "MODEL") or None
        self.api_key = api_key or env.get(prefix + "API_KEY") or env.get("OPENAI_API_KEY") or None
        for name, value, low in (("concurrency", concurrency, 1), ("max_retries", max_retries, 0),
                                 ("max_new_tokens", max_new_tokens, 1), ("top_logprobs", top_logprobs, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(f"{self.label} option {name}: expected an integer >= {low}, got {value!r}")
        for name, value in (("timeout", timeout), ("retry_backoff", retry_backoff), ("temperature", temperature)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (name == "timeout" and value == 0):
                raise InputError(f"{self.label} option {name}: expected a {'positive' if name == 'timeout' else 'non-negative'} "
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
        self.requests_sent = 0  # HTTP attempts, retries included (for benchmarks and tests)
        self._lock = threading.Lock()
        self._urls: dict[tuple[str, int, int], str] = {}

    # -- identity ------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "base_url": self.base_url, "model": self.resolve_model(),
                "template": f"server-chat+system:{llava_v1_id()}" if self.llava_system else "server-chat",
                "pad_to_square": f"clip-mean{self.pad_fill}".replace(" ", "") if self.pad_fill else False}

    def decoding(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "seed": self.seed, "max_new_tokens": self.max_new_tokens}

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
                                f"({_one_line(json.dumps(data)[:200])})") from None
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ResourceError(f"{self.label}: item {req.item!r}: message.content is {type(content).__name__}, not text")
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
        raise ResourceError(f"{self.label}: {what}: {url} failed after {self.max_retries + 1} attempts: {last}")

    def _once(self, method: str, url: str, body: dict[str, Any] | None, what: str) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        with self._lock:
            self.requests_sent += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            self._http_error(exc, url, what)
        except TimeoutError:  # socket.timeout is TimeoutError since Python 3.10
            raise _Retry(f"timed out after {self.timeout:g} s") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise _Retry(f"timed out after {self.timeout:g} s") from None
            raise _Retry(f"cannot reach the server ({_one_line(str(reason))}); is it running?") from None
        except (ConnectionError, OSError) as exc:  # reset / closed mid-answer
            raise _Retry(f"connection error ({_one_line(str(exc))})") from None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _Retry(f"malformed JSON in the answer ({_one_line(raw[:80].decode('utf-8', 'replace'))!r})") from None

    def _http_error(self, exc: urllib.error.HTTPError, url: str, what: str) -> None:
        try:
            body = exc.read()
        except Exception:  # the body is a courtesy; the status decides
            body = b""
        msg = _server_message(body) if body else (exc.reason or "")
        status = exc.code
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
            retry_after = exc.headers.get("Retry-After") if exc.headers else None
            if retry_after:
                try:
                    delay = min(max(float(retry_after), 0.0), 60.0)
                except ValueError:
                    pass
            raise _Retry(f"HTTP {status}: {msg}", delay) from None
        raise ResourceError(f"{self.label}: {what}: HTTP {status} from {url}: {msg}") from None

    def _available(self) -> str:
        """``"; the server has: a, b"`` (best effort, empty on any failure)."""
        try:
            names = self.list_models()
        except Exception:  # already reporting an error; the list is only a hint
            return ""
        return f"; the server has: {', '.join(names[:10])}" if names else ""
