"""The FACTUAL textual scene-graph parser (Li et al., Findings of ACL 2023) through transformers.

HICE-S takes its subject-predicate-object phrases from a textual scene-graph parser (Zeng et
al. 2024, Sec. 3.2.2 and 4.1). The FACTUAL models are flan-t5 seq2seq models on the
Hugging Face hub (default ``lizhuang144/flan-t5-base-VG-factual-sg``); their input is
``"Generate Scene Graph: " + caption`` and their output a string of facts::

    ( man , is , young ) , ( man , v:ride , horse ) , ( dogs , is , 2 ) , ( cat )

Read from zhuang-li/FactualSceneGraph (``src/factual_scene_graph/parser/scene_graph_parser.py``
``parse``: prompt, ``max_length`` 64 in / 128 out, beam search with 5 beams and early
stopping, ``skip_special_tokens``; ``utils.py``: the fact format, ``v:``/``pv:`` verb marks and
``:N`` entity ids, a truncated last fact dropped). :func:`parse_facts` is capeval's own reader
of that format: facts in order of first appearance, each once; a fact with three fields is a
triple, with one field an entity; anything else (a truncated tail, a stray word) is dropped.
:func:`fact_phrases` turns facts into the short texts HICE-S embeds (``"man ride horse"``,
``"man is young"``, ``"cat"``).
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Sequence

from capeval import truncation
from capeval.errors import ResourceError

DEFAULT_CHECKPOINT = "lizhuang144/flan-t5-base-VG-factual-sg"
PROMPT = "Generate Scene Graph: "
VERSION = "1"  # bump when parse_facts / fact_phrases change

_FACT = re.compile(r"\(([^()]*)\)")
_MARK = re.compile(r"^(?:v|pv):")  # FACTUAL's verb / passive-verb marks
_ENTITY_ID = re.compile(r":\d+$")  # FACTUAL's ids of repeated entities ("man:1")


def _clean_field(text: str, strip_marks: bool) -> str:
    text = " ".join(text.split())
    if strip_marks:
        text = _ENTITY_ID.sub("", _MARK.sub("", text)).strip()
    return text


def parse_facts(output: str, strip_marks: bool = True) -> list[tuple[str, ...]]:
    """Facts of one FACTUAL output string: ``(subject, predicate, object)`` triples and
    ``(entity,)`` singletons, in order of first appearance, duplicates removed.

    Only complete parenthesised groups count, so a fact cut off by the output length limit
    is dropped. ``strip_marks``: remove ``v:``/``pv:`` and ``:N`` ids (FACTUAL's
    ``remove_factual_chars``). Groups with two or more than three fields, or an empty field,
    are malformed and dropped.
    """
    facts: dict[tuple[str, ...], None] = {}
    for body in _FACT.findall(output or ""):
        fields = tuple(_clean_field(f, strip_marks) for f in body.split(","))
        if len(fields) not in (1, 3) or any(not f for f in fields):
            continue
        facts.setdefault(tuple(f.lower() for f in fields))
    return list(facts)


def fact_phrases(facts: Sequence[Sequence[str]]) -> list[str]:
    """Short texts of facts: a triple as ``"subject predicate object"``, an entity alone; each once.

    An entity that also appears in a triple adds nothing (its triple already names it).
    """
    named = {w for f in facts if len(f) == 3 for w in (f[0], f[2])}
    out: dict[str, None] = {}
    for f in facts:
        if len(f) == 3:
            out.setdefault(" ".join(f))
        elif f[0] not in named:
            out.setdefault(f[0])
    return list(out)


class FactualParser:
    """Caption -> phrases with a FACTUAL flan-t5 model (loaded by hub name or folder, or given).

    ``model``/``tokenizer``: loaded objects (tests, custom fine-tunes); otherwise
    ``AutoModelForSeq2SeqLM`` / ``AutoTokenizer`` ``from_pretrained`` of (:func:`locate`) a
    folder, the folder ``capeval download factual`` wrote for a hub name of the checkpoint
    table, or the hub name itself (the Hugging Face cache). Each distinct caption is generated
    once per parser.
    """

    name = "factual"

    def __init__(self, checkpoint: str | os.PathLike[str] = DEFAULT_CHECKPOINT, *, model: Any = None,
                 tokenizer: Any = None, device: str = "cpu", beam_size: int = 5, max_input_len: int = 64,
                 max_output_len: int = 128, batch_size: int = 32,
                 checkpoint_dir: str | os.PathLike[str] | None = None):
        self.checkpoint = os.fspath(checkpoint)
        self.device = device
        self.beam_size, self.batch_size = int(beam_size), int(batch_size)
        self.max_input_len, self.max_output_len = int(max_input_len), int(max_output_len)
        source = locate(self.checkpoint, checkpoint_dir) if model is None or tokenizer is None else self.checkpoint
        self.model = model if model is not None else _load(self.checkpoint, source, "model")
        self.tokenizer = tokenizer if tokenizer is not None else _load(self.checkpoint, source, "tokenizer")
        if hasattr(self.model, "to"):
            self.model = self.model.to(device)
        if hasattr(self.model, "eval"):
            self.model.eval()
        self._cache: dict[str, str] = {}
        self._fingerprint: str | None = None
        self.cut: set[str] = set()  # captions whose prompted input passed max_input_len (cut, as FACTUAL does)

    def signature_fields(self) -> dict[str, Any]:
        """Parser name and version, checkpoint, weights sha256 and the generation settings."""
        if self._fingerprint is None:
            self._fingerprint = weights_fingerprint(self.model)
        return {"parser": f"factual-{VERSION}", "parser_model": self.checkpoint,
                "parser_sha256": self._fingerprint[:16],
                "parser_generate": f"beams={self.beam_size},in={self.max_input_len},out={self.max_output_len}",
                "trunc_parser": truncation.policy(self.max_input_len, "keep-first+special")}

    def generate(self, captions: Sequence[str], input_lens: Sequence[int] | None = None) -> list[str]:
        """The raw output string of each caption (each distinct caption generated once).

        ``input_lens``: per caption, the ``max_length`` (end token included) its prompted input
        is truncated to, instead of ``max_input_len`` for all; each distinct (caption, length)
        is generated once. CAPTURE gives FactualSceneGraph's per-batch cut this way
        (:mod:`capeval.metrics.capture.parser_cut`).
        """
        import torch

        if input_lens is None:
            keys: list[Any] = list(captions)
        else:
            if len(input_lens) != len(captions):
                raise ValueError("FactualParser.generate: one input length per caption")
            keys = [(c, min(int(n), self.max_input_len)) for c, n in zip(captions, input_lens)]
        todo = [k for k in dict.fromkeys(keys) if k not in self._cache]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start: start + self.batch_size]
            plain = chunk if input_lens is None else [c for c, _ in chunk]
            prompted = [PROMPT + c.strip() for c in plain]
            if input_lens is None:
                enc = self.tokenizer(prompted, max_length=self.max_input_len,
                                     truncation=True, padding=True, return_tensors="pt")
            else:
                enc = self._encode_each(prompted, [n for _, n in chunk])
            full = self.tokenizer(prompted)["input_ids"]  # untruncated lengths: what was cut is counted
            self.cut.update(c for c, ids in zip(plain, full) if len(ids) > self.max_input_len)
            with torch.inference_mode():
                ids = self.model.generate(enc["input_ids"].to(self.device),
                                          attention_mask=enc["attention_mask"].to(self.device),
                                          num_beams=self.beam_size, max_length=self.max_output_len,
                                          early_stopping=self.beam_size > 1, num_return_sequences=1)
            texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True)
            for k, t in zip(chunk, texts):
                self._cache[k] = t.replace(PROMPT.strip(), "").strip()
        return [self._cache[k] for k in keys]

    def _encode_each(self, prompted: list[str], lens: list[int]) -> dict[str, Any]:
        """Each prompt truncated to its own length, the rows padded to the longest on the
        tokenizer's padding side (by hand: ``tokenizer.pad`` of a fast tokenizer logs a warning)."""
        import torch

        rows = [self.tokenizer(p, max_length=n, truncation=True)["input_ids"] for p, n in zip(prompted, lens)]
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), int(self.tokenizer.pad_token_id), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        for i, row in enumerate(rows):
            at = slice(width - len(row), width) if left else slice(0, len(row))
            ids[i, at] = torch.tensor(row, dtype=torch.long)
            mask[i, at] = 1
        return {"input_ids": ids, "attention_mask": mask}

    def phrases(self, captions: Sequence[str]) -> list[list[str]]:
        """Phrases of each caption (:func:`fact_phrases` of :func:`parse_facts`)."""
        return [fact_phrases(parse_facts(t)) for t in self.generate(captions)]


