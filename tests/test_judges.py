"""The judge layer and its judges: CLAIR, FLEUR / RefFLEUR, EXPERT (VisCE2: tests/test_visce2.py).

The official prompt strings are written out here from the official files (DavidMChan/clair
clair.py, Yebin46/FLEUR fleur.py / reffleur.py, hjkim811/EXPERT expert.py), not imported.
Models are tiny random LLaVAs built from config (no download); servers are scripted on 127.0.0.1.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

from capeval.errors import InputError, ResourceError
from capeval.judges import answers as ans
from capeval.judges import templates

sys.path.insert(0, str(Path(__file__).parent))

# ------------------------------------------------------------------ official strings, written out
# clair.py _CLAIR_PROMPT after the backslash-newline continuations, for candidates ["a dog"] and
# targets ["a dog runs", "a brown dog"]
CLAIR_EXPECTED = (
    "You are trying to tell if a candidate set of captions is describing the same image as a reference set of captions.\n"
    "Candidate set:\n- a dog\n\n"
    "Reference set:\n- a dog runs\n- a brown dog\n\n"
    "On a precise scale from 0 to 100, how likely is it that the candidate set is describing the same image as the reference set? "
    "(JSON format, with a key \"score\", value between 0 and 100, and a key \"reason\" with a string value.)\n"
)
FLEUR_EXPECTED = (
    "Your task is to evaluate and rate the caption on a scale of 0.0 to 1.0 based on the given Grading Criteria. (Print Real Number "
    "Score ONLY)\n\nGrading Criteria:\n\n0.0: The caption does not describe the image at all.\n1.0: The caption accurately and "
    "clearly describes the image.\n\nCaption: a dog on grass\n\nScore(Choose a rating from 0.0 to 1.0):"
)
REF_FLEUR_EXPECTED = (
    "Your task is to evaluate and rate the candidate caption on a scale of 0.0 to 1.0 based on the given Grading Criteria. (Print "
    "Real Number Score ONLY)\n\nGrading Criteria:\n\n0.0: The caption does not describe the image at all.\n1.0: The caption "
    "accurately and clearly describes the image.\n\nReference Captions: a dog runs\na brown dog\n\nCandidate Caption: a dog on "
    "grass\n\nScore(Choose a rating from 0.0 to 1.0):"
)
EXPERT_EXPECTED = "Evaluate the caption and assign a score on a scale of 0.0 to 1.0.\n\nCaption: a dog on grass\n\nScore (0.0~1.0):"
EXPERT_EXPLANATION_EXPECTED = (
    "Provide a brief explanation for the score based on three criteria: Fluency, Relevance, and Descriptiveness.\n\nCaption: a dog "
    "on grass\n\nEvaluation Criteria:\n- Fluency: Whether the caption is fluent, natural, and grammatically correct.\n- Relevance: "
    "Whether the sentence correctly describes the visual content and be closely relevant to the image.\n- Descriptiveness: Whether "
    "the sentence is a precise, informative caption that describes important details of the image.\n\nOutput Format:\nFluency: "
    "{Provide explanation here.}\nRelevance: {Provide explanation here.}\nDescriptiveness: {Provide explanation here.}"
)
LLAVA_SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
                "detailed, and polite answers to the human's questions.")


def test_official_prompts_render_byte_exact():
    from capeval.metrics import clair, fleur

    assert clair.render(["a dog"], ["a dog runs", "a brown dog"]) == CLAIR_EXPECTED
    assert fleur.render("fleur", "a  dog on\tgrass ") == FLEUR_EXPECTED  # whitespace normalised as the official
    assert fleur.render("ref-fleur", "a dog on grass", ["a dog runs", "a brown dog"]) == REF_FLEUR_EXPECTED
    assert fleur.render("expert", "a dog on grass") == EXPERT_EXPECTED
    assert fleur.render_explanation("a dog on grass") == EXPERT_EXPLANATION_EXPECTED


def test_llava_v1_two_turns_is_the_official_conversation():
    # conv_llava_v1 (SeparatorStyle.TWO) after EXPERT's scoring turn, score written back + "</s>"
    before, after = templates.llava_v1_turns("EXPLAIN", [("SCORE?", "0.745</s>")])
    assert before + "<image>" + after == (LLAVA_SYSTEM + " USER: <image>\nSCORE? ASSISTANT: 0.745</s></s>USER: EXPLAIN "
                                          "ASSISTANT:")
    before, after = templates.llava_v1_turns("Q")
    assert before + "<image>" + after == LLAVA_SYSTEM + " USER: <image>\nQ ASSISTANT:"


# ------------------------------------------------------------------ CLAIR parsing
@pytest.mark.parametrize("answer,score,reason,how", [
    ('{"score": 85, "reason": "same dog"}', 85.0, "same dog", "json"),
    ('Sure! {"score": 40.5} trailing {"score": 99}', 40.5, "Unknown", "json"),
    ('{"score": 0.85, "reason": "x"}', 0.85, "x", "json"),          # JSON scores are not rescaled
    ("Score: 0.7\nReason: both show a dog", 70.0, "both show a dog", "number"),   # < 1: x 100
    ("I'd say 72. reason: similar", 72.0, "similar", "number"),
    ("{not json 64} because", 64.0, "Unknown", "number"),
    ('{"score": "high"} 55', 55.0, "Unknown", "number"),           # non-numeric JSON score: number rule
    ("no idea", None, None, "none"),
])
def test_clair_parsing_is_the_official_rule(answer, score, reason, how):
    got = ans.parse_clair(answer)
    assert (got.score, got.reason, got.how) == (score, reason, how)


# ------------------------------------------------------------------ FLEUR smoothing (hand calculations)
def tok(text: str, alts: dict[str, float] | None = None) -> dict[str, Any]:
    alts = alts or {text: 1.0}
    return {"token": text, "logprob": math.log(alts.get(text, 1e-9)) if text in alts else -30.0,
            "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in alts.items()]}


def test_smoothing_two_decimals_is_the_hand_calculation():
    tokens = [tok("0"), tok("."), tok("7", {"7": 0.6, "8": 0.3, "6": 0.1}), tok("5", {"5": 0.5, "0": 0.5})]
    got = ans.smooth("0.75", tokens)
    # 0.1 * (7*0.6 + 8*0.3 + 6*0.1) + 0.01 * (5*0.5 + 0*0.5) = 0.72 + 0.025
    assert got.error is None and math.isclose(got.score, 0.745, rel_tol=0, abs_tol=1e-12)
    assert got.positions == (2, 3) and got.number == 0.75
    assert got.mass == pytest.approx((1.0, 1.0), abs=1e-12)


def test_smoothing_one_rule_and_occurrence_rules():
    # 1.0: 0.9 * p(0) + p(1) at the token of the 1
    got = ans.smooth("1.0", [tok("1", {"1": 0.7, "0": 0.2, "9": 0.1}), tok("."), tok("0")])
    assert math.isclose(got.score, 0.9 * 0.2 + 0.7, abs_tol=1e-12) and got.positions == (0,)
    # 0.05: the first decimal is 0 -> the SECOND "0" token; the second decimal 5 -> its only token
    t = [tok("0", {"0": 1.0}), tok("."), tok("0", {"0": 0.5, "1": 0.5}), tok("5", {"5": 0.4, "6": 0.6})]
    got = ans.smooth("0.05", t)
    assert got.positions == (2, 3)
    assert math.isclose(got.score, 0.1 * (1 * 0.5) + 0.01 * (5 * 0.4 + 6 * 0.6), abs_tol=1e-12)
    # 0.77: the first decimal -> the first "7"; the second decimal -> the second "7"
    t = [tok("0"), tok("."), tok("7", {"7": 1.0}), tok("7", {"7": 0.5, "2": 0.5})]
    got = ans.smooth("0.77", t)
    assert got.positions == (2, 3) and math.isclose(got.score, 0.7 + 0.01 * (3.5 + 1.0), abs_tol=1e-12)
    # a digit absent from top_logprobs counts 0 and the mass found is reported
    got = ans.smooth("0.8", [tok("0"), tok("."), tok("8", {"8": 0.5, "9": 0.2})])
    assert math.isclose(got.score, 0.1 * (8 * 0.5 + 9 * 0.2), abs_tol=1e-12) and got.mass == pytest.approx((0.7,))
    # leading text and a trailing full stop: the official digits-and-dots rule reads 0.9
    got = ans.smooth("Score: 0.9.", [tok("Score"), tok(":"), tok(" "), tok("0"), tok("."), tok("9"), tok(".")])
    assert got.number == 0.9 and got.positions == (5,)


@pytest.mark.parametrize("answer,tokens,error", [
    ("no score", [tok("no")], "no number"),
    ("1.5", [tok("1"), tok("."), tok("5")], "outside [0, 1]"),
    ("0.7.5", [tok("0")], "no number"),
    ("0.7", None, "no token log-probabilities"),
    ("0.7", [tok("0"), tok("."), tok("x")], "digit 7 is not a generated token"),
])
def test_smoothing_errors(answer, tokens, error):
    got = ans.smooth(answer, tokens)
    assert got.score is None and error in got.error


# ------------------------------------------------------------------ scripted server
class Scripted:
    """An OpenAI-compatible server on 127.0.0.1 answering with ``reply(body) -> (content, logprobs)``
    or ``("status", code)``; counts requests."""

    def __init__(self, reply: Callable[[dict], Any]):
        self.reply = reply
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"data": [{"id": "judge"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.bodies.append(body)
                out = server.reply(body)
                if out[0] == "status":
                    self._send(out[1], {"error": {"message": "scripted"}})
                    return
                choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": out[0]}}
                if out[1] is not None:
                    choice["logprobs"] = {"content": out[1]}
                self._send(200, {"choices": [choice]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def last_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[-1]["text"]


@pytest.fixture()
def image_dir(tmp_path):
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    for k, (c, s) in enumerate(zip([(200, 30, 30), (30, 200, 30), (30, 30, 200)], [(40, 30), (24, 36), (32, 32)])):
        Image.new("RGB", s, c).save(folder / f"img{k}.png")
    return folder


# ------------------------------------------------------------------ CLAIR end to end
CLAIR_SCRIPT = {
    "a red square": ['{"score": 80, "reason": "both red"}'],
    "a green thing": ["hmm", "hmm", "Score 0.65 Reason: green"],  # parsed at the third try
    "a blue blob": ["no", "no", "no"],                           # never: error item / 0
}


def clair_server():
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def reply(body):
        text = last_text(body)
        cand = text.split("Candidate set:\n- ")[1].split("\n")[0]
        with lock:
            k = seen.get(cand, 0)
            seen[cand] = k + 1
        script = CLAIR_SCRIPT[cand]
        return script[min(k, len(script) - 1)], None

    return Scripted(reply)


def test_clair_scores_reasons_tries_errors_cache_and_resume(tmp_path):
    from capeval.metrics.clair import CLAIR

    srv = clair_server()
    try:
        cands = {"a": "a red square", "b": "a green thing", "c": "a blue blob"}
        refs = {k: ["ref one", "ref two"] for k in cands}
        scorer = CLAIR(base_url=srv.base_url, model="judge", cache=tmp_path / "c", concurrency=2)
        res = scorer.score(cands, refs)["clair"]
        assert dict(res.items) == {"a": 0.8, "b": 0.65}
        assert res.extras["reasons"] == {"a": "both red", "b": "green"}
        assert res.extras["tries"] == {"a": 1, "b": 3, "c": 3}
        assert set(res.extras["errors"]) == {"c"} and res.skipped == ("c",)
        assert math.isclose(res.system, (0.8 + 0.65) / 2)
        assert len(srv.bodies) == 7 and all(b["temperature"] == 0.0 for b in srv.bodies)
        assert srv.bodies[0]["messages"] == [{"role": "user", "content": last_text(srv.bodies[0])}]
        assert "prompt:DavidMChan/clair" in str(res.signature)
        # a rerun is answered by the cache: no request
        again = CLAIR(base_url=srv.base_url, model="judge", cache=tmp_path / "c", unparsed="zero").score(cands, refs)
        assert len(srv.bodies) == 7 and again["clair"].items["c"] == 0.0 and again["clair"].extras["cached"] == 7
    finally:
        srv.close()


def test_clair_resumes_after_an_interrupted_run(tmp_path):
    from capeval.metrics.clair import CLAIR

    calls = {"n": 0}

    def reply(body):
        calls["n"] += 1
        if "fails" in last_text(body) and calls.get("broken", True):
            return ("status", 401)
        return '{"score": 50, "reason": "ok"}', None

    srv = Scripted(reply)
    try:
        cands = {"a": "one", "b": "fails here", "c": "three"}
        refs = {k: ["r"] for k in cands}
        with pytest.raises(ResourceError):
            CLAIR(base_url=srv.base_url, model="judge", cache=tmp_path / "c", concurrency=1).score(cands, refs)
        done = len(srv.bodies)
        calls["broken"] = False
        res = CLAIR(base_url=srv.base_url, model="judge", cache=tmp_path / "c").score(cands, refs)["clair"]
        sent = [last_text(b) for b in srv.bodies[done:]]
        assert dict(res.items) == {"a": 0.5, "b": 0.5, "c": 0.5}
        assert res.extras["generated"] == len(sent) < 3  # what was answered before is not asked again
        assert any("fails here" in s for s in sent)
    finally:
        srv.close()


@pytest.mark.parametrize("kw,msg", [
    ({"tries": 0}, r"clair\.tries=0 out of range"), ({"concurrency": 0}, r"clair\.concurrency=0 out of range"),
    ({"temperature": -1}, r"clair\.temperature=-1 out of range"), ({"backend": "vllm"}, "clair option backend"),
    ({"backend": "transformers"}, "clair option base_url does not apply"),
    ({"batch_size": 0}, r"clair\.batch_size=0 out of range"),
    ({"unparsed": "skip"}, "clair option unparsed"), ({"top_logprobs": 3}, "unexpected keyword"),
])
def test_clair_options_are_checked(kw, msg):
    from capeval.metrics.clair import CLAIR

    with pytest.raises((InputError, TypeError), match=msg):
        CLAIR(base_url="http://127.0.0.1:9/v1", model="m", **kw)


# ------------------------------------------------------------------ FLEUR / EXPERT through a server
def digit_tokens(answer: str, table: dict[int, dict[str, float]]) -> list[dict[str, Any]]:
    return [tok(ch, table.get(k)) for k, ch in enumerate(answer)]


def fleur_reply(body):
    text = last_text(body)
    if "Provide a brief explanation" in text:
        return "Fluency: fine.\nRelevance: red.\nDescriptiveness: short.", None
    cap = text.split("Caption: ")[-1].split("\n")[0]
    if cap == "a red square":
        return "0.75", digit_tokens("0.75", {2: {"7": 0.6, "8": 0.3, "6": 0.1}, 3: {"5": 0.5, "0": 0.5}})
    if cap == "a green thing":
        return "1.0", digit_tokens("1.0", {0: {"1": 0.8, "0": 0.2}})
    return "It is nice.", digit_tokens("It is nice.", {})


def test_fleur_ref_fleur_and_expert_through_a_server(tmp_path, image_dir):
    from capeval.metrics.fleur import EXPERT, FLEUR

    srv = Scripted(fleur_reply)
    try:
        cands = {"img0": "a red square", "img1": "a green thing", "img2": "a blue blob"}
        refs = {k: ["r1", "r2"] for k in cands}
        scorer = FLEUR(metrics=["fleur", "ref-fleur"], backend="openai", base_url=srv.base_url, model="judge",
                       cache=tmp_path / "c")
        rep = scorer.score(cands, refs, images=image_dir)
        for m in ("fleur", "ref-fleur"):
            r = rep[m]
            assert math.isclose(r.items["img0"], 0.745, abs_tol=1e-12)
            assert math.isclose(r.items["img1"], 0.9 * 0.2 + 0.8, abs_tol=1e-12)
            assert set(r.extras["errors"]) == {"img2"} and r.skipped == ("img2",)
            assert r.extras["digit_mass"]["img0"] == pytest.approx([1.0, 1.0])
        assert len(srv.bodies) == 6
        body = srv.bodies[0]
        assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["temperature"] == 0.0
        assert body["max_tokens"] == 512
        assert {last_text(b) for b in srv.bodies} >= {FLEUR_EXPECTED.replace("a dog on grass", "a red square")}
        # cached rerun: nothing sent; unparsed=zero keeps the item at 0
        rep2 = FLEUR(metrics=["fleur"], backend="openai", base_url=srv.base_url, model="judge",
                     cache=tmp_path / "c", unparsed="zero").score(cands, images=image_dir)
        assert len(srv.bodies) == 6 and rep2["fleur"].items["img2"] == 0.0
        # number mode reads the written number
        rep3 = FLEUR(backend="openai", base_url=srv.base_url, model="judge", cache=None, metrics=["fleur"],
                     score_mode="number").score(cands, images=image_dir)
        assert dict(rep3["fleur"].items) == {"img0": 0.75, "img1": 1.0}
        # EXPERT with its explanation turn
        n = len(srv.bodies)
        ex = EXPERT(backend="openai", base_url=srv.base_url, model="judge", cache=None,
                    explanation=True).score(cands, images=image_dir)["expert"]
        assert math.isclose(ex.items["img0"], 0.745, abs_tol=1e-12)
        assert ex.extras["explanations"]["img0"] == {"fluency": "fine.", "relevance": "red.",
                                                    "descriptiveness": "short."}
        second = [b for b in srv.bodies[n:] if len(b["messages"]) == 4]
        assert len(second) == 2  # img2 has no score: no explanation turn
        msgs = next(b for b in second if "a red square" in last_text(b))["messages"]
        assert msgs[0] == {"role": "system", "content": [{"type": "text", "text": templates.llava_v1_system()}]}
        assert msgs[1]["content"][1]["text"] == EXPERT_EXPECTED.replace("a dog on grass", "a red square")
        assert msgs[2] == {"role": "assistant", "content": f"{ex.items['img0']!r}</s>"}
        assert msgs[3]["content"] == EXPERT_EXPLANATION_EXPECTED.replace("a dog on grass", "a red square")
    finally:
        srv.close()


@pytest.mark.parametrize("kw,msg", [
    ({"unparsed": "skip"}, "fleur option unparsed"), ({"top_logprobs": 21}, r"fleur\.top_logprobs=21 out of range"),
    ({"max_new_tokens": 0}, r"fleur\.max_new_tokens=0 out of range"), ({"explanation": True}, "applies to expert only"),
    ({"score_mode": "mean"}, "fleur option score_mode"), ({"api_key": "k", "backend": "transformers"}, "does not apply"),
])
def test_fleur_options_are_checked(kw, msg):
    from capeval.metrics.fleur import FLEUR

    kw = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", **kw}
    with pytest.raises(InputError, match=msg):
        FLEUR(**kw)


def test_expert_transformers_needs_the_converted_checkpoint():
    pytest.importorskip("transformers")
    from capeval.metrics.fleur import EXPERT

    with pytest.raises(InputError, match="EXPERT-llava-13b-lora"):
        EXPERT()


# ------------------------------------------------------------------ tiny LLaVA: exact token probabilities
@pytest.fixture(scope="module")
def tiny_llava():
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from test_visce2 import _tiny_llava

    return _tiny_llava()


def test_transformers_logprobs_are_the_model_softmax(tiny_llava, image_dir):
    """The backend's per-token digit log-probs equal a teacher-forced forward pass (float64 log-softmax)."""
    import torch

    from capeval.judges.backends import Request
    from capeval.judges.transformers_llava import TransformersLlava

    model, proc = tiny_llava
    backend = TransformersLlava.from_loaded(model, proc, "tiny", max_new_tokens=8, label="fleur")
    got: dict[int, Any] = {}
    reqs = [Request("img0", image_dir / "img0.png", FLEUR_EXPECTED, logprobs=True),
            Request("img1", image_dir / "img1.png", "short", logprobs=True)]
    backend.generate(reqs, lambda i, a: got.__setitem__(i, a))
    tokz = proc.tokenizer
    digits = TransformersLlava.digit_ids(tokz)
    assert [tokz.convert_ids_to_tokens(d) for d in digits] == [str(d) for d in range(10)]
    for k, req in enumerate(reqs):
        answer = got[k]
        assert answer.logprobs and "".join(t["token"] for t in answer.logprobs) == answer.text
        # one request alone, teacher forced through the generated ids
        from capeval.judges.images import expand_to_square, mean_fill
        from PIL import Image

        image = expand_to_square(Image.open(req.image).convert("RGB"), mean_fill(proc.image_processor.image_mean))
        enc = proc(text=["<image>"], images=[image], return_tensors="pt")
        n_img = int((enc["input_ids"] == model.config.image_token_index).sum())
        ids = backend.token_ids(backend.load(), req.prompt, n_img, model.config.image_token_index)
        gen = [t["id"] for t in answer.logprobs]
        full = torch.tensor([ids + gen])
        with torch.no_grad():
            logits = model(input_ids=full, pixel_values=enc["pixel_values"]).logits[0].double()
        for pos, entry in enumerate(answer.logprobs):
            lsm = torch.log_softmax(logits[len(ids) + pos - 1], dim=-1)
            assert int(lsm.argmax()) == entry["id"]  # greedy
            want = [float(lsm[d]) for d in digits]
            have = [a["logprob"] for a in entry["top_logprobs"]]
            assert have == pytest.approx(want, abs=1e-4)  # float32 model, batch of two vs one: rounding only


