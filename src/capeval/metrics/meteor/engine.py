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
from collections.abc import Iterable, Sequence

import numpy as np

from capeval.errors import InputError, ResourceError
from capeval.gc_pause import gc_paused
from capeval.metrics.meteor import ahead, jit_align
from capeval.metrics.meteor.fast_align import finish, score_of, to_stats
from capeval.metrics.meteor.fast_match import chain_bound, match, mirrored, transposed
from capeval.metrics.meteor.normalize import java_hash, java_lower, java_tokens, java_trim, normalize_line
from capeval.metrics.meteor.parallel import resolve_workers, run_forked
from capeval.metrics.meteor.reference_align import SentenceInfo, align
from capeval.metrics.meteor.partial_index import load
from capeval.metrics.meteor.sentences import LRU, Sentence, SentencePreparer
from capeval.metrics.meteor.stats import MeteorStats, compute, corpus_score, segment_score
from capeval.metrics.meteor.stemmer import stem
from capeval.metrics.meteor.synonyms import SynonymDictionary


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


_NO_NUMBA = "meteor option compiled=true needs numba: pip install 'capeval[fast]'"


class Meteor15:
    """METEOR 1.5 (English, default task, ``-norm``) without Java.

    ``cache_dir`` is where the prepared resource index lives (default
    ``$CAPEVAL_CACHE/meteor-1.5`` or ``~/.cache/capeval/meteor-1.5``); it is built on first
    use if missing (see :func:`capeval.metrics.meteor.prepare`).

    :meth:`score`, :meth:`stats_many` and :meth:`segment_stats` use the fast path
    (:mod:`.sentences`, :mod:`.fast_match`, :mod:`.fast_align`);
    :meth:`reference_segment_stats` runs the reference implementation
    (:mod:`.reference_align`, a direct port of the Java code), kept to check the fast path.
    """

    #: items per batch of the fast path (bounds the per-batch memory)
    batch_items = 4096
    #: distinct words kept by the fast path before its caches are started afresh
    max_words = 500_000
    #: normalised texts kept (the cache is started afresh beyond)
    max_norm_cache = 32_768

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None, auto_prepare: bool = True,
                 compiled: bool | None = None):
        if compiled is not None and not isinstance(compiled, bool):
            raise InputError(f"meteor option compiled must be true, false or null (automatic), got {compiled!r}")
        if compiled and not jit_align.available():
            raise ResourceError(_NO_NUMBA)
        self.compiled = compiled
        self._finish = finish  # jit_align.finish once the compiled kernel is used (use_compiled)
        self._kernel_later = False  # its build runs beside the job: picked up when done (pick_up_kernel)
        # partial: with no index yet, a first small run scans the paraphrase table instead (_cover)
        self.resources = load(cache_dir, auto_prepare=auto_prepare)
        self._synonyms = SynonymDictionary(self.resources)
        self._norm_cache: dict[str, str] = {}
        self._sent_cache = LRU(4096)  # normalised sentence -> SentenceInfo (reference path)
        self._stem_hash: dict[str, int] = {}
        self._prepared = SentencePreparer(self.resources, self._synonyms)  # fast path

    def start_ahead(self, n_items: int, index: bool = True) -> None:
        """Start, as child processes, the one-time builds a job of ``n_items`` items will wait
        for (the full index unless ``index`` is False, the compiled kernel), so that they run
        together and beside the job's other work (:mod:`.ahead`); nothing when they are built.
        Same results."""
        kernel = self.compiled is not False and (bool(self.compiled) or n_items >= jit_align.JIT_MIN_ITEMS)
        ahead.start(None if self.resources.complete or not index else self.resources.index_dir, n_items, kernel)

    def use_compiled(self, n_items: int, wait: bool = True) -> bool:
        """Use the compiled resolution (:mod:`.jit_align`, numba: the ``fast`` extra) for a
        job of ``n_items`` items. With ``compiled=None``: a kernel already built ahead of
        time for any job (it loads in a millisecond), and from :data:`.jit_align.JIT_MIN_ITEMS`
        items on, one built now (once) or numba's JIT, if numba is installed. With True:
        always (an error without numba); with False: never. Call it before forking workers
        (they inherit it). Same results either way.

        ``wait=False`` (a job scored chunk by chunk: :meth:`.metric.Meteor.before_chunks`):
        with ``compiled=None``, a kernel whose build was started beside the job
        (:mod:`.ahead`) and is not done is not waited for: the chunks use the Python code
        until it is built, then the kernel (:meth:`pick_up_kernel`)."""
        if self.compiled is False:
            return False
        if not wait and self.compiled is None and ahead.kernel_building():
            self._kernel_later = True
            return False
        if jit_align.load(build=bool(self.compiled) or n_items >= jit_align.JIT_MIN_ITEMS):
            self._finish = jit_align.finish
            return True
        if self.compiled:
            raise ResourceError(_NO_NUMBA)
        return False

    def pick_up_kernel(self) -> None:
        """Switch to the compiled kernel once the build :meth:`use_compiled` did not wait for
        is in place with its sha256 record (a stat and a 2 ms hash per call until then; a
        module without its record yet is left alone, never discarded)."""
        if self._kernel_later and ahead.kernel_ready():
            self._kernel_later = False
            if jit_align.load(build=False):
                self._finish = jit_align.finish

    # ----------------------------------------------------------------- text → words
    def normalize(self, text: str) -> str:
        """``-norm`` normalisation followed by lower-casing (cached)."""
        out = self._norm_cache.get(text)
        if out is None:
            out = java_lower(normalize_line(text, self.resources.nonbreaking))
            if len(self._norm_cache) > self.max_norm_cache:
                self._norm_cache.clear()
            self._norm_cache[text] = out
        return out

    def _cover(self, texts: Iterable[str], scan: bool = True) -> None:
        """Let a partial index (no full index yet, :mod:`.partial_index`) answer the normalised
        ``texts`` (``scan``: by a scan if it has none yet); when it became the full index,
        sentence data made before is dropped."""
        if not self.resources.complete and self.resources.cover(texts, scan):
            self._sent_cache.clear()
            self._prepared = SentencePreparer(self.resources, self._synonyms)

    # ----------------------------------------------------------------- fast path data
    def fast_sentences(self, texts: Iterable[str]) -> dict[str, Sentence]:
        """Fast-path sentence data of distinct normalised texts (cached, new ones batched)."""
        if not self.resources.complete:  # texts a scoring call did not cover: the full index
            texts = list(texts)
            self._cover(texts, scan=False)
        return self._prepared.sentences(texts, self.max_words)

    # ----------------------------------------------------------------- reference path data
    def _stem_hash_of(self, word: str) -> int:
        h = self._stem_hash.get(word)
        if h is None:
            h = java_hash(stem(word))
            self._stem_hash[word] = h
        return h

    def sentence(self, normalized: str) -> SentenceInfo:
        """Reference-path matcher data for an already normalised sentence (cached)."""
        self._cover([normalized])
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
            synsets=tuple(self._synonyms.synsets_of(w) for w in words),
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
        r = self.resources
        words = info.words
        n = len(words)
        grams: list[str] = []
        where: list[tuple[int, int]] = []
        for k in range(n):
            for length in range(1, min(r.max_phrase, n - k) + 1):
                grams.append(" ".join(words[k : k + length]))
                where.append((k, length))
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
        self._cover([self.normalize(java_trim(x)) for x in (hypothesis, *references)])
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
        return self.stats_many([hypothesis], [references], workers=1)[0]

    def _best_many(self, hyps: list[str], refs: list[list[str]]) -> list[tuple[tuple, float]]:
        """(best statistics tuple, its score) per item; inputs already trimmed fields."""
        norm = self.normalize
        finish_pair = self._finish
        compiled = finish_pair is jit_align.finish  # takes mirrored pairs as they are
        out: list[tuple[tuple, float]] = []
        step = max(int(self.batch_items), 1)
        for a in range(0, len(hyps), step):
            hn = [norm(java_trim(h)) for h in hyps[a : a + step]]
            rn = [[norm(java_trim(x)) for x in rs] for rs in refs[a : a + step]]
            sents = self.fast_sentences(hn + [x for rs in rn for x in rs])
            # pairs whose mirror (reference and hypothesis swapped) is scored too, as in
            # leave-one-out jobs: the second of the two gets its bound from the first
            # one's matches, and their transpose if it is aligned (see fast_match.mirrored)
            pairs = {(h, x) for h, rs in zip(hn, rn) for x in rs}
            mirror: dict = {}
            for h, rs in zip(hn, rn):
                hs = sents[h]
                if len(rs) == 1:
                    st = finish_pair(match(hs, sents[rs[0]]))
                    out.append((st, score_of(st)))
                    continue
                # Java keeps the first reference with the highest score. Finish the
                # alignments in order of decreasing score upper bound (stable) and stop
                # once the bound is clearly below the best score found: such references
                # can neither beat nor tie it (the margin covers rounding). Once a score
                # is known, a reference is also skipped when the tighter (costlier)
                # chain_bound rules it out the same way.
                pending = []
                for x in rs:
                    p = mirror.pop((x, h), None)
                    if p is not None:
                        pending.append(mirrored(p))
                        continue
                    p = match(hs, sents[x])
                    if (x, h) in pairs:
                        mirror[(h, x)] = p
                    pending.append(p)
                best = None
                best_score = -1.0
                best_k = -1
                for k in sorted(range(len(rs)), key=lambda k: -pending[k][0]):
                    p = pending[k]
                    if p[0] < best_score - 1e-9:
                        break
                    if p[1] is None and not compiled:  # a mirrored bound: transpose the reverse matches now
                        p = transposed(p[2])
                    if best_k >= 0 and chain_bound(p) < best_score - 1e-9:
                        continue
                    st = finish_pair(p)
                    sc = score_of(st)
                    if sc > best_score or (sc == best_score and k < best_k):
                        best, best_score, best_k = st, sc, k
                out.append((best, best_score))
        return out

    def stats_many(
        self, hypotheses: Sequence[str], references: Sequence[Sequence[str]], workers: int | None = 1
    ) -> list[MeteorStats]:
        """:meth:`segment_stats` of many items (fields as METEOR receives them), batched.

        ``workers`` > 1 splits the items over forked worker processes (see :meth:`score`).
        """
        if len(hypotheses) != len(references):
            raise InputError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
        for rs in references:
            _check_refs(rs)
        return [to_stats(st) for st, _ in self._run(hypotheses, references, workers)]

    def best_many(self, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> list[tuple[tuple, float]]:
        """(statistics tuple of the best reference, its score) per item, in this process.

        Inputs are the fields METEOR receives (:func:`pycocoevalcap_fields`); the tuples are
        :func:`.fast_align.pair_stats`'s (:func:`.fast_align.to_stats`,
        :func:`.fast_align.sum_stats` turn them into ``MeteorStats``); the score is
        ``segment_score`` of those statistics.
        """
        for rs in refs:
            _check_refs(rs)
        return self._run(hyps, refs, 1)

    def _run(self, hyps: Sequence[str], refs: Sequence[Sequence[str]], workers: int | None) -> list[tuple[tuple, float]]:
        hyps = list(hyps)
        refs = [list(r) for r in refs]
        # the kernel's build beside the index's (which _cover builds here when the input is over
        # the scan's limit: no corpus pass to overlap, so no second child for it)
        self.start_ahead(len(hyps), index=False)
        if not self.resources.complete:  # before any fork: the workers inherit what it read
            self._cover(self.normalize(java_trim(x)) for rs in ([hyps], refs) for r in rs for x in r)
        n_workers = resolve_workers(workers, len(hyps))
        if self._kernel_later:  # a build beside the job: only a finished one is loaded
            self.pick_up_kernel()
        else:
            self.use_compiled(len(hyps))
        # The fast path allocates many small acyclic objects; the cyclic garbage collector
        # would re-scan them over and over (a third of the run time), so pause it.
        with gc_paused():
            if n_workers <= 1:
                out = self._best_many(hyps, refs)
            else:
                out = run_forked(self._best_many, hyps, refs, n_workers)
        ahead.reap(kernel=False)  # an index build started beside the job is done: the index was used
        return out

    @staticmethod
    def segment_score(stats: MeteorStats) -> float:
        """METEOR of one segment's statistics (EVAL's per-item line)."""
        return segment_score(stats)

    @staticmethod
    def corpus_score(all_stats: Sequence[MeteorStats]) -> float:
        """METEOR of the summed statistics (EVAL's last line)."""
        return corpus_score(list(all_stats))

    def score(
        self, hypotheses: Sequence[str], references: Sequence[Sequence[str]], workers: int | None = None
    ) -> tuple[float, list[float]]:
        """(corpus score, per-item scores) exactly as pycocoevalcap's ``Meteor().compute_score``.

        Inputs go through the same ``|||`` handling as pycocoevalcap's stdio protocol
        (:func:`pycocoevalcap_fields`). Each item needs at least one reference.

        ``workers``: worker processes (forked; results are identical and in input order).
        None: ``min(cpu count, 4)`` for more than 2,000 items, else 1. Where ``fork`` is
        not available everything runs in this process (see :mod:`.parallel`).
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
        results = self._run(hyps, refs, workers)
        all_stats = [to_stats(st) for st, _ in results]
        return corpus_score(all_stats), [sc for _, sc in results]


def _check_refs(references) -> None:
    if isinstance(references, str):
        raise InputError("references must be a list of strings, not a single string")
    if len(references) == 0:
        raise InputError("METEOR needs at least one reference per hypothesis (got an empty list)")
