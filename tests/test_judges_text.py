"""CLAIR through a local chat LLM in ``transformers`` (``capeval.judges.transformers_text``).

The official path (DavidMChan/clair ``clair.py`` -> grazier's chat engine for ``chat-gpt``) sends
the prompt as ONE user message; the backend must feed the model the tokenizer's chat template
applied to that message, tokenised without added special tokens, as vLLM does. Checked here on a
tiny random ``LlamaForCausalLM`` built from config with a one-token-per-character tokenizer (no
download): the model input against the template written out by hand, greedy answers against
``model.generate`` called directly, and CLAIR's parsing, tries, error items, cache and resume
through a model whose ``generate`` is scripted.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capeval.errors import InputError, ResourceError

sys.path.insert(0, str(Path(__file__).parent))
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from test_judges import CLAIR_EXPECTED  # noqa: E402  (the official prompt, written out there)

# a Llama-2-like template (only characters of the tiny vocabulary and its <s> / </s>)
TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
            "{% else %} {{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %} ANSWER:{% endif %}")
CANDS = {"a": "a red square", "b": "a green thing", "c": "a blue blob"}
REFS = {k: ["a dog runs", "a brown dog"] for k in CANDS}


def _tiny_chat_llm():
    import torch
    import transformers as tf

    from test_visce2 import _tiny_tokenizer

    tok = _tiny_tokenizer()
    tok.chat_template = TEMPLATE
    config = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                            bos_token_id=1, eos_token_id=2, pad_token_id=3, initializer_range=0.5)
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(config)
    with torch.no_grad():  # a non-zero <pad> embedding: attending to padding would change the answers
        model.get_input_embeddings().weight[3].normal_(0.0, 1.0)
    return model.eval(), tok


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    model, tok = _tiny_chat_llm()
    folder = tmp_path_factory.mktemp("tiny-chat-llm")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _official_ids(tok, prompt: str) -> list[int]:
    """The template written out by hand, one id per character after the BOS (the tokenizer's vocabulary)."""
    text = "[INST] " + prompt + " [/INST] ANSWER:"
    return [tok.bos_token_id] + [tok.convert_tokens_to_ids(c) for c in text]


def _direct_greedy(model, tok, prompt: str, n: int) -> str:
    """``model.generate`` called here on the hand-built ids: the independent path."""
    import torch

    ids = _official_ids(tok, prompt)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=n, do_sample=False, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id)
    new = out[0, len(ids):].tolist()
    new = new[: new.index(tok.eos_token_id)] if tok.eos_token_id in new else new
    return tok.decode(new, skip_special_tokens=True)


def test_model_input_is_the_chat_template_of_the_official_prompt(tiny_folder):
    from capeval.judges.backends import Request
    from capeval.metrics.clair import CLAIR, render

    scorer = CLAIR(backend="transformers", model=str(tiny_folder), cache=None)
    backend = scorer.backend
    tok = backend.tokenizer()
    req = Request("x", None, render(["a dog"], ["a dog runs", "a brown dog"]))
    assert req.prompt == CLAIR_EXPECTED
    assert backend.render(req) == "<s>[INST] " + CLAIR_EXPECTED + " [/INST] ANSWER:"
    assert backend.render(req) == tok.apply_chat_template([{"role": "user", "content": CLAIR_EXPECTED}],
                                                          tokenize=False, add_generation_prompt=True)
    ids = backend.token_ids(req)
    assert ids == _official_ids(tok, CLAIR_EXPECTED)  # one BOS: the template's, none added on top
    assert ids.count(tok.bos_token_id) == 1
    with pytest.raises(InputError, match="item 'y': the text-only transformers backend takes no image"):
        backend.token_ids(Request("y", "img.png", "p"))


def test_greedy_answers_equal_model_generate_and_batching(tiny_folder, tmp_path):
    from capeval.metrics.clair import CLAIR, render
    from capeval.judges import answers as ans

    model, tok = _tiny_chat_llm()
    want = {i: _direct_greedy(model, tok, render([c], REFS[i]), 12) for i, c in CANDS.items()}
    assert len(set(want.values())) > 1  # the answer depends on the prompt
    got = {}
    for bs in (1, 3):
        res = CLAIR(backend="transformers", model=str(tiny_folder), cache=tmp_path / f"c{bs}", max_new_tokens=12,
                    batch_size=bs, unparsed="zero").score(CANDS, REFS)["clair"]
        got[bs] = res.extras["answers"]
        for i, text in res.extras["answers"].items():  # CLAIR's parsing of whatever the model wrote
            p = ans.parse_clair(text)
            assert res.items[i] == (p.score / 100.0 if p.score is not None else 0.0)
    assert got[1] == want and got[3] == want
    sig = str(res.signature)
    assert "backend:transformers" in sig and "weights:sha256:" in sig and "template:chat-template@" in sig
    assert "temperature:0.0" in sig and "max_new_tokens:12" in sig and "prompt:DavidMChan/clair" in sig


