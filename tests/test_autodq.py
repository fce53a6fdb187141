"""DREAM-1K AutoDQ (Tarsier's evaluate_dream_gpt.py) on capeval's judge layer.

Through a scripted 127.0.0.1 judge: every prompt that reached the server is one the official
script sends on the same cases, as often (the official script itself, run with a stub client,
when the bytedance/tarsier mirror is present; its recorded run, tests/data/autodq_official.json,
always); per-item recall and precision equal the official samples and a hand reading of the
answers (malformed answers asked again, never-read items failed); the system numbers equal an
independent transcription of ``_summarize_metric_by_subtask``; a rerun sends no request.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import _autodq_cases as cases
from capeval.errors import InputError
from capeval.metrics.autodq import dream1k, official as off
from capeval.metrics.autodq.scorer import AutoDQ
from test_judges import Scripted

RECORD = json.loads(cases.RECORDED.read_text(encoding="utf-8"))


def _mirror() -> None:
    if not (cases.MIRROR / "HEAD").exists():
        pytest.skip("no bytedance/tarsier mirror (fetch github:bytedance/tarsier)")


def _sent(run: dict) -> Counter:
    return Counter(run["prompts"][k] for k in run["order"])


@pytest.fixture()
def annotations(tmp_path: Path) -> Path:
    path = tmp_path / "DREAM-1k.jsonl"
    path.write_text("\n".join(cases.annotation_lines()) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def server():
    judge = cases.Judge()
    srv = Scripted(lambda body: (judge(body["messages"][0]["content"]), None))
    yield srv
    srv.close()


CANDS = {vid: cand for vid, _, _, _, cand in cases.CASES}
REFS = {vid: [ref] for vid, _, ref, _, _ in cases.CASES}
SUBTASK = {vid: sub for vid, sub, _, _, _ in cases.CASES}


def independent_summary(scores: dict[str, tuple[float, float]]) -> tuple[float, float, float]:
    """``_summarize_metric_by_subtask`` written again: per subtask the means, then their mean."""
    by: dict[str, list[tuple[float, float]]] = {}
    for vid, rp in scores.items():
        by.setdefault(SUBTASK[vid], []).append(rp)
    rs = [np.average([x[0] for x in v]) for _, v in sorted(by.items())]
    ps = [np.average([x[1] for x in v]) for _, v in sorted(by.items())]
    r, p = np.average(rs), np.average(ps)
    return float(2 * r * p / (r + p)), float(r), float(p)


def test_recorded_run_is_the_official_script_at_the_pinned_commit():
    _mirror()
    blob = subprocess.run(["git", "--git-dir", str(cases.MIRROR), "show", f"{cases.COMMIT}:{cases.OFFICIAL_FILE}"],
                          capture_output=True, check=True).stdout
    assert hashlib.sha256(blob).hexdigest() == RECORD["file_sha256"]
    for key, with_events in (("with_events", True), ("without_events", False)):
        live = json.loads(json.dumps(cases.official_run(with_events)))  # NaN and tuples as the record holds them
        assert live == RECORD[key]


def test_prompts_are_the_official_strings():
    """Our renderings equal what the official functions sent (the recorded prompts)."""
    prompts = set(RECORD["with_events"]["prompts"]) | set(RECORD["without_events"]["prompts"])
    ours = set()
    for vid, _, ref, events, cand in cases.CASES:
        ours.add(off.extract_prompt(off.extraction_input(cand)))
        ours.add(off.extract_prompt(off.extraction_input(ref)))
        ours.add(off.entail_prompt(cand.lower(), events, ref.lower()))
    assert {p for p in prompts if p.startswith("Bellow")} <= ours
    assert off.entail_prompt("desc", [], "a\nb").endswith(
        "Video Description:\ndesc\n\nEvents: ['a b']\nOutput a JSON formed as:\n{\n  \"events\": [\n    "
        "{\"event\": \"copy an event here\", \"relationship\": \"put class name here\",  \"reason\": \"give your "
        "reason here\"},\n    ...\n  ]\n}\n\nDO NOT PROVIDE ANY OTHER OUTPUT TEXT OR EXPLANATION. Only output the "
        "JSON. Output:")
    assert "Requirements\n:- An event" in off.EXTRACT_TEMPLATE  # the script's typo, kept


def test_end_to_end_against_the_official_run(tmp_path, annotations, server):
    scorer = AutoDQ(base_url=server.base_url, model="judge", cache=tmp_path / "c", annotations=annotations,
                    retry_backoff=0.0)
    rep = scorer.score(CANDS)
    bodies = server.bodies
    assert all(b["messages"] == [{"role": "user", "content": b["messages"][0]["content"]}] for b in bodies)
    assert all(b["temperature"] == 1.0 and "seed" not in b and b["max_tokens"] == 4096 for b in bodies)
    # what reached the server: the official requests, as many times each
    assert Counter(b["messages"][0]["content"] for b in bodies) == _sent(RECORD["with_events"])
    assert len(bodies) == 38
    f1, rec, pre = rep["autodq-f1"], rep["autodq-recall"], rep["autodq-precision"]
    official = {k: tuple(v) for k, v in RECORD["with_events"]["samples"].items() if v is not None}
    assert {i: (rec.items[i], pre.items[i]) for i in rec.items} == official == cases.HAND
    assert {i: e["step"] for i, e in f1.extras["errors"].items()} == cases.FAILED
    assert set(f1.skipped) == set(cases.FAILED)
    want = independent_summary(cases.HAND)
    assert (f1.system, rec.system, pre.system) == want
    # the script's printed table (3 decimals) row by row
    table = RECORD["with_events"]["table"]
    overall = table[-1]
    assert overall[1:] == [round(want[0], 3), round(want[1], 3), round(want[2], 3), 5, 2]
    for row in table[1:-1]:
        got = f1.extras["subtasks"][row[0]]
        assert row[1:] == [round(got["f1"], 3), round(got["recall"], 3), round(got["precision"], 3),
                           got["success"], got["failed"]]
    # the script's tables split by the annotation's counts (3 decimals; NaN for an empty bucket)
    same = lambda a, b: a == b or (math.isnan(a) and math.isnan(b))  # noqa: E731
    for name, rows in zip(("subjects", "shots", "events"), RECORD["with_events"]["buckets"]):
        ours = f1.extras["buckets"][name]
        assert list(ours) == rows[0][1:]
        for row, field in zip(rows[1:], ("recall", "precision", "f1", "count")):
            assert all(same(v, round(ours[k][field], 3)) for k, v in zip(rows[0][1:], row[1:])), (name, field)
    assert f1.items["7"] == 0.0 and math.isclose(f1.items["2"], 2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert f1.extras["events_candidate"]["7"] == ["a dog runs", 5]
    sig = str(f1.signature)
    assert f"entail:{off.ENTAIL_SHA256[:16]}" in sig and f"extract:{off.EXTRACT_SHA256[:16]}" in sig
    assert "model:judge" in sig and "tries:10" in sig and "annotations:sha256:" in sig
    # a rerun is answered by the cache: no request, the same numbers
    again = AutoDQ(base_url=server.base_url, model="judge", cache=tmp_path / "c", annotations=annotations).score(CANDS)
    assert len(server.bodies) == 38 and again["autodq-f1"].extras["generated"] == 0
    assert again["autodq-f1"].system == f1.system and dict(again["autodq-recall"].items) == dict(rec.items)


def test_references_without_events_are_extracted_as_the_script_does(tmp_path, server):
    rep = AutoDQ(base_url=server.base_url, model="judge", cache=None, tries=10).score(CANDS, REFS)
    sent = Counter(b["messages"][0]["content"] for b in server.bodies)
    assert sent == _sent(RECORD["without_events"]) and len(server.bodies) == 46
    rec, pre = rep["autodq-recall"], rep["autodq-precision"]
    assert {i: (rec.items[i], pre.items[i]) for i in rec.items} == cases.HAND
    # no annotations: one group, the plain mean of the items
    r, p = np.average([v[0] for v in cases.HAND.values()]), np.average([v[1] for v in cases.HAND.values()])
    assert (rec.system, pre.system) == (float(r), float(p))
    assert rep["autodq-f1"].extras["events_reference"]["2"] == ["a man runs", "the man trips", "the man falls"]


def test_fewer_tries_and_refresh(tmp_path, annotations, server):
    kw = dict(base_url=server.base_url, model="judge", annotations=annotations, cache=tmp_path / "c")
    rep = AutoDQ(tries=1, **kw).score(CANDS)
    # one try each: 2 (its extraction), 4, 5 fail at their first unreadable answer
    assert {i: e["step"] for i, e in rep["autodq-f1"].extras["errors"].items()} == {
        "2": "candidate events", "4": "candidate events", "5": "recall"}
    assert len(server.bodies) == 7 + 5 + 4
    n = len(server.bodies)
    again = AutoDQ(tries=1, refresh=True, **kw).score(CANDS)["autodq-f1"]
    first = Counter(b["messages"][0]["content"] for b in server.bodies[:n])
    second = Counter(b["messages"][0]["content"] for b in server.bodies[n:])
    # every answer asked again; the judge now reads 2's events (its second answer), so 2 goes on
    # to recall and to precision, where its first answer (wrong length) fails it
    assert all(second[p] == k for p, k in first.items()) and sum(second.values()) == n + 2
    assert again.extras["generated"] == n + 2 and again.extras["errors"]["2"]["step"] == "precision"


def test_parsers_follow_the_official_rules():
    assert off.read_events("```python\n{'events': ['a', 1]}\n```") == (["a", 1], "")
    assert off.read_events(" ```json\n{'events': []}")[0] is None  # the fence is removed only at the start
    assert off.read_events("{'events': [1, 'a']}")[0] is None
    assert off.read_events("{'events': 'a'}")[0] is None
    assert off.read_events("['events']")[0] is None
    assert off.read_events("[" * 100_000)[0] is None  # too deep for the parser: unread, no crash
    assert off.read_events("{'events': [" + "9" * 5000 + "]}")[0] is None
    ok = '{"events": [{"relationship": " Neutral"}, {"relationship": "entailment"}]}'
    assert off.read_relationships(ok, 2) == (["neutral", "entailment"], "")
    assert off.read_relationships(ok, 3)[0] is None
    assert off.read_relationships('{"events": [{"relationship": "entailment"}]}', 0)[0] == ["entailment"]
    assert off.read_relationships('{"events": {"a": 1, "b": 2}}', 2)[0] is None
    assert off.read_relationships('{"events": "ab"}', 2)[0] is None
    assert off.read_relationships('{"events": [{"relationship": 1}]}', 1)[0] is None
    assert off.read_relationships("[" * 100_000, 1)[0] is None
    assert off.hit_score(["neutral", "entailment"], 2) == 0.5 and off.hit_score(["contradiction"], 0) == 1.0
    assert math.isnan(off.count_f1(0.0, 0.0))


def test_the_official_readers_agree_on_hostile_answers():
    """read_events / read_relationships + hit_score against the script's own extract_events and
    evaluate_one_sample (one try each), its client answering ``text``."""
    _mirror()
    current = {"text": ""}

    class Client:
        def __init__(self) -> None:
            self.chat = self.completions = self

        def create(self, model, messages):
            return type("C", (), {"model_dump_json": lambda self: json.dumps(
                {"choices": [{"message": {"content": current["text"]}}]})})()

    mod = cases.load_official(Client())
    answers = ["{'events': ['a']}", "```json{'events': ['a']}```", "{'events': None}", "{'events': [[1]]}", "x",
               " {'events': ['a']}", "```python\n{'events': []}\n```", "{'events': ['a', {1: 2}]}",
               '{"events": [{"relationship": "entailment"}]}', '{"events": [{"relationship": "Neutral "}, 1]}',
               '"events": [{"relationship": "entailment"}]', '{"events": [{"relationship": "entailment"}],}',
               '{"events": [{"relationship": "entailment", "x": True} {"relationship": "contradiction"}]}',
               '```json\n{"events": [\n{"relationship": "entailment"},\n]}\n```', '{"events": [[Placeholder]]}',
               '{"events": [{"event": [Placeholder], "relationship": "entailment"}]}',
               '{"events": 5}', '{"events": {"relationship": 1}}', '{"events": ["ab"]}', "{Events: []}",
               '{"events": "ab"}', '{"events": [{"relationship": null}]}', "[" * 5000,
               '{"events": [' + "9" * 5000 + "]}"]
    with contextlib.redirect_stdout(io.StringIO()):
        for text in answers:
            current["text"] = text
            try:
                want = mod.extract_events(({"prediction": "p", "response": "r"}, "m", False), is_pred=True,
                                          max_retry=1)
            except ValueError:
                want = None
            assert off.read_events(text)[0] == want, text
            for events in ([], ["e1"], ["e1", "e2"]):
                try:
                    want_score = mod.evaluate_one_sample(events, "r", "p", "m", False, is_recall=True, max_retry=1)
                except ValueError:
                    want_score = None
                rel = off.read_relationships(text, len(events))[0]
                assert (None if rel is None else off.hit_score(rel, len(events))) == want_score, (text, events)


def test_dream1k_loader_layouts_and_refusals(tmp_path, annotations):
    got = dream1k.load(annotations)
    assert list(got.records) == [c[0] for c in cases.CASES]  # the TVBench record skipped
    assert got.records["3"].events == () and got.records["2"].subtask == "DREAM/movie_animation"
    v1 = tmp_path / "v1.jsonl"
    v1.write_text("\n".join(json.dumps({"idx": int(v), "dataset": s, "text": {"prompt": "<video>\nDescribe.",
                                                                            "response": r},
                                        "video_file": "<placeholder>", "extra_info": {"events": e}, "vid": int(v)})
                            for v, s, r, e, _ in cases.CASES), encoding="utf-8")
    strip = lambda recs: {k: (r.reference, r.events, r.subtask) for k, r in recs.items()}  # noqa: E731
    assert strip(dream1k.load(v1).records) == strip(got.records)
    bad = tmp_path / "bad.jsonl"
    line = json.loads(cases.annotation_lines()[0])
    for mutate, msg in ((lambda d: d, "appears twice"), (lambda d: d["extra_info"].update(events=[1]), "not text"),
                        (lambda d: d.pop("messages"), "neither 'messages'")):
        twice = json.loads(json.dumps(line))
        mutate(twice)
        bad.write_text(json.dumps(line) + "\n" + json.dumps(twice) + "\n" if msg == "appears twice"
                       else json.dumps(twice) + "\n", encoding="utf-8")
        with pytest.raises(InputError, match=msg):
            dream1k.load(bad)
    bad.write_text("[" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError):
        dream1k.load(bad)


def test_the_released_annotation_file():
    _mirror()
    text = subprocess.run(["git", "--git-dir", str(cases.MIRROR), "show", f"{cases.COMMIT}:{dream1k.FILE}"],
                          capture_output=True, check=True).stdout
    assert hashlib.sha256(text).hexdigest() == dream1k.RELEASE


def test_released_file_loads(tmp_path):
    _mirror()
    path = tmp_path / "DREAM-1k.jsonl"
    path.write_bytes(subprocess.run(["git", "--git-dir", str(cases.MIRROR), "show", f"{cases.COMMIT}:{dream1k.FILE}"],
                                    capture_output=True, check=True).stdout)
    got = dream1k.load(path)
    assert len(got.records) == 1000 and got.sha256 == dream1k.RELEASE
    assert Counter(r.subtask for r in got.records.values()) == {s: 200 for s in dream1k.SUBTASKS}
    assert sum(1 for r in got.records.values() if not r.events) == 4


@pytest.mark.parametrize("kw,msg", [
    ({"tries": 0}, r"autodq\.tries=0 out of range"), ({"tries": 101}, r"autodq\.tries=101 out of range"),
    ({"concurrency": 0}, r"autodq\.concurrency=0 out of range"),
    ({"temperature": 3}, r"autodq\.temperature=3 out of range"), ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"backend": "vllm"}, "autodq option backend"), ({"refresh": True, "cache": None}, "refresh=true"),
    ({"annotations": 5}, "annotations"), ({"annotations": "/nonexistent/DREAM-1k.jsonl"}, "not found"),
])
def test_options_are_checked(kw, msg):
    with pytest.raises(InputError, match=msg):
        AutoDQ(base_url="http://127.0.0.1:9/v1", model="m", **kw)


def test_bad_inputs_are_one_line(annotations):
    scorer = AutoDQ(base_url="http://127.0.0.1:9/v1", model="m", cache=None, annotations=annotations)
    with pytest.raises(InputError, match="not both"):
        scorer.score(CANDS, REFS)
    with pytest.raises(InputError, match="'99' is not a video"):
        scorer.score({"99": "x"})
    plain = AutoDQ(base_url="http://127.0.0.1:9/v1", model="m", cache=None)
    with pytest.raises(InputError, match="needs references .* or the DREAM-1K annotation file"):
        plain.score({"a": "x"})
    with pytest.raises(InputError, match="2 references"):
        plain.score({"a": "x"}, {"a": ["r", "s"]})
    with pytest.raises(InputError, match="empty"):
        plain.score({"a": " "}, {"a": ["r"]})


def test_published_table_is_the_readme_and_reproduce_lists_it(capsys):
    """The Tarsier README's two DREAM-1K tables (Tarsier2-Recap-7b, Tarsier2-7B) in the published
    registry, re-read from the README at the pinned commit when the mirror is there; their
    descriptions are not released, so reproduce lists every cell as not run."""
    from capeval.bench import published as pub
    from capeval.cli.main import main

    cells = pub.select(["tarsier"])
    assert len(cells) == 2 * 6 * 3 and all(c.outputs and c.benchmark == "dream-1k" for c in cells)
    by = {(c.variant, c.statistic, c.metric): c for c in cells}
    assert by[("Tarsier2-7B", "system", "autodq-f1")].x100 == 42.0
    assert by[("Tarsier2-Recap-7b", "vertical_video", "autodq-precision")].x100 == 48.6
    if (cases.MIRROR / "HEAD").exists():
        readme = subprocess.run(["git", "--git-dir", str(cases.MIRROR), "show", f"{cases.COMMIT}:README.md"],
                                capture_output=True, text=True, check=True).stdout
        read, model, dream = {}, None, False
        for line in readme.splitlines():
            if line.startswith("# Model: "):
                model = line[len("# Model: "):].strip()
            elif line.startswith("## benchmark:"):
                dream = line.startswith("## benchmark: dream,")
            elif dream and line.startswith("|") and "F1 Score" not in line:
                label, *nums = (c.strip() for c in line.strip().strip("|").split("|"))
                stat = "system" if label == "OVERALL" else label.removeprefix("DREAM/")
                for metric, value in zip(("autodq-f1", "autodq-recall", "autodq-precision"), nums):
                    read[(model, stat, metric)] = float(value)
        assert {k: c.value for k, c in by.items()} == read
    assert main(["reproduce", "tarsier"]) in (0, None)
    out = capsys.readouterr().out
    assert out.count("not run: model outputs") == 36


def test_download_is_pinned_and_sha256_checked(tmp_path, monkeypatch):
    """``capeval download dream-1k``: the file at the pinned commit, sha256-checked (served from
    127.0.0.1 as CAPEVAL_DATA_MIRROR: the release's bytes when the mirror is here, a tampered file always)."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from capeval.bench.data_download import download_benchmark
    from capeval.bench.sources import METRIC_SOURCES
    from capeval.errors import ResourceError

    (f,) = METRIC_SOURCES["dream-1k"].files
    assert f.urls == (f"https://raw.githubusercontent.com/bytedance/tarsier/{cases.COMMIT}/data/annotations/"
                      "DREAM-1k.jsonl",) and f.sha256 == dream1k.RELEASE and f.place == "dream-1k/DREAM-1k.jsonl"
    served = tmp_path / "served" / "dream-1k"
    served.mkdir(parents=True)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(tmp_path / "served")))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    monkeypatch.setenv("CAPEVAL_DATA_MIRROR", f"http://127.0.0.1:{httpd.server_address[1]}")
    try:
        if (cases.MIRROR / "HEAD").exists():
            (served / "DREAM-1k.jsonl").write_bytes(subprocess.run(
                ["git", "--git-dir", str(cases.MIRROR), "show", f"{cases.COMMIT}:{dream1k.FILE}"],
                capture_output=True, check=True).stdout)
            download_benchmark("dream-1k", tmp_path / "data")
            assert len(dream1k.load(tmp_path / "data" / f.place).records) == 1000
        (served / "DREAM-1k.jsonl").write_text("\n".join(cases.annotation_lines()) + "\n", encoding="utf-8")
        with pytest.raises(ResourceError, match="sha256"):
            download_benchmark("dream-1k", tmp_path / "data2")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_lone_surrogate_is_one_line(tmp_path):
    """Text UTF-8 cannot carry (``"\\ud800"`` in a JSON file) is refused before any request."""
    scorer = AutoDQ(base_url="http://127.0.0.1:9/v1", model="m", cache=None)
    with pytest.raises(InputError, match="item '1': the caption holds a lone surrogate"):
        scorer.score({"1": "x\ud800"}, {"1": ["r"]})
    rec = json.loads(cases.annotation_lines()[0])
    rec["extra_info"]["events"] = ["fine", "bad \ud800"]
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="item '1': the event holds a lone surrogate"):
        AutoDQ(base_url="http://127.0.0.1:9/v1", model="m", cache=None, annotations=path).score({"1": "x"})


def test_events_the_judge_spells_with_a_lone_surrogate_stay_writable():
    """A Python literal may spell '\\ud800': the prompt carries it as Python's repr (ASCII), the
    extras as U+FFFD, so the result file can be written."""
    srv = Scripted(lambda body: ("{'events': ['a \\ud800 b']}" if body["messages"][0]["content"].startswith("Bellow")
                                 else '{"events": [{"relationship": "entailment"}]}', None))
    try:
        rep = AutoDQ(base_url=srv.base_url, model="m", cache=None, tries=1).score({"1": "x"}, {"1": ["r"]})
        sent = [b["messages"][0]["content"] for b in srv.bodies]
    finally:
        srv.close()
    assert any("Events: ['a \\ud800 b']" in s for s in sent)  # repr's escape, as the script sends it
    assert rep["autodq-f1"].extras["events_candidate"]["1"] == ["a \ufffd b"]
    json.dumps(list(rep["autodq-f1"].extras["events_candidate"]["1"]), ensure_ascii=False).encode("utf-8")
