"""METEOR 1.5 scorer: pure-Python ``java -jar meteor-1.5.jar - - -stdio -l en -norm``.

Reference: M. Denkowski and A. Lavie, "Meteor Universal: Language Specific Translation
Evaluation for Any Target Language", WMT 2014. This reproduces METEOR 1.5 as
pycocoevalcap 1.2 runs it (English, default "rank" task, ``-norm``), with no JVM:
normalise and lower-case, align hypothesis and each reference (exact, stem, synonym,
paraphrase matches; beam search), keep the statistics of the best-scoring reference
(the first one on ties) and score them (see :mod:`.stats`).
"""

from __future__ import annotations

import gc
import os
from collections import OrderedDict
from typing import Iterable, Sequence

import numpy as np

from capeval.errors import InputError
from capeval.metrics.meteor import resources as _res
from capeval.metrics.meteor import fast_align as _fast
from capeval.metrics.meteor.reference_align import SentenceInfo, align
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

    :meth:`score`, :meth:`stats_many` and :meth:`segment_stats` use the fast path
    (:mod:`.fast`); :meth:`reference_segment_stats` runs the reference implementation
    (:mod:`.aligner`, a direct port of the Java code), kept to check the fast path.
    """

    #: items per batch of the fast path (bounds the per-batch memory)
    batch_items = 4096
    #: distinct words kept by the fast path before its caches are started afresh
    max_words = 500_000

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True):
        self.resources = _res.load(cache_dir, auto_prepare=auto_prepare)
        r = self.resources
        self._max_phrase = int(np.max(r.para_ntok)) if len(r.para) else 0
        self._norm_cache: dict[str, str] = {}
        self._sent_cache = _LRU(4096)
        self._word_syn: dict[str, frozenset] = {}
        self._stem_hash: dict[str, int] = {}
        # fast path: word -> (hash, stem hash, synsets, is function word)
        self._winfo: dict[str, tuple[int, int, frozenset, bool]] = {}
        self._syn_words: dict[int, list[str]] = {}  # synset -> words of _winfo having it
        self._syn_nb: dict[str, frozenset] = {}  # word -> words of _winfo sharing a synset
        self._vocab_version = 0
        self._fast_cache = _LRU(32768)  # normalised sentence -> fast.Sentence
        self._phrase_cache: dict[int, tuple[dict, frozenset]] = {}  # table phrase -> its entries
        self._ntok: dict[int, int] = {}  # table string id -> number of words, once seen

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

    def _synsets_many(self, words: list[str]) -> list[frozenset]:
        """:meth:`_synsets_of` of many words with a few batched table searches."""
        r = self.resources
        syn_idx = dict(zip(words, r.syn.lookup_many(words)))
        exc_idx = r.exc.lookup_many(words)
        # SynonymDictionary.morph for the words that are not irregular forms
        trials: dict[str, list[str]] = {}
        morph: dict[str, str] = {}
        for w, e in zip(words, exc_idx):
            if e >= 0:
                continue
            if w.endswith("ss") or _utf16_len(w) <= 2:
                morph[w] = w
                continue
            trials[w] = [w[: len(w) - len(suf)] + rep for suf, rep in _MORPH if w.endswith(suf)]
        cands = list({c for cs in trials.values() for c in cs if c not in syn_idx})
        syn_idx.update(zip(cands, r.syn.lookup_many(cands)))
        for w, cs in trials.items():
            tail = "ful" if w.endswith("ful") else ""
            morph[w] = next((c + tail for c in cs if syn_idx[c] >= 0), "")
        rest = list({m for m in morph.values() if m not in syn_idx})
        syn_idx.update(zip(rest, r.syn.lookup_many(rest)))
        syn_start, syn_sets = r.syn_start, r.syn_sets

        def syn_ids(x: str) -> list[int]:
            i = syn_idx[x]
            return [] if i < 0 else syn_sets[int(syn_start[i]) : int(syn_start[i + 1])].tolist()

        out = []
        for w, e in zip(words, exc_idx):
            ids = set(syn_ids(w))
            if e >= 0:
                ids.update(r.exc_sets[int(r.exc_start[e]) : int(r.exc_start[e + 1])].tolist())
            else:
                ids.update(syn_ids(morph[w]))
            out.append(frozenset(ids))
        return out

    def _stem_hash_of(self, word: str) -> int:
        h = self._stem_hash.get(word)
        if h is None:
            h = java_hash(stem(word))
            self._stem_hash[word] = h
        return h

    # ----------------------------------------------------------------- fast path data
    def _add_words(self, words: Iterable[str]) -> None:
        """Word data of the fast path for words not seen yet."""
        winfo = self._winfo
        new = [w for w in set(words) if w not in winfo]
        if not new:
            return
        fw = self.resources.function_words
        syn_words = self._syn_words
        for w, ss in zip(new, self._synsets_many(new)):
            winfo[w] = (java_hash(w), java_hash(stem(w)), ss, java_lower(w) in fw)
            for x in ss:
                lst = syn_words.get(x)
                if lst is None:
                    syn_words[x] = [w]
                else:
                    lst.append(w)
        self._syn_nb.clear()  # neighbour sets grow with the vocabulary
        self._vocab_version += 1

    def _syn_neighbours(self, word: str) -> frozenset:
        """Known words sharing a synset with ``word`` (the synonym matcher's relation)."""
        got = self._syn_nb.get(word)
        if got is None:
            ss = self._winfo[word][2]
            if not ss:
                got = frozenset()
            else:
                syn_words = self._syn_words
                acc: set[str] = set()
                for x in ss:
                    acc.update(syn_words[x])
                got = frozenset(acc)
            self._syn_nb[word] = got
        return got

    def _fast_sentences(self, texts: Iterable[str]) -> dict[str, _fast.Sentence]:
        """Fast-path sentence data of distinct normalised texts (cached, new ones batched)."""
        if len(self._winfo) > self.max_words:  # bound memory: start the fast-path caches afresh
            self._winfo.clear()
            self._syn_words.clear()
            self._syn_nb.clear()
            self._fast_cache.clear()
            self._phrase_cache.clear()
            self._ntok = {}
            self._vocab_version += 1
        out: dict[str, _fast.Sentence] = {}
        new: list[str] = []
        cache = self._fast_cache
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
        nb = self._syn_neighbours
        for s in out.values():
            if s.nbv != ver:  # synonym neighbours as of the current vocabulary
                s.nbs = tuple(nb(w) for w in s.words)
                s.nbv = ver
        return out

    def _build_sentences(self, new: list[str], out: dict) -> None:
        cache = self._fast_cache
        toks = [tuple(java_tokens(t)) for t in new]
        self._add_words(w for ws in toks for w in ws)
        winfo = self._winfo
        sents = [_fast.Sentence(ws, winfo) for ws in toks]
        self._fast_paraphrases(sents)
        for t, s in zip(new, sents):
            out[t] = s
            cache.put(t, s)

    def _fast_paraphrases(self, sents: list[_fast.Sentence]) -> None:
        """:meth:`_paraphrase_info` for many sentences at once.

        Words and adjacent word pairs are looked up directly (all distinct ones in one
        sorted search); an n-gram of three or more words only when all its adjacent
        pairs occur in some table string (``para_pairs``): otherwise it is no table string.
        """
        r = self.resources
        maxp = self._max_phrase
        if maxp == 0:
            return
        pairs_of = [[a + " " + b for a, b in zip(s.words, s.words[1:])] if maxp >= 2 else [] for s in sents]
        short = list(dict.fromkeys([w for s in sents for w in s.words] + [g for ps in pairs_of for g in ps]))
        encoded = [g.encode("utf-8") for g in short]
        keys = _res._keys(encoded)
        pid_of = dict(zip(short, r.para.lookup_encoded(encoded, keys).tolist()))
        # longer n-grams whose adjacent pairs all occur in the table: start -> n-grams
        longer_of: list[dict[int, list[str]] | None] = [None] * len(sents)
        if maxp >= 3:
            ok_of = dict(zip(short, _res.contains_sorted(r.para_pairs, keys).tolist()))
            longer: list[str] = []
            for x, (s, pairs) in enumerate(zip(sents, pairs_of)):
                words = s.words
                n = len(words)
                if n < 3:
                    continue
                ok = [ok_of[g] for g in pairs]
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
        if len(pcache) > 500_000:
            pcache.clear()
        todo = sorted({i for i in pid_of.values() if i >= 0 and i not in pcache})
        if todo:
            hp = np.asarray(todo, dtype=np.int64)
            lo = r.para_start[hp].astype(np.int64)
            hi = r.para_start[hp + 1].astype(np.int64)
            ent = _res.gather_ranges(r.para_entries, lo, hi).tolist()
            a = 0
            empty: tuple[dict, frozenset] = ({}, frozenset())
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
                pcache[pid] = (eidx, frozenset(eidx))
        # per sentence, in Java's order: by start position, then phrase length
        info_of = {}
        for g, pid in pid_of.items():
            if pid >= 0:
                eidx, eset = pcache[pid]
                info_of[g] = (pid, eidx, eset)
        ntok = self._ntok  # table string id -> its number of words (a property of the string)
        get = info_of.get
        for s, pairs, by_start in zip(sents, pairs_of, longer_of):
            uni = list(map(get, s.words))
            two = list(map(get, pairs))
            two += [None] * (len(uni) - len(two))  # no pair starts at the last word
            positions: dict[int, list[int]] = {}
            hits: list = []
            sets: list[frozenset] = []
            for k, x in enumerate(uni):
                grams = (x, two[k])
                if by_start is not None and k in by_start:
                    grams += tuple(map(get, by_start[k]))
                for length, x in enumerate(grams, 1):
                    if x is None:
                        continue
                    pid, eidx, eset = x
                    lst = positions.get(pid)
                    if lst is None:
                        positions[pid] = [k]
                        ntok[pid] = length
                    else:
                        lst.append(k)
                    if eset:
                        hits.append((k, length, eidx))
                        sets.append(eset)
            if positions:
                s.set_paraphrases(positions, ntok, hits, frozenset().union(*sets))

    # ----------------------------------------------------------------- reference path data
    def sentence(self, normalized: str) -> SentenceInfo:
        """Reference-path matcher data for an already normalised sentence (cached)."""
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

    def reference_segment_stats(self, hypothesis: str, references: Sequence[str]) -> MeteorStats:
        """:meth:`segment_stats` computed with the reference implementation (slow)."""
        _check_refs(references)
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

    def segment_stats(self, hypothesis: str, references: Sequence[str]) -> MeteorStats:
        """Statistics of the best-scoring reference (the first on ties), as METEOR prints them.

        Mirrors ``MeteorScorer.getMeteorStats(String, ArrayList)`` after the stdio
        front end's ``trim``: an empty hypothesis is scored (0.0), an empty reference
        list raises :class:`~capeval.errors.InputError` (Java would return no statistics).
        """
        _check_refs(references)
        return self.stats_many([hypothesis], [references], n_jobs=1)[0]

    def _best_many(self, hyps: list[str], refs: list[list[str]]) -> list[tuple[tuple, float]]:
        """(best statistics tuple, its score) per item; inputs already trimmed fields."""
        norm = self.normalize
        out: list[tuple[tuple, float]] = []
        step = max(int(self.batch_items), 1)
        pair_stats, score_of, match, finish = _fast.pair_stats, _fast.score_of, _fast.match, _fast.finish
        for a in range(0, len(hyps), step):
            hn = [norm(java_trim(h)) for h in hyps[a : a + step]]
            rn = [[norm(java_trim(x)) for x in rs] for rs in refs[a : a + step]]
            sents = self._fast_sentences(hn + [x for rs in rn for x in rs])
            for h, rs in zip(hn, rn):
                hs = sents[h]
                if len(rs) == 1:
                    st = pair_stats(hs, sents[rs[0]])
                    out.append((st, score_of(st)))
                    continue
                # Java keeps the first reference with the highest score. Finish the
                # alignments in order of decreasing score upper bound (stable) and stop
                # once the bound is clearly below the best score found: such references
                # can neither beat nor tie it (the margin covers rounding).
                pending = [match(hs, sents[x]) for x in rs]
                best = None
                best_score = -1.0
                best_k = -1
                for k in sorted(range(len(rs)), key=lambda k: -pending[k][0]):
                    if pending[k][0] < best_score - 1e-9:
                        break
                    st = finish(pending[k])
                    sc = score_of(st)
                    if sc > best_score or (sc == best_score and k < best_k):
                        best, best_score, best_k = st, sc, k
                out.append((best, best_score))
        return out

    def stats_many(
        self, hypotheses: Sequence[str], references: Sequence[Sequence[str]], n_jobs: int | None = 1
    ) -> list[MeteorStats]:
        """:meth:`segment_stats` of many items (fields as METEOR receives them), batched.

        ``n_jobs`` > 1 splits the items over forked worker processes (see :meth:`score`).
        """
        if len(hypotheses) != len(references):
            raise InputError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
        for rs in references:
            _check_refs(rs)
        return [_fast.to_stats(st) for st, _ in self._run(hypotheses, references, n_jobs)]

    def _run(self, hyps: Sequence[str], refs: Sequence[Sequence[str]], n_jobs: int | None) -> list[tuple[tuple, float]]:
        hyps = list(hyps)
        refs = [list(r) for r in refs]
        jobs = _resolve_jobs(n_jobs, len(hyps))
        # The fast path allocates many small acyclic objects; the cyclic garbage collector
        # would re-scan them over and over (a third of the run time), so pause it.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if jobs <= 1:
                return self._best_many(hyps, refs)
            return _parallel(self, hyps, refs, jobs)
        finally:
            if gc_was_enabled:
                gc.enable()

    @staticmethod
    def segment_score(stats: MeteorStats) -> float:
        """METEOR of one segment's statistics (EVAL's per-item line)."""
        return segment_score(stats)

    @staticmethod
    def corpus_score(all_stats: Sequence[MeteorStats]) -> float:
        """METEOR of the summed statistics (EVAL's last line)."""
        return corpus_score(list(all_stats))

    def score(
        self, hypotheses: Sequence[str], references: Sequence[Sequence[str]], n_jobs: int | None = None
    ) -> tuple[float, list[float]]:
        """(corpus score, per-item scores) exactly as pycocoevalcap's ``Meteor().compute_score``.

        Inputs go through the same ``|||`` handling as pycocoevalcap's stdio protocol
        (:func:`pycocoevalcap_fields`). Each item needs at least one reference.

        ``n_jobs``: worker processes (forked; results are identical and in input order).
        None: ``min(cpu count, 4)`` for more than 2,000 items, else 1. Where ``fork`` is
        not available everything runs in this process.
        """
        if len(hypotheses) != len(references):
            raise InputError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
        hyps: list[str] = []
        refs: list[list[str]] = []
        for i, (h, rs) in enumerate(zip(hypotheses, references)):
            if isinstance(rs, str) or len(rs) == 0:
                raise InputError(f"item {i}: METEOR needs a non-empty list of references", item_id=str(i))
            hyp, ref_fields = pycocoevalcap_fields(h, rs)
            if not ref_fields:  # e.g. a single '|||' reference: Java gets no reference either
                _check_refs(ref_fields)
            hyps.append(hyp)
            refs.append(ref_fields)
        results = self._run(hyps, refs, n_jobs)
        all_stats = [_fast.to_stats(st) for st, _ in results]
        return corpus_score(all_stats), [sc for _, sc in results]


def _start_len(item: tuple) -> tuple:
    return item[0], item[1]


def _check_refs(references) -> None:
    if isinstance(references, str):
        raise InputError("references must be a list of strings, not a single string")
    if len(references) == 0:
        raise InputError("METEOR needs at least one reference per hypothesis (got an empty list)")


PARALLEL_MIN_ITEMS = 2000


def _resolve_jobs(n_jobs: int | None, n_items: int) -> int:
    if n_jobs is None:
        if n_items <= PARALLEL_MIN_ITEMS:
            return 1
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            cpus = os.cpu_count() or 1
        n_jobs = min(cpus, 4)
    n_jobs = max(1, min(int(n_jobs), n_items))
    if n_jobs > 1:
        import multiprocessing
        import threading

        # fork only where it exists, not from a multi-threaded program (a forked child
        # could inherit a lock held by another thread) and not from a daemon process
        if (
            "fork" not in multiprocessing.get_all_start_methods()
            or threading.active_count() > 1
            or multiprocessing.current_process().daemon  # a pool worker cannot have children
        ):
            return 1
    return n_jobs


_FORKED: tuple | None = None  # (scorer, hypotheses, references) inherited by forked workers


def _worker(span: tuple[int, int]) -> list[tuple[tuple, float]]:
    scorer, hyps, refs = _FORKED  # type: ignore[misc]
    a, b = span
    return scorer._best_many(hyps[a:b], refs[a:b])


def _parallel(scorer: Meteor15, hyps: list[str], refs: list[list[str]], jobs: int) -> list[tuple[tuple, float]]:
    """Contiguous spans of items scored in forked workers; results in input order.

    Each worker prepares the sentences of its spans itself (in parallel, and keeping
    them for its next spans); everything is deterministic, so the results are those of
    one process.
    """
    import multiprocessing

    global _FORKED
    n = len(hyps)
    n_spans = jobs * 2
    bounds = [n * k // n_spans for k in range(n_spans + 1)]
    spans = [(bounds[k], bounds[k + 1]) for k in range(n_spans) if bounds[k + 1] > bounds[k]]
    _FORKED = (scorer, hyps, refs)
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            parts = pool.map(_worker, spans, chunksize=1)
    finally:
        _FORKED = None
    return [x for part in parts for x in part]
