"""VDCscore through a scripted 127.0.0.1 judge server, against rese1f/aurora's process_vdc_result.py.

- what reached the server: the official system and user texts of both steps, checked against the
  recorded copy ``tests/data/vdcscore_official_prompts.json`` (built by executing the script's
  functions at commit 2bf68d5, always checked) and, where the git mirror is present, against the
  texts the script itself builds for the same captions and questions (tests/_vdc_official.py);
- request counts, and a rerun sending zero requests (the cache);
- the numbers: the official ``main()`` run on the same scripted replies (mirror present), and an
  independent transcription of its aggregation (always), malformed replies included.
"""

from __future__ import annotations

import ast
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import _vdc_official as official
from capeval.errors import InputError
from capeval.metrics.vdcscore import prompts
from capeval.metrics.vdcscore.reply import read_literal
from capeval.metrics.vdcscore.scorer import VDCscore

RECORDED = json.loads((Path(__file__).parent / "data" / "vdcscore_official_prompts.json").read_text("utf-8"))

# ------------------------------------------------------------------ scripted data
#: video -> questions [(question, answer)]; replies of step 2 keyed by question
QA = {
    "v1": [("What color is the car?", "red"), ("Where is the car?", "on a road"), ("Is it raining?", "no")],
    "v2": [("Who walks in?", "a man"), ("What does he carry?", "a bag")],  # a malformed reply: error item
    "v3": [("What is the weather?", "sunny"), ("What time is it?", "noon")],  # all 'no': dropped (zero acc)
    "v4": [("How many dogs?", "two"), ("What breed?", "poodle"), ("Any cats?", "one")],
    "v5": [("What moves?", "a train")],  # no 'pred' key: error item
    "v6": [("Camera motion?", "pan left"), ("Shot type?", "close-up")],
    "v7": [("What instrument?", "a violin")],  # score 0 and 'no': dropped
}
REPLIES = {
    "What color is the car?": "{'pred': 'yes', 'score': 5}",
    "Where is the car?": " {'pred': 'no', 'score': 2}",  # a leading space: literal_eval strips it
    "Is it raining?": "{'pred': 'yes', 'score': 4.8}",
    "Who walks in?": "{'pred': 'yes', 'score': 4}",
    "What does he carry?": "The answer is {'pred': 'yes', 'score': 3}",  # not a literal
    "What is the weather?": "{'pred': 'no', 'score': 1}",
    "What time is it?": "{'pred': 'no', 'score': 2}",
    "How many dogs?": "{'pred': 'yes', 'score': '3'}",  # a string score: float() reads it
    "What breed?": "[('pred', 'yes'), ('score', 4)]",  # pairs: dict.update takes them
    "Any cats?": "{'pred': 'Yes', 'score': 2, 'extra': [1, 2]}",  # 'Yes' is not 'yes'
    "What moves?": "{'score': 3}",
    "Camera motion?": "\n{'pred': 'yes', 'score': 3}\n",
    "Shot type?": "{\"pred\": \"no\", \"score\": 1.5}",
    "What instrument?": "{'pred': 'no', 'score': 0}",
}
CAPTIONS = {f"v{k}": cap for k, cap in enumerate((
    "A red car drives along a wet road while the camera pans.", "A man walks into the room, no bag.",
    "It is night and raining.", "Two poodles and a cat play {in} the yard.", "A train passes by.",
    "The camera pans left in a close-up.", "A cello is played on stage."), 1)}


def step1_reply(caption: str, question: str) -> str:
    return f"answer to {question!r} from {len(caption)} characters"


def reply_for(system: str, user: str) -> str:
    """The scripted judge: step 1 answers name the question; step 2 replies are :data:`REPLIES`."""
    if system == prompts.ANSWER_SYSTEM:
        question = next(q for qs in QA.values() for q, _ in qs if f", question: {q}DO NOT" in user)
        caption = user.split("detailed description: ", 1)[1].rsplit(", question: ", 1)[0]
        return step1_reply(caption, question)
    assert system == prompts.JUDGE_SYSTEM, system
    question = user.split("Question: ", 1)[1].split("\nCorrect Answer: ", 1)[0]
    return REPLIES[question]


