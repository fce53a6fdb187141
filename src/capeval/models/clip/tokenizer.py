"""CLIP's byte-level BPE tokenizer, written from OpenAI's description (``clip/simple_tokenizer.py``).

Text -> ``ftfy.fix_text`` -> ``html.unescape`` twice -> strip -> collapse whitespace ->
lower-case -> split with CLIP's regex -> bytes mapped to printable unicode -> BPE merges
(``</w>`` marks a word end) -> ids. A caption becomes ``[SOT] + bpe + [EOT]``; longer than
the context (77) -> the first 77 ids are kept and the last one is overwritten with
``[EOT]`` (``clip.tokenize(..., truncate=True)``), and the caption is counted as truncated.

The vocabulary is OpenAI's ``bpe_simple_vocab_16e6.txt.gz`` (MIT). :func:`find_vocab` looks
for it without importing anything: ``$CAPEVAL_CLIP_VOCAB`` (a file or folder), the
checkpoint folder (``$CAPEVAL_CHECKPOINTS``, where ``capeval download clip-vocab`` puts it and
``capeval info`` looks), ``$CAPEVAL_CACHE/clip/``, then an installed ``clip`` or
``open_clip`` package (located with ``importlib.util.find_spec`` on the parent package path
only), then the Hugging Face cache of ``openai/clip-vit-base-patch32`` (``vocab.json`` +
``merges.txt``, the same vocabulary in another layout).
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import html
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from capeval.errors import ResourceError

SOT = "<|startoftext|>"
EOT = "<|endoftext|>"
VOCAB_FILE = "bpe_simple_vocab_16e6.txt.gz"
# CLIP's pre-tokenisation: specials, English contractions, letter runs, single digits, other runs
PATTERN = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
# OpenAI keeps the first 49152 - 256 - 2 merges of the file: 256 bytes * 2 + merges + 2 specials = 49408 ids
N_MERGES = 49152 - 256 - 2


def _merge_pair(parts: list[str], pair: tuple[str, str]) -> list[str]:
    """Join every non-overlapping occurrence of ``pair``, left to right (one BPE merge)."""
    out: list[str] = []
    i = 0
    while i < len(parts):
        if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
            out.append(parts[i] + parts[i + 1])
            i += 2
        else:
            out.append(parts[i])
            i += 1
    return out


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """Byte -> printable character, in OpenAI's order (the order is part of the vocabulary).

    Printable Latin-1 bytes map to themselves and come first, in the order ``!``..``~``,
    ``¡``..``¬``, ``®``..``ÿ`` (188 bytes); the other 68 bytes follow in byte order, mapped to
    ``chr(256 + n)``. The first 256 ids of CLIP's vocabulary are these characters in exactly
    this order (then the same with ``</w>``), so ``"!"`` is id 0 and ``"a</w>"`` id 320. Do
    not sort: a table sorted by byte value gives every single-character word a wrong id.
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def openai_vocab(merges: Iterable[tuple[str, str]]) -> list[str]:
    """Tokens in id order as OpenAI builds them: 256 bytes, 256 bytes + ``</w>``, one per merge, SOT, EOT."""
    base = list(bytes_to_unicode().values())
    return [*base, *(b + "</w>" for b in base), *("".join(m) for m in merges), SOT, EOT]


def _regex():
    import regex

    return regex.compile(PATTERN, regex.IGNORECASE)


def _fix_text(text: str) -> str:
    try:
        import ftfy
    except ImportError:  # pragma: no cover - ftfy is in the [clip] extra
        raise ResourceError('ftfy is needed to clean text exactly like CLIP: pip install ".[clip]" (in the capeval checkout)') from None
    return ftfy.fix_text(text)


@lru_cache(maxsize=1)
def _whitespace():
    import regex

    # the regex module's \s, as CLIP's whitespace_clean (it differs from str.split() on U+001C..U+001F)
    return regex.compile(r"\s+")


def clean(text: str) -> str:
    """CLIP's ``basic_clean`` + ``whitespace_clean`` + lower-case."""
    text = html.unescape(html.unescape(_fix_text(text))).strip()
    return _whitespace().sub(" ", text).strip().lower()


