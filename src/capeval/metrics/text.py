"""Text metrics' shared base and their chunked pipeline.

Every reference-based text metric is streamable: corpus statistics (CIDEr-D's document
frequencies) take one pass over the references, and everything else is per item, with
system scores from merged sufficient statistics (BLEU's summed counts, METEOR's summed
statistics; ROUGE-L and CIDEr-D: the mean of the items). :func:`score_text` therefore
tokenises and scores chunk by chunk, once for all the text metrics of a call, optionally
in forked worker processes, and the results do not depend on the chunk size: they equal
those of one chunk bit for bit. Memory stays flat beyond the inputs and the per-item
scores.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice
from typing import Any, ClassVar

from capeval.errors import InputError
from capeval.gc_pause import gc_paused
from capeval.io.inputs import prepare_text_inputs
from capeval.metrics.text_chunks import TextChunk, span_texts, tokenize_span, tokenize_texts
from capeval.progress import make_progress
from capeval.result import MetricResult, Report
from capeval.scorer import ScorerBase

__all__ = ["DEFAULT_CHUNK", "KEEP_TOKENS_CHARS", "RECYCLE_ITEMS", "TextChunk", "TextScorer", "score_text",
           "score_text_stream", "span_texts", "tokenize_span", "tokenize_texts"]

#: items per chunk unless ``chunk_size`` says otherwise
DEFAULT_CHUNK = 2048
#: the same in a comparison's passes whose CIDEr-D is resampled: each chunk becomes a group of
#: the resampling, and a group's work arrays per block of resamples (its sentences' norms: 12 MB
#: at 1,024 items and 64 resamples) then stay in the last-level cache for two threads (the
#: 1,000 resamples of 40,000 items: 2.52 CPU-s against 2.74 at 2,048; scoring one system alone
#: is faster with 2,048)
RESAMPLED_CHUNK = 1024
#: characters of tokenised captions the corpus pass keeps for the scoring pass (about
#: the inputs' size in memory; beyond, the scoring pass tokenises them again)
KEEP_TOKENS_CHARS = 16 << 20
#: a worker process is replaced after about this many items (bounds memory, see
#: :func:`capeval.metrics.workers.map_tasks`). Each new worker pays a process's start: the
#: parent's pages it writes to copied, its heap faulted in, METEOR's caches filled again. At
#: 16,384 (the former value) a 100,000-item coco-ngram run took 42 CPU-s and 584 MB of the
#: process tree's PSS; at 32,768 35 CPU-s and 596 MB (65,536: 37 CPU-s, 650 MB); and a
#: 40,000-item compare of two systems no longer forks a worker mid-pass (its parent, holding the
#: first system's statistics, is the costliest to fork): 340,000 page faults -> 240,000
RECYCLE_ITEMS = 32768


class TextScorer(ScorerBase):
    """Base of reference-based n-gram metrics: validation + PTB tokenisation, shared.

    ``tokenizer="ptb"`` reproduces pycocoevalcap's PTBTokenizer in pure Python;
    ``tokenizer="none"`` takes the inputs as already tokenised (split on spaces).
    ``chunk_size``: items tokenised and scored at a time (memory; results do not depend on
    it); ``workers``: worker processes (None: automatic, see
    :func:`capeval.metrics.workers.resolve_workers`). Subclasses implement the streaming
    steps :meth:`score_chunk` and :meth:`merge`, and :meth:`corpus_order` when they need
    document frequencies of the whole set.
    """

    produces: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        metrics: Sequence[str] | None = None,
        tokenizer: str = "ptb",
        chunk_size: int | None = None,
        workers: int | None = None,
    ):
        chosen = self._select(metrics)
        if tokenizer not in ("ptb", "none"):
            raise InputError(f"unknown tokenizer {tokenizer!r}; use 'ptb' or 'none'")
        for name, value in (("chunk_size", chunk_size), ("workers", workers)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(f"{name} must be a positive integer, got {value!r}")
        self.metrics = chosen
        self.tokenizer = tokenizer
        self.chunk_size = chunk_size
        self.workers = workers

    # -- public ---------------------------------------------------------------
    def score(
        self,
        candidates: Mapping[Any, Any] | Sequence[str],
        references: Mapping[Any, Any] | None = None,
        *,
        progress: bool | None = False,
        **inputs: Any,
    ) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}``; see the class docs.

        ``progress``: draw a progress bar on stderr (None: only when it is a terminal).
        """
        if inputs:
            raise InputError(f"{type(self).__name__} takes only text; unexpected inputs {sorted(inputs)}")
        return Report(score_text([self], candidates, references, progress=progress))

    def tokenize(
        self, ids: list[str], cands: Mapping[str, str], refs: Mapping[str, list[str]], progress: bool | None = False
    ) -> tuple[list[str], list[list[str]]]:
        """Tokenise candidates and references as the COCO evaluation code does (all at once)."""
        with make_progress(len(ids) + sum(len(refs[i]) for i in ids), "tokenize", progress) as bar:
            return tokenize_span(self.tokenizer, ids, cands, refs, 0, len(ids), bar.update)

    def signature_params(self, nrefs: str) -> dict[str, Any]:
        """Signature fields every text metric shares (``nrefs``: e.g. ``"5"`` or ``"1-5"``)."""
        return {"tok": "ptb-corenlp-3.4.1" if self.tokenizer == "ptb" else "none", "nrefs": nrefs}

    # -- streaming steps, for subclasses -------------------------------------------
    def before_chunks(self, n_items: int) -> None:
        """Called once in this process before the chunks of ``n_items`` items are scored (before
        the scoring pass's workers are forked, so that they inherit what it loads; with a
        corpus pass, while its workers count). Default: nothing."""

    def corpus_order(self) -> int | None:
        """Order of the document frequencies over the whole set this metric needs, or None."""
        return None

    def score_chunk(self, chunk: TextChunk, corpus: Any) -> Any:
        """Per-item scores and sufficient statistics of one chunk (small, picklable).

        ``corpus``: the :class:`~capeval.metrics.ngrams.GramIndex` of all references when
        some metric asked for one (:meth:`corpus_order`), else None.
        """
        raise NotImplementedError

    def merge(self, ids: list[str], parts: list[Any], nrefs: str) -> list[MetricResult]:
        """The results over all items from the chunks' :meth:`score_chunk` outputs, in order."""
        raise NotImplementedError