def split_llama3(prompt: str) -> tuple[str, str]:
    """System and user text of a prompt in the recorded llama-3-instruct layout."""
    head, rest = RECORDED["llama3_rendered"].split("<SYSTEM>")
    middle, tail = rest.split("<USER>")
    assert prompt.startswith(head) and prompt.endswith(tail), prompt[:80]
    system, user = prompt[len(head):len(prompt) - len(tail)].split(middle)
    return system, user


def sent_texts(bodies: list) -> list:
    """(system, user) of every request, whichever way it went."""
    return [split_llama3(b["prompt"]) if "prompt" in b else (b["messages"][0]["content"], b["messages"][1]["content"])
            for b in bodies]


class Server:
    """An OpenAI-compatible chat server on 127.0.0.1 answering with :func:`reply_for`."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        lock, bodies = threading.Lock(), self.bodies

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, payload):
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send({"data": [{"id": "judge"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["path"] = self.path
                with lock:
                    bodies.append(body)
                if self.path.endswith("/completions") and "prompt" in body:  # the SGLang frontend's text
                    system, user = split_llama3(body["prompt"])
                    self._send({"choices": [{"index": 0, "finish_reason": "stop", "text": reply_for(system, user)}]})
                    return
                msgs = body["messages"]
                text = reply_for(msgs[0]["content"], msgs[1]["content"])
                self._send({"choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    s = Server()
    yield s
    s.close()


def write_qa(path: Path, qa: dict) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for video, pairs in qa.items():
            f.write(json.dumps({video: [{"question": q, "answer": a, "category": "c"} for q, a in pairs]}) + "\n")
    return path


@pytest.fixture()
def qa_file(tmp_path):
    # v1 listed twice: the script's dict.update keeps the later list, so does capeval (reported)
    path = tmp_path / "camera.jsonl"
    write_qa(path, QA)
    text = path.read_text("utf-8")
    stale = json.dumps({"v1": [{"question": "stale question?", "answer": "x", "category": "c"}]})
    path.write_text(stale + "\n" + text, "utf-8")
    return path


def scorer(server, qa_file, tmp_path, **kw):
    return VDCscore(qa=str(qa_file), base_url=server.base_url, model="judge", cache=str(tmp_path / "cache"),
                    max_retries=0, **kw)


# ------------------------------------------------------------------ independent transcription
def transcription(captions: dict, qa: dict, drop_zero: bool = True) -> tuple[dict, float, float]:
    """process_vdc_result.py's steps 2-4 and final means, written out again for the scripted
    judge: per video every question answered, every reply literal_eval'd and merged, any
    exception dropping the video; a video kept when its mean score and accuracy are both non-zero."""
    kept: dict[str, tuple[float, float]] = {}
    for video, caption in captions.items():
        if video not in qa:
            continue
        try:
            rows = []
            for q, a in qa[video]:
                rows.append({"question": q, "answer": a, "response": step1_reply(caption, q)})
            for row in rows:
                row.update(ast.literal_eval(REPLIES[row["question"]]))
            score = sum(float(r["score"]) for r in rows) / len(rows)
            acc = len([r for r in rows if r["pred"] == "yes"]) / len(rows)
        except Exception:
            continue
        if (score and acc) or not drop_zero:
            kept[video] = (score, acc)
    scores = [s for s, _ in kept.values()]
    accs = [a for _, a in kept.values()]
    return kept, sum(scores) / len(scores), sum(accs) / len(accs)


@pytest.mark.parametrize("template", ["llama-3-instruct", "chat"])
def test_requests_are_the_official_texts_and_numbers_the_official_aggregation(server, qa_file, tmp_path, template):
    report = scorer(server, qa_file, tmp_path, template=template).score(CAPTIONS)
    n_questions = sum(len(v) for v in QA.values())
    assert len(server.bodies) == 2 * n_questions  # one answer and one judgment per question
    r, acc = report["vdcscore"], report["vdcscore-acc"]
    assert r.extras["requests"] == {"answer": n_questions, "judge": n_questions}
    # every request: the recorded official texts, with this caption / question / answer / response
    rendered = []
    for video, pairs in QA.items():
        for q, a in pairs:
            resp = step1_reply(CAPTIONS[video], q)
            rendered.append((RECORDED["answer_system"], RECORDED["answer_user"].replace("<CAPTION>", CAPTIONS[video])
                             .replace("<QUESTION>", q)))
            rendered.append((RECORDED["judge_system"], RECORDED["judge_user"].replace("<QUESTION>", q)
                             .replace("<ANSWER>", a).replace("<RESPONSE>", resp)))
    sent = sent_texts(server.bodies)
    assert sorted(sent) == sorted(rendered)
    body = server.bodies[0]
    if template == "chat":
        assert {b["path"] for b in server.bodies} == {"/v1/chat/completions"}
        assert [[m["role"] for m in b["messages"]] for b in server.bodies] == [["system", "user"]] * len(sent)
    else:  # one text: the SGLang frontend's llama-3-instruct rendering, exactly
        assert {b["path"] for b in server.bodies} == {"/v1/completions"}
        assert body["prompt"] == RECORDED["llama3_rendered"].replace("<SYSTEM>", sent[0][0]).replace("<USER>", sent[0][1])
    assert (body["temperature"], body["top_p"], body["max_tokens"], "seed" in body) == (1.0, 1.0, 256, False)
    # the numbers: the transcription of the script's aggregation
    kept, want_score, want_acc = transcription(CAPTIONS, QA)
    assert set(kept) == {"v1", "v4", "v6"}
    assert dict(r.items) == {v: s for v, (s, _) in kept.items()} and dict(acc.items) == {v: a for v, (_, a) in kept.items()}
    assert (r.system, acc.system) == (want_score, want_acc)
    assert set(r.extras["errors"]) == {"v2", "v5"} and "question 1: not a Python literal" in r.extras["errors"]["v2"]["error"]
    assert "no 'pred'" in r.extras["errors"]["v5"]["error"]
    assert set(r.extras["dropped_zero"]) == {"v3", "v7"} and r.extras["qa_replaced"] == ["v1"]
    assert set(r.skipped) == {"v2", "v3", "v5", "v7"}
    sig = str(r.signature)
    assert "dimension:camera" in sig and "model:judge" in sig and prompts.ANSWER_SHA256[:16] in sig
    assert prompts.JUDGE_SHA256[:16] in sig and "zeros:drop" in sig
    assert ("template:server-chat" in sig) == (template == "chat")
    # a rerun sends nothing: every answer comes from the cache
    again = scorer(server, qa_file, tmp_path, template=template).score(CAPTIONS)
    assert len(server.bodies) == 2 * n_questions and again["vdcscore"].extras["generated"] == 0
    assert again["vdcscore"].extras["cached"] == 2 * n_questions
    assert (again["vdcscore"].system, again["vdcscore-acc"].system) == (want_score, want_acc)
    # zeros=keep averages the zero videos too (an option, in the signature)
    keep = scorer(server, qa_file, tmp_path, zeros="keep", template=template).score(CAPTIONS)
    _, s_keep, a_keep = transcription(CAPTIONS, QA, drop_zero=False)
    assert (keep["vdcscore"].system, keep["vdcscore-acc"].system) == (s_keep, a_keep)
    assert "zeros:keep" in str(keep["vdcscore"].signature) and len(server.bodies) == 2 * n_questions


def test_recorded_prompts_are_the_official_script(tmp_path):
    """The recorded copy equals what the script at the pinned commit builds (mirror present), and
    capeval's strings equal the recorded copy (always)."""
    assert RECORDED["source"].endswith(f"{prompts.COMMIT}:post_eval/process_vdc_result.py")
    ours = (prompts.ANSWER_SYSTEM, prompts.answer_user("<CAPTION>", "<QUESTION>"), prompts.JUDGE_SYSTEM,
            prompts.judge_user("<QUESTION>", "<ANSWER>", "<RESPONSE>"))
    recorded = (RECORDED["answer_system"], RECORDED["answer_user"], RECORDED["judge_system"], RECORDED["judge_user"])
    assert ours == recorded
    assert "video or image.Here's how" in ours[0] and "<QUESTION>DO NOT PROVIDE" in ours[1]  # the joins
    assert prompts.llama3_prompt("<SYSTEM>", "<USER>") == RECORDED["llama3_rendered"]
    text = official.script_text()
    if text is None:
        pytest.skip("no rese1f/aurora mirror at 2bf68d5 (fetch github:rese1f/aurora)")
    seen: list = []
    ns = official.load(text, lambda s, u: "x", seen)
    ns["gener_pred_response"].run(pred_cap="<CAPTION>", q="<QUESTION>")
    ns["gener_pred_score"].run(qa={"question": "<QUESTION>", "answer": "<ANSWER>", "response": "<RESPONSE>"})
    assert (seen[0][0], seen[0][1], seen[1][0], seen[1][1]) == recorded