class ClipTokenizer:
    """Byte-level BPE with CLIP's cleaning; ``encode_batch`` returns ids with SOT/EOT and a truncation count."""

    def __init__(self, encoder: dict[str, int], merges: list[tuple[str, str]], context_length: int = 77,
                 source: str = ""):
        missing = [t for t in (SOT, EOT) if t not in encoder]
        if missing:
            raise ResourceError(f"tokenizer vocabulary {source or '(in memory)'} has no {' and '.join(missing)} token")
        self.encoder = encoder
        self.decoder = {v: k for k, v in encoder.items()}
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.context_length = context_length
        self.source = source
        self.sot_id = encoder[SOT]
        self.eot_id = encoder[EOT]
        self._fingerprint: str | None = None
        self._bytes = bytes_to_unicode()
        self._pat = _regex()
        self._cache: dict[str, list[int]] = {SOT: [self.sot_id], EOT: [self.eot_id]}

    @property
    def merges(self) -> list[tuple[str, str]]:
        """The merges in rank order."""
        return sorted(self.ranks, key=self.ranks.__getitem__)

    def fingerprint(self) -> str:
        """sha256 (hex) of everything that decides the ids: the full token -> id table and the ranked merges.

        Two vocabularies with the same merges but a different id table (e.g. base tokens in
        another order) get different fingerprints.
        """
        if self._fingerprint is None:
            table = sorted(self.encoder.items(), key=lambda kv: (kv[1], kv[0]))
            blob = json.dumps({"encoder": table, "merges": self.merges}, ensure_ascii=False)
            self._fingerprint = hashlib.sha256(blob.encode("utf-8")).hexdigest()
        return self._fingerprint

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_openai(cls, path: str | os.PathLike[str], context_length: int = 77) -> "ClipTokenizer":
        """From OpenAI's merges file (``.txt.gz`` or plain); ids follow OpenAI's construction."""
        path = Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(line.split()) for line in lines[1 : N_MERGES + 1] if line.strip()]
        vocab = openai_vocab(merges)  # type: ignore[arg-type]
        return cls({tok: i for i, tok in enumerate(vocab)}, merges, context_length, str(path))  # type: ignore[arg-type]

    @classmethod
    def from_hf(cls, directory: str | os.PathLike[str], context_length: int = 77) -> "ClipTokenizer":
        """From a Hugging Face ``vocab.json`` + ``merges.txt`` pair (same vocabulary, other layout)."""
        directory = Path(directory)
        encoder = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        lines = (directory / "merges.txt").read_text(encoding="utf-8").split("\n")
        merges = [tuple(line.split()) for line in lines if line.strip() and not line.startswith("#version")]
        return cls(encoder, merges, context_length, str(directory))  # type: ignore[arg-type]

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], context_length: int = 77) -> "ClipTokenizer":
        """A merges file, or a directory holding ``bpe_simple_vocab_16e6.txt.gz`` or ``vocab.json``+``merges.txt``."""
        path = Path(path)
        if path.is_dir():
            if (path / VOCAB_FILE).is_file():
                return cls.from_openai(path / VOCAB_FILE, context_length)
            if (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
                return cls.from_hf(path, context_length)
            raise ResourceError(f"{path}: no {VOCAB_FILE} and no vocab.json + merges.txt in this folder")
        if not path.is_file():
            raise ResourceError(f"tokenizer vocabulary not found: {path}")
        return cls.from_openai(path, context_length)

    # -- encoding -----------------------------------------------------------------
    def bpe(self, word: str) -> list[str]:
        """Merge the characters of one pre-token (byte-mapped) by merge rank, lowest first."""
        parts = list(word[:-1]) + [word[-1] + "</w>"]
        while len(parts) > 1:
            best = None
            best_rank = None
            for pair in zip(parts, parts[1:]):
                rank = self.ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best, best_rank = pair, rank
            if best is None:
                break
            parts = _merge_pair(parts, best)
        return parts

    def encode(self, text: str) -> list[int]:
        """BPE ids of ``text`` without SOT/EOT."""
        ids: list[int] = []
        for token in self._pat.findall(clean(text)):
            cached = self._cache.get(token)
            if cached is None:
                mapped = "".join(self._bytes[b] for b in token.encode("utf-8"))
                cached = [self.encoder[p] for p in self.bpe(mapped)]
                self._cache[token] = cached
            ids.extend(cached)
        return ids

    def encode_batch(self, texts: Iterable[str]) -> tuple[list[list[int]], int]:
        """``[SOT] + bpe + [EOT]`` per text, truncated to the context with EOT kept; and how many were truncated."""
        out: list[list[int]] = []
        truncated = 0
        n = self.context_length
        for text in texts:
            ids = [self.sot_id, *self.encode(text), self.eot_id]
            if len(ids) > n:
                ids = ids[:n]
                ids[-1] = self.eot_id
                truncated += 1
            out.append(ids)
        return out, truncated

    def decode(self, ids: Iterable[int]) -> str:
        inverse = {v: k for k, v in self._bytes.items()}
        text = "".join(self.decoder[i] for i in ids)
        raw = bytes(inverse[c] for c in text.replace("</w>", " ") if c in inverse)
        return raw.decode("utf-8", errors="replace").replace("  ", " ").strip()


# -- finding the vocabulary ---------------------------------------------------------------


def _package_dir(name: str) -> Path | None:
    """Folder of an installed package found without importing it (open_clip imports torchvision)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _checkpoint_dir_vocab() -> Path:
    """Where ``capeval download clip-vocab`` puts the file (and ``capeval info`` looks): honours $CAPEVAL_CHECKPOINTS."""
    from capeval.models.clip.checkpoints import CHECKPOINTS, local_path

    return local_path(CHECKPOINTS["clip-vocab"])


def vocab_candidates() -> list[Path]:
    """Places searched for the vocabulary, in order (no duplicates)."""
    from capeval.paths import cache_dir

    found = [Path(os.environ["CAPEVAL_CLIP_VOCAB"]).expanduser()] if os.environ.get("CAPEVAL_CLIP_VOCAB") else []
    found.append(_checkpoint_dir_vocab())
    found.append(cache_dir() / "clip" / VOCAB_FILE)
    for pkg in ("clip", "open_clip"):
        d = _package_dir(pkg)
        if d is not None:
            found.append(d / VOCAB_FILE)
    hf_home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", hf_home / "hub"))
    for repo in ("openai--clip-vit-base-patch32", "openai--clip-vit-large-patch14"):
        snaps = hub / f"models--{repo}" / "snapshots"
        if snaps.is_dir():
            found.extend(sorted(p for p in snaps.iterdir() if p.is_dir()))
    return list(dict.fromkeys(found))


def find_vocab() -> Path:
    """The first existing vocabulary location, else :class:`ResourceError` saying how to get it."""
    places = vocab_candidates()
    for p in places:
        if p.is_file() or (p.is_dir() and (p / "vocab.json").is_file() and (p / "merges.txt").is_file()):
            return p
        if p.is_dir() and (p / VOCAB_FILE).is_file():
            return p / VOCAB_FILE
    raise ResourceError(
        f"CLIP's BPE vocabulary ({VOCAB_FILE}) was not found; run `capeval download clip-vocab` "
        f"(it goes to {_checkpoint_dir_vocab()}), set CAPEVAL_CLIP_VOCAB, or install openai's clip package. Searched: " + ", ".join(map(str, places))
    )


def load_tokenizer(path: str | os.PathLike[str] | None = None, context_length: int = 77) -> ClipTokenizer:
    """The CLIP tokenizer from ``path`` (file or folder) or from :func:`find_vocab`."""
    return ClipTokenizer.from_path(path if path is not None else find_vocab(), context_length)


# -- a small learned vocabulary for tests and benchmarks ---------------------------------


def train_bpe(texts: Iterable[str], num_merges: int, min_count: int = 2) -> list[tuple[str, str]]:
    """Learn CLIP-style merges (byte-mapped, ``</w>`` word ends) from ``texts``.

    For tests and benchmarks only (the real vocabulary cannot be fetched offline): gives
    realistic token counts per caption. Ties between equally frequent pairs go to the
    lexicographically smallest pair, so the result is deterministic.
    """
    bmap = bytes_to_unicode()
    pat = _regex()
    counts: collections.Counter[str] = collections.Counter()
    for text in texts:
        for tok in pat.findall(clean(text)):
            counts["".join(bmap[b] for b in tok.encode("utf-8"))] += 1
    words = [list(w[:-1]) + [w[-1] + "</w>"] for w in counts]
    freq = list(counts.values())
    pairs: collections.Counter[tuple[str, str]] = collections.Counter()
    where: dict[tuple[str, str], set[int]] = collections.defaultdict(set)
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            pairs[p] += freq[i]
            where[p].add(i)
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges and pairs:
        top = max(pairs.values())
        if top < min_count:
            break
        best = min(p for p, c in pairs.items() if c == top)
        merges.append(best)
        for i in list(where.pop(best, ())):
            w = words[i]
            for p in zip(w, w[1:]):
                pairs[p] -= freq[i]
                if pairs[p] <= 0:
                    del pairs[p]
            new = _merge_pair(w, best)
            words[i] = new
            for p in zip(new, new[1:]):
                pairs[p] += freq[i]
                where[p].add(i)
        pairs.pop(best, None)
    return merges


def write_vocab(directory: str | os.PathLike[str], merges: list[tuple[str, str]],
                encoder: dict[str, int] | None = None) -> Path:
    """Write ``vocab.json`` + ``merges.txt`` (Hugging Face layout).

    The id table is ``encoder`` when given (e.g. ``tokenizer.encoder``, to export a tokenizer
    exactly), else OpenAI's construction from ``merges`` (:func:`openai_vocab`).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    table = encoder if encoder is not None else {t: i for i, t in enumerate(openai_vocab(merges))}
    ordered = dict(sorted(table.items(), key=lambda kv: kv[1]))
    (directory / "vocab.json").write_text(json.dumps(ordered, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n",
                                          encoding="utf-8")
    return directory
