"""CapArena-Auto on the judge layer: the request each battle sends against the official
``mllm_judge_pairs`` (mirror) and a hand transcription (always), the score against the official
``calculate_caparena_scores`` (mirror) and an independent transcription (always), end to end
through a scripted 127.0.0.1 server, resumed from the cache."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from capeval.errors import InputError
from capeval.judges import caparena_auto as ca
from test_judges import Scripted

MIRROR = Path("/work/.mirror/njucckevin+CapArena/repo")
COMMIT = "c251cdd14a3a4a33c6934e53feebb8d4862d655d"
TEST = "My-Model"
#: sha256 of ``system_prompt_with_ref`` in vlm_as_a_judge.py@c251cdd (computed from the file)
SYSTEM_SHA = "7476b6f3d0c6c2e8c2e4e93e254eb496a80dfd3b461546fe31d2d239de143b32"
# what the test model's caption says decides the scripted verdict (its position is read from the prompt)
MOODS = ["win", "lose", "tie", "retry", "odd", "never", "win"]  # 7: each baseline meets every mood


def hand_prompt(c1: str, c2: str, ref: str) -> str:
    """compare_prompt (with_ref=True) of vlm_as_a_judge.py, transcribed by hand."""
    return ("Caption 1:\n" + c1 + "\nCaption 2:\n" + c2 + "\nCaption Reference:\n" + ref +
            "\nDetermine which is better and answer with the given format. Only mark a tie if it is truly "
            "difficult to decide which caption is better based on their quality, informativeness, and precision.")


def make_fixture(root: Path) -> tuple[Path, Path, Path]:
    """caparena_auto_600.json, the test model's results and the images, in the released layout."""
    from PIL import Image

    imgs = root / "all_images"
    imgs.mkdir()
    auto, results = {}, {}
    for k in range(19):
        name = f"test_{k:05d}.jpg"
        Image.new("RGB", (20 + k, 16), (10 * k, 40, 90)).save(imgs / name, format="JPEG")
        ref_model = ca.BASELINES[k % 3] if k != 18 else TEST  # the last: the tested model is the baseline
        auto[name] = {"captions": {"human": f"human words {k}", ref_model: f"baseline {ref_model} says {k}"},
                      "ref_model": ref_model}
        results[name] = f"test {MOODS[k % len(MOODS)]} caption {k} " + "x " * (k % 4)
    (root / "caparena_auto_600.json").write_text(json.dumps(auto))
    (root / "results.json").write_text(json.dumps(results))
    return root / "caparena_auto_600.json", root / "results.json", imgs


def reply_text(prompt: str, k: int) -> str:
    """The scripted judge: the test caption wins, loses or ties by its mood; "retry" is unparsed
    once, "never" always, "odd" gets a verdict the scoring skips."""
    c1 = prompt.split("Caption 1:\n")[1].split("\nCaption 2:")[0]
    pos = 1 if c1.startswith("test ") else 2
    mood = re.search(r"test (\w+)", prompt).group(1)
    if mood == "never" or (mood == "retry" and k == 0):
        return "I like both."
    verdict = {"win": f"Caption {pos} is better.", "lose": f"Caption {3 - pos} is better",
               "tie": "Tie.", "retry": "Tie", "odd": "Caption 1 is slightly better."}[mood]
    return f"Reason: because.\nJudgment: {verdict}"


def server() -> Scripted:
    seen: Counter = Counter()
    lock = threading.Lock()

    def reply(body):
        prompt = body["messages"][-1]["content"][-1]["text"]
        with lock:
            k = seen[prompt]
            seen[prompt] += 1
        return reply_text(prompt, k), None

    return Scripted(reply)


def independent_score(battles: list[dict], model: str, weight: float = 1.0) -> dict:
    """wins - losses per baseline / 2, averaged (caparena_auto_scores.py transcribed independently)."""
    net = Counter()
    for b in battles:
        j = b.get("judge", "").rstrip(".")
        if j not in ("Caption 1 is better", "Caption 2 is better", "Tie"):
            continue
        if j != "Tie":
            net[b["ref_model"]] += weight if b["source" + j[8]] == model else -weight
    per = {m: net[m] / 2 for m in ca.BASELINES}
    return {"scores": per, "score_avg": sum(per.values()) / 3}


