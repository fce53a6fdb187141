"""LLaVA's ``llava_v1`` conversation (``SeparatorStyle.TWO``), one or several turns.

The template itself is ``capeval/data/visce2/llava_v1.json`` (transcribed from
haotian-liu/LLaVA ``llava/conversation.py``, ``conv_llava_v1``), read through
:mod:`capeval.metrics.visce2.prompts`, which verifies its sha256. ``get_prompt()`` of that
template writes ``system + sep`` and then, per message, ``role + ": " + message + seps[i % 2]``
(``seps = (sep, sep2)``), or ``role + ":"`` for the empty assistant turn that asks for the answer.
FLEUR, EXPERT and VisCE2 put ``"<image>\\n"`` before the first user message.
"""

from __future__ import annotations

from typing import Sequence


def llava_v1_id() -> str:
    """``llava_v1@<sha256[:16]>`` of the template file (signatures and cache keys)."""
    from capeval.metrics.visce2 import prompts

    return f"llava_v1@{prompts.file_sha('llava_v1.json')[:16]}"


def llava_v1_system() -> str:
    """The ``llava_v1`` system line (``conv_llava_v1.system``), which ``get_prompt()`` writes
    first, followed by ``sep`` (one space)."""
    from capeval.metrics.visce2 import prompts

    return str(prompts.conversation()["system"])


def llava_v1_turns(prompt: str, history: Sequence[tuple[str, str]] = ()) -> tuple[str, str]:
    """``(before, after)`` the image: ``before + "<image>" + after`` is the reference's
    ``conv.get_prompt()`` for the user turns ``history`` (answered) and ``prompt`` (to answer)."""
    from capeval.metrics.visce2 import prompts

    conv = prompts.conversation()
    user, assistant = conv["roles"]
    seps = (conv["sep"], conv["sep2"])
    before = conv["system"] + seps[0] + user + ": "
    tail = conv["image_prefix"][len(conv["image_token"]):]
    messages: list[tuple[str, str | None]] = []
    for u, a in history:
        messages += [(user, u), (assistant, a)]
    messages += [(user, prompt), (assistant, None)]
    for k, (role, message) in enumerate(messages):
        if k == 0:
            tail += message + seps[0]  # type: ignore[operator]  # the first user turn, after the image
        elif message is None:
            tail += role + ":"
        else:
            tail += role + ": " + message + seps[k % 2]
    return before, tail
