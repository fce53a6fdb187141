"""CapArena (Cheng et al. 2025, "CapArena: Benchmarking and Analyzing Detailed Image Captioning
in the LLM Era"): the human pairwise battles between detailed captions of 14 VLMs (and a human
captioner) as a benchmark of how often a metric agrees with the human preference, and how its
model-level ranking matches the human one. CapArena-Auto (the judge-based leaderboard) is not
here yet.

Release read here: ``caparena/caparena_annots_eval.json`` (the repository's "human pair-wise
battle annotation", ``data/eval/caparena_annots_eval.json``, 6523 battles), a JSON list of
objects with the keys this loader reads: ``img``, ``source1``, ``source2`` (model names),
``caption1``, ``caption2``, ``winner`` (the human vote: a source name, anything else is a tie,
as ``cal_agreement`` reads it), ``cluster`` (``"level 1"`` .. ``"level 4"``) and ``ref`` (the
human reference caption; used as the single reference). Battles with ``source1`` or ``source2``
== ``"human"`` are skipped by both official statistics and are not scored (counted in ``info``).

The metric's vote on a battle: caption 1 when its score is higher, caption 2 when lower, a tie
when equal (the metric plays the role of the ``judge`` field of the official metric files).

Statistics, as the official code computes them (njucckevin/CapArena@c251cdd14a3a):

- ``agreement`` (headline) and ``agreement_level_1`` .. ``_4``: ``cal_agreement`` with
  ``include_tie=True`` (``caparena_metrics.py:41``, ``vlm_as_a_judge.py:58-91``): the share of
  battles where the metric's vote equals the human one, a tie counting as a vote (a metric tie
  against a human preference disagrees, a tie against a tie agrees), x100;
- ``spearman_models`` / ``kendall_models``: ``cal_ranking.py:92-135``: the metric's votes as
  ``winner_gpt``, online Elo (K=4, scale 400, base 10, start 1000; ``cal_ranking.py:13-34``)
  over 1000 bootstrap resamples of the battles (``np.random.seed(42)``, ``DataFrame.sample
  (frac=1.0, replace=True)``, i.e. ``choice(n, n)`` on that state), models ordered by their
  median rating; then ``caparena_metrics.py:10-33``: ranks 1..k of that order against each
  model's position in the human ranking hard-coded there (:data:`HUMAN_RANKING`), Spearman rho
  and Kendall tau (scipy's tau-b; no ties) x100. ``-B caparena.human_ranking=elo`` ranks the
  models by the same Elo procedure on the human votes of the loaded file instead. Not
  bootstrapped (the statistic already is a bootstrap median over 1000 rounds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from capeval.bench import statistics as stats
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, check_loader_options, malformed
from capeval.errors import InputError

CAPARENA_COMMIT = "c251cdd14a3a4a33c6934e53feebb8d4862d655d"
#: caparena_metrics.py:10-13, the human Elo ranking the official model-level agreement uses
HUMAN_RANKING = ("GPT-4o-0806", "human", "Gemini-2.0-flash-exp", "InternVL2-26B", "Gemini-1.5-pro-002",
                 "Claude-3.5-Sonnet-0620", "GPT-4o-mini-0718", "LLama-3.2-90B", "Qwen2-VL-72B-Instruct",
                 "CogVLM2-llama3-chat-19B", "MiniCPM-V2.6-8B", "Qwen2-VL-7B-Instruct", "Qwen2-VL-2B-Instruct",
                 "LLaVA-1.6-34B", "LLaVA-1.5-7B")
LEVELS = ("level 1", "level 2", "level 3", "level 4")
ANNOTATIONS = "caparena/caparena_annots_eval.json"
_KEYS = ("img", "source1", "source2", "caption1", "caption2", "winner", "cluster")


def votes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """A metric's vote per battle from its two scores: 1, 2, or 0 for a tie; -1 where a score is NaN."""
    a, b = np.asarray(first, float), np.asarray(second, float)
    out = np.where(a > b, 1, np.where(a < b, 2, 0))
    out[np.isnan(a) | np.isnan(b)] = -1
    return out


def agreement(metric: np.ndarray, human: np.ndarray) -> float:
    """Share of battles where the votes (1, 2, 0 = tie) are equal, ties included
    (``cal_agreement(include_tie=True)``); NaN when empty or a metric vote is missing (-1)."""
    m, h = np.asarray(metric), np.asarray(human)
    if m.size == 0 or (m < 0).any():
        return float("nan")
    return float((m == h).mean())


