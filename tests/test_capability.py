"""CAPability (issue 50 items 3-4) through a scripted 127.0.0.1 judge.

- What reached the server equals the official strings: rendered by the official ``Prompts`` class
  (the recorded copy of ali-vilab/CAPability@cebb82a ``evaluation/prompt.py`` in tests/data, and
  the mirror's own file when a mirror is present), one request per (item, round), with exactly
  the fields eval.py's ``call_gpt`` sends.
- Request counts: worked out by hand from eval.py's loop on the script of ``_capability_script``.
- Final numbers: an independent transcription of eval.py:470-508 (numpy, as there) on the scores
  the official rules give the scripted replies (malformed ones included); with a mirror, the
  official ``eval.py`` itself runs against the same scripted judge and must send the same
  requests and print the same numbers.
- A rerun sends zero requests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import _capability_script as S
from capeval.errors import InputError
from capeval.metrics.capability import data as D
from capeval.metrics.capability import parse as Q
from capeval.metrics.capability import prompts as P
from capeval.metrics.capability.scorer import CAPability
from test_judges import Scripted

MIRROR = Path("/work/.mirror/ali-vilab+CAPability/repo")
PIN = "cebb82afd070bb719f8890ff6a0042f5056fa9fb"
ANN = S.DATA / "annotations"
RECORDED = S.DATA / "prompt.py"


def mirror_file(path: str) -> bytes | None:
    """The file at the pinned commit of the mirror, or None without a mirror."""
    if not (MIRROR / "HEAD").exists() and not (MIRROR / "config").exists():
        return None
    out = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"{PIN}:{path}"], capture_output=True)
    return out.stdout if out.returncode == 0 else None


def official_prompts(source: bytes):
    """An instance of the official ``Prompts`` class from ``source`` (prompt.py's text)."""
    space: dict = {}
    exec(compile(source, "prompt.py", "exec"), space)  # noqa: S102 - the official file, recorded or pinned
    return space["Prompts"]()


def fixture_rows():
    ann = D.load_annotations(ANN)
    return [(d, fid, row["annotation"]) for d, rows in ann.items() for fid, row in rows.items()]


def test_recorded_prompt_file_is_the_pinned_official_one():
    pinned = mirror_file("evaluation/prompt.py")
    if pinned is None:
        pytest.skip("no mirror of ali-vilab/CAPability")
    assert RECORDED.read_bytes() == pinned


@pytest.mark.parametrize("which", ["recorded", "mirror"])
def test_prompts_render_as_the_official_class(which):
    source = RECORDED.read_bytes() if which == "recorded" else mirror_file("evaluation/prompt.py")
    if source is None:
        pytest.skip("no mirror of ali-vilab/CAPability")
    official = official_prompts(source)
    odd = 'a "caption" {with: braces}\nand\ttabs, ünïcode'
    for dim, fid, anno in fixture_rows():
        for caption in (f"Caption of {fid}.", odd, ""):
            system, users = official.get_prompts_by_task(dim, caption, anno)
            assert P.render(dim, caption, anno) == (system, users if isinstance(users, list) else [users])
    # categories are the official lists
    assert P.categories("style")[0] == official.style_categories
    assert P.categories("camera_movement")[1] == official.camera_movement_category_explains


def independent_metrics(expected):
    """eval.py:470-508 transcribed independently: flat scores per task, numpy counts, np.mean."""
    per = {}
    for dim in P.DIMENSIONS:
        flat = []
        for (d, _), s in expected.items():
            if d == dim and s is not None:
                flat += s if isinstance(s, list) else [s]
        a = np.array(flat)
        n, hit, correct = len(a), int(np.count_nonzero(a != 0)), int(np.count_nonzero(a == 1))
        p, r, h = 100 * correct / hit, 100 * correct / n, 100 * hit / n
        per[dim] = {"precision": p, "recall": r, "hit_rate": h, "f1_score": 2 * p * r / (p + r)}
    avg = {k: float(np.mean([m[k] for m in per.values()])) for k in ("precision", "recall", "hit_rate", "f1_score")}
    return per, avg


def run_ours(server, cache, **kw):
    scorer = CAPability(annotations=ANN, base_url=server.base_url, model="judge", cache=cache, **kw)
    return scorer.score(S.captions())


def check_bodies(bodies, official):
    """Every request: model + the official system and user strings, nothing else."""
    rendered = {(s, u) for d, fid, anno in fixture_rows()
                for s, us in [official.get_prompts_by_task(d, f"Caption of {fid}.", anno)]
                for u in (us if isinstance(us, list) else [us])}
    for body in bodies:
        assert set(body) == {"model", "messages"} and body["model"] == "judge"
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert (body["messages"][0]["content"], body["messages"][1]["content"]) in rendered


def test_scripted_judge_counts_numbers_and_rerun(tmp_path):
    judge = S.Judge()
    server = Scripted(judge)
    try:
        report = run_ours(server, tmp_path / "cache", max_retry_times=2, max_allow_missing=0)
        check_bodies(server.bodies, official_prompts(RECORDED.read_bytes()))
        # by hand from eval.py:427-462 on the script: round 0 asks the 29 one-prompt items and 5 object
        # prompts (2 + 1 + lamp and the unparsed book: the vase waits); 9 items fail; round 1 asks those
        # 7 one-prompt items and 1 + 3 object prompts; round 2 the two that never pass
        assert len(server.bodies) == 34 + 11 + 2 == 47
        assert sorted(judge.asked.values()).count(3) == 2  # spatial_relation_1, character_identification_1
        per, avg = independent_metrics(S.EXPECTED)
        dims = report["capability-precision"].extras["dimensions"]
        for dim in P.DIMENSIONS:
            for key in ("precision", "recall", "hit_rate", "f1_score"):
                assert dims[dim][key] == per[dim][key], (dim, key)
        for name, key in (("capability-precision", "precision"), ("capability-recall", "recall"),
                          ("capability-hit", "hit_rate"), ("capability-f1", "f1_score")):
            assert report[name].system == avg[key]
        extras = report["capability-precision"].extras
        assert set(extras["errors"]) == {"spatial_relation/spatial_relation_1",
                                         "character_identification/character_identification_1"}
        assert extras["errors"]["character_identification/character_identification_1"]["replies"] == ["not json at all"]
        assert extras["generated"] == 47 and extras["cached"] == 0
        # per caption: event_1 pools its event and action scores (1, 1)
        assert report["capability-hit"].items["event_1"] == 100.0
        assert "camera_angle_2" not in report["capability-precision"].items  # no hit: no precision
        sig = str(report["capability-f1"].signature)
        assert "model:judge" in sig and f"OCR@{P.prompt_sha256('OCR')[:8]}" in sig and "dimensions:" in sig
        # a rerun: zero requests, the same numbers
        again = run_ours(server, tmp_path / "cache", max_retry_times=2, max_allow_missing=0)
        assert len(server.bodies) == 47
        assert again["capability-f1"].system == report["capability-f1"].system
        assert again["capability-precision"].extras["cached"] == 47
        # refresh asks every request again (the judge scripted afresh: the same 47)
        judge.asked.clear()
        run_ours(server, tmp_path / "cache", max_retry_times=2, max_allow_missing=0, refresh=True)
        assert len(server.bodies) == 94
    finally:
        server.close()


def test_defaults_ask_once_when_few_items_lack_a_score(tmp_path):
    """max_allow_missing=5 (the script's default): with at most 5 items per dimension no round
    after the first; its 9 failures are error items."""
    server = Scripted(S.Judge())
    try:
        report = run_ours(server, tmp_path / "c")
        assert len(server.bodies) == 34
        assert report["capability-hit"].extras["n_errors"] == 9
    finally:
        server.close()


def test_official_eval_py_against_the_same_judge(tmp_path):
    """The official eval.py (pinned, unchanged) and capeval send the same requests and give the same numbers."""
    eval_py, prompt_py = mirror_file("evaluation/eval.py"), mirror_file("evaluation/prompt.py")
    if eval_py is None or prompt_py is None:
        pytest.skip("no mirror of ali-vilab/CAPability")
    code = tmp_path / "evaluation"
    code.mkdir()
    (code / "eval.py").write_bytes(eval_py)
    (code / "prompt.py").write_bytes(prompt_py)
    caps = tmp_path / "captions"
    caps.mkdir()
    for f in sorted(ANN.glob("*.jsonl")):
        if f.stem == "action":
            continue  # eval.py copies event's captions for action (eval.py:56-61)
        rows = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
        (caps / f.name).write_text("".join(json.dumps({"file_id": r["file_id"], "caption": f"Caption of {r['file_id']}.",
                                                       "extra": 1}) + "\n" for r in rows), encoding="utf-8")
    theirs, ours = Scripted(S.Judge()), Scripted(S.Judge())
    try:
        out = tmp_path / "official.json"
        env = {"SERVER_URL": theirs.base_url, "API_KEY": "k", "PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, str(Path(__file__).parent / "_capability_official.py"), str(code), str(caps),
                        str(ANN), str(tmp_path / "save"), str(out), json.dumps(list(P.DIMENSIONS)), "2", "0"],
                       check=True, capture_output=True, env=env, timeout=120)
        official = json.loads(out.read_text())
        report = run_ours(ours, False, max_retry_times=2, max_allow_missing=0)
        assert sorted(json.dumps(b, sort_keys=True) for b in ours.bodies) == \
            sorted(json.dumps(b, sort_keys=True) for b in theirs.bodies)
        dims = report["capability-precision"].extras["dimensions"]
        for dim, m in official["tasks"].items():
            for key, value in m.items():
                assert dims[dim][key] == value, (dim, key)
        for name, key in (("capability-precision", "precision"), ("capability-recall", "recall"),
                          ("capability-hit", "hit_rate"), ("capability-f1", "f1_score")):
            assert report[name].system == official["average"][key]
    finally:
        theirs.close()
        ours.close()