def score_text(
    scorers: Sequence[TextScorer],
    candidates: Mapping[Any, Any] | Sequence[str],
    references: Mapping[Any, Any] | None,
    *,
    progress: bool | None = False,
) -> dict[str, MetricResult]:
    """Every metric of ``scorers`` (one tokenizer) on one input set, chunk by chunk.

    The chunk size is the smallest ``chunk_size`` of the scorers (default
    :data:`DEFAULT_CHUNK`); workers: the largest ``workers`` given, else automatic.
    With several workers chunks are made small enough that each worker gets a few.
    """
    # Scoring allocates many small acyclic objects (METEOR's sentence data above all); the
    # cyclic garbage collector would re-scan them over and over (a sixth of the run time)
    with gc_paused():
        return _score_text(scorers, candidates, references, progress)


def _score_text(
    scorers: Sequence[TextScorer],
    candidates: Mapping[Any, Any] | Sequence[str],
    references: Mapping[Any, Any] | None,
    progress: bool | None,
) -> dict[str, MetricResult]:
    tokenizers = {s.tokenizer for s in scorers}
    if len(tokenizers) != 1:
        raise InputError(f"score_text needs one tokenizer, got {sorted(tokenizers)}")
    tokenizer = tokenizers.pop()
    from capeval.metrics.text_share import taken_ahead

    # a comparison's later system scored by the first one's pass (the same references object,
    # the same scorers, checked candidates): its chunks' results are merged, nothing is redone
    taken = taken_ahead(scorers, candidates, references)
    if taken is not None:
        return _merge_taken(scorers, candidates, taken, progress)
    cands, refs = prepare_text_inputs(candidates, references, needs_references=True)
    assert refs is not None
    ids = list(cands)

    def tasks(with_candidates: bool, work: list[tuple[int, int]]) -> Iterator[tuple]:
        return (span_texts(ids, cands if with_candidates else None, refs, a, b) for a, b in work)

    return _score_spans(scorers, tokenizer, ids, sorted({len(refs[i]) for i in ids}), tasks, progress, refs,
                        source=references, ahead=True)