def elo(battles: Sequence[tuple[str, str, int]], k: float = 4, scale: float = 400, base: float = 10,
        init: float = 1000) -> dict[str, float]:
    """Online Elo over (source1, source2, vote) in order, vote 1/2/0 (tie scores 1/2):
    ``cal_ranking.py:13-34`` (``compute_elo``), the same float operations in the same order."""
    rating: dict[str, float] = {}
    for s1, s2, vote in battles:
        ra, rb = rating.setdefault(s1, init), rating.setdefault(s2, init)
        ea = 1 / (1 + base ** ((rb - ra) / scale))
        eb = 1 / (1 + base ** ((ra - rb) / scale))
        sa = 1 if vote == 1 else 0 if vote == 2 else 0.5
        rating[s1] += k * (sa - ea)
        rating[s2] += k * (1 - sa - eb)
    return rating


def elo_ranking(battles: Sequence[tuple[str, str, int]], rounds: int = 1000, seed: int = 42) -> list[str]:
    """Models by their median bootstrap Elo, best first (``cal_ranking.py:125-135``): ``rounds``
    resamples ``choice(n, n)`` from ``RandomState(seed)`` (what ``np.random.seed(42)`` then
    ``DataFrame.sample(frac=1.0, replace=True)`` draws), a model absent from a resample left out
    of its median (pandas' NaN skipping). Equal medians keep first-appearance order (stable)."""
    rs = np.random.RandomState(seed)
    n = len(battles)
    order: dict[str, list[float]] = {}
    for _ in range(rounds):
        idx = rs.choice(n, size=n, replace=True)
        for name, value in elo([battles[i] for i in idx]).items():
            order.setdefault(name, []).append(value)
    medians = {name: float(np.median(v)) for name, v in order.items()}
    return sorted(medians, key=lambda name: -medians[name])


def model_level(metric_order: Sequence[str], human_order: Sequence[str]) -> tuple[float, float]:
    """(Spearman rho, Kendall tau) between positions 1..k of ``metric_order`` and each model's
    position in ``human_order`` (``caparena_metrics.py:18-33``, "human" removed first)."""
    models = [m for m in metric_order if m != "human"]
    missing = [m for m in models if m not in human_order]
    if missing:
        raise InputError(f"caparena: model(s) {', '.join(missing)} not in the human ranking")
    human = [list(human_order).index(m) + 1 for m in models]
    own = list(range(1, len(models) + 1))
    return stats.spearman(human, own), stats.kendall_tau(human, own, "b")