def test_folder_identity_is_its_content(tiny_folder, tmp_path):
    import shutil

    from capeval.judges.model_id import folder_sha256
    from capeval.metrics.clair import CLAIR

    copy = tmp_path / "copy"
    shutil.copytree(tiny_folder, copy)
    assert folder_sha256(copy) == folder_sha256(tiny_folder)  # content, not location
    first = CLAIR(backend="transformers", model=str(copy), cache=tmp_path / "c", max_new_tokens=4,
                  unparsed="zero").score(CANDS, REFS)["clair"]
    again = CLAIR(backend="transformers", model=str(copy), cache=tmp_path / "c", max_new_tokens=4,
                  unparsed="zero").score(CANDS, REFS)["clair"]
    assert again.extras["generated"] == 0 and again.extras["answers"] == first.extras["answers"]
    config = json.loads((copy / "generation_config.json").read_text())
    (copy / "generation_config.json").write_text(json.dumps({**config, "note": "changed"}))
    changed = CLAIR(backend="transformers", model=str(copy), cache=tmp_path / "c", max_new_tokens=4,
                    unparsed="zero").score(CANDS, REFS)["clair"]
    assert changed.extras["cached"] == 0 and changed.extras["generated"] >= 3  # other files: other model


# ------------------------------------------------------------------ a scripted model through the real path
SCRIPT = {
    "a red square": ['{"score": 80, "reason": "both red"}'],
    "a green thing": ["hmm", "hmm", "Score 0.65 Reason: green"],  # parsed at the third try
    "a blue blob": ["no", "no", "no"],                           # never: error item / 0
}


class ScriptedGenerate:
    """Stands in for ``model.generate``: reads each row's prompt (the real input ids), answers the
    script's next text for its candidate, pads finished rows with <pad> after </s> as generate does."""

    def __init__(self, tok, fail_after: int | None = None):
        self.tok, self.fail_after = tok, fail_after
        self.calls, self.configs, self.prompts = 0, [], []
        self.seen: dict[str, int] = {}

    def __call__(self, input_ids, attention_mask, generation_config, **kw):
        import torch

        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt  # an interrupted run
        self.calls += 1
        self.configs.append(generation_config)
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            prompt = self.tok.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
            self.prompts.append(prompt)
            cand = prompt.split("Candidate set:\n- ")[1].split("\n")[0]
            k = self.seen.get(cand, 0)
            self.seen[cand] = k + 1
            answer = SCRIPT[cand][min(k, len(SCRIPT[cand]) - 1)]
            rows.append([self.tok.convert_tokens_to_ids(c) for c in answer] + [self.tok.eos_token_id])
        width = max(len(r) for r in rows)
        new = torch.tensor([r + [self.tok.pad_token_id] * (width - len(r)) for r in rows])
        return torch.cat([input_ids, new], dim=1)


def _scripted_backend(fake, **kw):
    from capeval.judges.transformers_text import TransformersText

    model, tok = _tiny_chat_llm()
    model.generate = fake
    return TransformersText.from_loaded(model, tok, "tiny-scripted", **kw)


def test_parsing_tries_errors_and_cache_through_the_transformers_path(tmp_path):
    from capeval.metrics.clair import CLAIR

    _, tok = _tiny_chat_llm()
    fake = ScriptedGenerate(tok)
    res = CLAIR(backend=_scripted_backend(fake, batch_size=2), cache=tmp_path / "c").score(CANDS, REFS)["clair"]
    assert dict(res.items) == {"a": 0.8, "b": 0.65}
    assert res.extras["reasons"] == {"a": "both red", "b": "green"}
    assert res.extras["tries"] == {"a": 1, "b": 3, "c": 3} and res.extras["generated"] == 7
    assert set(res.extras["errors"]) == {"c"} and res.skipped == ("c",)
    assert res.extras["errors"]["c"]["answers"] == ["no", "no", "no"]
    assert math.isclose(res.system, (0.8 + 0.65) / 2)
    assert all(p.startswith("<s>[INST] You are trying to tell") and p.endswith(" [/INST] ANSWER:") for p in fake.prompts)
    cfg = fake.configs[0]  # the official decoding: greedy, 1024 new tokens, stops at </s>
    assert cfg.do_sample is False and cfg.max_new_tokens == 1024 and tok.eos_token_id in cfg.eos_token_id
    # a rerun is answered by the cache (the model is never called); unparsed=zero gives the official 0
    again_fake = ScriptedGenerate(tok)
    again = CLAIR(backend=_scripted_backend(again_fake), cache=tmp_path / "c", unparsed="zero").score(CANDS, REFS)
    assert again_fake.calls == 0 and again["clair"].extras["cached"] == 7 and again["clair"].items["c"] == 0.0


