"""Sentence data of the fast METEOR 1.5 path, prepared in batches.

A :class:`Sentence` holds what the fast matchers (:mod:`.fast_match`) need of one
normalised sentence: word hashes and stem hashes, function-word and position bitmasks,
synonym neighbours and its view of the paraphrase table (the lookups only a hypothesis
needs are built when it is first one, :meth:`Sentence.index`). :class:`SentencePreparer`
builds them for many texts at once, caching the data of words, phrases and sentences
seen before; the paraphrase-table lookups of all new sentences of a batch are done in
one sorted, vectorised search.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import numpy as np

from capeval.metrics.meteor.normalize import java_hash, java_lower, java_tokens
from capeval.metrics.meteor.resources import Resources
from capeval.metrics.meteor.stemmer import stem
from capeval.metrics.meteor.string_table import contains_sorted, gather_ranges, keys64
from capeval.metrics.meteor.synonyms import SynonymDictionary

#: matcher modules, in the Java order; also the index of the statistics' stage lists
EXACT, STEM, SYNONYM, PARAPHRASE = range(4)


class LRU(OrderedDict):
    """A dict that drops its least recently put or moved item beyond ``maxsize`` items."""

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def put(self, key, value) -> None:
        self[key] = value
        if len(self) > self.maxsize:
            self.popitem(last=False)


class Sentence:
    """Per-sentence data of the fast path (built once per distinct normalised sentence)."""

    __slots__ = (
        "words", "n", "hashes", "stem_hashes", "fmask", "nfunc", "hash_pos", "stem_pos",
        "word_mask", "wordset", "tmpl", "ngram_positions", "ngram_ids", "ngram_len", "hits",
        "path_ids", "nbs", "nbv", "paths",
    )  # fmt: skip

    def __init__(self, words: tuple[str, ...], winfo: dict) -> None:
        self.words = words
        self.n = len(words)
        if words:
            self.hashes, self.stem_hashes, _, funcs = zip(*[winfo[w] for w in words])
        else:
            self.hashes = self.stem_hashes = funcs = ()
        fmask = 0
        for j, is_function in enumerate(funcs):
            if is_function:
                fmask |= 1 << j
        self.fmask = fmask
        self.nfunc = fmask.bit_count()
        self.nbs: tuple = ()  # per word: known words sharing a synset (see SentencePreparer)
        self.nbv = -1  # vocabulary version ``nbs`` was computed for
        # hypothesis side (see index): built when the sentence is first a hypothesis
        self.tmpl: dict[str, tuple] | None = None  # reference word -> candidate (j, module) data
        self.hash_pos: dict[int, list[int]] = {}  # positions, see index
        self.stem_pos: dict[int, list[int]] = {}
        self.word_mask: dict[str, list[int]] = {}
        self.wordset: frozenset = frozenset()
        # Paraphrase table view (see set_paraphrases); the reference implementation's
        # ``paths`` (start, length, paraphrase id, paraphrase length) are generated on
        # demand from ``hits`` for the few paraphrase ids a pair has in common.
        self.ngram_positions: dict[int, list[int]] = {}  # table string id -> starts
        self.ngram_ids: frozenset = frozenset()
        self.ngram_len: dict[int, int] = {}  # table string id -> its number of words (shared)
        self.hits: list = []  # (start, length, {paraphrase id: index in the phrase's entries})
        self.path_ids: frozenset = frozenset()  # paraphrase ids of all phrases in ``hits``
        self.paths: dict[int, list] = {}  # paraphrase id -> its ``paths`` entries, once needed

    def index(self) -> dict:
        """Build the hypothesis-side lookups (once; returns ``tmpl``): the positions of each
        word hash, stem hash and word, as lists (:func:`bits` makes a bitmask of those a
        reference word needs: a bitmask per distinct word would take memory quadratic in
        the length of a caption of distinct words, issue 25)."""
        hash_pos: dict[int, list[int]] = {}
        stem_pos: dict[int, list[int]] = {}
        word_mask: dict[str, list[int]] = {}
        for j, (w, hw, hs) in enumerate(zip(self.words, self.hashes, self.stem_hashes)):
            lst = hash_pos.get(hw)
            if lst is None:
                hash_pos[hw] = [j]
            else:
                lst.append(j)
            lst = stem_pos.get(hs)
            if lst is None:
                stem_pos[hs] = [j]
            else:
                lst.append(j)
            lst = word_mask.get(w)
            if lst is None:
                word_mask[w] = [j]
            else:
                lst.append(j)
        self.hash_pos = hash_pos
        self.stem_pos = stem_pos
        self.word_mask = word_mask
        self.wordset = frozenset(word_mask)
        self.tmpl = tmpl = {}
        return tmpl

    def set_paraphrases(self, positions: dict, lengths: dict, hits: list, path_ids: frozenset) -> None:
        self.ngram_positions = positions
        self.ngram_ids = frozenset(positions)
        self.ngram_len = lengths
        self.hits = hits
        self.path_ids = path_ids


def bits(positions: list[int] | None) -> int:
    """The bitmask with bit j set for each j in ``positions`` (0 for None)."""
    if not positions:
        return 0
    if len(positions) < 64:
        m = 0
        for j in positions:
            m |= 1 << j
        return m
    arr = np.zeros(positions[-1] + 1, dtype=np.uint8)
    arr[positions] = 1
    return int.from_bytes(np.packbits(arr, bitorder="little").tobytes(), "little")


class _Neighbours(dict):
    """word -> known words sharing a synset with it, computed on first access."""

    def __init__(self, winfo: dict, syn_words: dict) -> None:
        super().__init__()
        self.winfo = winfo
        self.syn_words = syn_words

    def __missing__(self, word: str) -> frozenset:
        ss = self.winfo[word][2]
        if not ss:
            got: frozenset = frozenset()
        else:
            syn_words = self.syn_words
            acc: set[str] = set()
            for x in ss:
                acc.update(syn_words[x])
            got = frozenset(acc)
        self[word] = got
        return got


class SentencePreparer:
    """:class:`Sentence` data of normalised texts, with the word and phrase data behind it.

    Word data: (hash, stem hash, synsets, is function word) per distinct word, and the
    known words sharing a synset with it (its synonym neighbours, which grow with the
    vocabulary). Phrase data: the paraphrase entries of each table phrase seen.
    """

    #: sentences kept between batches; a Sentence with its per-word candidate lists is a few
    #: KB, and reuse across batches is mostly local (one image's captions), so keep few
    max_sentences = 2048

    def __init__(self, resources: Resources, synonyms: SynonymDictionary):
        self.resources = resources
        self.synonyms = synonyms
        # word -> (hash, stem hash, synsets, is function word)
        self._winfo: dict[str, tuple[int, int, frozenset, bool]] = {}
        self._syn_words: dict[int, list[str]] = {}  # synset -> words of _winfo having it
        self._syn_nb = _Neighbours(self._winfo, self._syn_words)  # word -> words of _winfo sharing a synset
        self._vocab_version = 0
        self._by_text = LRU(self.max_sentences)  # normalised sentence -> Sentence
        self._phrase_cache: dict[int, dict] = {}  # table phrase -> {paraphrase id: index in its entries}
        self._ntok: dict[int, int] = {}  # table string id -> number of words, once seen

    def sentences(self, texts: Iterable[str], max_words: int) -> dict[str, Sentence]:
        """Sentence data of distinct normalised texts (cached, new ones batched).

        Once more than ``max_words`` distinct words are known, every cache is started
        afresh first (this bounds their memory; the results do not change).
        """
        if len(self._winfo) > max_words:
            self._winfo.clear()
            self._syn_words.clear()
            self._syn_nb.clear()
            self._by_text.clear()
            self._phrase_cache.clear()
            self._ntok = {}
            self._vocab_version += 1
        out: dict[str, Sentence] = {}
        new: list[str] = []
        cache = self._by_text
        for t in texts:
            if t in out:
                continue
            s = cache.get(t)
            if s is None:
                out[t] = None  # type: ignore[assignment]
                new.append(t)
            else:
                cache.move_to_end(t)
                out[t] = s
        if new:
            self._build_sentences(new, out)
        ver = self._vocab_version
        nb = self._syn_nb.__getitem__
        for s in out.values():
            if s.nbv != ver:  # synonym neighbours as of the current vocabulary
                s.nbs = tuple(map(nb, s.words))
                s.nbv = ver
        return out

    def _build_sentences(self, new: list[str], out: dict) -> None:
        cache = self._by_text
        toks = [tuple(java_tokens(t)) for t in new]
        self._add_words(w for ws in toks for w in ws)
        winfo = self._winfo
        sents = [Sentence(ws, winfo) for ws in toks]
        self._paraphrases(sents)
        for t, s in zip(new, sents):
            out[t] = s
            cache.put(t, s)

    def _add_words(self, words: Iterable[str]) -> None:
        """Word data of the fast path for words not seen yet."""
        winfo = self._winfo
        new = [w for w in set(words) if w not in winfo]
        if not new:
            return
        fw = self.resources.function_words
        syn_words = self._syn_words
        for w, ss in zip(new, self.synonyms.synsets_many(new)):
            winfo[w] = (java_hash(w), java_hash(stem(w)), ss, java_lower(w) in fw)
            for x in ss:
                lst = syn_words.get(x)
                if lst is None:
                    syn_words[x] = [w]
                else:
                    lst.append(w)
        self._syn_nb.clear()  # neighbour sets grow with the vocabulary
        self._vocab_version += 1

    def _paraphrases(self, sents: list[Sentence]) -> None:
        """Paraphrase-table view of many sentences at once (what
        :meth:`.engine.Meteor15.sentence` finds for one, for the reference path).

        Words and adjacent word pairs are looked up directly (all distinct ones in one
        sorted search); an n-gram of three or more words only when all its adjacent
        pairs occur in some table string (``para_pairs``): otherwise it is no table string.
        """
        r = self.resources
        maxp = r.max_phrase
        if maxp == 0:
            return
        pairs_of = [[a + " " + b for a, b in zip(s.words, s.words[1:])] if maxp >= 2 else [] for s in sents]
        short = list(dict.fromkeys([w for s in sents for w in s.words] + [g for ps in pairs_of for g in ps]))
        encoded = [g.encode("utf-8") for g in short]
        keys = keys64(encoded)
        pid_of = dict(zip(short, r.para.lookup_encoded(encoded, keys).tolist()))
        # longer n-grams whose adjacent pairs all occur in the table: start -> n-grams
        longer_of: list[dict[int, list[str]] | None] = [None] * len(sents)
        if maxp >= 3:
            ok_get = dict(zip(short, contains_sorted(r.para_pairs, keys).tolist())).__getitem__
            longer: list[str] = []
            for x, (s, pairs) in enumerate(zip(sents, pairs_of)):
                words = s.words
                n = len(words)
                if n < 3:
                    continue
                ok = list(map(ok_get, pairs))
                if sum(ok) < 2:
                    continue
                by_start: dict[int, list[str]] = {}
                for k in range(n - 2):
                    if not (ok[k] and ok[k + 1]):
                        continue
                    g = pairs[k]
                    grams = []
                    for length in range(3, min(maxp, n - k) + 1):
                        if not ok[k + length - 2]:
                            break
                        g = g + " " + words[k + length - 1]
                        grams.append(g)
                    by_start[k] = grams
                    longer += grams
                if by_start:
                    longer_of[x] = by_start
            if longer:
                longer = [g for g in dict.fromkeys(longer) if g not in pid_of]
                pid_of.update(zip(longer, r.para.lookup_encoded([g.encode("utf-8") for g in longer]).tolist()))
        # paraphrase entries of the phrases found (cached per phrase), with one gather
        pcache = self._phrase_cache
        if len(pcache) > 100_000:
            pcache.clear()
        todo = sorted({i for i in pid_of.values() if i >= 0 and i not in pcache})
        if todo:
            hp = np.asarray(todo, dtype=np.int64)
            lo = r.para_start[hp].astype(np.int64)
            hi = r.para_start[hp + 1].astype(np.int64)
            ent = gather_ranges(r.para_entries, lo, hi).tolist()
            a = 0
            empty: dict = {}
            for pid, c in zip(todo, (hi - lo).tolist()):
                if c == 0:
                    pcache[pid] = empty
                    continue
                es = ent[a : a + c]
                a += c
                eidx = dict(zip(es, range(c)))
                if len(eidx) < c:  # a paraphrase listed twice: keep every index
                    multi: dict[int, list[int]] = {}
                    for i, e in enumerate(es):
                        multi.setdefault(e, []).append(i)
                    eidx = {e: (xs[0] if len(xs) == 1 else tuple(xs)) for e, xs in multi.items()}
                pcache[pid] = eidx
        # per sentence, in Java's order: by start position, then phrase length
        ntok = self._ntok  # table string id -> its number of words (a property of the string)
        info_of = {}
        for g, pid in pid_of.items():
            if pid >= 0:
                info_of[g] = (pid, pcache[pid])
                ntok[pid] = g.count(" ") + 1  # tokens hold no space
        get = info_of.get
        for s, pairs, by_start in zip(sents, pairs_of, longer_of):
            positions: dict[int, list[int]] = {}
            hits: list = []
            for k, x in enumerate(map(get, s.words)):
                if x is not None:
                    pid, eidx = x
                    lst = positions.get(pid)
                    if lst is None:
                        positions[pid] = [k]
                    else:
                        lst.append(k)
                    if eidx:
                        hits.append((k, 1, eidx))
            n_uni = len(hits)
            for k, x in enumerate(map(get, pairs)):
                if x is not None:
                    pid, eidx = x
                    lst = positions.get(pid)
                    if lst is None:
                        positions[pid] = [k]
                    else:
                        lst.append(k)
                    if eidx:
                        hits.append((k, 2, eidx))
            if by_start is not None:
                for k, grams in by_start.items():
                    length = 3
                    for x in map(get, grams):
                        if x is not None:
                            pid, eidx = x
                            lst = positions.get(pid)
                            if lst is None:
                                positions[pid] = [k]
                            else:
                                lst.append(k)
                            if eidx:
                                hits.append((k, length, eidx))
                        length += 1
            if positions:
                if len(hits) > n_uni:
                    hits.sort()  # (start, length) pairs are distinct: the dicts are never compared
                s.set_paraphrases(positions, ntok, hits, frozenset().union(*[x[2] for x in hits]))
