"""Judge backends: what asks a (vision-)language model one question, about one image or none.

A backend takes :class:`Request` objects (image + rendered prompt) and calls back with an
:class:`Answer` for each as soon as it has it (so the caller can cache it at once). Three ship
with capeval:

- ``transformers`` (:mod:`.transformers_llava`): LLaVA-1.5 / LLaVA-1.6 through the
  ``llava-hf`` ports, wrapped in LLaVA's ``llava_v1`` conversation as the reference does;
- ``transformers`` for the text-only judges (:mod:`.transformers_text`): a chat LLM, the
  prompt as one user message through the tokenizer's chat template, as a server applies it;
- ``openai`` (:mod:`.openai_compat`): any OpenAI-compatible chat server (vLLM, llama.cpp,
  Ollama, hosted APIs); the server applies its own chat template.

All expose ``identity()`` (what the answers depend on besides the inputs: the cache key's
model part), ``decoding()``, ``signature()`` and ``generate(requests, on_answer, progress)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

#: backend names accepted by the ``backend`` option
NAMES = ("transformers", "openai")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: Any) -> Any:
    """``value`` (a string, or lists / dicts of them) with every lone surrogate replaced by U+FFFD.

    JSON may escape half of a UTF-16 pair (``"\\ud800"``); Python then holds a string that
    UTF-8 cannot encode, and writing the cache or the results would fail. ``json.loads``
    already joins escaped pairs, so only lone halves remain to replace.
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [clean_text(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k): clean_text(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Request:
    """One generation: ``image`` (path, PIL image or array) and the rendered ``prompt``.

    ``item``: an item id that uses it (named in errors); ``logprobs``: ask for token
    log-probabilities (servers that return them).
    """

    item: str
    image: Any
    prompt: str
    logprobs: bool = False
    #: earlier turns ``((user, assistant), ...)`` of the same conversation (EXPERT's explanation
    #: turn); the image belongs to the first user turn
    history: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Answer:
    """The model's text and, when asked for and returned, the token log-probabilities."""

    text: str
    #: one entry per generated token, OpenAI's ``logprobs.content`` layout:
    #: ``{"token": str, "logprob": float, "top_logprobs": [{"token": str, "logprob": float}]}``;
    #: the transformers backend lists the ten digit tokens ``"0"``-``"9"`` as ``top_logprobs``
    #: with their exact log-softmax over the whole vocabulary (what FLEUR's smoothing reads)
    logprobs: list[Any] | None = None


@runtime_checkable
class Backend(Protocol):
    name: str

    def identity(self) -> dict[str, Any]: ...

    def decoding(self) -> dict[str, Any]: ...

    def signature(self) -> dict[str, Any]: ...

    def generate(self, requests: Sequence[Request], on_answer: Callable[[int, Answer], None],
                 progress: Any = None) -> None: ...
