"""What a vLLM server renders from the messages capeval sends for the LLaVA judges, under the
chat templates llava-hf has shipped, against LLaVA's ``conv_llava_v1.get_prompt()``.

The templates are the upstream artefacts, copied from the model repositories (``chat_template.json``):

- ``CREATED``: llava-hf/llava-1.5-7b-hf @ 17b3a43 ("Create chat_template.json"; the removed side
  of commit 9e7ca49a0174c7cc68c2605d221b4cac0aea799d): the system text printed twice;
- ``FIXED``: llava-hf/llava-1.5-7b-hf @ 9e7ca49a0174c7cc68c2605d221b4cac0aea799d ("Fix system
  message"), the same string as llava-hf/llava-1.5-13b-hf @ 267a75d ("Fix system message");
- ``GENERATION``: llava-hf/llava-1.5-7b-hf @ 73d3444bc3866dcaec23abb52f48c6b4a5cdf13f ("Update
  chat_template.json to incorporate `generation` tag (#29)"), still main at 95f2cf3.

Rendering is transformers' ``render_jinja_template`` (what ``apply_chat_template`` and vLLM's
``apply_hf_chat_template`` call) with ``add_generation_prompt=True``, on the messages as vLLM's
chat front end hands them to a template that iterates ``message['content']`` (its "openai"
content format): string content becomes one text part, an ``image_url`` part becomes
``{"type": "image"}``, text parts stay as they are.

The official string is written out by hand below from haotian-liu/LLaVA @ c121f04
``llava/conversation.py`` (``conv_llava_v1``: system, ``sep=" "``, ``sep2="</s>"``, roles
USER/ASSISTANT, ``SeparatorStyle.TWO``); when that file is at hand (``$CAPEVAL_LLAVA_CONVERSATION``,
or the git mirror the tools fetch) the test also runs it and checks the hand-written string.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from capeval.judges.backends import Request
from capeval.judges.openai_compat import OpenAICompat

SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. "
          "The assistant gives helpful, detailed, and polite answers to the human's questions.")

_IMAGES = ("{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
           "{{ '<image>\\n' }}{% endfor %}")
CREATED = ("{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'][0]['text'] }}"
           "{% else %}{{ message['role'].upper() + ': '}}{% endif %}" + _IMAGES +
           "{# Render all text next #}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
           "{{ content['text'] + ' '}}{% endfor %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}")
FIXED = ("{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}"
         "{% endif %}" + _IMAGES +
         "{# Render all text next #}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
         "{{ content['text'] + ' '}}{% endfor %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}")
GENERATION = ("{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}"
              "{% endif %}" + _IMAGES +
              "{# Render all text next #}{% if message['role'] != 'assistant' %}"
              "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
              "{{ content['text'] + ' '}}{% endfor %}{% else %}"
              "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
              "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}{% endfor %}"
              "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}")

PROMPTS = [
    "Your task is to evaluate and rate the caption on a scale of 0.0 to 1.0 based on the given Grading Criteria. "
    "(Print Real Number Score ONLY)\n\nGrading Criteria:\n\n0.0: The caption does not describe the image at all.\n"
    "1.0: The caption accurately and clearly describes the image.\n\nCaption: a dog on grass\n\n"
    "Score(Choose a rating from 0.0 to 1.0):",
    "Candidate:\na  red\tbus ,\n\nScore (0-100):",
    "x",
]


def official(prompt: str) -> str:
    """``conv_llava_v1`` with ``"<image>\\n" + prompt`` as the user turn and the empty assistant turn."""
    return SYSTEM + " " + "USER: " + "<image>\n" + prompt + " " + "ASSISTANT:"


def as_vllm_sees(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation a content-iterating template receives from vLLM's chat front end."""
    out = []
    for m in messages:
        parts = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]
        conv = []
        for p in parts:
            if p["type"] == "text":
                conv.append({"type": "text", "text": p["text"]})
            elif p["type"] == "image_url":
                conv.append({"type": "image"})
            else:  # pragma: no cover - capeval sends no other part
                raise AssertionError(p)
        out.append({"role": m["role"], "content": conv})
    return out


def render(template: str, messages: list[dict[str, Any]]) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template([as_vllm_sees(messages)], chat_template=template, add_generation_prompt=True,
                                        bos_token="<s>", eos_token="</s>")
    return rendered[0]


def sent(prompt: str, tmp_path: Path) -> list[dict[str, Any]]:
    from PIL import Image

    path = tmp_path / "im.png"
    if not path.exists():
        Image.new("RGB", (3, 2), (10, 200, 30)).save(path)
    backend = OpenAICompat("judge", base_url="http://127.0.0.1:9/v1", label="fleur")
    return backend.messages(Request("i0", str(path), prompt))


@pytest.mark.parametrize("name", ["FIXED", "GENERATION"])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_shipped_llava_hf_templates_render_the_official_prompt(name, prompt, tmp_path):
    template = globals()[name]
    messages = sent(prompt, tmp_path)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert render(template, messages) == official(prompt)
    # what was sent before: the user turn alone, without the system line
    assert render(template, messages[1:]) == official(prompt)[len(SYSTEM) + 1:]


def test_first_revision_prints_the_system_line_twice(tmp_path):
    # the hub's first llava-1.5 template (replaced by "Fix system message"): documented, not matched
    assert render(CREATED, sent("p", tmp_path)) == SYSTEM + official("p")


def test_text_only_judges_send_no_system_line():
    backend = OpenAICompat("judge", base_url="http://127.0.0.1:9/v1", label="clair", llava_system=False)
    assert backend.messages(Request("i0", None, "hello")) == [{"role": "user", "content": "hello"}]


def _official_file() -> str | None:
    path = os.environ.get("CAPEVAL_LLAVA_CONVERSATION")
    if path and Path(path).is_file():
        return Path(path).read_text(encoding="utf-8")
    mirror = Path("/work/.mirror/haotian-liu+LLaVA/repo")
    if mirror.is_dir():
        out = subprocess.run(["git", f"--git-dir={mirror}", "show", "HEAD:llava/conversation.py"],
                             capture_output=True, text=True, check=False)
        if out.returncode == 0:
            return out.stdout
    return None


def test_hand_written_prompt_is_the_official_get_prompt():
    source = _official_file()
    if source is None:
        pytest.skip("haotian-liu/LLaVA llava/conversation.py not at hand (set CAPEVAL_LLAVA_CONVERSATION)")
    module = types.ModuleType("llava_conversation_official")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(source, "llava/conversation.py", "exec"), module.__dict__)
        for prompt in PROMPTS:
            conv = module.conv_templates["llava_v1"].copy()
            conv.append_message(conv.roles[0], "<image>\n" + prompt)
            conv.append_message(conv.roles[1], None)
            assert conv.get_prompt() == official(prompt)
    finally:
        del sys.modules[module.__name__]