def locate(checkpoint: str, directory: str | os.PathLike[str] | None = None) -> str:
    """Where to load ``checkpoint`` from: an existing folder as it is; a hub name of the
    checkpoint table from capeval's model folder (``directory``, default ``$CAPEVAL_CHECKPOINTS``
    or the cache) when ``capeval download`` put it there;
    otherwise the hub name (transformers reads the Hugging Face cache)."""
    if os.path.isdir(os.path.expanduser(checkpoint)):
        return os.path.expanduser(checkpoint)
    from capeval.models.clip.checkpoints import by_hub, local_path

    entry = by_hub(checkpoint)
    if entry is not None and entry.present(directory):
        return str(local_path(entry, directory))
    return checkpoint


def missing_message(name: str) -> str:
    """The one-line error of a FACTUAL model that is not on this machine."""
    from capeval.models.clip.checkpoints import by_hub

    entry = by_hub(name)
    how = ("run `capeval download factual` once online" if entry is not None else
           "download it once online (it is then read from the Hugging Face cache) or give a folder saved "
           "with save_pretrained")
    return (f"hice-s parser='factual': the FACTUAL model {name} is not on this machine: {how}, or score "
            "offline with the SPICE parser, -O hice-s.parser=spice (parser='spice' in Python; not the "
            "published pipeline)")