def test_resume_after_an_interrupted_transformers_run(tmp_path):
    from capeval.metrics.clair import CLAIR

    _, tok = _tiny_chat_llm()
    broken = ScriptedGenerate(tok, fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        CLAIR(backend=_scripted_backend(broken, batch_size=1), cache=tmp_path / "c").score(CANDS, REFS)
    assert broken.calls == 2  # two answers stored before the interruption
    fake = ScriptedGenerate(tok)
    fake.seen = broken.seen  # the script goes on where the interrupted run stopped
    res = CLAIR(backend=_scripted_backend(fake, batch_size=1), cache=tmp_path / "c").score(CANDS, REFS)["clair"]
    assert res.extras["cached"] == 2 and res.extras["generated"] == 5 and fake.calls == 5
    assert dict(res.items) == {"a": 0.8, "b": 0.65}


def test_sampling_options_are_honoured_and_keyed(tiny_folder, tmp_path):
    from capeval.metrics.clair import CLAIR

    _, tok = _tiny_chat_llm()
    fake = ScriptedGenerate(tok)
    res = CLAIR(backend=_scripted_backend(fake, temperature=0.7, seed=3), cache=None).score(CANDS, REFS)["clair"]
    cfg = fake.configs[0]
    assert cfg.do_sample is True and cfg.temperature == 0.7 and cfg.top_p == 1.0 and cfg.top_k == 0
    assert "temperature:0.7|top_p:1.0|top_k:off|seed:3" in str(res.signature)

    def run(seed):
        return CLAIR(backend="transformers", model=str(tiny_folder), cache=tmp_path / "c", max_new_tokens=10,
                     temperature=1.5, seed=seed, tries=1, unparsed="zero").score(CANDS, REFS)["clair"]

    first, same = run(3), run(3)
    assert same.extras["generated"] == 0 and same.extras["answers"] == first.extras["answers"]
    other = run(4)
    assert other.extras["cached"] == 0  # another seed: other cache entries
    greedy = CLAIR(backend="transformers", model=str(tiny_folder), cache=None, max_new_tokens=10, tries=1,
                   unparsed="zero").score(CANDS, REFS)["clair"]
    assert greedy.extras["answers"] != first.extras["answers"]  # sampling at T=1.5 left the greedy path


def test_transformers_backend_errors(tiny_folder, tmp_path):
    import shutil

    from capeval.metrics.clair import CLAIR

    with pytest.raises(InputError, match=r"clair backend='transformers' needs model="):
        CLAIR(backend="transformers")
    with pytest.raises(InputError, match="quantization does not apply"):
        from capeval.judges import options as jopt

        jopt.make_backend("clair", "transformers", model=str(tiny_folder), default_model=None, text_only=True,
                          quantization="4bit")
    plain = tmp_path / "no-template"
    shutil.copytree(tiny_folder, plain)
    for name in os.listdir(plain):
        if name.startswith("chat_template"):
            os.remove(plain / name)
    cfg = json.loads((plain / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (plain / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ResourceError, match="has no chat template; the official clair sends its prompt as a chat"):
        CLAIR(backend="transformers", model=str(plain), cache=None).score(CANDS, REFS)
    with pytest.raises(ResourceError, match="the model folder .*nowhere' does not exist; .* -O clair.backend=openai"):
        CLAIR(backend="transformers", model=str(tmp_path / "nowhere"), cache=None).score(CANDS, REFS)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResourceError, match="cannot load the tokenizer of"):
        CLAIR(backend="transformers", model=str(tmp_path / "empty"), cache=None).score(CANDS, REFS)


def test_cli_runs_clair_on_a_local_model(tiny_folder, tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(CANDS))
    (tmp_path / "r.json").write_text(json.dumps(REFS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "capeval.cli", "score", "-m", "clair", "-c", str(tmp_path / "c.json"),
                          "-r", str(tmp_path / "r.json"), "--quiet", "-O", "clair.backend=transformers",
                          "-O", f"clair.model={tiny_folder}", "-O", "clair.max_new_tokens=6",
                          "-O", "clair.unparsed=zero", "-O", "clair.cache=false"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sig = json.loads(out.stdout)["signatures"]["clair"]
    assert "backend:transformers" in sig and f"model:{tiny_folder}" in sig and "weights:sha256:" in sig