def test_official_main_gives_the_same_numbers(server, qa_file, tmp_path, monkeypatch):
    """The script's own main() on the same scripted judge: same requests, same per-video and final numbers."""
    text = official.script_text()
    if text is None:
        pytest.skip("no rese1f/aurora mirror at 2bf68d5 (fetch github:rese1f/aurora)")
    work = tmp_path / "run"
    (work / "post_eval").mkdir(parents=True)
    with open(work / "post_eval" / "VDC_1k_captions.jsonl", "w") as f:
        for v in CAPTIONS:
            f.write(json.dumps({"video_id": v, "captions": {"main_object_caption": "gt " + v}}) + "\n")
    raw = work / "raw.json"
    raw.write_text(json.dumps([{"doc": {"video_id": v}, "resps": [[c]]} for v, c in CAPTIONS.items()]))
    out = work / "out" / "res.jsonl"
    monkeypatch.chdir(work)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # the script sets it; restored after the test
    monkeypatch.setattr(sys, "argv", ["process_vdc_result.py", "--raw_file", str(raw), "--output_file", str(out),
                                      "--tp_qa_path", str(qa_file)])
    seen: list = []
    ns = official.load(text, reply_for, seen)
    ns["main"]()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    report = scorer(server, qa_file, tmp_path).score(CAPTIONS)
    assert sorted(sent_texts(server.bodies)) == sorted(seen)  # what reached our server = what the script asked
    r, acc = report["vdcscore"], report["vdcscore-acc"]
    assert [x["tp_score"] for x in lines[:-1]] == list(r.items.values())
    assert [x["tp_acc"] for x in lines[:-1]] == list(acc.items.values())
    assert (lines[-1]["tp_score"], lines[-1]["tp_acc"]) == (r.system, acc.system)


