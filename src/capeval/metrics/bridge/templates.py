"""BRIDGE template captions: noun chunks, one masked replica per chunk, padded batches.

Sarto et al. 2024 (ECCV), Sec. 3.2: the main subjects of a generated caption are masked;
"since a primary subject might be described by words other than just its corresponding
nouns (e.g. adjectives), we utilize noun chunks"; the template is replicated once per noun
chunk, each replica masking a different chunk, e.g. 'A man running with a white dog' ->
['A [MASK] running with a white dog', 'A man running with a [MASK]']. Each mask is US
consecutive pseudo-token slots (Table 1: US = 3; 1, 2, 4, 8 ablated).

Which chunks count (capeval's reading of the paper's example, all visible in one place):

- spaCy ``doc.noun_chunks`` (English pipeline ``en_core_web_sm`` of the ``spice`` extra);
- leading determiners (POS ``DET``: a, an, the, this) and possessive pronouns (his, their)
  stay in the template: the paper's example masks 'man' and 'white dog', keeping 'A'/'a';
- chunks headed by a pronoun (it, who, them, each other) are not subjects: never masked;
- numerals and adjectives are part of the subject ('two cats', 'white dog');
- the noun of a complex preposition ('in front of', 'on top of', 'in the middle of': a
  :data:`SPATIAL_NOUNS` word after a preposition and before 'of') is a relation, not a subject.

Sec. 4.1 says the subjects are "extracted by using the NLTK library"; the method section
and the issue name noun chunks, which NLTK has no parser for: spaCy's are used.

Token layout of a replica: ``[SOT] + bpe(prefix) + US slots + bpe(suffix) + [EOT]`` with
CLIP's BPE. CLIP's pre-tokeniser splits at the chunk's word boundaries, so the prefix and
suffix ids equal those of the whole caption (tested). Longer than the context: the suffix
is cut (EOT kept); a replica whose slots do not fit is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple, Sequence

from capeval.models.spacy_pipelines import load_pipeline


DEFAULT_US = 3  # Table 1: "US = 3 generally leads to the best performance"
NO_TEMPLATE_PREFIX = "a photo of"  # Sec. 4.3: "we construct a template such as 'a photo of S*'"
SLOT_ID = 0  # placeholder id at slot positions; the slot embeddings replace it
DEFAULT_SPACY_MODEL = "en_core_web_sm"

SPATIAL_NOUNS = frozenset({"front", "top", "middle", "side", "edge", "bottom", "center", "centre", "back",
                           "left", "right", "end", "corner", "rear"})

def load_spacy(name: str = DEFAULT_SPACY_MODEL) -> Any:
    """A spaCy English pipeline with a parser (noun chunks need it), loaded once per process."""
    return load_pipeline(name, "BRIDGE's noun chunks", exclude=["ner", "lemmatizer"])


class Chunk(NamedTuple):
    """A maskable noun chunk: character span ``[start, end)`` of the caption and its text."""

    start: int
    end: int
    text: str


def chunks_of_doc(doc: Any) -> list[Chunk]:
    """The maskable noun chunks of a parsed spaCy ``Doc`` (rules in the module docstring)."""
    out = []
    for span in doc.noun_chunks:
        if span.root.pos_ == "PRON":
            continue
        after = doc[span.end] if span.end < len(doc) else None
        if (span.root.lower_ in SPATIAL_NOUNS and after is not None and after.lower_ == "of"
                and span.root.head.pos_ == "ADP"):
            continue
        tokens = list(span)
        while tokens and (tokens[0].pos_ == "DET" or (tokens[0].pos_ == "PRON" and tokens[0].dep_ == "poss")):
            tokens.pop(0)
        if not tokens:
            continue
        start, end = tokens[0].idx, tokens[-1].idx + len(tokens[-1].text)
        out.append(Chunk(start, end, doc.text[start:end]))
    return out


def noun_chunks(captions: Sequence[str], nlp: Any = None, batch_size: int = 256) -> list[list[Chunk]]:
    """Maskable noun chunks of each caption (``nlp``: a pipeline or a model name; default en_core_web_sm)."""
    if nlp is None or isinstance(nlp, str):
        nlp = load_spacy(nlp or DEFAULT_SPACY_MODEL)
    unique = list(dict.fromkeys(captions))
    found = {text: chunks_of_doc(doc) for text, doc in zip(unique, nlp.pipe(unique, batch_size=batch_size))}
    return [found[c] for c in captions]


@dataclass(frozen=True)
class Replica:
    """One masked copy of a template: CLIP ids with ``us`` slots at ``slot_start``; ``chunk`` is what they hide."""

    ids: tuple[int, ...]
    slot_start: int
    us: int
    chunk: str
    text: str  # the template with the chunk shown as [MASK], for people

    @property
    def slots(self) -> range:
        return range(self.slot_start, self.slot_start + self.us)


def _assemble(tokenizer: Any, prefix: str, suffix: str, us: int, context_length: int) -> tuple[list[int], int] | None:
    head = [tokenizer.sot_id, *tokenizer.encode(prefix)]
    tail = tokenizer.encode(suffix)
    if len(head) + us + 1 > context_length:
        return None  # the slots do not fit before the end of the context
    room = context_length - len(head) - us - 1
    ids = head + [SLOT_ID] * us + tail[:room] + [tokenizer.eot_id]
    return ids, len(head)


def make_replicas(caption: str, chunks: Iterable[Chunk], tokenizer: Any, us: int = DEFAULT_US,
                  context_length: int = 77) -> list[Replica]:
    """One :class:`Replica` per chunk of ``caption``, that chunk replaced by ``us`` slots (Sec. 3.2)."""
    if us < 1:
        raise ValueError(f"us must be >= 1, got {us}")
    out = []
    for ch in chunks:
        built = _assemble(tokenizer, caption[: ch.start], caption[ch.end:], us, context_length)
        if built is None:
            continue
        ids, start = built
        text = f"{caption[: ch.start]}[MASK]{caption[ch.end:]}"
        out.append(Replica(tuple(ids), start, us, ch.text, text))
    return out


def prompt_replica(tokenizer: Any, us: int = DEFAULT_US, prefix: str = NO_TEMPLATE_PREFIX,
                   context_length: int = 77) -> Replica:
    """The template-free pseudo-caption 'a photo of S*' (Table 1, w/o template captions / MLP rows)."""
    built = _assemble(tokenizer, prefix, "", us, context_length)
    if built is None:
        raise ValueError(f"prefix {prefix!r} with {us} slots does not fit in {context_length} tokens")
    ids, start = built
    return Replica(tuple(ids), start, us, "", f"{prefix} [MASK]")


def chunk_prompt(chunk: str) -> str:
    """The regularisation prompt of a chunk (Sec. 3.3: 'a photo of a <NOUNCHUNK>')."""
    return f"a photo of a {chunk}"


@dataclass
class ReplicaBatch:
    """Replicas padded to their longest: ``ids`` (R, L), ``slots``/``valid`` (R, L) bool, ``eot`` (R,),
    ``owner`` (R,) = index of the replica's image in the image batch, ``chunks`` (R texts)."""

    ids: Any
    slots: Any
    valid: Any
    eot: Any
    owner: Any
    chunks: list[str]

    def __len__(self) -> int:
        return len(self.chunks)

    def to(self, device: Any) -> "ReplicaBatch":
        return ReplicaBatch(self.ids.to(device), self.slots.to(device), self.valid.to(device), self.eot.to(device),
                            self.owner.to(device), self.chunks)


def pack(replicas: Sequence[Replica], owners: Sequence[int]) -> ReplicaBatch:
    """Pad ``replicas`` (with id 0 after EOT) into one :class:`ReplicaBatch`; ``owners[r]`` = image index."""
    import torch

    if len(replicas) != len(owners):
        raise ValueError("one owner per replica")
    n = len(replicas)
    longest = max((len(r.ids) for r in replicas), default=1)
    ids = torch.zeros(n, longest, dtype=torch.long)
    slots = torch.zeros(n, longest, dtype=torch.bool)
    valid = torch.zeros(n, longest, dtype=torch.bool)
    for i, r in enumerate(replicas):
        ids[i, : len(r.ids)] = torch.as_tensor(r.ids, dtype=torch.long)
        slots[i, r.slot_start: r.slot_start + r.us] = True
        valid[i, : len(r.ids)] = True
    eot = torch.as_tensor([len(r.ids) - 1 for r in replicas], dtype=torch.long)
    return ReplicaBatch(ids, slots, valid, eot, torch.as_tensor(list(owners), dtype=torch.long),
                        [r.chunk for r in replicas])
