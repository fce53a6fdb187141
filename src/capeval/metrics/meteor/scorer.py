"""METEOR 1.5 scorer: pure-Python ``java -jar meteor-1.5.jar - - -stdio -l en -norm``.

Reference: M. Denkowski and A. Lavie, "Meteor Universal: Language Specific Translation
Evaluation for Any Target Language", WMT 2014. This reproduces METEOR 1.5 as
pycocoevalcap 1.2 runs it (English, default "rank" task, ``-norm``), with no JVM:
normalise and lower-case, align hypothesis and each reference (exact, stem, synonym,
paraphrase matches; beam search), keep the statistics of the best-scoring reference
(the first one on ties) and score them (see :mod:`.stats`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Sequence

import numpy as np

from capeval.errors import InputError
from capeval.metrics.meteor import resources as _res
from capeval.metrics.meteor.aligner import SentenceInfo, align
from capeval.metrics.meteor.normalize import java_hash, java_lower, java_tokens, java_trim, normalize_line
from capeval.metrics.meteor.stats import MeteorStats, compute, corpus_score, segment_score
from capeval.metrics.meteor.stemmer import stem

# SynonymDictionary.morph: suffix -> replacement, tried in this order
_MORPH = (
    ("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
    ("men", "man"), ("ies", "y"), ("s", ""), ("ies", "y"), ("es", "e"), ("es", ""),
    ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", ""), ("er", ""), ("est", ""),
    ("er", "e"), ("est", "e"),
)  # fmt: skip


def _utf16_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


def pycocoevalcap_fields(hypothesis: str, references: Sequence[str]) -> tuple[str, list[str]]:
    """The (hypothesis, references) METEOR receives from pycocoevalcap's ``Meteor._stat``.

    pycocoevalcap removes ``|||`` from the hypothesis and replaces double spaces, joins
    ``SCORE ||| ref1 ||| ... ||| hyp`` into one line, and Java splits that line on
    ``|||`` (dropping trailing empty fields) and trims each field. A ``|||`` inside a
    reference therefore splits it in two, exactly as with the Java scorer.
    """
    hyp = hypothesis.replace("|||", "").replace("  ", " ")
    line = " ||| ".join(("SCORE", " ||| ".join(references), hyp))
    parts = line.split("|||")
    while parts and parts[-1] == "":
        parts.pop()
    return java_trim(parts[-1]), [java_trim(p) for p in parts[1:-1]]


class _LRU(OrderedDict):
    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def put(self, key, value) -> None:
        self[key] = value
        if len(self) > self.maxsize:
            self.popitem(last=False)


class Meteor15:
    """METEOR 1.5 (English, default task, ``-norm``) without Java.

    ``cache_dir`` is where the prepared resource index lives (default
    ``$CAPEVAL_CACHE/meteor-1.5`` or ``~/.cache/capeval/meteor-1.5``); it is built on first
    use if missing (see :func:`capeval.metrics.meteor.prepare`).
    """

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True):
        self.resources = _res.load(cache_dir, auto_prepare=auto_prepare)
        r = self.resources
        self._max_phrase = int(np.max(r.para_ntok)) if len(r.para) else 0
        self._norm_cache: dict[str, str] = {}
        self._sent_cache = _LRU(4096)
        self._word_syn: dict[str, frozenset] = {}
        self._stem_hash: dict[str, int] = {}

    # ----------------------------------------------------------------- text → words
    def normalize(self, text: str) -> str:
        """``-norm`` normalisation followed by lower-casing (cached)."""
        out = self._norm_cache.get(text)
        if out is None:
            out = java_lower(normalize_line(text, self.resources.nonbreaking))
            if len(self._norm_cache) > 200_000:
                self._norm_cache.clear()
            self._norm_cache[text] = out
        return out

    def _synsets_of(self, word: str) -> frozenset:
        """SynonymDictionary: synsets of the word plus those of its base form."""
        got = self._word_syn.get(word)
        if got is not None:
            return got
        r = self.resources
        ids = set(self._syn_ids(word))
        e = r.exc.lookup(word)
        if e >= 0:  # irregular form: the bases' synsets
            ids.update(r.exc_sets[int(r.exc_start[e]) : int(r.exc_start[e + 1])].tolist())
        else:
            ids.update(self._syn_ids(self._morph(word)))
        got = frozenset(ids)
        self._word_syn[word] = got
        return got

    def _syn_ids(self, word: str) -> list[int]:
        r = self.resources
        i = r.syn.lookup(word)
        if i < 0:
            return []
        return r.syn_sets[int(r.syn_start[i]) : int(r.syn_start[i + 1])].tolist()

    def _morph(self, s: str) -> str:
        """SynonymDictionary.morph, including its quirks (a ``-ful`` word is looked up whole
        and gets ``ful`` appended to the result; no match gives the empty string)."""
        tail = "ful" if s.endswith("ful") else ""
        if s.endswith("ss") or _utf16_len(s) <= 2:
            return s
        for suf, rep in _MORPH:
            if s.endswith(suf):
                cand = s[: len(s) - len(suf)] + rep
                if self.resources.syn.lookup(cand) >= 0:
                    return cand + tail
        return ""

    def _stem_hash_of(self, word: str) -> int:
        h = self._stem_hash.get(word)
        if h is None:
            h = java_hash(stem(word))
            self._stem_hash[word] = h
        return h

    def sentence(self, normalized: str) -> SentenceInfo:
        """Per-sentence matcher data for an already normalised sentence (cached)."""
        info = self._sent_cache.get(normalized)
        if info is not None:
            self._sent_cache.move_to_end(normalized)
            return info
        words = tuple(java_tokens(normalized))
        fw = self.resources.function_words
        info = SentenceInfo(
            words=words,
            hashes=tuple(java_hash(w) for w in words),
            stem_hashes=tuple(self._stem_hash_of(w) for w in words),
            synsets=tuple(self._synsets_of(w) for w in words),
            function=tuple(java_lower(w) in fw for w in words),
        )
        self._paraphrase_info(info)
        self._sent_cache.put(normalized, info)
        return info

    def _paraphrase_info(self, info: SentenceInfo) -> None:
        """Table ids of the sentence's n-grams, and the paraphrase entries they start.

        Java walks a trie over the sentence; looking up every n-gram up to the longest
        table phrase finds the same phrases (a phrase implies all its prefixes are trie
        states). Entries are listed by start position, then phrase length, then table
        order, which is the order Java's transducer returns them in.
        """
        words = info.words
        n = len(words)
        grams: list[str] = []
        where: list[tuple[int, int]] = []
        for k in range(n):
            for length in range(1, min(self._max_phrase, n - k) + 1):
                grams.append(" ".join(words[k : k + length]))
                where.append((k, length))
        r = self.resources
        ids = r.para.lookup_many(grams)
        hits = [(kl, pid) for kl, pid in zip(where, ids) if pid >= 0]
        if not hits:
            return
        pids = np.fromiter((pid for _, pid in hits), dtype=np.int64, count=len(hits))
        lo = r.para_start[pids].tolist()
        hi = r.para_start[pids + 1].tolist()
        positions: dict[int, list[int]] = {}
        paths: list[tuple[int, int, int, int]] = []
        for ((k, length), pid), a, b in zip(hits, lo, hi):
            positions.setdefault(pid, []).append(k)
            if b > a:
                entries = r.para_entries[a:b]
                ntok = r.para_ntok[entries].tolist()
                for e, t in zip(entries.tolist(), ntok):
                    paths.append((k, length, e, t))
        info.set_paraphrases(positions, paths)

    # ----------------------------------------------------------------- statistics
    def _pair_stats(self, hyp: SentenceInfo, ref: SentenceInfo) -> MeteorStats:
        a = align(hyp, ref)
        s = MeteorStats(float(a.len1), float(a.len2), float(a.function1), float(a.function2))
        s.test_content = [float(x) for x in a.content1]
        s.reference_content = [float(x) for x in a.content2]
        s.test_function = [float(x) for x in a.func1]
        s.reference_function = [float(x) for x in a.func2]
        s.chunks = float(a.chunks)
        s.test_word_matches = float(sum(a.content1) + sum(a.func1))
        s.reference_word_matches = float(sum(a.content2) + sum(a.func2))
        return s

    def segment_stats(self, hypothesis: str, references: Sequence[str]) -> MeteorStats:
        """Statistics of the best-scoring reference (the first on ties), as METEOR prints them.

        Mirrors ``MeteorScorer.getMeteorStats(String, ArrayList)`` after the stdio
        front end's ``trim``: an empty hypothesis is scored (0.0), an empty reference
        list raises :class:`~capeval.errors.InputError` (Java would return no statistics).
        """
        if isinstance(references, str):
            raise InputError("references must be a list of strings, not a single string")
        if len(references) == 0:
            raise InputError("METEOR needs at least one reference per hypothesis (got an empty list)")
        hyp = self.sentence(self.normalize(java_trim(hypothesis)))
        best: MeteorStats | None = None
        best_score = -1.0
        for ref_text in references:
            ref = self.sentence(self.normalize(java_trim(ref_text)))
            st = self._pair_stats(hyp, ref)
            sc = compute(st).score
            if sc > best_score:  # strictly greater: ties keep the earlier reference
                best, best_score = st, sc
        assert best is not None
        return best

    @staticmethod
    def segment_score(stats: MeteorStats) -> float:
        """METEOR of one segment's statistics (EVAL's per-item line)."""
        return segment_score(stats)

    @staticmethod
    def corpus_score(all_stats: Sequence[MeteorStats]) -> float:
        """METEOR of the summed statistics (EVAL's last line)."""
        return corpus_score(list(all_stats))

    def score(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> tuple[float, list[float]]:
        """(corpus score, per-item scores) exactly as pycocoevalcap's ``Meteor().compute_score``.

        Inputs go through the same ``|||`` handling as pycocoevalcap's stdio protocol
        (:func:`pycocoevalcap_fields`). Each item needs at least one reference.
        """
        if len(hypotheses) != len(references):
            raise InputError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
        all_stats = []
        for i, (h, refs) in enumerate(zip(hypotheses, references)):
            if isinstance(refs, str) or len(refs) == 0:
                raise InputError(f"item {i}: METEOR needs a non-empty list of references", item_id=str(i))
            hyp, ref_fields = pycocoevalcap_fields(h, refs)
            all_stats.append(self.segment_stats(hyp, ref_fields))
        return corpus_score(all_stats), [segment_score(s) for s in all_stats]