@pytest.mark.parametrize("text", [
    'a ```json {"x": 1} ``` b ```json\n{"y": 2}\n``` c', '```python\n[1]\n```', 'x ```\n{"z": 3}\n``` y ``` w',
    '```json [1] ```python [2] ```', 'only ``` one fence', '````json\n{}\n````', "plain {'a': 1}", '```python only'])
def test_fences_as_the_official_splits(text):
    m = text  # eval.py:372-377, transcribed
    if '```json' in m:
        m = m.split('```json')[-1].split('```')[0].strip()
    if '```python' in m:
        m = m.split('```python')[-1].split('```')[0].strip()
    elif '```' in m:
        m = m.split('```')[1].strip()
    assert Q.strip_fences(text) == m


@pytest.mark.parametrize("text, why", [
    ("[" * 100_000, "SyntaxError"), ("-" * 100_000 + "1", "MemoryError"), ("{[1]: 2}", "TypeError"),
    ("1+" * 50_000 + "1", "RecursionError"), ("x" * (Q.MAX_LITERAL_CHARS + 1), "more than the")])
def test_hostile_replies_are_unparsed_not_crashes(text, why):
    value, reason = Q.read_reply(text)
    assert value is None and why in reason


def test_metrics_edge_cases():
    assert Q.metrics([0, 0])["precision"] != Q.metrics([0, 0])["precision"]  # NaN: no hit (eval.py divides by 0)
    assert Q.metrics([-1, 0])["f1_score"] == 0.0
    assert Q.flatten({"a": [1, -1], "b": 0}) == [1, -1, 0]


