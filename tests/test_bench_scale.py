"""Every bench table says which scale its statistics are in (issue 47 item 10): DetailCaps prints
PCC and taus x100 where the CAPTURE README prints fractions, and 1-R^2 unscaled as the README does;
the text table, the HTML report and the saved JSON all carry the benchmark's scale line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from test_detailcaps import _write  # noqa: E402

import capeval.bench as cb  # noqa: E402
from capeval.bench.base import DEFAULT_SCALE  # noqa: E402
from capeval.bench.report import render_html  # noqa: E402
from capeval.bench.runner import BenchRun  # noqa: E402


@pytest.fixture(scope="module")
def detailcaps_run(tmp_path_factory) -> BenchRun:
    root = tmp_path_factory.mktemp("dc")
    _write(root, n=8, seed=2)
    return cb.run(["detailcaps"], ["bleu-1"], data_root=str(root), bootstrap=20)


def test_text_table_names_the_readme_scale(detailcaps_run: BenchRun) -> None:
    last = detailcaps_run.table().splitlines()[-1]
    assert last.startswith("detailcaps: ")
    assert "x100" in last and "fractions" in last and "one_minus_r2 unscaled" in last


def test_html_and_saved_json_carry_the_scale(detailcaps_run: BenchRun) -> None:
    page = render_html(detailcaps_run)
    assert "one_minus_r2 unscaled" in page and "0.5051" in page
    again = BenchRun.from_dict(json.loads(json.dumps(detailcaps_run.to_dict())))
    assert again.benchmarks["detailcaps"]["scale"] == detailcaps_run.benchmarks["detailcaps"]["scale"]
    assert "one_minus_r2 unscaled" in render_html(again)


def test_other_benchmarks_state_the_default_scale(tmp_path: Path) -> None:
    from capeval.bench.base import get_benchmark

    assert get_benchmark("flickr8k-expert").scale == ""  # the default applies
    run = BenchRun([])
    run.benchmarks["flickr8k-expert"] = {"title": "t", "citation": "c", "protocol": "p", "signature": "s"}
    assert run.table().splitlines()[-1] == f"flickr8k-expert: {DEFAULT_SCALE}"
    assert f"Scale: {DEFAULT_SCALE}." in render_html(run)
