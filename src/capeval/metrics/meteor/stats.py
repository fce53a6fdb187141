"""METEOR 1.5 sufficient statistics and the score computed from them.

Reference: M. Denkowski and A. Lavie, "Meteor Universal: Language Specific Translation
Evaluation for Any Target Language", WMT 2014 (METEOR 1.5); ``MeteorStats`` /
``MeteorScorer.computeMetrics`` in the METEOR 1.5 sources.

With module weights ``w_i`` (exact 1.0, stem 0.6, synonym 0.8, paraphrase 0.6 for the
English default task) and ``delta = 0.75`` weighting content against function words::

    P = sum_i w_i (delta * m_i^content(hyp) + (1-delta) * m_i^function(hyp))
        / (delta * |hyp content words| + (1-delta) * |hyp function words|)
    R = the same over the reference
    Fmean = 1 / ((1-alpha)/P + alpha/R)                            alpha = 0.85
    Pen   = gamma * (chunks / ((matches_hyp + matches_ref) / 2)) ** beta
                                                     gamma = 0.6, beta = 0.2
    score = max(0, Fmean * (1 - Pen))      (0 when undefined, e.g. an empty hypothesis)

``Pen`` is 0 when every word of both sentences is matched in a single chunk. The corpus
score applies the same formula to the summed statistics (perfectly matched items add
no chunks), not to the mean of item scores.

Java evaluates this with IEEE doubles (0/0 = NaN, x/0 = inf); the helpers below do the
same instead of raising ``ZeroDivisionError``, in the same operation order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Constants.PARAM_RANK[english] and WEIGHT_RANK[english] (task "default" = "rank").
ALPHA, BETA, GAMMA, DELTA = 0.85, 0.2, 0.6, 0.75
MODULE_WEIGHTS = (1.0, 0.6, 0.8, 0.6)
N_STAGES = 4


def _div(a: float, b: float) -> float:
    """Java double division."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        neg = (a < 0) != (math.copysign(1.0, b) < 0)
        return -math.inf if neg else math.inf
    return a / b


def _java_double_str(x: float) -> str:
    """``Double.toString`` for the integral values METEOR statistics hold (e.g. ``12.0``)."""
    if x == int(x) and abs(x) < 1e7:
        return f"{int(x)}.0"
    return repr(x)  # not reached for word counts; kept exact for safety


@dataclass
class MeteorStats:
    """The 23 numbers METEOR prints for one segment (``MeteorStats.toString``).

    Stage lists are indexed by module: exact, stem, synonym, paraphrase.
    """

    test_length: float = 0.0
    reference_length: float = 0.0
    test_function_words: float = 0.0
    reference_function_words: float = 0.0
    test_content: list[float] = field(default_factory=lambda: [0.0] * N_STAGES)
    reference_content: list[float] = field(default_factory=lambda: [0.0] * N_STAGES)
    test_function: list[float] = field(default_factory=lambda: [0.0] * N_STAGES)
    reference_function: list[float] = field(default_factory=lambda: [0.0] * N_STAGES)
    chunks: float = 0.0
    test_word_matches: float = 0.0
    reference_word_matches: float = 0.0

    @property
    def test_total_matches(self) -> float:
        t = 0.0
        for i in range(N_STAGES):
            t += self.test_content[i]
            t += self.test_function[i]
        return t

    @property
    def reference_total_matches(self) -> float:
        t = 0.0
        for i in range(N_STAGES):
            t += self.reference_content[i]
            t += self.reference_function[i]
        return t

    def to_string(self) -> str:
        """The stats line METEOR's ``SCORE`` command prints (23 space-separated numbers)."""
        vals = [self.test_length, self.reference_length, self.test_function_words, self.reference_function_words]
        for i in range(N_STAGES):
            vals += [self.test_content[i], self.reference_content[i], self.test_function[i], self.reference_function[i]]
        vals += [self.chunks, self.test_word_matches, self.reference_word_matches]
        return " ".join(_java_double_str(float(v)) for v in vals)

    __str__ = to_string

    @classmethod
    def from_string(cls, text: str) -> "MeteorStats":
        """Parse a stats line (as METEOR's ``EVAL`` command does)."""
        v = [float(t) for t in text.split()]
        if len(v) < 23:
            raise ValueError(f"METEOR stats need 23 numbers, got {len(v)}: {text!r}")
        s = cls(v[0], v[1], v[2], v[3])
        for i in range(N_STAGES):
            a, b, c, d = v[4 + 4 * i : 8 + 4 * i]
            s.test_content[i], s.reference_content[i], s.test_function[i], s.reference_function[i] = a, b, c, d
        s.chunks, s.test_word_matches, s.reference_word_matches = v[20], v[21], v[22]
        return s

    def is_perfect(self) -> bool:
        """All words of both sides matched in one chunk (no fragmentation)."""
        return (
            self.test_total_matches == self.test_length
            and self.reference_total_matches == self.reference_length
            and self.chunks == 1.0
        )

    def add(self, other: "MeteorStats") -> None:
        """``MeteorStats.addStats``: accumulate for a corpus score."""
        self.test_length += other.test_length
        self.reference_length += other.reference_length
        self.test_function_words += other.test_function_words
        self.reference_function_words += other.reference_function_words
        for i in range(N_STAGES):
            self.test_content[i] += other.test_content[i]
            self.reference_content[i] += other.reference_content[i]
            self.test_function[i] += other.test_function[i]
            self.reference_function[i] += other.reference_function[i]
        if not other.is_perfect():
            self.chunks += other.chunks
        self.test_word_matches += other.test_word_matches
        self.reference_word_matches += other.reference_word_matches