def test_fleur_and_expert_run_on_a_tiny_llava(tiny_llava, image_dir, tmp_path):
    """End to end on the transformers backend: every item is a smoothed score read from the model's
    own probabilities, or an error item naming why; the rerun is served from the cache."""
    from capeval.judges.transformers_llava import TransformersLlava
    from capeval.metrics.fleur import EXPERT, FLEUR

    model, proc = tiny_llava
    cands = {"img0": "a red square", "img1": "a green thing", "img2": "a blue blob"}
    backend = TransformersLlava.from_loaded(model, proc, "tiny", max_new_tokens=6, label="fleur")
    rep = FLEUR(metrics=["fleur"], backend=backend, cache=tmp_path / "c").score(cands, images=image_dir)["fleur"]
    for i in cands:
        answer = rep.extras["answers"][i]
        assert (i in rep.items) != (i in rep.extras["errors"])
        if i in rep.extras["errors"]:
            assert rep.extras["errors"][i]["answer"] == answer
    assert rep.extras["generated"] == 3
    again = FLEUR(metrics=["fleur"], backend=backend, cache=tmp_path / "c").score(cands, images=image_dir)["fleur"]
    assert again.extras["generated"] == 0 and again.extras["cached"] == 3
    assert again.extras["answers"] == rep.extras["answers"]
    ex_backend = TransformersLlava.from_loaded(model, proc, "tiny-expert", max_new_tokens=6, label="expert")
    ex = EXPERT(backend=ex_backend, cache=None, explanation=True).score(cands, images=image_dir)["expert"]
    assert set(ex.extras["explanation_answers"]) == set(ex.items) - set(ex.extras["errors"])


