"""VisCE2: prompts byte for byte (expected strings written by hand from the reference files),
answer parsing, the transformers path on a tiny random LLaVA / LLaVA-NeXT built from config,
and the OpenAI-compatible path against a scripted local server (retries, errors, cache, resume).

The expected prompts below were typed from Silviase/VisCE2 at f08b2e1 (``prompts/*.txt``,
``src/utils/constants.py`` ``desc_task``, ``src/utils/prompter.py`` slot labels) and LLaVA's
``conv_llava_v1`` (``llava/conversation.py``); they are not produced by capeval's renderer.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from capeval.errors import InputError, ResourceError
from capeval.metrics.visce2 import parse, prompts
from capeval.metrics.visce2.backends import Request
from capeval.metrics.visce2.scorer import VisCE2

# ----------------------------------------------------------------------------- prompts
TASK = "\nOn a precise scale from 0 to 100, rate whether the candidate caption is appropriate for the given image.\n"
TAIL = (
    "Your final rating must be a single digit between 0 and 100.\n"
    "\n"
    "Appropriateness(0-100): How well the caption matches the image's content, atmosphere, and context.\n"
    "A score of 0 indicates complete inappropriateness, while a score of 100 indicates perfect appropriateness."
)
CAPTION = "A man rides a brown horse."
CONTEXT = "List of Important Objects:\n- Object 1: man\n- Object 2: horse"

EXPECTED_VISCE2 = (
    "\n"
    "On a precise scale from 0 to 100, rate whether the candidate caption is appropriate for the given image.\n"
    "\n"
    "Candidate caption:\n"
    "Candidate:\n"
    "A man rides a brown horse.\n"
    "\n"
    "Use the image and following visual context to evaluate the candidate caption:\n"
    "Visual Context:\n"
    "List of Important Objects:\n"
    "- Object 1: man\n"
    "- Object 2: horse\n"
    "\n" + TAIL
)
EXPECTED_VANILLA = TASK + "\nCandidate caption:\nCandidate:\nA man rides a brown horse.\n\n" + TAIL
EXPECTED_REF = (
    TASK + "\nCandidate caption:\nCandidate:\nA man rides a brown horse.\n\n"
    "Use the image and following visual context to evaluate the candidate caption:\n"
    "References:\nA person on a horse.\nA rider in a field.\n\n" + TAIL
)
EXPECTED_DESC = (
    TASK + "\nCandidate caption:\nCandidate:\nA man rides a brown horse.\n\n"
    "Use the image and following visual context to evaluate the candidate caption:\n"
    "Visual Context:\nThe image shows a rider.\n\n" + TAIL
)
EXPECTED_CONTEXT_PROMPT = (
    "Analyze the uploaded image and provide a structured output focusing on the objects, their features, "
    "and the relationships between them. \n"
    "Select up to five of the most important elements. The output should be organized as follows:\n"
    "\n"
    "List of Important Objects (up to five):\n"
    "\n"
    "- Object 1: [Brief description]\n"
    "- Object 2: [Brief description]\n"
    "- (Continue as necessary, up to five objects)\n"
    "\n"
    "Features (Specific characteristics and attributes of each object, such as color, shape, size, and texture):\n"
    "\n"
    "- Features of Object 1: [Detailed description of features]\n"
    "- Features of Object 2: [Detailed description of features]\n"
    "- (Continue as necessary for each selected object)\n"
    "\n"
    "Relationships (The way objects interact or are positioned relative to each other, without using specific "
    "object names or symbols):\n"
    "\n"
    "- Description of a relationship: [General description]\n"
    "- Another relationship: [General description]\n"
    "- (Continue as necessary for each relevant relationship)\n"
    "\n"
    "Focus on providing unique and detailed insights into the features and relationships of the selected objects "
    "up to five objects."
)
LLAVA_V1_HEAD = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives "
                 "helpful, detailed, and polite answers to the human's questions. USER: ")


def test_rating_prompts_byte_for_byte():
    assert prompts.render_rating("visce2", CAPTION, context=CONTEXT) == EXPECTED_VISCE2
    assert prompts.render_rating("visce2-vanilla", CAPTION) == EXPECTED_VANILLA
    refs = ["A person on a horse.", "A rider in a field."]
    assert prompts.render_rating("visce2-ref", CAPTION, references=refs) == EXPECTED_REF
    assert prompts.render_rating("visce2-desc", CAPTION, description="The image shows a rider.") == EXPECTED_DESC


def test_step1_prompts_byte_for_byte():
    assert prompts.step1_prompt("visce2") == EXPECTED_CONTEXT_PROMPT
    assert prompts.step1_prompt("visce2-desc") == "Generate a detailed description for the given image."
    assert prompts.step1_prompt("visce2-vanilla") is None


def test_llava_v1_conversation_byte_for_byte():
    text = prompts.llava_v1_text(EXPECTED_VISCE2)
    assert text == LLAVA_V1_HEAD + "<image>\n" + EXPECTED_VISCE2 + " ASSISTANT:"
    before, after = prompts.llava_v1("p")
    assert (before, after) == (LLAVA_V1_HEAD, "\np ASSISTANT:")


def test_slot_markers_inside_user_text_are_not_substituted():
    out = prompts.render_rating("visce2", "a [context] sign", context="ctx [cand]")
    assert "Candidate:\na [context] sign\n" in out and "Visual Context:\nctx [cand]\n" in out
    with pytest.raises(InputError, match="needs 'context'"):
        prompts.render_rating("visce2", CAPTION)


def test_prompt_files_are_verified(monkeypatch):
    sig = prompts.signature_fields("visce2", template=True)
    assert sig["rating_prompt"] == "visce_2.txt@" + hashlib.sha256(
        ("[task]\nCandidate caption:\n[cand]\n\nUse the image and following visual context to evaluate the "
         "candidate caption:\n[context]\n\n" + TAIL).encode()).hexdigest()[:16]
    assert sig["step1_prompt"].startswith("visual_context.txt@") and sig["template"].startswith("llava_v1@")
    real_read = prompts._read
    prompts.prompt_file.cache_clear()
    monkeypatch.setattr(prompts, "_read", lambda name: b"tampered" if name == "base.txt" else real_read(name))
    try:
        with pytest.raises(ResourceError, match="base.txt has sha256"):
            prompts.prompt_file("base.txt")
    finally:
        prompts.prompt_file.cache_clear()


# ----------------------------------------------------------------------------- parsing
@pytest.mark.parametrize("answer, score", [
    ("85", 85.0),
    ("The score is 73 out of 100.", 73.0),
    ("0-100: 42", 42.0),
    ("Rating (0-100): 64", 64.0),
    ("Appropriateness(0-100): 90", 90.0),
    ("On a scale from 0 to 100, I rate it 55.", 55.0),
    ("a score between 0 and 100: 12", 12.0),
    ("0 \u2013 100 scale, 30", 30.0),
    ("I would give 250", 100.0),
    ("Score: 80-100 range", 80.0),  # not an echo: 80 is the answer
    ("72.5", 72.0),
    ("0", 0.0),
    ("100", 100.0),
])
def test_parse_first_integer(answer, score):
    assert parse.parse_answer(answer).score == score


# issue 24: an echo of the scale followed by a full stop is still an echo
@pytest.mark.parametrize("answer, score, clipped", [
    ("Score: 85/100", 85.0, False),
    ("between 0 and 100. 90", 90.0, False),
    ("0 to 100.\nScore: 33", 33.0, False),
    ("Rating: 150", 100.0, True),
    ("Your rating must be between 0 and 100. 90", 90.0, False),
    ("0-100. 42", 42.0, False),
    ("0-100.5 is not a scale, 7", 0.0, False),  # "100.5" is a number: no echo, the first integer is 0
    ("Score: 5.0 to 100", 5.0, False),  # "0 to 100" inside "5.0 to 100" is no echo
])
def test_parse_issue24_answer_shapes(answer, score, clipped):
    got = parse.parse_answer(answer)
    assert (got.score, got.clipped, got.error) == (score, clipped, None)


def test_parse_unparsable_word_is_an_error_or_zero():
    assert parse.parse_answer("eighty").score is None and parse.parse_answer("eighty").error
    assert parse.parse_answer("eighty", unparsed="zero").score == 0.0


@pytest.mark.parametrize("answer, score", [
    # the reference code's get_digit_scores: re.findall("[0-9]+") -> first, as int, no clipping
    ("between 0 and 100. 90", 0.0), ("Rating: 150", 150.0), ("Score: 85/100", 85.0), ("0-100. 42", 0.0),
])
def test_parse_reference_rule_is_the_first_integer(answer, score):
    assert re.findall("[0-9]+", answer)[0] == str(int(score))  # the transcription of the reference
    got = parse.parse_answer(answer, rule="reference")
    assert got.score == score and not got.clipped
    with pytest.raises(InputError, match="parse_rule"):
        parse.parse_answer(answer, rule="official")


def test_parse_no_number_is_an_error_unless_zero_asked():
    for answer in ("The caption is fine.", "", "Rate (0-100):"):
        p = parse.parse_answer(answer)
        assert p.score is None and p.error
        z = parse.parse_answer(answer, unparsed="zero")
        assert z.score == 0.0 and z.error == p.error
    with pytest.raises(InputError, match="unparsed"):
        parse.parse_answer("1", unparsed="silent")


def test_expected_score_from_logprobs():
    lp = math.log
    tokens = [{"token": "Score: ", "logprob": -0.1, "top_logprobs": []},
              {"token": "80", "logprob": lp(0.5), "top_logprobs": [
                  {"token": "80", "logprob": lp(0.5)}, {"token": " 60", "logprob": lp(0.3)},
                  {"token": "good", "logprob": lp(0.2)}]}]
    answer = "Score: 80"
    got = parse.expected_score(answer, tokens, parse.parse_answer(answer))
    assert got == pytest.approx((0.5 * 80 + 0.3 * 60) / 0.8)
    split = [{"token": "8", "logprob": -0.1, "top_logprobs": [{"token": "8", "logprob": -0.1}]},
             {"token": "0", "logprob": -0.1, "top_logprobs": []}]
    assert parse.expected_score("80", split, parse.parse_answer("80")) is None  # one digit per token
    assert parse.expected_score("80", None, parse.parse_answer("80")) is None
    assert parse.expected_score("81", tokens[1:], parse.parse_answer("81")) is None  # tokens do not spell it


# ----------------------------------------------------------------------------- images
@pytest.fixture()
def image_dir(tmp_path):
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    colors = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]
    sizes = [(40, 30), (24, 36), (32, 32)]
    for k, (c, s) in enumerate(zip(colors, sizes)):
        Image.new("RGB", s, c).save(folder / f"img{k}.png")
    return folder


# ----------------------------------------------------------------------------- tiny LLaVA
def _tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    # one token per printable character (no merges) + Llama's special tokens + <image>
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
    vocab = {tok: i for i, tok in enumerate(specials + sorted(set(string.printable)))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tk.decoder = decoders.Fuse()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", additional_special_tokens=["<image>"])


def _tiny_llava(next_: bool = False):
    import torch
    import transformers as tf

    tok = _tiny_tokenizer()
    vision = tf.CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 image_size=28, patch_size=14, projection_dim=16, initializer_factor=10.0)
    text = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                          bos_token_id=1, eos_token_id=2, pad_token_id=3,
                          initializer_range=0.5)  # large weights: the answer depends on the whole prompt
    common = dict(vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<image>"),
                  vision_feature_layer=-2, vision_feature_select_strategy="default")
    torch.manual_seed(0)
    if next_:
        grid = [[28, 56], [56, 28], [56, 56]]
        model = tf.LlavaNextForConditionalGeneration(tf.LlavaNextConfig(image_grid_pinpoints=grid, **common))
        ip = tf.LlavaNextImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28},
                                           image_grid_pinpoints=grid)
        proc = tf.LlavaNextProcessor(image_processor=ip, tokenizer=tok, patch_size=14,
                                     vision_feature_select_strategy="default", num_additional_image_tokens=1)
    else:
        model = tf.LlavaForConditionalGeneration(tf.LlavaConfig(image_seq_length=4, **common))
        ip = tf.LlavaImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
        proc = tf.LlavaProcessor(image_processor=ip, tokenizer=tok, patch_size=14,
                                 vision_feature_select_strategy="default", num_additional_image_tokens=1)
    with torch.no_grad():  # a non-zero <pad> embedding: attending to padding would change the answers
        model.get_input_embeddings().weight[3].normal_(0.0, 1.0)
    return model.eval(), proc


@pytest.fixture(scope="module")
def tiny_llava():
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    return _tiny_llava()


def _transformers_backend(model, proc, **kw):
    from capeval.metrics.visce2.backends.transformers_llava import TransformersLlava

    return TransformersLlava.from_loaded(model, proc, "tiny-random-llava", **kw)


def test_llava_token_layout_is_the_reference_conversation(tiny_llava):
    model, proc = tiny_llava
    backend = _transformers_backend(model, proc)
    loaded = backend.load()
    tok = proc.tokenizer
    img = tok.convert_tokens_to_ids("<image>")
    ids = backend.token_ids(loaded, EXPECTED_VISCE2, 4, img)
    first = ids.index(img)
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    assert ids[first:first + 4] == [img] * 4 and ids.count(img) == 4
    assert tok.decode(ids[1:first]) == LLAVA_V1_HEAD
    assert tok.decode(ids[first + 4:]) == "\n" + EXPECTED_VISCE2 + " ASSISTANT:"


def _scores_with(backend, image_dir, captions, metrics=("visce2", "visce2-vanilla")):
    scorer = VisCE2(metrics=list(metrics), backend=backend, cache=None)
    imgs = {k: image_dir / f"img{int(k[-1]) % 3}.png" for k in captions}
    return scorer.score(captions, images=imgs)


def test_llava_batched_left_padding_equals_one_by_one(tiny_llava, image_dir):
    model, proc = tiny_llava
    captions = {"c0": "a red square", "c1": "green", "c2": "a blue square on a table", "c3": "red!"}
    one = _scores_with(_transformers_backend(model, proc, batch_size=1, max_new_tokens=6), image_dir, captions)
    many = _scores_with(_transformers_backend(model, proc, batch_size=4, max_new_tokens=6), image_dir, captions)
    for m in ("visce2", "visce2-vanilla"):
        assert one[m].extras["answers"] == many[m].extras["answers"]
        assert set(one[m].extras["answers"]) == set(captions)
    assert one["visce2"].extras["contexts"] == many["visce2"].extras["contexts"]
    assert many["visce2"].extras["generated"] == {"context": 3, "rating": 8}
    sig = str(many["visce2"].signature)
    assert "backend:transformers" in sig and "template:llava_v1@" in sig and "temperature:0.0" in sig


def test_llava_scores_parse_the_generated_number(tiny_llava, image_dir):
    import torch

    model, proc = _tiny_llava()
    hidden, vocab = model.lm_head.in_features, model.lm_head.out_features
    head = torch.nn.Linear(hidden, vocab, bias=True)  # always says "4": a known answer through the real path
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[proc.tokenizer.convert_tokens_to_ids("4")] = 10.0
    model.lm_head = head
    report = _scores_with(_transformers_backend(model, proc, batch_size=2, max_new_tokens=2), image_dir,
                          {"c0": "x", "c1": "y"})
    assert dict(report["visce2"].items) == {"c0": 44.0, "c1": 44.0}
    assert report["visce2"].extras["contexts"]["c0"] == "44"
    assert report["visce2"].system == 44.0


def test_llava_next_batched_equals_one_by_one(image_dir):
    pytest.importorskip("transformers")
    model, proc = _tiny_llava(next_=True)
    from PIL import Image

    reqs = [Request(str(k), Image.open(image_dir / f"img{k}.png"), p)
            for k, p in enumerate(["short", "a much longer prompt here", "mid prompt"])]
    outs = []
    for bs in (1, 3):
        got: dict[int, str] = {}
        _transformers_backend(model, proc, batch_size=bs, max_new_tokens=5).generate(
            reqs, lambda i, a, out=got: out.__setitem__(i, a.text))
        outs.append(got)
    assert outs[0] == outs[1] and len(outs[0]) == 3


def test_transformers_options_are_checked():
    pytest.importorskip("transformers")
    with pytest.raises(InputError, match="quantization"):
        VisCE2(backend="transformers", quantization="3bit", cache=None)
    with pytest.raises(InputError, match="base_url does not apply"):
        VisCE2(backend="transformers", base_url="http://x/v1", cache=None)
    with pytest.raises(InputError, match="log-probabilities"):
        VisCE2(backend="transformers", score_mode="expected", cache=None)


# ----------------------------------------------------------------------------- scripted server
class ScriptedServer:
    """An OpenAI-compatible chat server answering from a script keyed by the candidate caption.

    ``script[caption]`` is a list of behaviours used for successive attempts (the last one
    repeats): ``("ok", text[, logprobs])``, ``("status", code[, message])``,
    ``("sleep", seconds, text)``, ``("raw", bytes)``. Visual-context requests get
    ``"CTX <image hash>"``; unscripted captions get ``"Rating: 50"``.
    """

    def __init__(self, models=("tiny-vlm",), api_key=None):
        self.models = list(models)
        self.api_key = api_key
        self.script: dict[str, list[tuple]] = {}
        self.attempts: dict[str, int] = {}
        self.counts = {"context": 0, "rating": 0}
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code, payload, headers=None):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def _authorised(self):
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    self._send(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}})
                    return False
                return True

            def do_GET(self):
                if not self._authorised():
                    return
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})
                else:
                    self._send(404, {"error": {"message": "Not Found"}})

            def do_POST(self):
                if self.path != "/v1/chat/completions":
                    self._send(404, {"detail": "Not Found"})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not self._authorised():
                    return
                if body["model"] not in server.models:
                    self._send(404, {"error": {"message": f"The model `{body['model']}` does not exist.",
                                               "type": "NotFoundError", "code": 404}})
                    return
                content = body["messages"][1]["content"]
                url, text = content[0]["image_url"]["url"], content[1]["text"]
                m = re.search(r"\nCandidate:\n(.*)\n", text)
                with server.lock:
                    server.bodies.append(body)
                    if m is None:
                        server.counts["context"] += 1
                        behaviour = ("ok", "CTX " + hashlib.sha256(url.encode()).hexdigest()[:8])
                    else:
                        server.counts["rating"] += 1
                        caption = m.group(1)
                        steps = server.script.get(caption, [("ok", "Rating: 50")])
                        k = server.attempts.get(caption, 0)
                        server.attempts[caption] = k + 1
                        behaviour = steps[min(k, len(steps) - 1)]
                kind = behaviour[0]
                if kind == "status":
                    msg = behaviour[2] if len(behaviour) > 2 else f"scripted {behaviour[1]}"
                    self._send(behaviour[1], {"error": {"message": msg}}, {"Retry-After": "0"})
                elif kind == "raw":
                    self._send(200, behaviour[1])
                else:
                    if kind == "sleep":
                        time.sleep(behaviour[1])
                    answer = behaviour[-1] if kind == "sleep" else behaviour[1]
                    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": answer}}
                    if kind == "ok" and len(behaviour) > 2:
                        choice["logprobs"] = {"content": behaviour[2]}
                    self._send(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                                     "choices": [choice]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    s = ScriptedServer()
    yield s
    s.close()


def _server_scorer(server, tmp_path, metrics=("visce2",), **kw):
    opts = dict(backend="openai", base_url=server.base_url, model="tiny-vlm", cache=str(tmp_path / "cache"),
                retry_backoff=0.01, timeout=5.0)
    opts.update(kw)
    return VisCE2(metrics=list(metrics), **opts)


def _images(image_dir, ids):
    return {i: image_dir / f"img{k % 3}.png" for k, i in enumerate(ids)}


def test_server_scores_and_extras(server, tmp_path, image_dir):
    server.script = {"a": [("ok", "85")], "b": [("ok", "The score is 40 out of 100.")],
                     "c": [("ok", "Appropriateness(0-100): 70")], "d": [("ok", "It is a good caption.")]}
    caps = {"0": "a", "1": "b", "2": "c", "3": "d"}
    res = _server_scorer(server, tmp_path).score(caps, images=_images(image_dir, caps))["visce2"]
    assert dict(res.items) == {"0": 85.0, "1": 40.0, "2": 70.0}
    assert res.system == pytest.approx(65.0)
    assert res.extras["errors"] == {"3": {"answer": "It is a good caption.", "error": "no number in the answer"}}
    assert res.skipped == ("3",) and res.extras["n_errors"] == 1
    assert res.extras["answers"]["1"] == "The score is 40 out of 100."
    assert res.extras["contexts"]["0"].startswith("CTX ") and res.extras["contexts"]["3"] == res.extras["contexts"]["0"]
    assert server.counts == {"context": 3, "rating": 4}  # img0 is used by items 0 and 3: one context
    body = server.bodies[-1]
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["max_tokens"] == 1024
    assert body["messages"][1]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    rating_texts = [b["messages"][1]["content"][1]["text"] for b in server.bodies if "Candidate:" in
                    b["messages"][1]["content"][1]["text"]]
    ctx0 = res.extras["contexts"]["0"]
    assert prompts.render_rating("visce2", "a", context=ctx0) in rating_texts
    zero = _server_scorer(server, tmp_path, unparsed="zero").score(caps, images=_images(image_dir, caps))["visce2"]
    assert zero.items["3"] == 0.0 and "3" in zero.extras["errors"] and zero.skipped == ()
    sig = str(res.signature)
    assert "backend:openai" in sig and "model:tiny-vlm" in sig and "rating_prompt:visce_2.txt@" in sig


def test_server_issue24_answers_clipped_counted_and_reference_rule(server, tmp_path, image_dir):
    answers = {"a": "Score: 85/100", "b": "between 0 and 100. 90", "c": "0 to 100.\nScore: 33",
               "d": "Rating: 150", "e": "eighty", "f": "Your rating must be between 0 and 100. 90",
               "g": "0-100. 42"}
    server.script = {c: [("ok", a)] for c, a in answers.items()}
    caps = {c: c for c in answers}
    res = _server_scorer(server, tmp_path).score(caps, images=_images(image_dir, caps), skip_bad_items=True)["visce2"]
    assert dict(res.items) == {"a": 85.0, "b": 90.0, "c": 33.0, "d": 100.0, "f": 90.0, "g": 42.0}
    assert res.extras["clipped"] == {"d": "Rating: 150"} and res.extras["n_clipped"] == 1
    assert res.skipped == ("e",) and res.extras["errors"]["e"]["answer"] == "eighty"
    assert "parse:first-int,scale-echo-removed,clip[0,100]" in str(res.signature)
    zero = _server_scorer(server, tmp_path, unparsed="zero").score(caps, images=_images(image_dir, caps))["visce2"]
    assert zero.items["e"] == 0.0 and "e" in zero.extras["errors"]
    ref = _server_scorer(server, tmp_path, parse_rule="reference").score(
        caps, images=_images(image_dir, caps), skip_bad_items=True)["visce2"]
    assert dict(ref.items) == {"a": 85.0, "b": 0.0, "c": 0.0, "d": 150.0, "f": 0.0, "g": 0.0}
    assert ref.extras["n_clipped"] == 0 and "parse:first-int(reference)" in str(ref.signature)
    with pytest.raises(InputError, match="parse_rule"):
        _server_scorer(server, tmp_path, parse_rule="first")


def test_server_retries_transient_failures(server, tmp_path, image_dir):
    server.script = {"slow": [("sleep", 1.5, "61"), ("ok", "62")], "busy": [("status", 429), ("ok", "70")],
                     "err": [("status", 500), ("status", 503), ("ok", "80")],
                     "junk": [("raw", b"{not json"), ("ok", "90")]}
    caps = {"s": "slow", "b": "busy", "e": "err", "j": "junk"}
    scorer = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",), timeout=0.5, concurrency=4)
    res = scorer.score(caps, images=_images(image_dir, caps))["visce2-vanilla"]
    assert dict(res.items) == {"s": 62.0, "b": 70.0, "e": 80.0, "j": 90.0}
    assert server.attempts == {"slow": 2, "busy": 2, "err": 3, "junk": 2}
    assert scorer.backend.requests_sent == 9


def test_server_gives_up_after_max_retries(server, tmp_path, image_dir):
    server.script = {"down": [("status", 500)], "junk": [("raw", b"<html>oops")]}
    for cap, pattern in (("down", "HTTP 500"), ("junk", "malformed JSON")):
        scorer = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",), max_retries=2)
        with pytest.raises(ResourceError, match=f"failed after 3 attempts: {pattern}") as err:
            scorer.score({"x": cap}, images=_images(image_dir, ["x"]))
        assert "\n" not in str(err.value) and "item 'x'" in str(err.value)
        assert server.attempts[cap] == 3


def test_server_authentication_error_is_one_clear_line(tmp_path, image_dir):
    s = ScriptedServer(api_key="right")
    try:
        scorer = _server_scorer(s, tmp_path, metrics=("visce2-vanilla",), api_key="wrong")
        with pytest.raises(ResourceError, match=r"HTTP 401: Incorrect API key provided\); check the API key") as err:
            scorer.score({"x": "a"}, images=_images(image_dir, ["x"]))
        assert "\n" not in str(err.value)
        ok = _server_scorer(s, tmp_path, metrics=("visce2-vanilla",), api_key="right")
        assert ok.score({"x": "a"}, images=_images(image_dir, ["x"]))["visce2-vanilla"].items["x"] == 50.0
    finally:
        s.close()


def test_server_model_not_found_and_model_discovery(server, tmp_path, image_dir, monkeypatch):
    scorer = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",), model="llava-99b")
    with pytest.raises(ResourceError, match=r"model 'llava-99b' not found at .*; the server has: tiny-vlm") as err:
        scorer.score({"x": "a"}, images=_images(image_dir, ["x"]))
    assert "\n" not in str(err.value)
    monkeypatch.delenv("CAPEVAL_VISCE2_MODEL", raising=False)
    found = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",), model=None)
    assert found.score({"x": "a"}, images=_images(image_dir, ["x"]))["visce2-vanilla"].items["x"] == 50.0
    assert "model:tiny-vlm" in str(found.signature("visce2-vanilla"))
    wrong = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",), base_url=server.base_url[:-3] + "/api")
    with pytest.raises(ResourceError, match="is base_url right"):
        wrong.score({"x": "a"}, images=_images(image_dir, ["x"]))


def test_server_environment_configuration(server, tmp_path, image_dir, monkeypatch):
    monkeypatch.setenv("CAPEVAL_VISCE2_BASE_URL", server.base_url)
    monkeypatch.setenv("CAPEVAL_VISCE2_MODEL", "tiny-vlm")
    scorer = VisCE2(metrics=["visce2-vanilla"], backend="openai", cache=None)
    assert scorer.score({"x": "a"}, images=_images(image_dir, ["x"]))["visce2-vanilla"].items["x"] == 50.0


def test_cache_hits_and_new_captions_of_the_same_images(server, tmp_path, image_dir):
    caps = {f"i{k}": f"cap {k}" for k in range(6)}
    images = _images(image_dir, caps)
    first = _server_scorer(server, tmp_path).score(caps, images=images)["visce2"]
    assert server.counts == {"context": 3, "rating": 6}
    again = _server_scorer(server, tmp_path).score(caps, images=images)["visce2"]
    assert server.counts == {"context": 3, "rating": 6}  # nothing asked again
    assert dict(again.items) == dict(first.items) and again.extras["cached"] == {"context": 3, "rating": 6}
    new = {k: v + " (new)" for k, v in caps.items()}
    _server_scorer(server, tmp_path).score(new, images=images)
    assert server.counts == {"context": 3, "rating": 12}  # new captions: ratings only, contexts cached
    sampled = _server_scorer(server, tmp_path, temperature=0.2, seed=7).score(caps, images=images)["visce2"]
    assert server.counts == {"context": 6, "rating": 18}  # other decoding: other cache entries
    assert "temperature:0.2" in str(sampled.signature) and "seed:7" in str(sampled.signature)


def test_resume_after_an_interrupted_run(server, tmp_path, image_dir):
    caps = {f"i{k}": f"cap {k}" for k in range(6)}
    images = _images(image_dir, caps)
    server.script = {"cap 3": [("status", 400, "This model's maximum context length is exceeded")]}
    with pytest.raises(ResourceError, match="item 'i3': HTTP 400"):
        _server_scorer(server, tmp_path, concurrency=1).score(caps, images=images)
    first_ratings = server.counts["rating"]
    assert server.counts["context"] == 3 and 4 <= first_ratings <= 5  # stopped at item 3 (maybe one more in flight)
    server.script = {}
    res = _server_scorer(server, tmp_path, concurrency=1).score(caps, images=images)["visce2"]
    assert len(res.items) == 6 and server.counts["context"] == 3  # contexts came from the cache
    generated = res.extras["generated"]["rating"]
    assert generated == server.counts["rating"] - first_ratings
    assert res.extras["cached"]["rating"] + generated == 6 and generated == 6 - (first_ratings - 1)


def test_expected_score_through_the_server(server, tmp_path, image_dir):
    lp = math.log
    server.script = {"a": [("ok", "80", [{"token": "80", "logprob": lp(0.6), "top_logprobs": [
        {"token": "80", "logprob": lp(0.6)}, {"token": "90", "logprob": lp(0.4)}]}])],
        "b": [("ok", "75")]}
    scorer = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",), score_mode="expected", top_logprobs=5)
    res = scorer.score({"x": "a", "y": "b"}, images=_images(image_dir, ["x", "y"]))["visce2-vanilla"]
    assert res.items["x"] == pytest.approx(84.0) and res.items["y"] == 75.0
    assert res.extras["first_integer"] == {"x": 80.0, "y": 75.0} and res.extras["expected_fallback"] == 1
    assert server.bodies[-1]["logprobs"] is True and server.bodies[-1]["top_logprobs"] == 5
    assert "score:expected|top_logprobs:5" in str(res.signature)


def test_reference_and_description_variants(server, tmp_path, image_dir):
    caps = {"x": "a", "y": "b"}
    refs = {"x": ["ref one", "ref two"], "y": ["ref three"]}
    scorer = _server_scorer(server, tmp_path, metrics=("visce2-ref", "visce2-desc", "visce2-vanilla"))
    report = scorer.score(caps, refs, images=_images(image_dir, caps))
    assert set(report) == {"visce2-ref", "visce2-desc", "visce2-vanilla"}
    texts = [b["messages"][1]["content"][1]["text"] for b in server.bodies]
    assert prompts.render_rating("visce2-ref", "a", references=refs["x"]) in texts
    assert "Generate a detailed description for the given image." in texts
    assert report["visce2-desc"].extras["descriptions"]["x"].startswith("CTX ")
    assert "nrefs:1-2" in str(report["visce2-ref"].signature)
    with pytest.raises(InputError, match="visce2-ref needs references"):
        scorer.score(caps, images=_images(image_dir, caps))


def test_precomputed_contexts_file(server, tmp_path, image_dir):
    table = tmp_path / "contexts.json"
    table.write_text(json.dumps({"img0.png": "given context zero", "y": "given context for item y"}))
    scorer = _server_scorer(server, tmp_path, contexts=str(table))
    res = scorer.score({"x": "a", "y": "b", "z": "c"}, images=_images(image_dir, ["x", "y", "z"]))["visce2"]
    assert res.extras["contexts"]["x"] == "given context zero"
    assert res.extras["contexts"]["y"] == "given context for item y"
    assert server.counts["context"] == 1 and res.extras["from_file"] == {"context": 2}
    assert "step1:file:" in str(res.signature)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="contexts: .* must hold one JSON object"):
        _server_scorer(server, tmp_path, contexts=str(bad))


def test_bad_items_are_named_or_skipped(server, tmp_path, image_dir):
    scorer = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",))
    caps = {"ok": "a", "gone": "b", "empty": " "}
    images = {"ok": image_dir / "img0.png", "gone": image_dir / "missing.png", "empty": image_dir / "img1.png"}
    with pytest.raises(InputError, match=r"item 'gone': image file not found.*and 1 more bad items"):
        scorer.score(caps, images=images)
    res = scorer.score(caps, images=images, skip_bad_items=True)["visce2-vanilla"]
    assert dict(res.items) == {"ok": 50.0} and set(res.skipped) == {"gone", "empty"}


def test_in_memory_images_and_folder_lookup(server, tmp_path, image_dir):
    import numpy as np
    from PIL import Image

    scorer = _server_scorer(server, tmp_path, metrics=("visce2-vanilla",))
    arr = np.zeros((8, 8, 3), dtype=np.uint8)
    res = scorer.score({"p": "a", "q": "b"}, images={"p": Image.new("RGB", (9, 9)), "q": arr})["visce2-vanilla"]
    assert len(res.items) == 2
    res = scorer.score({"img0": "a", "img2": "b"}, images=str(image_dir))["visce2-vanilla"]
    assert len(res.items) == 2


def test_evaluator_routes_and_validates_options(server, tmp_path, image_dir, monkeypatch):
    import capeval
    from capeval import registry

    specs = {
        "visce2": frozenset({"images"}), "visce2-ref": frozenset({"images", "references"}),
    }
    for name, needs in specs.items():
        if name not in registry.metrics():
            spec = registry.MetricSpec(name=name, factory="capeval.metrics.visce2.scorer:VisCE2", group="visce2",
                                       needs=needs, accepts=frozenset({"images", "references", "skip_bad_items"}),
                                       range=(0.0, 100.0), description=name)
            monkeypatch.setitem(registry._METRICS, name, spec)
    opts = {"visce2": {"backend": "openai", "base_url": server.base_url, "model": "tiny-vlm",
                       "cache": str(tmp_path / "c")}}
    ev = capeval.Evaluator("visce2", options=opts)
    out = ev.score({"x": "a"}, images=_images(image_dir, ["x"]))
    assert out["visce2"].items["x"] == 50.0
    with pytest.raises(InputError, match="no option 'temprature'"):
        capeval.Evaluator("visce2", options={"visce2": {"temprature": 0.2}}, strict=True)


def _decode_data_url(url):
    import base64
    import io

    import numpy as np
    from PIL import Image

    head, b64 = url.split(",", 1)
    with Image.open(io.BytesIO(base64.b64decode(b64))) as im:
        return head, np.asarray(im.convert("RGB"))


def _expand2square_transcribed(pil, mean):
    """LLaVA mm_utils.expand2square as its paper code writes it, with the processor's mean colour."""
    from PIL import Image

    fill = tuple(int(x * 255) for x in mean)
    w, h = pil.size
    if w == h:
        return pil
    if w > h:
        out = Image.new(pil.mode, (w, w), fill)
        out.paste(pil, (0, (w - h) // 2))
        return out
    out = Image.new(pil.mode, (h, h), fill)
    out.paste(pil, ((h - w) // 2, 0))
    return out


def test_both_backends_send_the_same_pixels(tiny_llava, server, tmp_path, image_dir, monkeypatch):
    """The server receives exactly the padded image the transformers backend gives its processor."""
    import numpy as np
    import transformers as tf
    from PIL import Image

    model, proc = tiny_llava
    mean = proc.image_processor.image_mean
    assert [int(x * 255) for x in mean] == [122, 116, 104]  # CLIP's mean, as LLaVA-1.5's processor
    seen: list = []
    original = tf.LlavaProcessor.__call__

    def spy(self, *args, **kwargs):
        seen.extend(np.asarray(im) for im in kwargs["images"])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(tf.LlavaProcessor, "__call__", spy)
    rng = np.random.default_rng(7)
    noisy = image_dir / "noisy.png"
    Image.fromarray(rng.integers(0, 256, (13, 21, 3), dtype=np.uint8)).save(noisy)
    files = [image_dir / "img0.png", image_dir / "img1.png", image_dir / "img2.png", noisy]
    backend = _transformers_backend(model, proc, batch_size=1, max_new_tokens=2)
    backend.generate([Request(str(k), f, "p") for k, f in enumerate(files)], lambda i, a: None)
    assert len(seen) == len(files)
    _server_scorer(server, tmp_path, metrics=("visce2-vanilla",)).score(
        {str(k): "cap" for k in range(len(files))}, images={str(k): f for k, f in enumerate(files)})
    sent = {}
    for body in server.bodies:
        head, arr = _decode_data_url(body["messages"][1]["content"][0]["image_url"]["url"])
        sent[arr.tobytes() + str(arr.shape).encode()] = (head, arr)
    for k, f in enumerate(files):
        with Image.open(f) as im:
            want = np.asarray(_expand2square_transcribed(im.convert("RGB"), mean))
        assert np.array_equal(seen[k], want)
        assert want.tobytes() + str(want.shape).encode() in sent  # pixel-identical on the wire
        assert want.shape[0] == want.shape[1]
    assert tuple(seen[0][0, 0]) == (122, 116, 104)  # 40x30: a padded top row
    # pad_to_square=False sends the file's bytes as they are
    server.bodies.clear()
    _server_scorer(server, tmp_path, metrics=("visce2-vanilla",), pad_to_square=False, cache=None).score(
        {"0": "cap"}, images={"0": files[0]})
    import base64

    url = server.bodies[0]["messages"][1]["content"][0]["image_url"]["url"]
    assert base64.b64decode(url.split(",", 1)[1]) == files[0].read_bytes()
    sig_pad = str(_server_scorer(server, tmp_path).signature("visce2"))
    sig_raw = str(_server_scorer(server, tmp_path, pad_to_square=False).signature("visce2"))
    assert "pad_to_square:clip-mean(122,116,104)" in sig_pad and "pad_to_square:False" in sig_raw
    with pytest.raises(InputError, match="pad_to_square"):
        _server_scorer(server, tmp_path, pad_to_square="yes")


def test_llava_loaded_from_a_local_folder_and_shared(tmp_path, image_dir):
    pytest.importorskip("transformers")
    model, proc = _tiny_llava()
    folder = tmp_path / "tiny-llava"
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    a = VisCE2(metrics=["visce2-vanilla"], backend="transformers", model=str(folder), cache=None, max_new_tokens=3)
    b = VisCE2(metrics=["visce2"], backend="transformers", model=str(folder), cache=None, max_new_tokens=3)
    caps = {"x": "a red square"}
    got = a.score(caps, images=_images(image_dir, caps))["visce2-vanilla"]
    ref = _scores_with(_transformers_backend(model, proc, max_new_tokens=3), image_dir, {"c0": "a red square"},
                       metrics=("visce2-vanilla",))["visce2-vanilla"]
    assert got.extras["answers"]["x"] == ref.extras["answers"]["c0"]  # same weights, same answer
    assert b.backend.load() is a.backend.load()  # one load per process for visce2 and its ablations
    assert "commit:local" in str(got.signature) and f"model:{folder}" in str(got.signature)


def test_transformers_backend_errors(tmp_path):
    pytest.importorskip("transformers")
    import transformers as tf

    from capeval.errors import MissingDependencyError

    folder = tmp_path / "not-llava"
    tf.LlamaConfig(vocab_size=10, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                   num_attention_heads=1).save_pretrained(folder)
    scorer = VisCE2(metrics=["visce2-vanilla"], backend="transformers", model=str(folder), cache=None)
    with pytest.raises(ResourceError, match="is a 'llama' model; the transformers backend runs LLaVA-1.5"):
        scorer.backend.load()
    missing = VisCE2(metrics=["visce2-vanilla"], backend="transformers", model=str(tmp_path / "nowhere"), cache=None)
    with pytest.raises(ResourceError, match="the model folder .*nowhere' does not exist"):
        missing.backend.load()
    (tmp_path / "empty").mkdir()
    empty = VisCE2(metrics=["visce2-vanilla"], backend="transformers", model=str(tmp_path / "empty"), cache=None)
    with pytest.raises(ResourceError, match="cannot load the config of"):
        empty.backend.load()
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match="bitsandbytes"):
            VisCE2(backend="transformers", quantization="4bit", cache=None)


def test_cli_names_every_error_item_on_stderr(server, tmp_path, image_dir, capsys):
    from capeval.cli.main import main

    server.script = {"a": [("ok", "85")], "d": [("ok", "It is a good caption.")]}
    folder = tmp_path / "imgs"
    folder.mkdir()
    for k, i in enumerate(("x", "y")):
        (folder / f"{i}.png").write_bytes((image_dir / f"img{k}.png").read_bytes())
    cands = tmp_path / "c.json"
    cands.write_text(json.dumps({"x": "a", "y": "d"}))
    code = main(["score", "-m", "visce2", "-c", str(cands), "--images", str(folder), "-q",
                 "-O", "visce2.backend=openai", "-O", f"visce2.base_url={server.base_url}",
                 "-O", "visce2.model=tiny-vlm", "-O", f"visce2.cache={tmp_path / 'cache'}",
                 "-O", "visce2.retry_backoff=0.01", "--per-item-extras", str(tmp_path / "x.json")])
    out = capsys.readouterr()
    assert code == 0
    assert "capeval: visce2: item 'y': no number in the answer: 'It is a good caption.'" in out.err
    summary = json.loads(out.out)
    assert summary["scores"]["visce2"] == 85.0 and "answers" not in json.dumps(summary["results"][0].get("extras", {}))
    assert json.loads((tmp_path / "x.json").read_text())["visce2"]["answers"]["y"] == "It is a good caption."


def test_bench_runs_visce2_where_the_images_are(server, tmp_path):
    """`capeval bench composite -m visce2`: the generic runner feeds the benchmark's images to the
    judge and correlates its ratings with the human ones (Composite fixture, scripted server)."""
    import sys
    from pathlib import Path

    import numpy as np
    from PIL import Image

    import capeval.bench as cb

    sys.path.insert(0, str(Path(__file__).parent))
    from test_bench_fixtures import _write_composite

    _write_composite(tmp_path / "data")
    images = tmp_path / "images"
    images.mkdir()
    for k, name in enumerate(("111_aaa.jpg", "222_bbb.jpg", "333.jpg", "COCO_val2014_000000000042.jpg")):
        Image.new("RGB", (40, 32 + 4 * k), (50 * k, 90, 200 - 40 * k)).save(images / name)
    loaded = cb.load("composite", data_root=tmp_path / "data")
    captions = sorted({it.candidate for it in loaded.settings[""].items.values()})
    server.script = {c: [("ok", f"Rating: {10 + 7 * k}")] for k, c in enumerate(captions)}
    run = cb.run(["composite"], ["visce2"], data_root=tmp_path / "data", images=images, bootstrap=0,
                 verify_media=False, options={"visce2": {"backend": "openai", "base_url": server.base_url,
                                                         "model": "tiny-vlm", "cache": str(tmp_path / "c"),
                                                         "retry_backoff": 0.01}})
    taus = {r.statistic: r.value for r in run if r.metric == "visce2"}
    assert "kendall_tau_b" in taus and np.isfinite(taus["kendall_tau_b"])