def test_loader_layouts_and_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [json.loads(line) for line in (ANN / "dynamic_object_number.jsonl").read_text().splitlines()]
    # the hub's struct column: every key of the config, None where a row has none
    keys = list(dict.fromkeys(k for r in rows for k in r["annotation"]))
    table = pa.table({"file_id": [r["file_id"] for r in rows], "file_path": [r["file_path"] for r in rows],
                      "annotation": [{k: r["annotation"].get(k) for k in keys} for r in rows],
                      "task": [r["task"] for r in rows], "data_type": [r["data_type"] for r in rows]})
    hub = tmp_path / "hub"
    (hub / "dynamic_object_number").mkdir(parents=True)
    pq.write_table(table, hub / "dynamic_object_number" / "test-00000-of-00001.parquet")
    (hub / "scene" / "test").mkdir(parents=True)
    shutil.copy(ANN / "scene.jsonl", tmp_path / "scene.jsonl")
    scene = [json.loads(line) for line in (ANN / "scene.jsonl").read_text().splitlines()]
    pq.write_table(pa.table({k: [r[k] for r in scene] for k in scene[0]}), hub / "scene" / "test" / "0000.parquet")
    got = D.load_annotations(hub)
    assert list(got) == ["scene", "dynamic_object_number"]
    assert got["dynamic_object_number"]["dynamic_object_number_0"]["annotation"] == {"table": 4, "chair": 2}
    assert got["scene"] == D.load_annotations(ANN, ["scene"])["scene"]
    assert D.load_annotations(tmp_path / "scene.jsonl") == D.load_annotations(ANN, ["scene"])


