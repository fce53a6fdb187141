"""Issue 47 item 5: one status vocabulary for published values. ``capeval bench`` (terminal table,
HTML, JSON) gives every published cell the status ``capeval reproduce`` gives it, from one
function (:func:`capeval.bench.reproduce.verdict`): THumB's BLEU-4 of VisCE2 Table 2 is ``not
comparable: <reason>`` in both (bench shaded it ``differs``), a cell within the tolerance
``reproduced``, one outside ``differs``, a NaN ``not run: no value (...)``."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from capeval.bench import published as pub
from capeval.bench import reproduce as rp
from capeval.bench.runner import BenchRecord, BenchRun
from capeval.cli.main import main

# (benchmark, metric, statistic) -> capeval's value (x100), with the published value and the status
# reproduce gives: within PAC-S++'s 30.8 by 0.3 (tolerance 0.5), 2.9 below its 43.9, THumB's
# sacreBLEU number (comparability.csv) and a statistic the run gave no number for
WITHIN = ("flickr8k-expert", "bleu-4", "kendall_tau_c")
OUTSIDE = ("flickr8k-expert", "cider-d", "kendall_tau_c")
THUMB = ("thumb", "bleu-4", "pearson_P")
NO_VALUE = ("flickr8k-expert", "rouge-l", "kendall_tau_c")
VALUES = {WITHIN: 30.8 + 0.3, OUTSIDE: 41.0, THUMB: 12.05, NO_VALUE: float("nan")}
EXPECTED = {WITHIN: "reproduced", OUTSIDE: "differs", THUMB: "not comparable: " + pub.not_comparable()[
    ("visce2", "2", "bleu-4")], NO_VALUE: "not run: no value (the benchmark gave none for this metric)"}


def _run() -> BenchRun:
    """A bench run holding VALUES (what `capeval bench flickr8k-expert thumb` would give)."""
    sig = {b: f"benchmark:{b}|protocol:x|version:0" for b in ("flickr8k-expert", "thumb")}
    run = BenchRun(BenchRecord(b, m, s, v, 100, None, None, f"{m}|sig", sig[b]) for (b, m, s), v in VALUES.items())
    run.benchmarks = {b: {"title": b, "protocol": "p", "citation": "c", "signature": sig[b]} for b in sig}
    run.config = {"seed": 0, "bootstrap": 0, "confidence": 0.95}
    return run


def _bench_cli(monkeypatch, tmp_path: Path, capsys, run: BenchRun) -> tuple[str, dict, str]:
    """``capeval bench`` on ``run`` (the scoring replaced): (terminal output, JSON, HTML)."""
    import capeval.bench

    monkeypatch.setattr(capeval.bench, "run", lambda *a, **k: run)
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    capsys.readouterr()
    assert main(["bench", "flickr8k-expert", "thumb", "-m", "bleu-4,cider-d,rouge-l", "--data-root", str(tmp_path),
                 "--out", str(out), "--html", str(page), "-q"]) == 0
    return capsys.readouterr().out, json.loads(out.read_text()), page.read_text()


def _reproduce(tmp_path: Path, values: dict) -> dict:
    """``capeval reproduce`` of the papers whose cells bench shows, its runner giving ``values``:
    ``{(benchmark, metric, statistic): Outcome}`` of the cells bench shows."""
    def runner(benches, metrics, data_root, **kw):
        (bench,) = benches
        return [SimpleNamespace(benchmark=b, metric=m, statistic=s, value=v, ci_low=None, ci_high=None)
                for (b, m, s), v in values.items() if b == bench and m in metrics]

    out = {}
    for key in values:
        cell = pub.published_cell(*key)
        for o in rp.reproduce([cell.paper], cell.table, tmp_path, runner=runner, checkpoints=tmp_path):
            if (o.benchmark, o.metric, o.statistic) == key:
                out[key] = o
    return out


def _paper_td(page: str, benchmark: str, metric: str, published: float) -> str:
    """The HTML cell of a published value (its row is the metric's, in the benchmark's section)."""
    section = page.split(f"<small>({benchmark})</small></h2>", 1)[1].split("<h2>", 1)[0]
    row = next(r for r in re.findall(r"<tr>.*?</tr>", section) if r.startswith(f"<tr><td>{metric}</td>"))
    (td,) = [td for td in re.findall(r"<td class='paper[^']*' title='[^']*'>[^<]*</td>", row)
             if re.search(rf">{published:.1f}", td)]
    return td


def test_bench_terminal_json_and_html_carry_reproduces_status(monkeypatch, tmp_path: Path, capsys) -> None:
    from test_hostile3_html import assert_inert

    text, data, page = _bench_cli(monkeypatch, tmp_path, capsys, _run())
    outcomes = _reproduce(tmp_path, VALUES)
    rows = {(r["benchmark"], r["metric"], r["statistic"]): r for r in data["published"]}
    lines = text.splitlines()
    beside = lines[lines.index("published values beside capeval's (x100; status as capeval reproduce gives it):"):]
    for key, status in EXPECTED.items():
        o, row = outcomes[key], rows[key]
        # JSON: reproduce's status, tolerance and reason, word for word
        assert o.status == row["status"] == status, key
        assert row["tolerance"] == o.tolerance == 0.5 and row["not_comparable"] == o.not_comparable
        # terminal: the short status in its row, a reason whole in a note below the table
        (line,) = [ln for ln in beside if re.match(rf"{key[0]}\s+{key[1]}\s+{key[2]}\s+-?\d+\.\d\d\s+\d", ln)
                   or re.match(rf"{key[0]}\s+{key[1]}\s+{key[2]}\s+nan\s+\d", ln)]
        word, _, reason = status.partition(": ")
        if reason:
            mark = re.search(rf"  {word} \[(\d+)\]  ", line).group(1)
            assert f"[{mark}] {status}" in beside
        else:
            assert re.search(rf"  0\.5  {status}  ", line)
        # HTML: shaded and titled with the same status, the reason also below the table
        td = _paper_td(page, key[0], key[1], o.published)
        shade = {"reproduced": "reproduced", "differs": "differs", "not comparable": "not-comparable"}.get(word)
        assert re.match(rf"<td class='paper{' ' + shade if shade else ''}'", td), td
        assert html.unescape(re.search(r"title='([^']*)'", td).group(1)).endswith(f"tolerance 0.5: {status}")
        if reason:
            assert f"{key[1]} {key[2]}: {html.escape(status, quote=True)}</p>" in page
    # the cell: never "differs" in any of the three
    thumb_td = _paper_td(page, "thumb", "bleu-4", 15.0)
    assert "differs" not in thumb_td and "≠" not in thumb_td and "†" in thumb_td
    assert "THumB&#x27;s number" in thumb_td  # the reason's apostrophe escaped in the attribute
    assert_inert(page)


def test_the_real_thumb_run_calls_bleu4_not_comparable(shared_data: Path, tmp_path: Path, capsys) -> None:
    """The issue's report, on the real THumB data: every BLEU-4 cell (VisCE2 Table 2) is ``not
    comparable: <reason>`` in bench's JSON, terminal and HTML, as ``capeval reproduce visce2
    --table 2`` says on the same run."""
    out, html_file = tmp_path / "r.json", tmp_path / "r.html"
    capsys.readouterr()
    assert main(["bench", "thumb", "-m", "bleu-4", "--data-root", str(shared_data), "--bootstrap", "20",
                 "--out", str(out), "--html", str(html_file), "-q"]) == 0
    text = capsys.readouterr().out
    data, page = json.loads(out.read_text()), html_file.read_text()
    values = {(r["benchmark"], r["metric"], r["statistic"]): r["value"] for r in data["results"]}
    reason = pub.not_comparable()[("visce2", "2", "bleu-4")]
    status = f"not comparable: {reason}"
    rows = [r for r in data["published"] if r["metric"] == "bleu-4"]
    assert len(rows) == 6 and all(r["status"] == status and r["not_comparable"] == reason for r in rows)
    pearson_p = next(r for r in rows if r["statistic"] == "pearson_P")
    assert pearson_p["published"] == 15.0 and abs(pearson_p["delta"]) > 0.5  # would have been "differs"
    assert f"[1] {status}" in text.splitlines() and "differs" not in text
    assert text.count("not comparable [1]") == 6
    assert "differs" not in re.sub(r"<style>.*?</style>|<p class='note'>paper:.*?</p>", "", page, flags=re.S)
    assert page.count("<td class='paper not-comparable'") == 6

    def runner(benches, metrics, data_root, **kw):
        return BenchRun.from_dict(data)

    outcomes = rp.reproduce(["visce2"], "2", shared_data, runner=runner, checkpoints=tmp_path)
    mine = {(o.benchmark, o.metric, o.statistic): o for o in outcomes if o.metric == "bleu-4"}
    assert len(mine) == 6 and all(o.status == status for o in mine.values())
    assert {k: o.ours for k, o in mine.items()} == pytest.approx({k: values[k] for k in mine})


def test_one_function_decides_for_bench_and_reproduce(monkeypatch, tmp_path: Path, capsys) -> None:
    """Replacing :func:`capeval.bench.reproduce.verdict` changes what both commands say: no
    second copy of the tolerance or comparability rule is left in bench."""
    calls = []

    def fake(cell, ours):
        calls.append((cell.benchmark, cell.metric, cell.statistic))
        return rp.Verdict("not comparable: STAND-IN <b>'", 0.0, 9.0)

    monkeypatch.setattr(rp, "verdict", fake)
    text, data, page = _bench_cli(monkeypatch, tmp_path, capsys, _run())
    assert {r["status"] for r in data["published"]} == {"not comparable: STAND-IN <b>'"}
    assert {r["tolerance"] for r in data["published"]} == {9.0}
    assert "[1] not comparable: STAND-IN <b>'" in text.splitlines() and "reproduced" not in text
    assert page.count("<td class='paper not-comparable'") == len(VALUES)
    assert "STAND-IN &lt;b&gt;&#x27;" in page and "STAND-IN <b>" not in page
    assert "reproduced" not in re.sub(r"<style>.*?</style>|<p class='note'>paper:.*?</p>", "", page, flags=re.S)
    outcomes = _reproduce(tmp_path, {k: v for k, v in VALUES.items() if k != NO_VALUE})
    assert {o.status for o in outcomes.values()} == {"not comparable: STAND-IN <b>'"}
    assert set(VALUES) - {NO_VALUE} <= set(calls)


def test_no_other_copy_of_the_tolerance_rule() -> None:
    """Only :func:`capeval.bench.reproduce.cell_tolerance` reads the tolerance table."""
    src = Path(rp.__file__).parents[1]
    callers = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                     if re.search(r"(?<!def )\btolerance\(", p.read_text(encoding="utf-8")))
    assert callers == ["bench/reproduce.py"], callers
    text = Path(rp.__file__).read_text(encoding="utf-8")
    assert len(re.findall(r"\btolerance\(", text)) == 1  # in cell_tolerance


def test_verdict_statuses_are_the_known_vocabulary() -> None:
    cell = pub.published_cell(*WITHIN)
    for ours, want in ((cell.x100 + 0.5, "reproduced"), (cell.x100 - 0.5, "reproduced"),
                       (cell.x100 + 0.51, "differs"), (float("inf"), "differs"), (None, EXPECTED[NO_VALUE]),
                       (float("nan"), EXPECTED[NO_VALUE])):
        v = rp.verdict(cell, ours)
        assert v.status == want and rp.known_status(v.status) and v.tolerance == 0.5
    v = rp.verdict(pub.published_cell(*THUMB), 15.0)  # equal, and still no reproduction of it
    assert v.status == EXPECTED[THUMB] and v.word == "not comparable" and v.reason == pub.not_comparable()[
        ("visce2", "2", "bleu-4")] and v.difference == 0.0