@pytest.mark.parametrize("answer", ["0.75", "1.0", "0.05"])
def test_fleur_smoothing_reads_the_model_probabilities(tiny_llava, image_dir, answer):
    """The tiny LLaVA is steered to write ``answer`` (at each step the target token's logit is set
    to the row's maximum + 1, the other logits are the model's own); the FLEUR score equals the
    official formula computed by hand from a teacher-forced forward pass with the same steering."""
    import torch

    from capeval.judges.transformers_llava import TransformersLlava
    from capeval.metrics.fleur import FLEUR

    model, proc = tiny_llava
    tokz = proc.tokenizer
    target = [tokz.convert_tokens_to_ids(c) for c in answer] + [tokz.eos_token_id]
    head = getattr(model, "lm_head", None) or model.language_model.lm_head
    state = {"step": 0, "on": True}

    def steer(module, inputs, output):
        if not state["on"]:
            return output
        out = output.clone()
        k = min(state["step"], len(target) - 1)
        out[:, -1, target[k]] = out[:, -1].max(dim=-1).values + 1.0
        state["step"] += 1
        return out

    handle = head.register_forward_hook(steer)
    try:
        backend = TransformersLlava.from_loaded(model, proc, "tiny", max_new_tokens=8, label="fleur")
        res = FLEUR(metrics=["fleur"], backend=backend, cache=None).score({"img0": "a red square"},
                                                                          images=image_dir)["fleur"]
    finally:
        handle.remove()
    assert res.extras["answers"]["img0"] == answer and not res.extras["errors"]
    # by hand: teacher forcing, raw logits, the same steering, float64 softmax over the whole vocabulary
    from PIL import Image

    from capeval.judges.images import expand_to_square, mean_fill

    image = expand_to_square(Image.open(image_dir / "img0.png").convert("RGB"),
                             mean_fill(proc.image_processor.image_mean))
    enc = proc(text=["<image>"], images=[image], return_tensors="pt")
    n_img = int((enc["input_ids"] == model.config.image_token_index).sum())
    from capeval.metrics.fleur import render

    ids = backend.token_ids(backend.load(), render("fleur", "a red square"), n_img, model.config.image_token_index)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids + target[:-1]]), pixel_values=enc["pixel_values"]).logits[0]
    probs = []
    for k in range(len(target)):
        row = logits[len(ids) - 1 + k].clone()
        row[target[k]] = row.max() + 1.0
        p = torch.softmax(row.double(), dim=-1)
        probs.append([float(p[tokz.convert_tokens_to_ids(str(d))]) for d in range(10)])
    if answer == "0.75":  # first decimal at token 2, second at token 3
        want = sum(probs[2][d] * d * 0.1 for d in range(10)) + sum(probs[3][d] * d * 0.01 for d in range(10))
    elif answer == "0.05":  # first decimal 0: the second "0" token (2); second decimal: token 3
        want = sum(probs[2][d] * d * 0.1 for d in range(10)) + sum(probs[3][d] * d * 0.01 for d in range(10))
    else:  # 1.0: 0.9 p(0) + p(1) at the token of the 1
        want = 0.9 * probs[0][0] + probs[0][1]
    assert 0.0 < want < 1.0
    assert res.items["img0"] == pytest.approx(want, abs=1e-5)  # float32 model: cached-KV vs full pass rounding


