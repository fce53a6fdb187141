"""The two prompts of VDCscore, as ``post_eval/process_vdc_result.py`` of rese1f/aurora builds them.

Official strings that must reach the model byte for byte: data, kept with their source and
commit. The script writes each text as adjacent string literals, which Python joins with no
separator: ``"...video or image." "Here's how..."`` becomes ``"...video or image.Here's how..."``,
and the user text of step 1 runs the question straight into ``"DO NOT PROVIDE..."``. Those joins
are kept here exactly (``tests/test_vdcscore.py`` compares every request with the strings the
official functions produce).

- step 1, ``gener_pred_response(pred_cap, q)`` (lines 116-132): a system message and a user
  message holding the candidate caption and one ground-truth question; the model's reply is the
  predicted answer;
- step 2, ``gener_pred_score(qa)`` (lines 135-156): a system message and a user message holding
  the question, the ground-truth answer and the predicted answer; the reply is read as a Python
  dict ``{'pred': 'yes'|'no', 'score': 0-5}`` (:mod:`.reply`).
"""

from __future__ import annotations

import hashlib

#: how SGLang's frontend (``sgl.RuntimeEndpoint``, which the script uses) renders a system + user turn
#: for a Llama-3 instruct model: its ``llama-3-instruct`` chat template (sgl-project/sglang@c036172
#: ``python/sglang/lang/chat_template.py``, picked for any model path holding "llama-3" and
#: "instruct"); the server's tokenizer adds ``<|begin_of_text|>``. A server's own chat template for
#: Llama-3.1 (``/chat/completions``) also writes "Cutting Knowledge Date" and "Today Date" lines into
#: the system turn, which the script's judge never saw.
LLAMA3_HEADER = "<|start_header_id|>{role}<|end_header_id|>\n\n"
LLAMA3_END = "<|eot_id|>"

REPOSITORY = "rese1f/aurora"
#: the commit whose ``post_eval/process_vdc_result.py`` (and QA files) capeval follows
COMMIT = "2bf68d5779ddd98e44ce5bc66c17a6d1525ce204"
SOURCE = f"{REPOSITORY}@{COMMIT[:7]}/post_eval/process_vdc_result.py"

#: ``gener_pred_response``'s system text (lines 118-126), the literals joined as Python joins them
ANSWER_SYSTEM = (
    "You are an intelligent chatbot designed for providing accurate answers to questions related to the content "
    "based on a detailed description of a video or image."
    "Here's how you can accomplish the task:"
    "------"
    "##INSTRUCTIONS: "
    "- Read the detailed description carefully.\n"
    "- Answer the question only based on the detailed description.\n"
    "- The answer should be a short sentence or phrase.\n"
)
_ANSWER_HEAD = ("Please provide accurate answers to questions related to the content based on a detailed "
                "description of a video or image:\n\n")
_ANSWER_TAIL = "DO NOT PROVIDE ANY OTHER OUTPUT TEXT OR EXPLANATION. Only provide short but accurate answer."

#: ``gener_pred_score``'s system text (lines 137-145)
JUDGE_SYSTEM = (
    "You are an intelligent chatbot designed for evaluating the correctness of generative outputs for "
    "question-answer pairs. "
    "Your task is to compare the predicted answer with the correct answer and determine if they match "
    "meaningfully. Here's how you can accomplish the task:"
    "------"
    "##INSTRUCTIONS: "
    "- Focus on the meaningful match between the predicted answer and the correct answer.\n"
    "- Consider synonyms or paraphrases as valid matches.\n"
    "- Evaluate the correctness of the prediction compared to the answer."
)
_JUDGE_HEAD = "Please evaluate the following video-based question-answer pair:\n\n"
_JUDGE_TAIL = (
    "Provide your evaluation only as a yes/no and score where the score is an integer value between 0 and 5, "
    "with 5 indicating the highest meaningful match. "
    "Please generate the response in the form of a Python dictionary string with keys 'pred' and 'score', where "
    "value of 'pred' is  a string of 'yes' or 'no' and value of 'score' is in INTEGER, not STRING."
    "DO NOT PROVIDE ANY OTHER OUTPUT TEXT OR EXPLANATION. Only provide the Python dictionary string. "
    "For example, your response should look like this: {'pred': 'yes', 'score': 4.8}."
)


def answer_user(caption: str, question: str) -> str:
    """Step 1's user text (lines 127-131): ``detailed description: {caption}, question: {question}``
    between the fixed head and tail, no space before the tail."""
    return f"{_ANSWER_HEAD}detailed description: {caption}, question: {question}{_ANSWER_TAIL}"


def judge_user(question: str, answer: str, response: str) -> str:
    """Step 2's user text (lines 146-155): question, correct answer, predicted answer, instructions."""
    return (f"{_JUDGE_HEAD}Question: {question}\nCorrect Answer: {answer}\nPredicted Answer: {response}\n\n"
            f"{_JUDGE_TAIL}")


def llama3_prompt(system: str, user: str) -> str:
    """The text SGLang's frontend sends for ``system(...)``, ``user(...)``, ``assistant(gen(...))``
    with the ``llama-3-instruct`` template (the generation starts after the assistant header)."""
    return (LLAMA3_HEADER.format(role="system") + system + LLAMA3_END + LLAMA3_HEADER.format(role="user") + user
            + LLAMA3_END + LLAMA3_HEADER.format(role="assistant"))


def _sha(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


#: sha256 of each step's fixed text (system, user head, user tail): the signature names them
ANSWER_SHA256 = _sha(ANSWER_SYSTEM, _ANSWER_HEAD, _ANSWER_TAIL)
JUDGE_SHA256 = _sha(JUDGE_SYSTEM, _JUDGE_HEAD, _JUDGE_TAIL)