class CapArena(Benchmark):
    name = "caparena"
    title = "CapArena (human pairwise battles of detailed captions)"
    citation = ("Cheng et al. 2025, CapArena: Benchmarking and Analyzing Detailed Image Captioning in the LLM Era "
                f"(arXiv 2503.12329); code and data: github.com/njucckevin/CapArena@{CAPARENA_COMMIT[:12]}")
    protocol = ("caparena_annots_eval.json: human pairwise battles between VLM captions (battles with the human "
                "captioner skipped); metric votes caption 1/2/tie by its scores against the human reference. "
                "Caption-level agreement x100 with ties (overall, headline, and per level); model-level: "
                "bootstrap-median Elo ranking (1000 rounds, seed 42) vs the human ranking, Spearman and "
                "Kendall x100 (not bootstrapped). -B caparena.human_ranking=elo: human ranking by the same "
                "Elo on the file's human votes.")
    protocol_id = "caparena-v1"
    files: dict[str, str | None] = {}  # no digest published
    human_label = "human pairwise vote"
    loader_options = {"human_ranking": ("paper", "elo")}

    def load(self, root: Path, seed: int = 0, human_ranking: str = "paper", **options: Any) -> Loaded:
        check_loader_options([self], {self.name: {"human_ranking": human_ranking, **options}})
        path = self.path(root, ANNOTATIONS)
        rows, skipped = read_battles(path)
        items: dict[str, ScoreItem] = {}
        for k, row in rows:
            refs = (row["ref"],) if isinstance(row.get("ref"), str) and row["ref"].strip() else ()
            for side in ("1", "2"):
                items[f"{k}|{side}"] = ScoreItem(row[f"caption{side}"], refs, image=f"caparena/images/{row['img']}")
        human = np.array([1 if r["winner"] == r["source1"] else 2 if r["winner"] == r["source2"] else 0
                          for _, r in rows])
        data = {"human": human, "sources": [(r["source1"], r["source2"]) for _, r in rows],
                "levels": np.array([LEVELS.index(r["cluster"]) for _, r in rows])}
        if human_ranking == "elo":
            data["ranking"] = tuple(elo_ranking([(*s, int(v)) for s, v in zip(data["sources"], human)]))
        else:
            data["ranking"] = HUMAN_RANKING
        info: dict[str, Any] = {"battles": len(rows), "battles_with_human_captioner": skipped,
                                "commit": CAPARENA_COMMIT, "human_ranking": list(data["ranking"])}
        files = self.checksum_files(root, {ANNOTATIONS: path}, info)
        return Loaded(self, {"": Setting("", items)}, data, files, info, root,
                      options={"human_ranking": human_ranking})

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        data = loaded.data
        s = np.asarray(scores[""], float).reshape(-1, 2)
        metric, human, levels = votes(s[:, 0], s[:, 1]), data["human"], data["levels"]
        n = len(human)

        def agree(level: int | None):
            def fn(units: np.ndarray | None) -> float:
                sel = np.arange(n) if units is None else units
                if level is not None:
                    sel = sel[levels[sel] == level]
                return 100.0 * agreement(metric[sel], human[sel])
            return fn

        rho = tau = float("nan")
        if (metric >= 0).all():
            order = elo_ranking([(*src, int(v)) for src, v in zip(data["sources"], metric)])
            rho, tau = model_level(order, data["ranking"])
        n_models = len({m for pair in data["sources"] for m in pair})
        specs = [StatSpec("agreement", agree(None), n, n, "", headline=True)]
        specs += [StatSpec(f"agreement_level_{i + 1}", agree(i), int((levels == i).sum()), n, "") for i in range(4)]
        specs += [StatSpec("spearman_models", lambda u, v=100.0 * rho: v, n_models, n, "", bootstrap=False),
                  StatSpec("kendall_models", lambda u, v=100.0 * tau: v, n_models, n, "", bootstrap=False)]
        return specs


def read_battles(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """(row number, battle) for each battle without the human captioner, and the count of those skipped.
    A row missing a key, with a non-string field, equal sources or an unknown cluster is a one-line error."""
    from capeval.io.captions import loads_unique  # duplicate keys refused, nesting bounded
    from capeval.io.reading import read_json_text  # within capeval's JSON size limit
    from capeval.paths import resolve_under

    try:
        raw = loads_unique(read_json_text(path), path)
    except InputError as exc:
        raise malformed(path, "whole file", str(exc)) from None
    except ValueError as exc:  # an integer of more than 4,300 digits, ...
        raise malformed(path, "whole file", f"not JSON ({str(exc).splitlines()[0][:200]})") from None
    if not isinstance(raw, list) or not raw:
        raise malformed(path, "whole file", "expected a non-empty JSON list of battles")
    rows, skipped = [], 0
    for k, row in enumerate(raw):
        where = f"row {k}"
        if not isinstance(row, dict):
            raise malformed(path, where, f"a battle must be an object, got {type(row).__name__}")
        for key in _KEYS:
            if not isinstance(row.get(key), str):
                raise malformed(path, where, f"{key!r} must be a string, got {row.get(key)!r:.40}")
        try:  # the image is read as caparena/images/<img>: a name, never a way out of that folder
            resolve_under(Path("caparena/images"), row["img"], what=f"{path.name} img")
        except InputError as exc:
            raise malformed(path, where, str(exc)) from None
        if "human" in (row["source1"], row["source2"]):
            skipped += 1
            continue
        if row["source1"] == row["source2"]:
            raise malformed(path, where, f"source1 and source2 are both {row['source1']!r}")
        if row["cluster"] not in LEVELS:
            raise malformed(path, where, f"cluster must be one of {', '.join(LEVELS)}, got {row['cluster']!r:.40}")
        for side in ("caption1", "caption2"):
            if not row[side].strip():
                raise malformed(path, where, f"empty {side}")
        rows.append((k, row))
    if not rows:
        raise malformed(path, "whole file", "no battle between two models")
    return rows, skipped