def test_cli_routes_judge_options_and_signatures(tmp_path, image_dir):
    import hashlib
    import os
    import subprocess

    from capeval.metrics import clair

    (tmp_path / "c.json").write_text(json.dumps({"img0": "a red square", "img1": "a green thing"}))
    (tmp_path / "r.json").write_text(json.dumps({"img0": ["r1", "r2"], "img1": ["r3"]}))
    srv_c, srv_f = clair_server(), Scripted(fleur_reply)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "capeval.cli", "score", "-c", str(tmp_path / "c.json"),
                               "-r", str(tmp_path / "r.json"), "--quiet", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path)

    try:
        out = run("-m", "clair", "-O", f"clair.base_url={srv_c.base_url}", "-O", "clair.model=judge",
                  "-O", "clair.cache=false")
        assert out.returncode == 0, out.stderr
        payload = json.loads(out.stdout)
        assert payload["scores"]["clair"] == pytest.approx((0.8 + 0.65) / 2)
        sig = payload["signatures"]["clair"]
        sha = hashlib.sha256(clair.PROMPT.encode()).hexdigest()[:16]
        assert f"prompt:DavidMChan/clair@f33f96d/clair.py@{sha}" in sig and "temperature:0.0" in sig
        assert all(part.count(":") >= 1 for part in sig.split("|")) and "pad_to_square" not in sig
        out = run("-m", "fleur,ref-fleur", "--images", str(image_dir), "-O", "fleur.backend=openai",
                  "-O", f"fleur.base_url={srv_f.base_url}", "-O", "fleur.model=judge", "-O", "fleur.cache=false",
                  "-O", "fleur.temperature=0.2", "-O", "fleur.seed=7")
        assert out.returncode == 0, out.stderr
        payload = json.loads(out.stdout)
        assert payload["scores"]["fleur"] == pytest.approx((0.745 + 0.98) / 2)
        assert "temperature:0.2|seed:7" in payload["signatures"]["fleur"]
        assert "prompt:Yebin46/FLEUR@6375a50/reffleur.py@" in payload["signatures"]["ref-fleur"]
        for args, msg in ((("-m", "fleur", "--images", str(image_dir), "-O", "fleur.concurrency=0"),
                           "fleur.concurrency"),
                          (("-m", "clair", "-O", "clair.tries=0"), "clair.tries")):
            out = run(*args)
            assert out.returncode == 2 and out.stderr.strip().startswith("capeval: ") and msg in out.stderr
            assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    finally:
        srv_c.close()
        srv_f.close()


