"""Published cells that are no target for capeval's run (``comparability.csv``): the registry
rows name real cells, ``capeval reproduce`` reports them as ``not comparable``, never
``differs``, and the provenance each reason states is checked on the data: VisCE2's Table 2
baselines are the THumB paper's numbers (Kasai et al. 2022), whose BLEU, ROUGE-L and CIDEr-D
give the printed values only under THumB's own implementations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from capeval.bench import published as pub
from capeval.bench import reproduce as rp

from test_reproduce import FakeRunner  # noqa: E402  (tests/ is on the path: pytest rootdir conftest)

STATS = ("pearson_P_no_human", "pearson_R_no_human", "pearson_total_no_human", "pearson_P", "pearson_R",
         "pearson_total")


def test_registry_rows_name_cells_and_reasons():
    why = pub.not_comparable()
    assert why, "comparability.csv is empty"
    for (paper, table, metric), reason in why.items():
        cells = [c for c in pub.cells() if (c.paper, c.table, c.metric) == (paper, table, metric)]
        assert cells, (paper, table, metric)
        assert all(c.not_comparable == reason for c in cells) and len(reason) > 40
    # VisCE2's THumB-implementation baselines; the CAPTURE README's averages over two DetailCaps releases
    assert {(p, t) for p, t, _ in why} == {("visce2", "2"), ("visce2", "6"), ("capture", "readme")}
    # the same metric in another table keeps its status
    assert not any(c.not_comparable for c in pub.cells() if c.paper == "pac-s++" and c.metric == "bleu-4")


def test_not_comparable_cells_are_never_differs(tmp_path: Path):
    runner = FakeRunner(delta={"bleu-4": 9.0, "rouge-l": 0.1, "cider-d": 9.0, "spice": 9.0})
    out = rp.reproduce(["visce2", "pac-s++"], None, tmp_path, runner=runner, checkpoints=tmp_path)
    marked = [o for o in out if o.not_comparable]
    assert len(marked) == 6 * 3 + 5 * 5  # Table 2: BLEU-4, ROUGE-L, CIDEr-D; Table 6: five n-gram rows
    for o in marked:
        assert o.ours is not None and o.status == f"not comparable: {o.not_comparable}"
    by = {(o.paper, o.table, o.metric, o.statistic): o for o in out}
    assert by[("visce2", "2", "spice", "pearson_P")].status == "differs"  # THumB's jar vs capeval's parser
    assert by[("pac-s++", "3", "bleu-4", "accuracy_HC")].status == "differs"
    assert by[("visce2", "2", "rouge-l", "pearson_P")].status.startswith("not comparable: THumB's number")
    assert "43 not comparable" in rp.summary(out)
    from capeval.bench.reproduce_html import html_report

    assert "not comparable" in rp.text_table(out) and "not comparable" in html_report(out)


# ------------------------------------------------------------------ THumB's implementations, on THumB
def _thumb(root: Path):
    refs = {}
    with open(root / "thumb" / "mscoco_references.json", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            refs[rec["seg_id"]] = rec["refs"]
    with open(root / "thumb" / "mscoco_THumB-1.0.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return rows, refs


def _pearsons(rows, values) -> dict[str, float]:
    out = {}
    for suffix, keep in (("_no_human", lambda r: r["SYS"] != "Human"), ("", lambda r: True)):
        sel = [i for i, r in enumerate(rows) if keep(r)]
        for name, key in (("P", "P"), ("R", "R"), ("total", "human_score")):
            h = np.array([rows[i][key] for i in sel], dtype=np.float64)
            v = np.array([values[i] for i in sel], dtype=np.float64)
            out[f"pearson_{name}{suffix}"] = float(np.corrcoef(v, h)[0, 1]) * 100
    return out


def _printed(metric: str) -> dict[str, float]:
    return {c.statistic: c.x100 for c in pub.select(["visce2"], "2") if c.metric == metric}


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _rouge_score_l(hyp: str, refs: list[str]) -> float:
    """rouge_score's ROUGE-L F1 (lower-cased, non-alphanumerics as spaces), best reference."""
    def tok(s: str) -> list[str]:
        return re.sub(r"[^a-z0-9]+", " ", s.lower()).split()

    best = 0.0
    for ref in refs:
        a, b = tok(hyp), tok(ref)
        n = _lcs(a, b)
        if n:
            p, r = n / len(a), n / len(b)
            best = max(best, 2 * p * r / (p + r))
    return best


def test_thumb_baselines_are_thumbs_own_implementations(shared_data):
    sacrebleu = pytest.importorskip("sacrebleu")
    from capeval.metrics.cider import CiderD

    rows, refs = _thumb(shared_data)
    assert set(_printed("bleu-4")) == set(STATS)
    found = {
        "bleu-4": [sacrebleu.sentence_bleu(r["hyp"], refs[r["seg_id"]]).score for r in rows],
        "rouge-l": [_rouge_score_l(r["hyp"], refs[r["seg_id"]]) for r in rows],
    }
    keys = [f"{r['seg_id']}|{r['SYS']}" for r in rows]
    per_system: dict[str, float] = {}
    for system in sorted({r["SYS"] for r in rows}):
        ks = [k for k, r in zip(keys, rows) if r["SYS"] == system]
        sub = CiderD().score({k: rows[keys.index(k)]["hyp"] for k in ks},
                             {k: refs[rows[keys.index(k)]["seg_id"]] for k in ks})["cider-d"].items
        per_system.update(sub)
    found["cider-d"] = [per_system[k] for k in keys]
    for metric, values in found.items():
        got, printed = _pearsons(rows, values), _printed(metric)
        for stat in STATS:  # the paper prints two decimals of rho: x100 within rounding
            assert abs(got[stat] - printed[stat]) <= 0.5 + 1e-9, (metric, stat, got[stat], printed[stat])