def test_hostile_replies_are_bounded_error_items():
    assert read_literal("{'pred': 'yes', 'score': 4}") == ({"pred": "yes", "score": 4}, "")
    for text, why in (("[" * 5000, "nested 5000 brackets"), ("1+" * 400 + "1", "400 operators"),
                      ("'" + "a" * 70000 + "'", "70,002 characters"), ("{'a': 1} trailing", "not a Python literal"),
                      ("9" * 5000, "not a Python literal")):
        value, got = read_literal(text)
        assert value is None and why in got, (text[:20], got)
    # brackets and operators inside strings are text, not nesting
    assert read_literal("{'pred': 'yes', 'score': 3, 'why': '((((- - -))))" + "[" * 300 + "'}")[1] == ""


def test_bad_options_and_inputs_are_one_line(server, qa_file, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_DATA", str(tmp_path / "nodata"))
    with pytest.raises(InputError, match="dimension=camera"):
        VDCscore(base_url=server.base_url)
    with pytest.raises(InputError, match="capeval download vdc"):
        VDCscore(dimension="camera", base_url=server.base_url)
    with pytest.raises(InputError, match="expected one of camera"):
        VDCscore(dimension="audio", qa=str(qa_file))
    with pytest.raises(InputError, match="top_p"):
        VDCscore(qa=str(qa_file), top_p=0)
    with pytest.raises(InputError, match="zeros"):
        VDCscore(qa=str(qa_file), zeros="sometimes")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v1": [{"question": 3, "answer": "a"}]}\n')
    with pytest.raises(InputError, match="line 1, video 'v1', question 0"):
        VDCscore(qa=str(bad))
    s = scorer(server, qa_file, tmp_path)
    with pytest.raises(InputError, match="video 'nope': no questions"):
        s.score({"nope": "a caption", "v1": CAPTIONS["v1"]})
    skipped = s.score({"nope": "a caption", "v1": CAPTIONS["v1"]}, skip_bad_items=True)
    assert "nope" in skipped["vdcscore"].skipped and list(skipped["vdcscore"].items) == ["v1"]


def test_through_the_api_with_options(server, qa_file, tmp_path):
    import capeval

    report = capeval.score({"v6": CAPTIONS["v6"]}, metrics="vdcscore,vdcscore-acc",
                           options={"vdcscore": {"qa": str(qa_file), "base_url": server.base_url, "model": "judge",
                                                 "cache": str(tmp_path / "c2"), "concurrency": 2}})
    assert report["vdcscore"].system == 2.25 and report["vdcscore-acc"].system == 0.5
    assert len(server.bodies) == 4


# ------------------------------------------------------------------ capeval download vdc
def _serve(folder: Path) -> tuple[ThreadingHTTPServer, str]:
    from functools import partial
    from http.server import SimpleHTTPRequestHandler

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def test_download_is_pinned_and_sha256_checked(tmp_path, monkeypatch):
    import subprocess

    from capeval.bench.data_download import download_benchmark as download
    from capeval.bench.sources import METRIC_SOURCES
    from capeval.errors import ResourceError
    from capeval.metrics.vdcscore import qa

    src = METRIC_SOURCES["vdc"]
    assert [f.place for f in src.files] == [f"vdc/{d}.jsonl" for d in qa.DIMENSIONS]
    assert all(f.urls == (f"https://raw.githubusercontent.com/rese1f/aurora/{prompts.COMMIT}/post_eval/{d}.jsonl",)
               and f.sha256 == qa.RELEASE[d] for f, d in zip(src.files, qa.DIMENSIONS))
    served = tmp_path / "served" / "vdc"
    served.mkdir(parents=True)
    have_mirror = official.script_text() is not None
    for d in qa.DIMENSIONS:
        if have_mirror:
            blob = subprocess.run(["git", f"--git-dir={official.MIRROR}", "show",
                                   f"{prompts.COMMIT}:post_eval/{d}.jsonl"], capture_output=True, check=True).stdout
        else:
            blob = b'{"v": [{"question": "q", "answer": "a"}]}\n'  # not the release: refused below
        (served / f"{d}.jsonl").write_bytes(blob)
    httpd, url = _serve(tmp_path / "served")
    monkeypatch.setenv("CAPEVAL_DATA_MIRROR", url)
    monkeypatch.setenv("CAPEVAL_DATA", str(tmp_path / "data"))
    try:
        if have_mirror:
            download("vdc", tmp_path / "data")
            s = VDCscore(dimension="main_object", base_url="http://127.0.0.1:9/v1")
            assert len(s.qa.questions) == 1025 and len(s.qa.replaced) == 4 and s.qa.sha256 == qa.RELEASE["main_object"]
            assert "qa:" + qa.RELEASE["main_object"][:16] in str(s.signature())
        (served / "short.jsonl").write_bytes(b'{"v": [{"question": "q", "answer": "a"}]}\n')
        with pytest.raises(ResourceError, match="sha256"):
            download("vdc", tmp_path / "data2")
    finally:
        httpd.shutdown()
        httpd.server_close()


# ------------------------------------------------------------------ published values, capeval reproduce vdc
def test_published_table_is_the_readme_and_reproduce_lists_it(capsys):
    import subprocess

    from capeval.bench import published as pub
    from capeval.cli.main import main

    cells = pub.select(["vdc"])
    assert len(cells) == 18 * 5 * 2 and {c.outputs != "" for c in cells} == {True}
    by = {(c.variant, c.benchmark, c.metric): c for c in cells}
    assert by[("AURORACAP-7B", "vdc-camera", "vdcscore-acc")].x100 == 43.5  # the README's bold row
    assert by[("AURORACAP-7B", "vdc-camera", "vdcscore")].x100 == 227.0  # 2.27 on the 0-5 scale, x100
    if official.script_text() is not None:  # re-read every value from the README at the pinned commit
        readme = subprocess.run(["git", f"--git-dir={official.MIRROR}", "show",
                                 f"{prompts.COMMIT}:post_eval/vdc/README.md"], capture_output=True, text=True,
                                check=True).stdout
        rows = [line.strip().strip("|").split("|") for line in readme.splitlines() if line.startswith("|")][2:]
        read = {}
        for row in rows:
            model = row[0].replace("*", "").strip()
            for k, dim in enumerate(("camera", "short", "background", "main_object", "detailed")):
                acc, score = (float(x.replace("*", "")) for x in row[1 + k].split("/"))
                read[(model, f"vdc-{dim}", "vdcscore-acc")] = acc
                read[(model, f"vdc-{dim}", "vdcscore")] = score
        assert {k: c.value for k, c in by.items()} == read
    assert main(["reproduce", "vdc"]) in (0, None)
    out = capsys.readouterr().out
    assert out.count("not run: model outputs") == 180 and "-O vdcscore.dimension=main_object" in out