@pytest.mark.parametrize("line, msg", [
    ('{"file_id": "a", "annotation": "park", "task": "scene"}\n{"file_id": "a", "annotation": "x", "task": "scene"}',
     "appears twice"),
    ('{"file_id": "a", "annotation": "park", "task": "weather"}', "is not a dimension"),
    ('{"file_id": "a", "annotation": {"dog": "two"}, "task": "object_number"}', "is not a count"),
    ('{"file_id": "a", "annotation": "bird view", "task": "camera_angle"}', "is not one of"),
    ('{"file_id": "", "annotation": "park", "task": "scene"}', "file_id must be"),
    ('{"file_id": "a", "annotation": {}, "task": "dynamic_object_number"}', "non-empty"),
    ('{"file_id": "a", "file_id": "b", "annotation": "x", "task": "scene"}', "twice")])
def test_bad_annotations_are_one_line(tmp_path, line, msg):
    f = tmp_path / "a.jsonl"
    f.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=msg) as err:
        D.load_annotations(f)
    assert "\n" not in str(err.value)


def test_missing_dimension_and_names(tmp_path):
    with pytest.raises(InputError, match="no OCR.jsonl"):
        D.load_annotations(tmp_path, ["OCR"])
    with pytest.raises(InputError, match="not a dimension"):
        D.parse_dimensions("scene,weather")
    row = {"file_path": "data/scene/scene_0.jpg"}
    assert D.media_path(tmp_path, row, "scene_0") == tmp_path / "data" / "scene" / "scene_0.jpg"
    (tmp_path / "scene").mkdir()
    (tmp_path / "scene" / "scene_0.jpg").write_bytes(b"x")  # lmms-eval's layout: data/ dropped
    assert D.media_path(tmp_path, row, "scene_0") == tmp_path / "scene" / "scene_0.jpg"
    for bad in ("../x.jpg", "/etc/passwd", "data/../../x"):
        with pytest.raises(InputError, match="scene_0"):
            D.media_path(tmp_path, {"file_path": bad}, "scene_0")


