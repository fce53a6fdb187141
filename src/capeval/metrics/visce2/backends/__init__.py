"""VisCE2 backends: what asks a vision-language model one question about one image.

A backend takes :class:`Request` objects (image + rendered prompt) and calls back with an
:class:`Answer` for each as soon as it has it (so the caller can cache it at once). Two ship
with capeval:

- ``transformers`` (:mod:`.transformers_llava`): LLaVA-1.5 / LLaVA-1.6 through the
  ``llava-hf`` ports, wrapped in LLaVA's ``llava_v1`` conversation as the reference does;
- ``openai`` (:mod:`.openai_compat`): any OpenAI-compatible chat server (vLLM, llama.cpp,
  Ollama, hosted APIs); the server applies its own chat template.

Both expose ``identity()`` (what the answers depend on besides the inputs: the cache key's
model part), ``decoding()``, ``signature()`` and ``generate(requests, on_answer, progress)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

#: backend names accepted by the ``backend`` option
NAMES = ("transformers", "openai")


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


@dataclass(frozen=True)
class Answer:
    """The model's text and, when asked for and returned, the token log-probabilities."""

    text: str
    logprobs: list[Any] | None = None


@runtime_checkable
class Backend(Protocol):
    name: str

    def identity(self) -> dict[str, Any]: ...

    def decoding(self) -> dict[str, Any]: ...

    def signature(self) -> dict[str, Any]: ...

    def generate(self, requests: Sequence[Request], on_answer: Callable[[int, Answer], None],
                 progress: Any = None) -> None: ...
