"""A text-only chat LLM in ``transformers`` (``AutoModelForCausalLM`` + ``AutoTokenizer``): CLAIR's local backend.

CLAIR's official code (DavidMChan/clair ``clair.py``) calls ``grazier``'s ``LLMEngine`` for
``"chat-gpt"``, a chat engine wrapped as a completion engine (grazier
``engines/llm/chat_engine.py``): the formatted prompt becomes ONE user turn of a conversation,
sent to ``chat.completions`` as ``[{"role": "user", "content": prompt}]`` (no system message),
temperature 0. This backend sends the same message to a local model the way an
OpenAI-compatible server (vLLM) does for that request:

- the tokenizer's own chat template renders ``[{"role": "user", "content": prompt}]`` with
  ``add_generation_prompt=True`` to a string, which is tokenised with
  ``add_special_tokens=False`` (vLLM's chat default: the template writes BOS itself);
  a model without a chat template is refused (vLLM refuses it too; CLAIR asks a chat model);
- decoding: greedy by default (``temperature=0``, the official); ``temperature > 0`` samples
  with the OpenAI API's defaults (``top_p`` 1, no top-k, no repetition penalty), seeded per
  batch from ``seed`` and the batch's prompts; at most ``max_new_tokens``; generation stops at
  the tokenizer's EOS and at the model's ``generation_config.json`` ``eos_token_id`` (the stop
  tokens vLLM uses, e.g. Llama-3's ``<|eot_id|>``); nothing else of that file is used
  (vLLM's ``--generation-config vllm`` gives the same request defaults);
- the answer is the generated tokens up to the first stop token, decoded with
  ``skip_special_tokens=True`` (vLLM's default), not stripped;
- batches of ``batch_size`` prompts, left-padded (longest first), with an attention mask.

Identity (the cache key's model part): the model name, ``revision``, ``dtype``, the sha256 of
the chat template, and for a local folder the sha256 of its files (:mod:`.model_id`).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Sequence

from capeval.errors import InputError, ResourceError
from capeval.judges.local_model import locate
from capeval.judges.backends import Answer, Request
from capeval.judges.transformers_llava import check_local, left_pad


class TransformersText:
    """A chat LLM through ``transformers``; loads lazily (a cached run loads the tokenizer only)."""

    name = "transformers"

    def __init__(self, model: str | None, *, device: str = "cpu", dtype: str = "auto", revision: str | None = None,
                 batch_size: int = 8, temperature: float = 0.0, seed: int | None = 0, max_new_tokens: int = 1024,
                 label: str = "clair", loaded: tuple[Any, Any] | None = None):
        from capeval._optional import require

        self.label = label
        require("torch", purpose=f"{label} backend='transformers'")
        require("transformers", purpose=f"{label} backend='transformers'")
        if not model:
            raise InputError(f"{label} backend='transformers' needs model=<folder or Hugging Face name of a chat LLM>")
        self.model_name = str(model)
        self.device = device or "cpu"
        self.dtype = check_local(label, self.device, dtype, batch_size, max_new_tokens, temperature)
        self.revision = revision
        self.batch_size = batch_size
        self.temperature = float(temperature)
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self._model = loaded[0] if loaded else None
        self._tokenizer = loaded[1] if loaded else None
        self._given = loaded is not None
        self._weights: str | None = None
        self._where: str | None = None  # the folder the model loads from (located on first use)

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, name: str, **options: Any) -> "TransformersText":
        """A backend around an already built model and tokenizer (tests, custom checkpoints)."""
        options.setdefault("dtype", str(next(model.parameters()).dtype).removeprefix("torch."))
        options.setdefault("device", str(next(model.parameters()).device))
        return cls(name, loaded=(model, tokenizer), **options)

    # -- identity ------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        tok = self.tokenizer()
        if self._weights is None:
            if self._given:
                self._weights = "in-memory"
            elif os.path.isdir(self.model_name):
                from capeval.judges.model_id import folder_sha256

                self._weights = "sha256:" + folder_sha256(self.model_name)
            else:
                self._weights = "hub"  # name + revision identify it
        template = hashlib.sha256(str(tok.chat_template).encode("utf-8")).hexdigest()[:16]
        return {"backend": self.name, "model": self.model_name, "revision": self.revision or "default",
                "weights": self._weights, "dtype": self.dtype, "template": f"chat-template@{template}"}

    def decoding(self) -> dict[str, Any]:
        if self.temperature > 0:
            return {"temperature": self.temperature, "top_p": 1.0, "top_k": "off", "seed": self.seed,
                    "max_new_tokens": self.max_new_tokens}
        return {"temperature": 0.0, "max_new_tokens": self.max_new_tokens}

    def signature(self) -> dict[str, Any]:
        import torch
        import transformers

        out = self.identity()
        out["versions"] = {"transformers": transformers.__version__, "torch": torch.__version__}
        return out

    # -- loading -------------------------------------------------------------------
    def _fail(self, what: str, exc: BaseException) -> ResourceError:
        msg = " ".join(str(exc).split())[:300]
        return ResourceError(f"{self.label}: cannot load {what} of {self.model_name!r}"
                             f"{'@' + self.revision if self.revision else ''}: {type(exc).__name__}: {msg}")

    def _folder(self) -> str:
        """Where the model is on this machine (one line naming `capeval download` when nowhere)."""
        if self._where is None:
            self._where = locate(self.model_name, self.revision, self.label)
        return self._where

    def tokenizer(self) -> Any:
        """The tokenizer (loaded once); refused without a chat template."""
        if self._tokenizer is None:
            import transformers

            folder = self._folder()
            try:
                self._tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
            except (OSError, ValueError) as exc:
                raise self._fail("the tokenizer", exc) from None
        if not getattr(self._tokenizer, "chat_template", None):
            raise ResourceError(f"{self.label}: {self.model_name!r} has no chat template; the official {self.label} "
                                "sends its prompt as a chat message: use a chat (instruction-tuned) model")
        return self._tokenizer

    def model(self) -> Any:
        """The causal LM (loaded once, on the first generation)."""
        if self._model is None:
            import torch
            import transformers

            major = int(transformers.__version__.split(".")[0])
            kwargs = {("dtype" if major >= 5 else "torch_dtype"): getattr(torch, self.dtype)}
            folder = self._folder()
            try:
                model = transformers.AutoModelForCausalLM.from_pretrained(folder, **kwargs)
            except (OSError, ValueError, ImportError) as exc:
                raise self._fail("the weights", exc) from None
            self._model = model.to(self.device).eval()
        return self._model

    # -- the model input -------------------------------------------------------------
    def render(self, req: Request) -> str:
        """The chat template applied to the request's messages (earlier turns, then the prompt),
        with the generation prompt: the text a server renders for the same messages."""
        messages: list[dict[str, str]] = []
        for user, assistant in req.history:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        messages.append({"role": "user", "content": req.prompt})
        return self.tokenizer().apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def token_ids(self, req: Request) -> list[int]:
        """:meth:`render` tokenised without added special tokens (the template writes them)."""
        if req.image is not None:
            raise InputError(f"{self.label}: item {req.item!r}: the text-only transformers backend takes no image")
        return list(self.tokenizer()(self.render(req), add_special_tokens=False).input_ids)

    def stop_ids(self) -> list[int]:
        """The tokenizer's EOS and the model's ``generation_config`` ``eos_token_id`` (one or several)."""
        out: list[int] = []
        tok, model = self.tokenizer(), self.model()
        extra = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for tid in [tok.eos_token_id] + (extra if isinstance(extra, (list, tuple)) else [extra]):
            if tid is not None and int(tid) not in out:
                out.append(int(tid))
        return out

    # -- generation ----------------------------------------------------------------
    def generate(self, requests: Sequence[Request], on_answer: Callable[[int, Answer], None],
                 progress: Any = None) -> None:
        """Answer ``requests`` in left-padded batches (longest first); ``on_answer`` after each batch."""
        if not requests:
            return
        seqs = [self.token_ids(r) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: -len(seqs[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start: start + self.batch_size]
            texts = self._generate_batch([seqs[i] for i in idx], [requests[i].prompt for i in idx])
            for i, text in zip(idx, texts):
                on_answer(i, Answer(text))
            if progress is not None:
                progress.update(len(idx))

    def _generate_batch(self, seqs: list[list[int]], prompts: list[str]) -> list[str]:
        import torch
        from transformers import GenerationConfig

        tok, model = self.tokenizer(), self.model()
        stops = self.stop_ids()
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else stops[0]
        input_ids, mask = left_pad(seqs, pad_id)
        width = input_ids.shape[1]
        config: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "pad_token_id": pad_id,
                                  "eos_token_id": stops, "do_sample": self.temperature > 0,
                                  "repetition_penalty": 1.0}
        if self.temperature > 0:
            config.update(temperature=self.temperature, top_p=1.0, top_k=0)
            blob = f"{self.seed}|" + "|".join(hashlib.sha256(p.encode()).hexdigest() for p in prompts)
            torch.manual_seed(int.from_bytes(hashlib.sha256(blob.encode()).digest()[:4], "little"))
        device = next(model.parameters()).device
        with torch.inference_mode():
            out = model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                 generation_config=GenerationConfig(**config))
        ids = getattr(out, "sequences", out)  # a generation_config.json may ask for a dict
        texts = []
        for row in ids[:, width:].tolist():
            cut = next((k for k, t in enumerate(row) if t in stops), len(row))
            texts.append(tok.decode(row[:cut], skip_special_tokens=True))
        return texts