@pytest.mark.parametrize("orders", ["random", "both"])
def test_end_to_end_prompt_score_and_cache(tmp_path, orders):
    auto, results, imgs = make_fixture(tmp_path)
    srv = server()
    try:
        kw = dict(base_url=srv.base_url, cache=tmp_path / "cache", orders=orders, retry_backoff=0.0)
        got = ca.evaluate(TEST, results, auto, imgs, out=tmp_path / f"{TEST}.json", **kw)
        n = 18 * (2 if orders == "both" else 1)
        assert len(got["battles"]) == n
        bodies = list(srv.bodies)
        for body in bodies:  # the official request, byte for byte in its text
            assert body["temperature"] == 0.1 and body["top_p"] == 0.9 and body["max_tokens"] == 1500
            system, user = body["messages"]
            assert hashlib.sha256(system["content"][0]["text"].encode()).hexdigest() == SYSTEM_SHA
            image, text = user["content"]
            assert image["image_url"]["detail"] == "high"
            assert image["image_url"]["url"].startswith("data:image/png;base64,/9j/")  # the JPEG bytes as they are
        sent = Counter(b["messages"][1]["content"][1]["text"] for b in bodies)
        for b in got["battles"]:
            assert sent[hand_prompt(b["caption1"], b["caption2"], b["ref"])] >= 1
        never = [b["img"] for b in got["battles"] if "never" in b["caption1"] + b["caption2"]]
        assert sorted(got["unjudged"]) == sorted(never) and never
        retry = [b for b in got["battles"] if "retry" in b["caption1"] + b["caption2"]]
        assert len(bodies) == got["generated"] == n + len(retry) + 4 * len(never)  # 5 tries for "never"
        ref = independent_score(got["battles"], TEST, 0.5 if orders == "both" else 1.0)
        assert got["scores"] == pytest.approx(ref["scores"], abs=0) and got["score_avg"] == pytest.approx(ref["score_avg"])
        assert got["score_avg"] != 0
        if orders == "both":  # each battle in both orders
            assert Counter(b["img"] for b in got["battles"]) == Counter({b["img"]: 2 for b in got["battles"]})
        srv.bodies.clear()
        again = ca.evaluate(TEST, results, auto, imgs, **kw)
        assert srv.bodies == [] and again["generated"] == 0 and again["cached"] > 0
        assert again["score_avg"] == got["score_avg"]
    finally:
        srv.close()


def _official(tmp_path: Path):
    if not MIRROR.is_dir():
        pytest.skip("no CapArena mirror (fetch njucckevin/CapArena)")
    src = tmp_path / "official"
    src.mkdir()
    for name in ("vlm_as_a_judge.py", "caparena_auto_scores.py"):
        text = subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"{COMMIT}:{name}"],
                              capture_output=True, text=True, check=True).stdout
        (src / name).write_text(text)
    pytest.importorskip("requests")
    pytest.importorskip("tqdm")
    sys.path.insert(0, str(src))
    try:
        import caparena_auto_scores  # type: ignore[import-not-found]
        import vlm_as_a_judge  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(src))
    return vlm_as_a_judge, caparena_auto_scores