@dataclass(frozen=True)
class MeteorScore:
    """Precision, recall, Fmean, fragmentation penalty and score of some statistics."""

    precision: float
    recall: float
    fmean: float
    penalty: float
    score: float


def compute(stats: MeteorStats) -> MeteorScore:
    """``MeteorScorer.computeMetrics`` with the English default-task parameters."""
    d = DELTA
    test_wlen = d * (stats.test_length - stats.test_function_words) + (1.0 - d) * stats.test_function_words
    ref_wlen = d * (stats.reference_length - stats.reference_function_words) + (1.0 - d) * stats.reference_function_words
    test_wm = 0.0
    ref_wm = 0.0
    for i, w in enumerate(MODULE_WEIGHTS):
        test_wm += stats.test_content[i] * w * d
    for i, w in enumerate(MODULE_WEIGHTS):
        ref_wm += stats.reference_content[i] * w * d
    for i, w in enumerate(MODULE_WEIGHTS):
        test_wm += stats.test_function[i] * w * (1.0 - d)
    for i, w in enumerate(MODULE_WEIGHTS):
        ref_wm += stats.reference_function[i] * w * (1.0 - d)
    precision = _div(test_wm, test_wlen)
    recall = _div(ref_wm, ref_wlen)
    fmean = _div(1.0, _div(1.0 - ALPHA, precision) + _div(ALPHA, recall))
    if stats.is_perfect():
        frag = 0.0
    else:
        frag = _div(stats.chunks, (stats.test_word_matches + stats.reference_word_matches) / 2.0)
    penalty = GAMMA * nan_pow(frag, BETA)
    value = fmean * (1.0 - penalty)
    # Java: NaN -> 0, else Math.max(value, 0.0) (which also maps -0.0 to 0.0)
    score = value if value > 0.0 else 0.0
    return MeteorScore(precision, recall, fmean, penalty, score)


def nan_pow(a: float, b: float) -> float:
    """``math.pow`` that keeps a NaN base NaN (``math.pow(nan, 0)`` would give 1.0)."""
    if math.isnan(a):
        return math.nan
    return math.pow(a, b)


def segment_score(stats: MeteorStats) -> float:
    """METEOR score of one segment's statistics."""
    return compute(stats).score


def corpus_score(all_stats: list[MeteorStats]) -> float:
    """METEOR of summed statistics (what ``EVAL`` prints last), not the mean of item scores."""
    total = MeteorStats()
    for s in all_stats:
        total.add(s)
    return compute(total).score


def add_totals(parts: list[MeteorStats]) -> MeteorStats:
    """Field-wise sum of statistics that are already totals over items (chunks included as
    they are: the per-item rule of :meth:`MeteorStats.add` was applied when they were summed).
    With integer-valued totals the sum is exact, so the corpus score does not depend on how
    the items were grouped."""
    total = MeteorStats()
    for s in parts:
        total.test_length += s.test_length
        total.reference_length += s.reference_length
        total.test_function_words += s.test_function_words
        total.reference_function_words += s.reference_function_words
        for i in range(N_STAGES):
            total.test_content[i] += s.test_content[i]
            total.reference_content[i] += s.reference_content[i]
            total.test_function[i] += s.test_function[i]
            total.reference_function[i] += s.reference_function[i]
        total.chunks += s.chunks
        total.test_word_matches += s.test_word_matches
        total.reference_word_matches += s.reference_word_matches
    return total