@pytest.mark.parametrize("native", [True, False])
def test_native_vocab_leaves_the_padded_rows_out(tiny_llava, image_dir, native):
    """llava-hf ports pad LLaVA's output layer past Llama's 32,000 tokens (<image>, <pad>, rows up to a
    multiple of 64); FLEUR/EXPERT's official LLaVA has none. With ``native_vocab`` (their default) those
    rows never win greedy decoding and are out of the digit softmax: the log-probs equal a teacher-forced
    log-softmax over the base vocabulary of the unpadded model. Without it the padded rows (steered to
    win here) are generated."""
    import copy

    import torch

    from capeval.judges.backends import Request
    from capeval.judges.images import expand_to_square, mean_fill
    from capeval.judges.transformers_llava import TransformersLlava
    from PIL import Image

    model, proc = tiny_llava
    tokz = proc.tokenizer
    n_text, n_rows = tokz.vocab_size, model.get_output_embeddings().weight.shape[0]
    padded = copy.deepcopy(model)
    padded.resize_token_embeddings(n_rows + 6)
    extra = list(range(n_text, n_rows + 6))
    assert TransformersLlava.added_rows(tokz, padded) == extra

    def steer(module, inputs, output):  # the padded rows would win every step
        out = output.clone()
        out[..., n_rows:] = out.max(dim=-1, keepdim=True).values + 5.0
        return out

    handle = padded.get_output_embeddings().register_forward_hook(steer)
    try:
        backend = TransformersLlava.from_loaded(padded, proc, "tiny", max_new_tokens=4, label="fleur",
                                                native_vocab=native)
        got: dict[int, Any] = {}
        req = Request("img0", image_dir / "img0.png", FLEUR_EXPECTED, logprobs=True)
        backend.generate([req], lambda i, a: got.__setitem__(i, a))
    finally:
        handle.remove()
    ids_out = [t["id"] for t in got[0].logprobs]
    assert ("vocab" in backend.identity()) == native
    if not native:
        assert ids_out[0] >= n_rows  # a padded row was generated
        return
    assert ids_out and all(i < n_text for i in ids_out)
    image = expand_to_square(Image.open(req.image).convert("RGB"), mean_fill(proc.image_processor.image_mean))
    enc = proc(text=["<image>"], images=[image], return_tensors="pt")
    n_img = int((enc["input_ids"] == model.config.image_token_index).sum())
    ids = backend.token_ids(backend.load(), req.prompt, n_img, model.config.image_token_index)
    with torch.no_grad():  # the unpadded model, base vocabulary only
        logits = model(input_ids=torch.tensor([ids + ids_out]), pixel_values=enc["pixel_values"]).logits[0].double()
    digits = TransformersLlava.digit_ids(tokz)
    for pos, entry in enumerate(got[0].logprobs):
        lsm = torch.log_softmax(logits[len(ids) + pos - 1, :n_text], dim=-1)
        assert int(lsm.argmax()) == entry["id"]
        assert entry["logprob"] == pytest.approx(float(lsm[entry["id"]]), abs=1e-4)
        assert [a["logprob"] for a in entry["top_logprobs"]] == pytest.approx([float(lsm[d]) for d in digits],
                                                                               abs=1e-4)
