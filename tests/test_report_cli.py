"""``capeval report``: the HTML of a saved ``bench`` run again, byte for byte, without recomputing;
``--html`` alone; what the reports show (provenance, marks, no -0.00)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from capeval.cli.main import main


@pytest.fixture(scope="module")
def bench_run(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    argv = ["bench", "thumb", "-m", "bleu-4,rouge-l", "--data-root", str(shared_data), "--bootstrap", "50",
            "--out", str(out / "run.json"), "--html", "--quiet"]
    assert main(argv) == 0
    return out


def test_html_alone_lands_beside_out(bench_run):
    assert (bench_run / "run.html").is_file() and (bench_run / "run.json").is_file()


def test_report_reproduces_the_runs_html_byte_for_byte(bench_run, monkeypatch, capsys):
    import capeval.bench

    monkeypatch.setattr(capeval.bench, "run", None)  # nothing may be recomputed
    assert main(["report", str(bench_run / "run.json"), "--html", str(bench_run / "again.html")]) == 0
    assert (bench_run / "again.html").read_bytes() == (bench_run / "run.html").read_bytes()
    capsys.readouterr()
    before = (bench_run / "run.html").read_bytes()
    assert main(["report", str(bench_run / "run.json")]) == 0  # default: RESULT.html beside the JSON
    assert capsys.readouterr().out.strip() == str(bench_run / "run.html")
    assert (bench_run / "run.html").read_bytes() == before


def test_bench_report_shows_provenance_and_marks(bench_run):
    data = json.loads((bench_run / "run.json").read_text())
    text = (bench_run / "run.html").read_text()
    cfg = data["config"]
    assert f"capeval {cfg['version']}, seed 0, run {cfg['date']}" in text
    assert "<h3>Paired bootstrap tests between metrics</h3>" in text
    assert "published: " not in text  # the published values are in the table's paper column, once
    assert "-0.00" not in text and "<div class='scroll'>" in text
    # every paper cell carries reproduce's status (issue 47 item 5): THumB's BLEU-4 and ROUGE-L are
    # sacreBLEU's and rouge_score's, not COCO's, so reproduce calls both "not comparable", and so does bench
    cells = re.findall(r"<td class='paper( [\w-]+)?'", text)
    assert cells and all(c == " not-comparable" for c in cells), cells


def test_report_refuses_what_is_not_a_run(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    assert main(["report", str(bad), "--html", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "neither a `capeval bench` result" in err


def test_fixed_never_prints_negative_zero():
    from capeval.bench.published import fixed

    assert fixed(-0.001) == "0.00" and fixed(-0.004, signed=True) == "0.00" and fixed(0.006, signed=True) == "+0.01"
    assert fixed(-1.234) == "-1.23" and fixed(-0.4, 0) == "0"