def check_available(name: str, directory: str | os.PathLike[str] | None = None) -> None:
    """Raise the one-line :func:`missing_message` unless the model ``name`` can be loaded:
    a folder, capeval's downloaded copy, or a config transformers finds (the Hugging Face
    cache; only the small config is read)."""
    source = locate(name, directory)
    if os.path.isdir(source):
        return
    from capeval._optional import require

    tf = require("transformers", purpose="hice-s parser='factual'")
    try:
        tf.AutoConfig.from_pretrained(source)
    except OSError:
        raise ResourceError(missing_message(name)) from None
    except ValueError as exc:  # found, but not a config transformers reads
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ResourceError(f"hice-s parser='factual': {name} is not a transformers model ({first[:200]})") from None


def _load(name: str, source: str, what: str) -> Any:
    from capeval._optional import require

    tf = require("transformers", purpose="hice-s parser='factual'")
    local = os.path.isdir(source)
    try:
        if what == "model":
            return tf.AutoModelForSeq2SeqLM.from_pretrained(source)
        return tf.AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if not local and isinstance(exc, OSError):  # not in the cache, offline or unreachable
            raise ResourceError(missing_message(name)) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResourceError(f"hice-s parser='factual': cannot load the {what} of the FACTUAL model {name} from "
                            f"{source} ({first[:200]}); run `capeval download factual --force`, or score with "
                            "-O hice-s.parser=spice") from None


def weights_fingerprint(model: Any) -> str:
    """sha256 over the model's state dict (names, shapes, bytes); ``custom`` for other objects."""
    state = getattr(model, "state_dict", None)
    if state is None:
        return "custom"
    import torch

    h = hashlib.sha256()
    for key, tensor in sorted(state().items()):
        t = tensor.detach().to("cpu").contiguous()
        h.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
