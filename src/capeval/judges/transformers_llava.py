"""VisCE2 with LLaVA-1.5 / LLaVA-1.6 in ``transformers`` (the ``llava-hf`` ports), as the reference runs it.

The reference (Silviase/VisCE2 ``src/models/llava_v15.py`` / ``llava_v16.py``) loads
``liuhaotian/llava-v1.5-{7b,13b}`` / ``llava-v1.6-vicuna-*`` with LLaVA's own code in 4-bit
(nf4, double quantisation, fp16 compute), wraps each prompt in the ``llava_v1`` conversation
(``<system> USER: <image>\\n<prompt> ASSISTANT:``), tokenises the text before and after
``<image>`` separately (LLaVA's ``tokenizer_image_token``: one BOS, at the start), pads
LLaVA-1.5 images to a square filled with the CLIP mean colour before the CLIP preprocessing
(``image_aspect_ratio: pad``), samples with temperature 0.2 (top-k 50, top-p 1: the
``transformers`` defaults of the time), stops at ``</s>`` and keeps at most 1024 new tokens.

Here the same conversation string, the same token layout (the ``<image>`` placeholder
expanded to as many image tokens as the ``llava-hf`` processor produces for the image) and
the same square padding feed ``LlavaForConditionalGeneration`` /
``LlavaNextForConditionalGeneration``; batches are left-padded; decoding is greedy unless
``temperature > 0`` (then seeded per batch from ``seed`` and the batch's prompts).
``quantization="4bit"`` loads as the reference does (needs ``bitsandbytes``, CUDA).
"""

from __future__ import annotations

import hashlib
import os
import weakref
from typing import Any, Callable, Sequence

from capeval.errors import InputError, ResourceError
from capeval.judges import templates
from capeval.judges.backends import Answer, Request
from capeval.judges.images import expand_to_square, mean_fill, to_pil
from capeval.judges.local_model import locate

DEFAULT_MODEL = "llava-hf/llava-1.5-13b-hf"  # the paper's LLaVA-1.5-13B
#: short names and the reference's model ids -> their llava-hf ports
MODELS = {
    "llava-1.5-7b": "llava-hf/llava-1.5-7b-hf",
    "llava-1.5-13b": "llava-hf/llava-1.5-13b-hf",
    "llava-1.6-vicuna-7b": "llava-hf/llava-v1.6-vicuna-7b-hf",
    "llava-1.6-vicuna-13b": "llava-hf/llava-v1.6-vicuna-13b-hf",
    "liuhaotian/llava-v1.5-7b": "llava-hf/llava-1.5-7b-hf",
    "liuhaotian/llava-v1.5-13b": "llava-hf/llava-1.5-13b-hf",
    "liuhaotian/llava-v1.6-vicuna-7b": "llava-hf/llava-v1.6-vicuna-7b-hf",
    "liuhaotian/llava-v1.6-vicuna-13b": "llava-hf/llava-v1.6-vicuna-13b-hf",
}
DTYPES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
          "bfloat16": "bfloat16", "bf16": "bfloat16"}
QUANTIZATIONS = ("none", "4bit")


