"""``capeval reproduce`` with a stand-in bench runner: statuses, tolerances, one run per
benchmark across papers, the JSON and HTML outputs, and the real run on Flickr8k text metrics
when ../shared/data is there (slow)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from capeval.bench import published as pub
from capeval.bench import reproduce as rp
from capeval.errors import ResourceError


class FakeRunner:
    """Returns the published value + ``delta[metric]`` for every cell asked for."""

    def __init__(self, delta=None, fail=()):
        self.calls, self.delta, self.fail = [], delta or {}, set(fail)

    def __call__(self, benches, metrics, data_root, **kw):
        (bench,) = benches
        self.calls.append((bench, tuple(metrics)))
        if bench in self.fail:
            raise ResourceError(f"{bench}: missing data file 'x.json'")
        out = []
        for c in pub.cells():
            if c.benchmark == bench and c.metric in metrics and c.main:
                v = c.x100 + self.delta.get(c.metric, 0.0)
                out.append(SimpleNamespace(benchmark=bench, metric=c.metric, statistic=c.statistic, value=v,
                                           ci_low=v - 1, ci_high=v + 1))
        return out


def test_statuses_and_tolerances(tmp_path: Path) -> None:
    runner = FakeRunner(delta={"bleu-1": 0.3, "cider-d": 0.7})
    out = rp.reproduce(["pac-s++"], "1", tmp_path, runner=runner, checkpoints=tmp_path)
    by = {(o.benchmark, o.metric, o.statistic): o for o in out}
    ok = by[("flickr8k-expert", "bleu-1", "kendall_tau_c")]
    assert ok.status == "reproduced" and ok.difference == pytest.approx(0.3) and ok.tolerance == 0.5
    assert by[("flickr8k-cf", "cider-d", "kendall_tau_b")].status == "differs"
    # mid is a capeval metric now (issue 27): its CLIP weights are not here
    assert by[("flickr8k-expert", "mid", "kendall_tau_c")].status == "not run: weights (openai/ViT-B-32)"
    assert by[("composite", "pac-s++", "kendall_tau_c")].status == "not run: weights (pac-s++/ViT-B-32)"
    assert by[("flickr8k-expert", "clip-s", "kendall_tau_b")].status == "not run: weights (openai/ViT-B-32)"
    assert len(out) == len(pub.select(["pac-s++"], "1"))
    # each benchmark scored once, with the union of its runnable metrics
    assert sorted(b for b, _ in runner.calls) == ["composite", "flickr8k-cf", "flickr8k-expert"]
    assert dict(runner.calls)["flickr8k-cf"] == ("bleu-1", "bleu-4", "cider-d", "meteor", "rouge-l", "spice")
    # a baseline capeval has, whose weights are not here: not run, never attempted
    assert by[("flickr8k-expert", "bertscore", "kendall_tau_c")].status == "not run: weights (bertscore/roberta-large)"


def test_one_run_per_benchmark_across_papers_and_missing_data(tmp_path: Path) -> None:
    runner = FakeRunner(fail={"composite"})
    out = rp.reproduce(None, None, tmp_path, runner=runner, checkpoints=tmp_path)
    benches = [b for b, _ in runner.calls]
    assert len(benches) == len(set(benches))
    comp = [o for o in out if o.benchmark == "composite" and o.metric == "meteor" and o.statistic.startswith("kendall_tau_")]
    assert comp and all(o.status == "not run: data (composite: missing data file 'x.json')" for o in comp)
    var = [o for o in out if o.paper == "pac-s++" and o.table == "8"]
    assert var and all(o.status.startswith("not run: variant") for o in var)
    stat = [o for o in out if o.statistic == "spearman" and o.benchmark == "flickr8k-expert" and o.metric == "bleu-4"]
    assert stat and all("not computed by capeval bench" in o.status for o in stat)
    assert "reproduced" in rp.summary(out)


def test_images_needed_when_weights_are_there(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(rp, "missing_weights", lambda metric, directory=None: None)
    out = rp.reproduce(["hice-s"], "1", tmp_path, runner=FakeRunner())
    hice = [o for o in out if o.metric == "hice-s"]
    assert hice and all(o.status == "not run: images (--images DIR)" for o in hice)
    out = rp.reproduce(["hice-s"], "1", tmp_path, runner=FakeRunner(delta={"hice-s": -2.0}), images=tmp_path)
    hice = [o for o in out if o.metric == "hice-s"]
    assert all(o.status == "differs" and o.tolerance == 1.0 for o in hice)


def test_bad_paper_and_table() -> None:
    from capeval.errors import InputError

    with pytest.raises(InputError, match="unknown paper 'pacs'"):
        rp.reproduce(["pacs"], runner=FakeRunner())
    with pytest.raises(InputError, match="no published values stored for bridge table 99"):
        rp.reproduce(["bridge"], "99", runner=FakeRunner())


def test_cli_json_and_html(tmp_path: Path, monkeypatch, capsys) -> None:
    import capeval.bench
    from capeval.cli.main import main

    monkeypatch.setattr(capeval.bench, "run", FakeRunner(delta={"meteor": 0.2}))
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    html = tmp_path / "r.html"
    assert main(["reproduce", "bridge", "--table", "3", "--data-root", str(tmp_path), "--json",
                 "--html", str(html)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["config"]["seed"] == 0 and {"version", "date", "bootstrap"} <= set(payload["config"])
    records = payload["cells"]
    assert len(records) == len(pub.select(["bridge"], "3"))
    assert set(records[0]) >= {"paper", "table", "benchmark", "metric", "statistic", "published", "ours",
                               "ci_low", "ci_high", "difference", "tolerance", "status"}
    met = [r for r in records if r["metric"] == "meteor" and r["statistic"] == "kendall_tau_b"]
    assert met[0]["status"] == "reproduced" and math.isclose(met[0]["difference"], 0.2)
    text = html.read_text()
    assert text.startswith("<!DOCTYPE html>") and "not run: weights" in text and "reproduced" in text
    assert f"capeval {payload['config']['version']}, seed 0, run {payload['config']['date']}" in text
    assert "-0.00" not in text
    # the page again from the saved JSON: the same bytes, nothing run
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps(payload))
    monkeypatch.setattr(capeval.bench, "run", None)  # would fail if called
    assert main(["report", str(saved), "--html", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_bytes() == html.read_bytes()
    assert main(["reproduce", "nosuch"]) != 0
    err = capsys.readouterr().err
    assert "unknown paper 'nosuch'" in err and "Traceback" not in err


def test_bench_tables_have_a_paper_column() -> None:
    from capeval.bench.report import _stat_table
    from capeval.bench.runner import BenchRecord, BenchRun

    recs = BenchRun([BenchRecord("flickr8k-expert", "meteor", "kendall_tau_c", 41.83, 5664, None, None, "", ""),
                     BenchRecord("flickr8k-expert", "length", "kendall_tau_c", 10.0, 5664, None, None, "", "")])
    lines = recs.table().splitlines()
    assert lines[0].split()[-1] == "paper" and lines[2].split()[-1] == "41.8"
    assert lines[3].split()[-1] == "5664"  # no published value for length on Flickr8k: empty cell
    html = _stat_table(list(recs))
    assert "<th class='paper'>paper</th>" in html and ">41.8</td>" in html


def test_nebula_cells_run_under_their_papers_scores(tmp_path: Path, monkeypatch) -> None:
    """DENEB printed tau on the release's test scores, arXiv 2512.21582 on the corrected ones: one
    Nebula run per protocol, each given its loader options, each cell compared with its own run."""
    monkeypatch.setattr(rp, "missing_weights", lambda metric, directory=None: None)
    calls = []

    def runner(benches, metrics, data_root, **kw):
        (bench,) = benches
        opts = dict(kw.get("bench_options", {}).get(bench, {}))
        calls.append((bench, opts.get("scores"), tuple(metrics)))
        shift = {"original": 0.0, "corrected": 0.3, None: 0.0}[opts.get("scores")]
        return [SimpleNamespace(benchmark=bench, metric=c.metric, statistic=c.statistic, value=c.x100 + shift,
                                ci_low=None, ci_high=None)
                for c in pub.cells() if c.benchmark == bench and c.metric in metrics
                and c.bench_options().get("scores") == opts.get("scores")]

    out = rp.reproduce(["deneb", "pearl"], None, tmp_path, runner=runner, images=tmp_path)
    assert sorted((b, s) for b, s, _ in calls) == [("nebula", "corrected"), ("nebula", "original")]
    assert dict((s, m) for _, s, m in calls)["original"] == ("ref-clip-s", "ref-pac-s")
    by = {(o.paper, o.metric, o.statistic): o for o in out}
    assert by[("deneb", "ref-pac-s", "kendall_tau_c")].difference == 0.0
    assert by[("pearl", "bleu-4", "kendall_tau_b")].difference == pytest.approx(0.3)
    assert all(o.status == "reproduced" for o in out) and len(out) == 18


def test_weights_lists_cover_every_learned_metric() -> None:
    """The hand lists of which weights a metric loads (the registry has no such field) stay complete:
    every metric with a model extra or media input is in one list (never two), every named checkpoint exists."""
    from capeval import registry
    from capeval.models.clip.checkpoints import CHECKPOINTS

    for name in registry.metrics():
        spec = registry.get(name)
        learned = spec.extra not in (None, "meteor", "spice", "chair") or bool({"images", "videos"} & set(spec.needs))
        listed = (name in rp._WEIGHTS) + (name in rp._OTHER_WEIGHTS)
        assert listed <= 1 and (listed == 1 or not learned), (name, spec.extra, listed)  # clair: a server, no extra
    assert not set(rp._WEIGHTS) - set(registry.metrics()) and not set(rp._OTHER_WEIGHTS) - set(registry.metrics())
    assert {c for names in rp._WEIGHTS.values() for c in names} <= set(CHECKPOINTS)



def test_docs_name_missing_metrics_as_the_registry_does() -> None:
    """docs/reproduce.md's examples of metrics capeval lacks are missing from the registry and
    have published cells; those it says capeval runs (MID, Polos, BERTScore) are registered."""
    import re

    from capeval import registry

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "reproduce.md").read_text(encoding="utf-8").split())
    lacking, running = re.search(r"does not have \(<name>\)` \((.+?), \.\.\. stay in the registry; (.+?) rows run with",
                                 text).groups()
    known, published = set(registry.metrics()), {c.metric for c in pub.select(pub.PAPERS, None)}
    lacking = [n.strip().lower() for n in lacking.split(",")]
    assert lacking and all(n not in known and n in published for n in lacking), lacking
    running = {n.strip().lower() for n in re.split(r",| and ", running)}
    assert running == {"mid", "polos", "bertscore"} and running <= known & published


def test_capture_and_caparena_cells_run_on_their_benchmarks(tmp_path: Path, capsys) -> None:
    """``capeval reproduce capture caparena`` on fixtures in the released layouts (DetailCaps Parquet,
    CapArena battles): the text metrics run through the real bench runner and their cells carry the
    runner's own numbers; the CAPTURE README cells (averages over two releases) are shown as not
    comparable, CapArena's are compared; learned metrics without weights are not run."""
    pytest.importorskip("pyarrow")
    import sys

    import capeval.bench as cb
    from capeval.cli.main import main

    sys.path.insert(0, str(Path(__file__).parent))
    from test_caparena import _write as write_caparena
    from test_detailcaps import _write as write_detailcaps

    write_detailcaps(tmp_path, n=12)
    write_caparena(tmp_path)
    out = rp.reproduce(["capture", "caparena"], None, tmp_path, bootstrap=0, checkpoints=tmp_path / "none")
    by = {(o.paper, o.benchmark, o.metric, o.variant, o.statistic): o for o in out}
    ours = {(r.benchmark, r.metric, r.statistic): r.value
            for r in cb.run(["caparena"], ["bleu-4", "meteor"], data_root=tmp_path, bootstrap=0)}
    for stat in ("agreement", "agreement_level_2", "spearman_models", "kendall_models"):
        o = by[("caparena", "caparena", "meteor", "", stat)]
        assert o.ours == pytest.approx(ours[("caparena", "meteor", stat)]) and o.status in ("reproduced", "differs")
    dc = by[("capture", "detailcaps", "meteor", "", "kendall_tau_b")]
    assert dc.ours is not None and dc.status.startswith("not comparable: the README prints the average")
    assert by[("capture", "detailcaps", "clip-s", "", "pcc")].status == "not run: weights (openai/ViT-B-32)"
    assert by[("caparena", "caparena", "gpt-4o", "", "agreement")].status == "not run: metric capeval does not have (gpt-4o)"
    assert by[("caparena", "caparena", "clip-s", "Long-CLIP backbone (which one not stated)", "agreement")
              ].status.startswith("not run: variant")
    (tmp_path / "empty").mkdir()
    assert main(["reproduce", "capture", "--data-root", str(tmp_path / "empty"), "--bootstrap", "0", "-q"]) == 0
    text = capsys.readouterr().out
    assert "capture  readme  detailcaps" in text and "not run: data (detailcaps: missing data file " \
        "'detailcaps/DetailCaps-4870.parquet')" in text and "28 published cells" in text
