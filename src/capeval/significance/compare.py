"""``capeval.compare``: is system B better than system A on the same items?

Every system is scored with :func:`capeval.score`; each metric's corpus score is then rebuilt
on resamples of the items (:mod:`capeval.significance.statistics`) by a paired test
(:mod:`capeval.significance.paired`): paired bootstrap (``method="bs"``, the default, as
sacreBLEU ``--paired-bs``) or approximate randomisation (``"ar"``, as ``--paired-ar``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from capeval.significance.paired import PairedResult, approximate_randomization, paired_bootstrap
from capeval.significance.statistics import CiderStatistic, bleu_statistic, check_mean, mean_statistic, meteor_statistic
from capeval.errors import InputError
from capeval.io.inputs import normalize_candidates, normalize_references

METHODS = ("bs", "ar")
#: sacreBLEU's defaults: 1,000 bootstrap resamples, 10,000 randomisation trials, seed 12345
DEFAULT_SAMPLES = {"bs": 1000, "ar": 10000}
DEFAULT_SEED = 12345


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
    out = {str(name): normalize_candidates(cands) for name, cands in systems.items()}
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
                options: Mapping[str, Mapping[str, Any]] | None) -> tuple[dict[str, Any], Any]:
    """(metric -> Statistic, the system's Report) for one system."""
    from capeval.api import score

    report = score(cands, refs, metrics, options=options)
    ids = list(cands)
    out: dict[str, Any] = {}
    table = None
    for metric in metrics:
        result = report[metric]
        if metric == "meteor":
            stat = _meteor(ids, cands, refs, options)
            _same(metric, name, stat.score(), result.system)
        elif metric.startswith("bleu-") or metric == "cider-d":
            if table is None:
                table = _ngram_table(ids, cands, refs, options)
            if metric == "cider-d":
                sigma = float(((options or {}).get("cider-d") or {}).get("sigma", 6.0))
                stat = CiderStatistic(table, sigma)
            else:
                from capeval.metrics.bleu import table_bleu_stats

                testlen, reflen, guess, correct = table_bleu_stats(table)
                rows = np.column_stack([testlen, reflen, np.array(guess), np.array(correct)])
                stat = bleu_statistic(rows, int(metric[5:]))
            _same(metric, name, stat.score(), result.system)
        else:
            _every_item_scored(metric, name, ids, result)
            items = np.array([result.items[i] for i in ids], dtype=np.float64)
            check_mean(metric, result.system, items)
            stat = mean_statistic(items)
        out[metric] = stat
    return out, report


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
    if not math.isclose(rebuilt, system, rel_tol=1e-12, abs_tol=1e-15):
        raise InputError(f"compare: {metric} of {name!r} rebuilt from its statistics ({rebuilt!r}) differs from its "
                         f"score ({system!r}); options that change its statistics are not supported by compare")


def _meteor(ids: list[str], cands: dict[str, str], refs: dict[str, list[str]],
            options: Mapping[str, Mapping[str, Any]] | None) -> Any:
    from capeval.metrics.meteor.metric import Meteor
    from capeval.metrics.text import TextChunk
    from capeval.significance.statistics import meteor_statistic

    opts = dict((options or {}).get("meteor") or {})
    scorer = Meteor(**{k: v for k, v in opts.items() if k in ("tokenizer", "cache_dir")})
    hyps, tok_refs = scorer.tokenize(ids, cands, refs)
    return meteor_statistic([st for st, _ in scorer.item_stats(TextChunk(hyps, tok_refs))])


def _ngram_table(ids: list[str], cands: dict[str, str], refs: dict[str, list[str]],
                 options: Mapping[str, Mapping[str, Any]] | None) -> Any:
    from capeval.metrics.bleu import Bleu
    from capeval.metrics.ngrams import NgramTable

    tokenizer = ((options or {}).get("bleu") or {}).get("tokenizer", "ptb")
    hyps, tok_refs = Bleu(tokenizer=tokenizer).tokenize(ids, cands, refs)
    return NgramTable(hyps, tok_refs, 4)


def compare(systems: Mapping[str, Any], references: Mapping[Any, Any], metrics: str | Sequence[str] = "bleu-4",
            *, method: str = "bs", samples: int | None = None, seed: int | None = DEFAULT_SEED,
            confidence: float = 0.95, options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Paired significance of every system against the first (the baseline), per metric.

    ``systems``: ``{name: {id: caption}}`` in order, the first is the baseline; all must cover
    the same ids. ``method``: ``"bs"`` (paired bootstrap, sacreBLEU ``--paired-bs``) or ``"ar"``
    (approximate randomisation, ``--paired-ar``); ``samples``: resamples or trials (default 1,000
    / 10,000, range [1, 10^6]); ``seed``: numpy ``default_rng`` seed (default 12345 as sacreBLEU;
    ``None`` draws fresh entropy); ``confidence``: of the bootstrap interval of the difference.

    Returns JSON-ready data: ``{"baseline", "method", "samples", "seed", "confidence",
    "signatures": {metric: str}, "systems": {name: {metric: {"score", "diff", "p_value", ...}}}}``;
    for the bootstrap also the system's bootstrap ``mean``, ``ci`` (sacreBLEU's half-width) and
    ``diff_ci`` ``[low, high]``. Raises :class:`~capeval.errors.InputError` (one line) on bad input.
    """
    from capeval.registry import expand

    samples = _check(method, samples, seed, confidence)
    names_metrics = expand(metrics)
    cands = _systems(systems)
    refs = normalize_references(references)
    names = list(cands)
    stats: dict[str, dict[str, Any]] = {}
    signatures: dict[str, str] = {}
    for name in names:
        stats[name], report = _statistics(name, cands[name], refs, names_metrics, options)
        if not signatures:
            signatures = {m: f"{report[m].signature}|paired:{method}|samples:{samples}|seed:{str(seed).lower()}"
                          for m in names_metrics}
    baseline = names[0]
    out: dict[str, Any] = {"baseline": baseline, "method": method, "samples": samples, "seed": seed,
                           "confidence": confidence if method == "bs" else None, "signatures": signatures,
                           "systems": {baseline: {m: {"score": stats[baseline][m].score()} for m in names_metrics}}}
    for name in names[1:]:
        row = {}
        for metric in names_metrics:
            base, other = stats[baseline][metric], stats[name][metric]
            if method == "bs":
                res = paired_bootstrap(base, other, samples, seed, confidence)
            else:
                res = approximate_randomization(base, other, samples, seed)
            row[metric] = _row(res)
        out["systems"][name] = row
    return out


def _row(res: PairedResult) -> dict[str, Any]:
    row: dict[str, Any] = {"score": res.system, "diff": res.system - res.baseline, "p_value": res.p_value}
    if res.mean is not None:
        row.update(mean=res.mean, ci=res.ci, diff_ci=[res.diff_low, res.diff_high])
    return row