def test_request_parsing_and_score_against_the_official_code(tmp_path, monkeypatch):
    judge, scorer = _official(tmp_path)
    auto, results, imgs = make_fixture(tmp_path)
    srv = server()
    try:
        got = ca.evaluate(TEST, results, auto, imgs, base_url=srv.base_url, cache=None, retry_backoff=0.0)
        ours = {b["messages"][1]["content"][1]["text"]: b for b in srv.bodies}
        n_sent = len(srv.bodies)
    finally:
        srv.close()
    # the official judge loop on the same battles, its call_llm answering as the scripted server
    payloads, seen = [], Counter()

    def call_llm(model_name, payload):
        payloads.append({**payload, "temperature": 0.1})
        prompt = payload["messages"][1]["content"][1]["text"]
        seen[prompt] += 1
        return reply_text(prompt, seen[prompt] - 1)

    monkeypatch.setattr(judge, "call_llm", call_llm)
    monkeypatch.setattr(judge.time, "sleep", lambda s: None)
    bare = [{k: v for k, v in b.items() if k not in ("judge", "judge_reason")} for b in got["battles"]]
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(bare))
    with contextlib.redirect_stdout(io.StringIO()):
        judge.mllm_judge_pairs(str(path), str(imgs), with_ref=True, cal_agree=False, eval_model_name=TEST)
    official = json.loads(path.read_text())
    assert [b.get("judge") for b in official] == [b.get("judge") for b in got["battles"]]
    assert len(payloads) == n_sent  # the same tries
    for p in payloads:
        mine = ours[p["messages"][1]["content"][1]["text"]]
        assert mine["messages"] == p["messages"]
        assert (mine["temperature"], mine["top_p"], mine["max_tokens"]) == (p["temperature"], p["top_p"], p["max_tokens"])
        assert "seed" not in mine and "seed" not in p  # call_llm sends none (issue 47 item 10)
        assert set(p) - {"model"} <= set(mine)  # every field of the official payload is sent
    # the official leaderboard (it reads every default model's file: one unjudged battle each)
    board = tmp_path / "board"
    board.mkdir()
    for name in ["GPT-4o-0806", "Claude-3.5-Sonnet-0620", "Gemini-1.5-pro-002", "InternVL2-26B",
                 "Gemini-2.0-flash-exp", "Qwen2-VL-72B-Instruct", "CogVLM2-llama3-chat-19B", "GPT-4o-mini-0718",
                 "LLama-3.2-90B", "MiniCPM-V2.6-8B", "LLaVA-1.6-34B", "Qwen2-VL-2B-Instruct", "Qwen2-VL-7B-Instruct",
                 "LLaVA-1.5-7B", "cambrian-34b", "LLaVA-OV-72b", "Ovis-1_6-27b", "Ovis-2-34b", "Internvl2-5-8b",
                 "Qwen2.5VL-72B", "Hunyuan-standard-vision", "GLM-4V-Plus"]:
        (board / f"{name}.json").write_text(json.dumps([{"source1": name, "caption1": "a b", "source2": "x"}]))
    (board / f"{TEST}.json").write_text(json.dumps(official))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        scorer.calculate_caparena_scores(str(board), TEST)
    row = next(line for line in out.getvalue().splitlines() if line.startswith(TEST + " "))
    cells = [float(c) for c in row.split("|")[1:6]]
    assert cells == [round(got["score_avg"], 2), *(round(got["scores"][b], 2) for b in ca.BASELINES),
                     round(got["length_avg"], 2)]


@pytest.mark.parametrize("kw, msg", [({"tries": 0}, "tries"), ({"top_p": 0}, "top_p"), ({"orders": "three"}, "orders"),
                                     ({"temperature": -1}, "temperature")])
def test_bad_options_are_one_line(tmp_path, kw, msg):
    auto, results, imgs = make_fixture(tmp_path)
    with pytest.raises(InputError, match=msg):
        ca.evaluate(TEST, results, auto, imgs, base_url="http://127.0.0.1:9/v1", cache=None, **kw)


def test_missing_caption_names_the_image(tmp_path):
    auto, results, imgs = make_fixture(tmp_path)
    data = json.loads(results.read_text())
    del data["test_00004.jpg"]
    with pytest.raises(InputError, match="test_00004.jpg"):
        ca.evaluate(TEST, data, auto, imgs, base_url="http://127.0.0.1:9/v1", cache=None)


def test_a_seed_is_sent_only_when_asked(tmp_path):
    auto, results, imgs = make_fixture(tmp_path)
    srv = server()
    try:
        ca.evaluate(TEST, results, auto, imgs, base_url=srv.base_url, cache=None, retry_backoff=0.0, seed=7)
        assert srv.bodies and all(b["seed"] == 7 for b in srv.bodies)
    finally:
        srv.close()