def test_captions_folder(tmp_path):
    (tmp_path / "event.jsonl").write_text('{"file_id": "event_1", "caption": "c1", "x": 1}\n', encoding="utf-8")
    (tmp_path / "samples_capability_scene.jsonl").write_text('{"file_id": "scene_0", "caption": "s"}\n')
    assert D.load_captions(tmp_path) == {"event_1": "c1", "scene_0": "s"}
    (tmp_path / "action.jsonl").write_text('{"file_id": "event_1", "caption": "other"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="another caption"):
        D.load_captions(tmp_path)


@pytest.mark.parametrize("kw, msg", [
    ({"max_retry_times": -1}, "max_retry_times"), ({"max_allow_missing": 1.5}, "max_allow_missing"),
    ({"concurrency": 0}, "concurrency"), ({"temperature": 3}, "temperature"), ({"dimensions": "weather"}, "dimension"),
    ({"strict_match": "yes"}, "strict_match"), ({"annotations": None}, "needs its annotations"),
    ({"backend": "transformers"}, "only openai"), ({"refresh": True, "cache": False}, "refresh")])
def test_options_are_checked_before_any_request(kw, msg):
    args = {"annotations": ANN, "base_url": "http://127.0.0.1:9/v1", "model": "judge", **kw}
    with pytest.raises(InputError, match=msg):
        CAPability(**args)


def test_inputs_are_checked(tmp_path):
    scorer = CAPability(annotations=ANN, dimensions="scene", base_url="http://127.0.0.1:9/v1", model="judge",
                        cache=False)
    with pytest.raises(InputError, match="no annotation"):
        scorer.score({"scene_0": "a", "scene_1": "b", "other": "c"})
    with pytest.raises(InputError, match="no caption"):
        scorer.score({"scene_0": "a"})
    with pytest.raises(InputError, match="no references"):
        scorer.score({"scene_0": "a", "scene_1": "b"}, {"scene_0": ["r"]})


def test_cli_scores_and_refuses(tmp_path, capsys):
    from capeval.cli.main import main

    caps = tmp_path / "caps.jsonl"
    ids = [json.loads(line)["file_id"] for line in (ANN / "scene.jsonl").read_text().splitlines()]
    caps.write_text("".join(json.dumps({"file_id": i, "caption": f"Caption of {i}."}) + "\n" for i in ids))
    server = Scripted(S.Judge())
    try:
        base = ["score", "-m", "capability,capability-hit", "-c", str(caps), "-O", f"capability.annotations={ANN}",
                "-O", "capability.dimensions=scene", "-O", f"capability.base_url={server.base_url}",
                "-O", "capability.model=judge", "-O", f"capability.cache={tmp_path / 'cache'}", "-f", "json"]
        assert main(base) == 0
        out = json.loads(capsys.readouterr().out)
        text = json.dumps(out)
        assert "capability-precision" in text and "capability-hit" in text and len(server.bodies) == 2
        assert main(base[:-6] + ["-O", "capability.max_retry_times=101"]) == 2
        assert "max_retry_times" in capsys.readouterr().err
    finally:
        server.close()


# printed cells the released judge replies do not give at one decimal (capeval's value from those
# replies, then the README's): the table was not made from exactly these files
PRINTED_ELSEWHERE = {
    ("Qwen2VL-72B", "capability-precision", "style"), ("Qwen2VL-72B", "capability-f1", "spatial_relation"),
    ("Qwen2VL-72B", "capability-f1", "event"), ("InternVL2.5-78B", "capability-recall", "object_color"),
    ("InternVL2.5-78B", "capability-f1", "scene"), ("InternVL2.5-78B", "capability-f1", "OCR"),
    ("Qwen2.5VL-72B", "capability-recall", "scene"), ("Qwen2.5VL-72B", "capability-f1", "object_color"),
    ("Gemini-1.5-pro", "capability-recall", "camera_angle"), ("Gemini-1.5-pro", "capability-recall",
                                                              "character_identification"),
    ("Gemini-1.5-pro", "capability-f1", "camera_angle"), ("Gemini-2.0-flash", "capability-precision", "object_category"),
}


def test_published_table_from_the_released_judge_replies():
    """The README table (systems.csv, transcribed from assets/72B.png) against capeval's aggregation
    of the judge replies the repository releases (evaluation/output/<model>/, already validated by
    eval.py): 282 of the 294 printed cells equal at one decimal, the 12 others within 0.35."""
    import re

    from capeval.bench import published as pub

    if mirror_file("README.md") is None:
        pytest.skip("no mirror of ali-vilab/CAPability")
    annos = {d: {json.loads(x)["file_id"]: json.loads(x)["annotation"]
                 for x in mirror_file(f"annotations/{d}.jsonl").decode().splitlines()} for d in P.DIMENSIONS}
    cells = pub.select(["capability"])
    assert len(cells) == 7 * 3 * 14
    key = {"capability-precision": "precision", "capability-recall": "recall", "capability-f1": "f1_score"}
    tables: dict[str, dict] = {}
    for cell in cells:
        folder = re.search(r"inference/output/([^)]+)\)", cell.outputs).group(1)
        if folder not in tables:
            dims = {}
            for d in P.DIMENSIONS:
                scores = {}
                for line in mirror_file(f"evaluation/output/{folder}/{d}.jsonl").decode().splitlines():
                    r = json.loads(line)
                    if "pred" in r:  # eval.py:269-275 on the saved, validated pred
                        s = 0 if r["pred"] == ["N/A"] else (1 if annos[d][r["file_id"]] in r["pred"] else -1)
                    else:
                        s = [x["score"] for x in r["response"]] if "response" in r else r["score"]
                    scores[r["file_id"]] = s
                dims[d] = Q.metrics(Q.flatten(scores))
            tables[folder] = {**dims, "system": Q.average(dims)}
        got = tables[folder][cell.statistic][key[cell.metric]]
        if (cell.variant, cell.metric, cell.statistic) in PRINTED_ELSEWHERE:
            assert f"{got:.1f}" != f"{cell.value:.1f}" and abs(got - cell.value) < 0.35
        else:
            assert f"{got:.1f}" == f"{cell.value:.1f}", (cell.variant, cell.metric, cell.statistic)
