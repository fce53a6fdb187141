"""``capeval.compare``: is system B better than system A on the same items?

Every system is scored once (the scorers of :class:`capeval.Evaluator`, keeping their per-item
statistics); each metric's corpus score is then rebuilt from those statistics on resamples of
the items (:mod:`capeval.significance.statistics`) by a paired test
(:mod:`capeval.significance.paired`): paired bootstrap (``method="bs"``, the default, as
sacreBLEU ``--paired-bs``) or approximate randomisation (``"ar"``, as ``--paired-ar``). The
draws are made once for all systems and metrics, and the baseline's scores on them once.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from capeval.significance.paired import (PairedResult, bootstrap_result, bootstrap_scores, estimate_ci,
                                         randomization_gaps, randomization_result)
from capeval.significance.statistics import (bleu_statistic, check_mean, cider_statistic, mean_statistic,
                                             meteor_statistic)
from capeval.errors import InputError
from capeval.gc_pause import gc_paused
from capeval.io.inputs import CheckedCandidates, CheckedReferences, normalize_candidates, normalize_references

METHODS = ("bs", "ar")
#: sacreBLEU's defaults: 1,000 bootstrap resamples, 10,000 randomisation trials, seed 12345
DEFAULT_SAMPLES = {"bs": 1000, "ar": 10000}
DEFAULT_SEED = 12345
#: fewer items than this: the test is reported but no row is marked significant, with a warning.
#: Why 10: the bootstrap sees the spread of the items' differences as (n-1)/n of the sample
#: variance and cuts its interval at normal quantiles, so for a mean of normally distributed
#: item differences a nominal 5% test rejects a true null with probability
#: P(|t_(n-1)| > 1.96 sqrt((n-1)/n)): 19% at 4 items, 10.2% at 9, 9.6% at 10, 7.1% at 20. From
#: 10 items the real error rate is at most twice the nominal one (docs/compare.md).
MIN_ITEMS = 10
#: the metric groups whose scorers make no BLAS call (capeval/metrics/bleu.py, meteor/, rouge.py,
#: cider.py): compare keeps numpy's BLAS on one thread around their scoring and resamples
_NO_BLAS_GROUPS = ("bleu", "meteor", "rouge-l", "cider-d")


def _check(method: str, samples: int | None, seed: int | None, confidence: float) -> int:
    from capeval.errors import shown
    from capeval.ranges import COMPARE_RANGES

    if method not in METHODS:
        raise InputError(f"compare: method={method!r}: expected 'bs' (paired bootstrap) or 'ar' (approximate "
                         "randomisation)")
    if samples is None:
        samples = DEFAULT_SAMPLES[method]
    for name, value in (("samples", samples), ("seed", seed), ("confidence", confidence)):
        bounds = COMPARE_RANGES[name]
        if not (name == "seed" and value is None) and not bounds.accepts(value):
            raise InputError(f"compare: {name}={shown(value)} out of range: {bounds.describe(name)}")
    return samples


def _systems(systems: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    if not isinstance(systems, Mapping) or len(systems) < 2:
        raise InputError("compare needs at least two systems: {name: {id: caption}, ...} (the first is the baseline)")
    # checked once here: each system's scoring pass then copies them without checking again
    out = {str(name): CheckedCandidates(normalize_candidates(cands)) for name, cands in systems.items()}
    names = list(out)
    ids = set(out[names[0]])
    for name in names[1:]:
        other = set(out[name])
        if other != ids:
            missing = sorted(ids - other)[:1] or sorted(other - ids)[:1]
            raise InputError(f"compare: system {name!r} and the baseline {names[0]!r} are not scored on the same items "
                             f"(e.g. {missing[0]!r} is in one only); paired tests need the same ids")
    return out


def _statistics(name: str, cands: dict[str, str], refs: dict[str, list[str]], metrics: list[str],
                options: Mapping[str, Mapping[str, Any]] | None, *, shared: dict[str, Any] | None = None,
                samples: int = 1000, method: str = "bs", evaluator: Any = None) -> tuple[dict[str, Any], Any]:
    """(metric -> Statistic, the system's Report) for one system, from its one scoring pass.

    The scorers keep their per-item statistics in that pass (:mod:`capeval.significance.keep`):
    BLEU's counts, METEOR's statistics, CIDEr-D's n-gram tables; nothing is tokenised or run
    again. ``shared``: what the systems' statistics share (CIDEr-D's document frequencies of each
    resample, the references' norms), filled by the first system; none for ``method="ar"``, whose
    trials swap whole outputs (the references, hence CIDEr-D's df, stay those of the full set).
    ``evaluator``: the :class:`~capeval.Evaluator` of ``metrics`` scoring every system (built
    here when None)."""
    from capeval.significance.keep import keeping

    shared = {} if shared is None else shared
    if evaluator is None:
        evaluator = _evaluator(metrics, options, refs)
    with keeping() as kept:
        report = evaluator.score(cands, refs, progress=False)
    ids = list(cands)
    out: dict[str, Any] = {}
    for metric in metrics:
        result = report[metric]
        stats = kept.get(metric)
        if metric == "meteor" and stats is not None:
            stat = meteor_statistic(stats)
            _same(metric, name, stat.score(), result.system)
        elif metric.startswith("bleu-") and stats is not None:
            stat = bleu_statistic(stats, int(metric[5:]))
            _same(metric, name, stat.score(), result.system)
        elif metric == "cider-d" and stats is not None:
            from capeval.significance.cider_resample import CiderResampling

            items = _item_array(result.items, ids)
            common = shared.get(metric)
            if method == "ar":
                common = None
            elif common is None or not common.same_references(stats):
                from capeval.significance.keep import defer

                # its index of the references is built while the next system's workers score
                common = CiderResampling(len(ids), stats, samples_hint=samples, defer=True)
                defer(common.prepare)
                shared.setdefault(metric, common)
            stat = cider_statistic(stats, items, common)
        else:
            _every_item_scored(metric, name, ids, result)
            items = _item_array(result.items, ids)
            check_mean(metric, result.system, items)
            stat = mean_statistic(items)
        out[metric] = stat
    return out, report


def _load_kernels_ahead(work: int) -> None:
    """CIDEr-D's resampling kernels built ahead of time, loaded (checked, imported: 20 ms) while
    the scoring pass's workers score rather than between the pass and the resamples, for a job
    that will use them (:class:`~capeval.significance.cider_resample.CiderResampling`)."""
    from capeval.significance.cider_arrays import JIT_MIN_WORK, numba_available
    from capeval.significance.keep import defer

    if work >= JIT_MIN_WORK and numba_available():
        from capeval.significance import cider_aot

        defer(cider_aot.load)


def _evaluator(metrics: list[str], options: Mapping[str, Mapping[str, Any]] | None, refs: Any) -> Any:
    """One :class:`~capeval.Evaluator` for every system (as :func:`capeval.score` builds it): the
    scorers are loaded once, and the first system's text pass can score the others' candidates
    for the very scorers that their own passes then run (:func:`capeval.significance.keep.score_ahead`)."""
    from capeval.evaluator import Evaluator
    from capeval.io.inputs import check_reference_counts

    check_reference_counts(refs)
    return Evaluator(metrics, options=options, progress=False)


def _item_array(items: Mapping[str, float], ids: list[str]) -> np.ndarray:
    """A system's item scores in the order of ``ids`` (float64)."""
    from capeval.result import ItemScores

    if isinstance(items, ItemScores):
        return np.array(items.in_order(ids), dtype=np.float64)
    return np.array([items[i] for i in ids], dtype=np.float64)


def _every_item_scored(metric: str, name: str, ids: list[str], result: Any) -> None:
    """A one-line error naming the first item of system ``name`` without a ``metric`` score: a
    judge's error item (an answer without a number, left out of its items), an item skipped, or
    a NaN score. Paired tests draw the same items for every system, so such an item cannot be
    left out of one system only; leaving it out of all of them would change every system's
    score from the one ``capeval score`` gives. The user decides: rescore it, drop the id from
    every file, or score error items as the official code does (``unparsed=zero``)."""
    from capeval.errors import shown

    items = result.items
    bad = [i for i in ids if i not in items or items[i] != items[i]]  # missing or NaN
    if not bad:
        return
    first = bad[0]
    errors = result.extras.get("errors")
    error = errors.get(first) if isinstance(errors, Mapping) else None
    if isinstance(error, Mapping) and error.get("error"):
        why = f"is an error item ({error['error']})"
    elif error is not None:
        why = f"is an error item ({shown(error)})"
    elif first not in items:
        why = "has no score (left out by the metric)"
    else:
        why = f"has a score of {items[first]!r}"
    more = f" ({len(bad)} such items in all)" if len(bad) > 1 else ""
    from capeval.options import option_types
    from capeval.registry import get

    spec = get(metric)
    zero = "unparsed" in (option_types(spec) or {})
    hint = f", or -O {spec.group}.unparsed=zero to score them 0 as the official code" if zero else ""
    raise InputError(f"compare: {metric} of system {shown(name)}: item {shown(first)} {why}{more}; paired tests "
                     "need a score for every item of every system: rescore it, leave the id out of every system's "
                     f"file{hint}", item_id=first)


def _same(metric: str, name: str, rebuilt: float, system: float) -> None:
    """A statistic rebuilt from the kept per-item statistics must give the system's score (a
    guard against a scorer whose statistics mean something else)."""
    if not math.isclose(rebuilt, system, rel_tol=1e-12, abs_tol=1e-15):
        raise InputError(f"compare: {metric} of {name!r} rebuilt from its statistics ({rebuilt!r}) differs from its "
                         f"score ({system!r}); options that change its statistics are not supported by compare")


def compare(systems: Mapping[str, Any], references: Mapping[Any, Any], metrics: str | Sequence[str] = "bleu-4",
            *, method: str = "bs", samples: int | None = None, seed: int | None = DEFAULT_SEED,
            confidence: float = 0.95, options: Mapping[str, Mapping[str, Any]] | None = None,
            progress: bool | None = False, reports: dict[str, Any] | None = None) -> dict[str, Any]:
    """Paired significance of every system against the first (the baseline), per metric.

    ``systems``: ``{name: {id: caption}}`` in order, the first is the baseline; all must cover
    the same ids. ``method``: ``"bs"`` (paired bootstrap, sacreBLEU ``--paired-bs``) or ``"ar"``
    (approximate randomisation, ``--paired-ar``); ``samples``: resamples or trials (default 1,000
    / 10,000, range [1, 10^6]); ``seed``: numpy ``default_rng`` seed (default 12345 as sacreBLEU;
    ``None`` draws fresh entropy, once for all systems); ``confidence``: of the bootstrap interval
    of the difference. ``progress``: progress on stderr (scoring, then the resamples; None: when
    stderr is a terminal). ``reports``: a dict filled with each system's :class:`~capeval.result.Report`.

    Each system is scored once; every metric's corpus score on a resample is rebuilt from the
    per-item statistics of that pass, on draws shared by every system and metric.

    Returns JSON-ready data: ``{"baseline", "method", "samples", "seed", "confidence", "items",
    "signatures": {metric: str}, "systems": {name: {metric: {"score", "diff", "p_value", ...}}}}``;
    for the bootstrap also each system's bootstrap ``mean`` and ``ci`` (sacreBLEU's half-width;
    the baseline's too) and ``diff_ci`` ``[low, high]``. With fewer than :data:`MIN_ITEMS` items
    every compared row carries ``"too_few_items": true`` and one warning says why. Raises
    :class:`~capeval.errors.InputError` (one line) on bad input.
    """
    from capeval.progress import make_progress, progress_setting, resolve
    from capeval.registry import expand
    from capeval.registry import get as get_spec

    samples = _check(method, samples, seed, confidence)
    names_metrics = expand(metrics)
    # checking the inputs makes many small acyclic objects (each system's copy, each id's list): the
    # collector would scan the inputs' objects again and again (as in score_text)
    with gc_paused():
        cands = _systems(systems)
        refs = CheckedReferences(normalize_references(references))
    names = list(cands)
    n_items = len(next(iter(cands.values())))
    stats: dict[str, dict[str, Any]] = {}
    signatures: dict[str, str] = {}
    # compare's own progress (capeval bench's: a bar on a terminal, a line every few seconds
    # elsewhere) says how far the scoring and the resampling are; an error ends it without a
    # line (the error is the one line); the scorers' own bars stay off
    show = resolve(progress)
    from capeval.significance.keep import score_ahead, sharing

    from capeval.significance.blas_threads import quiet_blas

    resampled_cider = method == "bs" and "cider-d" in names_metrics
    if resampled_cider:
        from capeval.significance.blas_dot import check_ahead

        # the resample means' BLAS check wakes BLAS's threads, which spin for a tenth of a
        # second: now, before the scoring pass's fork shuts them down, not beside the kernels
        check_ahead(n_items)
    # BLAS on one thread from before the scoring pass's forks (no thread created after them
    # spins beside the kernels), where no scorer makes a BLAS call (blas_threads)
    quiet = method == "bs" and all(get_spec(m).group in _NO_BLAS_GROUPS for m in names_metrics)
    with progress_setting(False), quiet_blas(quiet), gc_paused():
        shared: dict[str, Any] = {}
        evaluator = _evaluator(names_metrics, options, refs)
        # the systems after the first take its tokenised references and corpus index (text_share);
        # its pass scores their candidates beside its own, on joint n-gram tables
        with make_progress(len(names) * n_items, "compare: scoring", show) as bar, sharing(method == "bs"):
            score_ahead([cands[name] for name in names[1:]])
            if resampled_cider:
                _load_kernels_ahead(n_items * samples)
            for name in names:
                stats[name], report = _statistics(name, cands[name], refs, names_metrics, options, shared=shared,
                                                  samples=samples, method=method, evaluator=evaluator)
                if reports is not None:  # each system's Report (per-item scores): capeval compare --html's items
                    reports[name] = report
                if not signatures:
                    signatures = {m: f"{report[m].signature}|paired:{method}|samples:{samples}|"
                                     f"seed:{str(seed).lower()}" for m in names_metrics}
                bar.update(n_items)
        few = n_items < MIN_ITEMS
        if few:
            warnings.warn(f"compare: {n_items} item{'s' if n_items != 1 else ''} only: too few for a paired test to "
                          f"mean much (fewer than {MIN_ITEMS}; see docs/compare.md); no row is marked significant",
                          UserWarning, stacklevel=2)
        baseline = names[0]
        order = [(m, name) for m in names_metrics for name in names]
        label = "paired bootstrap" if method == "bs" else "approximate randomisation"
        with make_progress(samples, f"compare: {label}", show) as bar:
            if method == "bs":
                scores = bootstrap_scores([stats[name][m] for m, name in order], samples, seed, bar)
                by = {key: scores[j] for j, key in enumerate(order)}
            else:
                gaps = {m: randomization_gaps(stats[baseline][m], [stats[name][m] for name in names[1:]], samples,
                                              seed, bar) for m in names_metrics}
    out: dict[str, Any] = {"baseline": baseline, "method": method, "samples": samples, "seed": seed,
                           "confidence": confidence if method == "bs" else None, "items": n_items,
                           "signatures": signatures, "systems": {}}
    base_row: dict[str, Any] = {}
    for m in names_metrics:
        base_row[m] = {"score": stats[baseline][m].score()}
        if method == "bs":
            mean, ci = estimate_ci(by[(m, baseline)])
            base_row[m].update(mean=mean, ci=ci)
    out["systems"][baseline] = base_row
    for j, name in enumerate(names[1:]):
        row = {}
        for m in names_metrics:
            base, other = stats[baseline][m], stats[name][m]
            if method == "bs":
                res = bootstrap_result(base, other, by[(m, baseline)], by[(m, name)], confidence)
            else:
                res = randomization_result(base, other, gaps[m][j])
            row[m] = _row(res, few)
        out["systems"][name] = row
    return out


def _row(res: PairedResult, few: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {"score": res.system, "diff": res.system - res.baseline, "p_value": res.p_value}
    if res.mean is not None:
        row.update(mean=res.mean, ci=res.ci, diff_ci=[res.diff_low, res.diff_high])
    if few:
        row["too_few_items"] = True
    return row


def significant(row: Mapping[str, Any], alpha: float = 0.05) -> bool:
    """Whether a compared row is shown as significant (shaded, starred): ``p < alpha``, a
    difference at all (identical outputs get ``p = 1/(samples+1)`` from sacreBLEU's formula),
    and enough items (no ``too_few_items``)."""
    p = row.get("p_value")
    diff = row.get("diff")
    real = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)  # noqa: E731
    return (real(p) and p < alpha and real(diff) and diff != 0 and row.get("too_few_items") is not True)