def check_local(label: str, device: str, dtype: str, batch_size: Any, max_new_tokens: Any, temperature: Any,
                half_on_cpu: bool = False) -> str:
    """The torch dtype name of a local backend (``auto``: float16 on CUDA or when ``half_on_cpu``,
    else float32) after checking its numeric settings; one-line errors naming ``label``'s option."""
    if dtype == "auto":
        dtype = "float16" if device.startswith("cuda") or half_on_cpu else "float32"
    if dtype not in DTYPES:
        raise InputError(f"{label} option dtype: expected auto, float32, float16 or bfloat16, got {dtype!r}")
    for opt, value in (("batch_size", batch_size), ("max_new_tokens", max_new_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{label} option {opt}: expected an integer >= 1, got {value!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise InputError(f"{label} option temperature: expected a number >= 0, got {temperature!r}")
    return DTYPES[dtype]


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """``(input_ids, attention_mask)`` with every sequence ending where generation starts."""
    import torch

    width = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for k, s in enumerate(seqs):
        input_ids[k, width - len(s):] = torch.tensor(list(s), dtype=torch.long)
        mask[k, width - len(s):] = 1
    return input_ids, mask
#: sampling as the reference's ``generate(do_sample=True, temperature=0.2)`` got it then
SAMPLING_TOP_K, SAMPLING_TOP_P = 50, 1.0

# loaded models shared by every scorer in the process (visce2 and visce2-ref may be built
# by different Evaluators); freed when no scorer holds them any more
_SHARED: "weakref.WeakValueDictionary[tuple, Loaded]" = weakref.WeakValueDictionary()


class Loaded:
    """A loaded model + processor, and what it is (``model_type``, resolved ``commit``)."""

    def __init__(self, model: Any, processor: Any, commit: str | None = None):
        self.model = model
        self.processor = processor
        self.model_type = getattr(model.config, "model_type", "llava")
        self.commit = commit


class TransformersLlava:
    """LLaVA through ``transformers``; loads lazily, on the first generation (cached runs load nothing)."""

    name = "transformers"

    def __init__(self, model: str | None = None, *, device: str = "cpu", dtype: str = "auto",
                 quantization: str | None = None, revision: str | None = None, batch_size: int = 8,
                 temperature: float = 0.0, seed: int | None = 0, max_new_tokens: int = 1024,
                 pad_to_square: bool = True, loaded: Loaded | None = None, label: str = "visce2",
                 native_vocab: bool = False):
        self.label = label  # the metric named in errors
        # FLEUR/EXPERT's official LLaVA has the 32,000 tokens of Llama's vocabulary; llava-hf ports (and
        # `capeval convert expert`) add <image>/<pad> and pad the output layer to 32,064 rows. Those rows
        # are suppressed (-inf) so greedy decoding and the digit softmax are the official ones exactly.
        self.native_vocab = bool(native_vocab)
        from capeval._optional import require

        require("torch", purpose=f"{label} backend='transformers'")
        require("transformers", purpose=f"{label} backend='transformers'")
        require("PIL", purpose=f"{label} images")
        self.model_name = MODELS.get(model or "", model or DEFAULT_MODEL)
        self.device = device or "cpu"
        self.quantization = (quantization or "none").lower()
        if self.quantization not in QUANTIZATIONS:
            raise InputError(f"{label} option quantization: expected one of {', '.join(QUANTIZATIONS)}, got {quantization!r}")
        if self.quantization == "4bit":
            require("bitsandbytes", purpose=f"{label} quantization='4bit'")
        self.dtype = check_local(label, self.device, dtype, batch_size, max_new_tokens, temperature,
                                 half_on_cpu=self.quantization == "4bit")
        self.revision = revision
        self.batch_size = batch_size
        self.temperature = float(temperature)
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.pad_to_square = pad_to_square
        self._loaded = loaded

    @classmethod
    def from_loaded(cls, model: Any, processor: Any, name: str, **options: Any) -> "TransformersLlava":
        """A backend around an already built model and processor (tests, custom checkpoints)."""
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        options.setdefault("dtype", dtype)
        options.setdefault("device", str(next(model.parameters()).device))
        return cls(name, loaded=Loaded(model, processor), **options)

    # -- identity ------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name, "model": self.model_name, "revision": self.revision or "default",
            "quantization": self.quantization, "dtype": self.dtype,
            "template": templates.llava_v1_id(),
            "pad_to_square": bool(self.pad_to_square),
            **({"vocab": "native"} if self.native_vocab else {}),
        }

    def decoding(self) -> dict[str, Any]:
        if self.temperature > 0:
            return {"temperature": self.temperature, "top_k": SAMPLING_TOP_K, "top_p": SAMPLING_TOP_P,
                    "seed": self.seed, "max_new_tokens": self.max_new_tokens}
        return {"temperature": 0.0, "max_new_tokens": self.max_new_tokens}

    def signature(self) -> dict[str, Any]:
        import torch
        import transformers

        out = self.identity()
        if self._loaded is not None and self._loaded.commit:
            out["commit"] = self._loaded.commit
        out["versions"] = {"transformers": transformers.__version__, "torch": torch.__version__}
        return out

    # -- loading -------------------------------------------------------------------
    def load(self) -> Loaded:
        """The model and processor, loaded once per process for the same name/revision/device/dtype/quantization."""
        if self._loaded is None:
            key = (self.model_name, self.revision, self.device, self.dtype, self.quantization)
            loaded = _SHARED.get(key)
            if loaded is None:
                loaded = _load(self.model_name, self.revision, self.device, self.dtype, self.quantization, self.label)
                _SHARED[key] = loaded
            self._loaded = loaded
        return self._loaded

    # -- generation ----------------------------------------------------------------
    def generate(self, requests: Sequence[Request], on_answer: Callable[[int, Answer], None],
                 progress: Any = None) -> None:
        """Answer ``requests`` in left-padded batches (longest prompts first); ``on_answer`` after each batch."""
        if not requests:
            return
        loaded = self.load()
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i].prompt))
        for start in range(0, len(order), self.batch_size):
            idx = order[start: start + self.batch_size]
            answers = self._generate_batch(loaded, [requests[i] for i in idx])
            for i, answer in zip(idx, answers):
                on_answer(i, answer)
            if progress is not None:
                progress.update(len(idx))

    def token_ids(self, loaded: Loaded, prompt: str, n_image_tokens: int, image_token_id: int,
                  history: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Token ids of the ``llava_v1`` conversation for ``prompt``, as LLaVA's ``tokenizer_image_token``.

        The text before and after the image is tokenised separately; the after-part's BOS is
        dropped; the image placeholder becomes ``n_image_tokens`` image tokens.
        """
        tok = loaded.processor.tokenizer
        before, after = templates.llava_v1_turns(prompt, history)
        head = list(tok(before).input_ids)
        tail = list(tok(after).input_ids)
        if head and head[0] == tok.bos_token_id and tail and tail[0] == tok.bos_token_id:
            tail = tail[1:]
        return head + [image_token_id] * n_image_tokens + tail

    def _generate_batch(self, loaded: Loaded, reqs: list[Request]) -> list[Answer]:
        import torch
        from transformers import GenerationConfig

        proc, model = loaded.processor, loaded.model
        tok = proc.tokenizer
        for r in reqs:
            if r.image is None:
                raise InputError(f"{self.label}: item {r.item!r}: the transformers backend runs LLaVA and needs an image")
        images = [to_pil(r.image, r.item) for r in reqs]
        if self.pad_to_square and loaded.model_type == "llava":
            fill = mean_fill(getattr(proc.image_processor, "image_mean", None) or (0.0, 0.0, 0.0))
            images = [expand_to_square(im, fill) for im in images]
        image_token = getattr(proc, "image_token", "<image>")
        image_token_id = getattr(proc, "image_token_id", None)
        if image_token_id is None:
            image_token_id = tok.convert_tokens_to_ids(image_token)
        # the processor expands one placeholder per image to the number of image features
        enc = proc(text=[image_token] * len(reqs), images=images, return_tensors="pt", padding=True)
        counts = (enc["input_ids"] == image_token_id).sum(dim=1).tolist()
        seqs = [self.token_ids(loaded, r.prompt, n, image_token_id, r.history) for r, n in zip(reqs, counts)]
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        input_ids, mask = left_pad(seqs, pad_id)
        width = input_ids.shape[1]
        device = next(model.parameters()).device
        extra: dict[str, Any] = {"pixel_values": enc["pixel_values"].to(device, dtype=getattr(torch, self.dtype))}
        if "image_sizes" in enc:
            extra["image_sizes"] = enc["image_sizes"].to(device)
        want_lp = any(r.logprobs for r in reqs)
        config: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "pad_token_id": pad_id,
                                  "eos_token_id": tok.eos_token_id, "do_sample": self.temperature > 0}
        extra_rows = self.added_rows(tok, model) if self.native_vocab else []
        if extra_rows:
            config["suppress_tokens"] = extra_rows  # scores (and so the digit softmax) get -inf there
        if self.temperature > 0:
            config.update(temperature=self.temperature, top_k=SAMPLING_TOP_K, top_p=SAMPLING_TOP_P)
            blob = f"{self.seed}|" + "|".join(hashlib.sha256(r.prompt.encode()).hexdigest() for r in reqs)
            torch.manual_seed(int.from_bytes(hashlib.sha256(blob.encode()).digest()[:4], "little"))
        with torch.inference_mode():
            out = model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                 generation_config=GenerationConfig(**config), output_scores=want_lp,
                                 return_dict_in_generate=True, **extra)
        new = out.sequences[:, width:]
        texts = [t.strip() for t in tok.batch_decode(new, skip_special_tokens=True)]
        if not want_lp:
            return [Answer(t) for t in texts]
        return [Answer(t, self._token_logprobs(tok, new[k], [s[k] for s in out.scores]) if r.logprobs else None)
                for k, (t, r) in enumerate(zip(texts, reqs))]

    @staticmethod
    def added_rows(tok: Any, model: Any) -> list[int]:
        """Output rows past the tokenizer's base vocabulary (added tokens, padding to a multiple of 64)."""
        return list(range(int(tok.vocab_size), int(model.get_output_embeddings().weight.shape[0])))

    @staticmethod
    def digit_ids(tok: Any) -> list[int]:
        """Token ids of the digits 0-9 as FLEUR/EXPERT find them: ``tokenizer.encode(str(d))[-1]``."""
        return [tok.encode(str(d))[-1] for d in range(10)]

    def _token_logprobs(self, tok: Any, ids: Any, scores: list[Any]) -> list[dict[str, Any]]:
        """Per generated token (up to the end of sequence): its text, log-probability and the
        exact log-softmax (float64; over the native vocabulary when ``native_vocab``, else all rows) of
        the ten digit tokens, as ``top_logprobs``."""
        import torch

        digits = self.digit_ids(tok)
        out: list[dict[str, Any]] = []
        for tid, logits in zip(ids.tolist(), scores):
            if tid == tok.eos_token_id:  # generate() pads finished sequences after it
                break
            lsm = torch.log_softmax(logits.double(), dim=-1)
            out.append({"token": tok.decode([tid], skip_special_tokens=True), "id": int(tid),
                        "logprob": float(lsm[tid]),
                        "top_logprobs": [{"token": str(d), "logprob": float(lsm[i])} for d, i in enumerate(digits)]})
        return out


def _load(name: str, revision: str | None, device: str, dtype: str, quantization: str, label: str = "visce2") -> Loaded:
    import torch
    import transformers

    def fail(what: str, exc: BaseException) -> ResourceError:
        msg = " ".join(str(exc).split())[:300]
        return ResourceError(f"{label}: cannot load {what} of {name!r}"
                             f"{'@' + revision if revision else ''}: {type(exc).__name__}: {msg}")

    folder = locate(name, revision, label)  # offline: a missing model is one line naming `capeval download`
    try:
        config = transformers.AutoConfig.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise fail("the config", exc) from None
    classes = {"llava": "LlavaForConditionalGeneration", "llava_next": "LlavaNextForConditionalGeneration"}
    if config.model_type not in classes:
        raise ResourceError(f"{label}: {name!r} is a {config.model_type!r} model; the transformers backend runs "
                            "LLaVA-1.5 (llava) and LLaVA-1.6 (llava_next) checkpoints such as llava-hf/llava-1.5-13b-hf")
    cls = getattr(transformers, classes[config.model_type])
    torch_dtype = getattr(torch, dtype)
    major = int(transformers.__version__.split(".")[0])
    kwargs: dict[str, Any] = {("dtype" if major >= 5 else "torch_dtype"): torch_dtype}
    if quantization == "4bit":
        kwargs["quantization_config"] = transformers.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16, bnb_4bit_use_double_quant=True,
            bnb_4bit_quant_type="nf4")
        kwargs["device_map"] = {"": device}
    try:
        model = cls.from_pretrained(folder, **kwargs)
        processor = transformers.AutoProcessor.from_pretrained(folder)
    except (OSError, ValueError, ImportError) as exc:
        raise fail("the weights", exc) from None
    if quantization != "4bit":
        model = model.to(device)
    model.eval()
    commit = getattr(config, "_commit_hash", None)
    if commit is None and os.path.isdir(name):
        commit = "local"
    elif commit is None:  # the Hugging Face cache's snapshot folder is named by its commit
        commit = os.path.basename(folder.rstrip("/"))
    return Loaded(model, processor, commit)