def _merge_taken(scorers: Sequence[TextScorer], candidates: Mapping[str, str], taken: tuple[list[str], Any, str],
                 progress: bool | None) -> dict[str, MetricResult]:
    """The results of chunks scored by an earlier pass (:func:`~capeval.metrics.text_share.taken_ahead`),
    with what this pass would have done besides: its empty-candidates warning, its progress, the
    comparison's work left for it (:func:`capeval.significance.keep.run_deferred`)."""
    from capeval.io.inputs import warn_empty_candidates
    from capeval.significance.keep import run_deferred

    ids, parts, nrefs = taken
    warn_empty_candidates([i for i, c in candidates.items() if not c.strip()])
    label = "/".join(m for s in scorers for m in s.metrics)[:24]
    with make_progress(len(ids), label, progress) as bar:
        run_deferred()
        bar.update(len(ids))
    return _merged(scorers, ids, parts, nrefs)


def score_text_stream(
    scorers: Sequence[TextScorer],
    ids: list[str],
    ref_counts: Sequence[int],
    items: Callable[[bool], Iterable[tuple[str, str, list[str]]]],
    *,
    progress: bool | None = False,
) -> dict[str, MetricResult]:
    """:func:`score_text` on items gone over twice from a stream instead of held in memory.

    ``ids``: the item ids in order; ``ref_counts``: the distinct numbers of references per
    item (the signature's ``nrefs``); ``items(with_candidates)``: a fresh iterator of ``(id,
    candidate, [references])`` in that order, already validated (as :func:`prepare_text_inputs`
    would; the candidates are not read without ``with_candidates``).
    It is read once for the corpus statistics (when a metric needs them) and once to score,
    each time a chunk plus the :data:`~capeval.tokenize.CONTEXT_CAPTIONS` items after it at
    a time; the chunks, their tokenisation context and so the results are those of
    :func:`score_text` on the same items, bit for bit.
    """
    tokenizers = {s.tokenizer for s in scorers}
    if len(tokenizers) != 1:
        raise InputError(f"score_text needs one tokenizer, got {sorted(tokenizers)}")

    def tasks(with_candidates: bool, work: list[tuple[int, int]]) -> Iterator[tuple]:
        return _stream_spans(ids, items(with_candidates), with_candidates, work)

    with gc_paused():
        return _score_spans(scorers, tokenizers.pop(), ids, sorted(set(ref_counts)), tasks, progress)


def _stream_spans(ids: list[str], items: Iterable[tuple[str, str, list[str]]], with_candidates: bool,
                  work: list[tuple[int, int]]) -> Iterator[tuple]:
    """:func:`span_texts` of each span of ``work``, from a stream of items (a window of a span
    and its context at a time)."""
    from capeval.tokenize import CONTEXT_CAPTIONS

    window: deque[tuple[str, str, list[str]]] = deque()
    stream = iter(items)
    for a, b in work:
        while len(window) < b - a + CONTEXT_CAPTIONS:
            nxt = next(stream, None)
            if nxt is None:
                break
            window.append(nxt)
        span = [window.popleft() for _ in range(min(b - a, len(window)))]
        if len(span) != b - a or any(item[0] != ids[k] for k, item in enumerate(span, a)):
            raise InputError("the input files changed while being scored (read twice: once for the corpus "
                             "statistics, once to score)")
        after = list(islice(window, CONTEXT_CAPTIONS))
        hyps = [c for _, c, _ in span] if with_candidates else None
        next_hyps = [c for _, c, _ in after] if with_candidates else []
        yield hyps, [r for _, _, r in span], next_hyps, [x for _, _, r in after for x in r][:CONTEXT_CAPTIONS]


def _score_spans(
    scorers: Sequence[TextScorer],
    tokenizer: str,
    ids: list[str],
    counts: list[int],
    tasks: Callable[[bool, list[tuple[int, int]]], Iterator[tuple]],
    progress: bool | None,
    refs: Mapping[str, list[str]] | None = None,
    *,
    source: Any = None,
    ahead: bool = False,
) -> dict[str, MetricResult]:
    """The chunked pipeline over ``ids``; ``tasks(with_candidates, spans)``: the
    :func:`span_texts` of each span (candidates None without ``with_candidates``). ``refs``:
    the references in memory, when the pass may share its reference work with the other
    systems of a comparison (:mod:`capeval.metrics.text_share`); ``source``: the references as
    the caller gave them (later passes on that very object find the later systems' results:
    :func:`~capeval.metrics.text_share.taken_ahead`); ``ahead``: score a
    comparison's later systems (:func:`~capeval.metrics.text_share.ahead_texts`) in this pass
    beside its own when it is the first on these references
    (:func:`~capeval.metrics.text_share.joint_scores`)."""
    from capeval.metrics.workers import map_tasks, resolve_workers, spans

    n_items = len(ids)
    sizes = [s.chunk_size for s in scorers if s.chunk_size]
    from capeval.significance.keep import kept as keeping_statistics, wants_reference_sets

    orders = [o for o in (s.corpus_order() for s in scorers) if o]
    # a comparison's pass whose CIDEr-D (a metric with a corpus) is resampled
    resampled = bool(orders) and keeping_statistics() is not None and wants_reference_sets() and refs is not None
    chunk = min(sizes) if sizes else RESAMPLED_CHUNK if resampled else DEFAULT_CHUNK
    given = [s.workers for s in scorers if s.workers]
    workers = resolve_workers(max(given) if given else None, n_items)
    if workers > 1:
        chunk = min(chunk, max(64, math.ceil(n_items / (4 * workers))))
    if workers > 1 and tokenizer == "ptb":
        from capeval.tokenize import warm_up

        warm_up()  # once here rather than in every worker
    work = spans(n_items, chunk)
    recycle = max(1, RECYCLE_ITEMS // chunk)
    nrefs = "0" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    label = "/".join(m for s in scorers for m in s.metrics)[:24]

    corpus = None
    kept: list[tuple[list[str], list[list[str]]] | None] = []  # per span: its tokenised texts, or None
    prepared = False  # before_chunks called
    share, reused = None, False
    if orders and refs is not None:
        from capeval.metrics.text_share import find_shared

        share, reused = find_shared(tokenizer, max(orders), work, ids, refs)
    # later systems scored here, on joint tables: by the first pass of a comparison on these references
    if ahead and share is not None and not reused and refs is not None:
        from capeval.metrics.text_share import ahead_texts

        joint = ahead_texts(ids)
    else:
        joint = []
    if reused:  # another system's pass on these references counted them: its index, its tokens
        corpus = share.corpus
    elif orders:
        from capeval.metrics.ngrams import GramIndex

        corpus = GramIndex(max(orders))

        # a comparison's first pass: the references' (item, n-gram) pairs, for its resampling
        with_pairs = share is not None and resampled

        def count(task: tuple) -> Any:
            hyps, rs = tokenize_texts(tokenizer, *task)
            return corpus.part(rs, pairs=with_pairs), hyps, rs

        # the tokenised candidates and references are kept for the scoring pass, up to a
        # budget (beyond, they are tokenised again there): tokenising is the costlier of the
        # two, and a worker tokenising both meets a candidate that is also a reference (as
        # in leave-one-out jobs) in its tokeniser's cache
        budget = KEEP_TOKENS_CHARS
        with make_progress(n_items, "references", progress) as bar:
            for part, hs, rs in map_tasks(count, tasks(True, work), workers, recycle):
                if not prepared:  # here the corpus pass's workers go on counting meanwhile
                    prepared = True
                    for s in scorers:
                        s.before_chunks(n_items)
                corpus.add_part(part)
                if budget > 0:
                    budget -= sum(map(len, chain.from_iterable(rs))) + sum(map(len, hs))
                    kept.append((hs, rs) if budget >= 0 else None)
                if share is not None:  # the references within the budget, for the next systems
                    share.tokens.append(rs if budget >= 0 else None)
                bar.update(part.n_items)

    if not prepared:
        for s in scorers:
            s.before_chunks(n_items)
    if corpus is not None and corpus.keeps_pairs and not reused:
        from capeval.significance.keep import offer_reference_sets
        from capeval.significance.reference_sets import ReferenceSets

        offer_reference_sets(ReferenceSets(corpus))  # built while the scoring pass's workers score

    def tokenised(task: tuple) -> tuple[list[str], list[list[str]]]:
        if len(task) == 2:  # tokenised by the corpus pass
            return task
        if len(task) == 3:  # references tokenised by another system's pass: chunk task[2]'s
            return tokenize_texts(tokenizer, task[0], [], task[1], [])[0], share.tokens_of(task[2])
        return tokenize_texts(tokenizer, *task)

    def job(task: tuple) -> tuple[Any, ...]:
        if joint:  # (chunk number, task): the later systems' candidates of that chunk too
            from capeval.metrics.text_share import joint_scores

            k, task = task
            return joint_scores(scorers, corpus, tokenizer, *tokenised(task), joint, work[k])
        piece = TextChunk(*tokenised(task))
        return len(piece), [s.score_chunk(piece, corpus) for s in scorers]

    def scoring_tasks() -> Iterator[tuple]:
        for k, task in enumerate(tasks(True, work)):
            tokens = kept[k] if k < len(kept) else None
            if reused and share.tokens_of(k) is not None:
                # candidates, the ones after them, the chunk whose tokenised references the job
                # reads from the shared entry: a forked worker has it from the parent (it is held
                # until the comparison ends), so they are not pickled to it
                yield task[0], task[2], k
            elif tokens is None:
                yield task
            else:
                kept[k] = None  # handed on: held by the task only
                yield tokens

    parts: list[list[Any]] = [[] for _ in scorers]
    later: list[list[list[Any]]] = [[[] for _ in scorers] for _ in joint]  # per later system
    from capeval.significance.keep import run_deferred

    work_tasks: Iterable[Any] = enumerate(scoring_tasks()) if joint else scoring_tasks()
    with make_progress(n_items, label, progress) as bar:
        # a comparison's work left for this pass (capeval.significance.keep.defer) is done here
        # while the workers score: this process would only wait for them
        for done, outs, *others in map_tasks(job, work_tasks, workers, recycle, meanwhile=run_deferred):
            for k, out in enumerate(outs):
                parts[k].append(out)
            for j, system_outs in enumerate(others[0] if others else []):
                for k, out in enumerate(system_outs):
                    later[j][k].append(out)
            bar.update(done)
    if share is not None and not reused:
        from capeval.metrics.text_share import publish

        share.ahead = [(tuple(scorers), t, p) for t, p in zip(joint, later)]
        share.source, share.nrefs = source, nrefs
        publish(share, corpus)
    return _merged(scorers, ids, parts, nrefs)


def _merged(scorers: Sequence[TextScorer], ids: list[str], parts: list[list[Any]], nrefs: str) -> dict[str, MetricResult]:
    results: dict[str, MetricResult] = {}
    for s, p in zip(scorers, parts):
        for r in s.merge(ids, p, nrefs):
            results[r.metric] = r
    return results
