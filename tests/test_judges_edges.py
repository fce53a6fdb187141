"""Judges' edge cases (issue 34): CLAIR's non-finite scores, ASCII digits in VisCE2's parse rules,
FLEUR/EXPERT on a server that returns no log-probabilities. Scripted 127.0.0.1 servers from
``test_judges``."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from capeval.errors import ResourceError
from capeval.judges import answers as ans
from capeval.metrics.visce2 import parse

sys.path.insert(0, str(Path(__file__).parent))
from test_judges import Scripted, image_dir, last_text  # noqa: E402,F401  (image_dir: a fixture)

SRC = str(Path(__file__).parents[1] / "src")


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "capeval.cli", "score", "-c", str(tmp_path / "c.json"), "--quiet",
                           *args], capture_output=True, text=True, env=env, cwd=tmp_path)


# ------------------------------------------------------------------ CLAIR: NaN / Infinity
CLAIR_SCRIPT = {
    "a red square": ['{"score": NaN, "reason": "x"}'],                     # never finite: error item
    "a green thing": ['{"score": Infinity}', '{"score": -Infinity, "reason": "y"}',
                      '{"score": 40, "reason": "ok"}'],                     # read at the third try
    "a blue blob": ['{"score": 80, "reason": "fine"}'],
}


def clair_reply():
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def reply(body):
        cand = last_text(body).split("Candidate set:\n- ")[1].split("\n")[0]
        with lock:
            k = seen.get(cand, 0)
            seen[cand] = k + 1
        script = CLAIR_SCRIPT[cand]
        return script[min(k, len(script) - 1)], None

    return reply


def test_clair_non_finite_score_is_an_unparsed_answer(tmp_path):
    from capeval.metrics.clair import CLAIR

    for text in ('{"score": NaN}', '{"score": Infinity, "reason": "r"}', '{"score": -Infinity}',
                 "score " + "9" * 400, '{"score": "nan"}'):
        got = ans.parse_clair(text)
        assert got.score is None and got.how == "non-finite", text
    assert ans.parse_clair('{"score": 1e308}').score == 1e308  # finite: read as the official code

    srv = Scripted(clair_reply())
    try:
        cands = {"a": "a red square", "b": "a green thing", "c": "a blue blob"}
        res = CLAIR(base_url=srv.base_url, model="judge", cache=None, concurrency=1).score(
            cands, {k: ["r"] for k in cands})["clair"]
        assert dict(res.items) == {"b": 0.4, "c": 0.8} and res.skipped == ("a",)
        assert res.extras["tries"] == {"a": 3, "b": 3, "c": 1} and len(srv.bodies) == 7
        assert res.extras["errors"]["a"]["error"] == "a non-finite score in the answer after 3 tries"
        assert math.isfinite(res.system) and res.system == pytest.approx((0.4 + 0.8) / 2)
        # the command line: the mean of the parsed items, one stderr line naming the item
        (tmp_path / "c.json").write_text(json.dumps(cands))
        (tmp_path / "r.json").write_text(json.dumps({k: ["r"] for k in cands}))
        out = cli(tmp_path, "-r", str(tmp_path / "r.json"), "-m", "clair", "-O", f"clair.base_url={srv.base_url}",
                  "-O", "clair.model=judge", "-O", "clair.cache=false")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["scores"]["clair"] == pytest.approx(0.6)
        assert "item 'a': a non-finite score in the answer after 3 tries" in out.stderr
    finally:
        srv.close()


# ------------------------------------------------------------------ ASCII digits
OTHER_DIGITS = "".join(chr(z + d) for z in (0x0660, 0x06F0, 0x0966, 0x09E6, 0xFF10, 0x1D7CE) for d in range(10))


def random_answer(rng: random.Random) -> str:
    pieces = ["Score", ": ", " ", "\n", ".", "0-100", "between 0 and 100", "(0-100)", "/100", "rating", "-"]
    out = []
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        if r < 0.35:
            out.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 3))))
        elif r < 0.7:
            out.append("".join(rng.choice(OTHER_DIGITS) for _ in range(rng.randint(1, 3))))
        else:
            out.append(rng.choice(pieces))
    return "".join(out)


def test_visce2_parse_rules_read_ascii_digits_only():
    assert parse.parse_answer("\u0661\u0662").score is None  # "١٢": no number (it read 12)
    assert parse.parse_answer("\u0661\u0662", rule="reference").score is None
    assert parse.parse_answer("Score: \uff18\uff10 then 7").score == 7.0
    rng = random.Random(34)
    neutral = str.maketrans({c: "x" for c in OTHER_DIGITS})
    differ = 0
    for _ in range(2000):
        answer = random_answer(rng)
        # the reference (get_digit_scores): the first re.findall("[0-9]+") as int, none: 0
        found = re.findall("[0-9]+", answer)
        ref = parse.parse_answer(answer, unparsed="zero", rule="reference")
        assert ref.score == (float(int(found[0])) if found else 0.0), answer
        # the paper rule sees other scripts' digits as letters
        assert parse.parse_answer(answer) == parse.parse_answer(answer.translate(neutral)), answer
        differ += bool(re.findall(r"\d+", answer)) and re.findall(r"\d+", answer)[0] != (found or [None])[0]
    assert differ > 100  # the draw does exercise answers where \d+ reads another number
    lp = [{"token": "80", "logprob": math.log(0.5), "top_logprobs": [
        {"token": "80", "logprob": math.log(0.5)}, {"token": "\u0666\u0660", "logprob": math.log(0.5)}]}]
    assert parse.expected_score("80", lp, parse.parse_answer("80")) == 80.0  # "٦٠" is no alternative


def test_clair_and_fleur_keep_the_official_digit_class():
    # their official code applies Python's \d (any script's digits) and float() reads them:
    # clair.py re.findall(r"\d*\.?\d+"), fleur.py re.sub(r"[^\d\.]", "")
    answer = "Score \u0668\u0660 reason: ok"
    assert ans.parse_clair(answer).score == float(re.findall(r"\d*\.?\d+", answer)[0]) == 80.0
    assert ans.fleur_number("\u0660.\u0667") == float(re.sub(r"[^\d\.]", "", "\u0660.\u0667")) == 0.7
    # the smoothing then finds no ASCII digit token, as rate2token's ids are the ASCII digits
    tokens = [{"token": c, "logprob": 0.0, "top_logprobs": []} for c in "\u0660.\u0667"]
    assert ans.smooth("\u0660.\u0667", tokens).error == "the digit 7 is not a generated token"


# ------------------------------------------------------------------ FLEUR / EXPERT without log-probs
def test_fleur_stops_at_the_first_answer_without_logprobs(tmp_path):
    from PIL import Image

    from capeval.metrics.fleur import EXPERT, FLEUR

    folder = tmp_path / "images"
    folder.mkdir()
    cands = {}
    for k in range(12):
        Image.new("RGB", (8, 6), (20 * k, 30, 30)).save(folder / f"im{k}.png")
        cands[f"im{k}"] = f"caption {k}"
    srv = Scripted(lambda body: ("0.75", None))  # a server that ignores logprobs
    try:
        for cls, label, conc, most in ((FLEUR, "fleur", 1, 1), (EXPERT, "expert", 4, 4)):
            n = len(srv.bodies)
            with pytest.raises(ResourceError) as err:
                cls(backend="openai", base_url=srv.base_url, model="judge", cache=tmp_path / label,
                    concurrency=conc, metrics=[label]).score(cands, images=folder)
            msg = str(err.value)
            assert "\n" not in msg and "returned no token log-probabilities" in msg
            assert f"-O {label}.score_mode=number" in msg and "--max-logprobs" in msg
            assert 1 <= len(srv.bodies) - n <= most  # no request after the first such answer
            assert srv.bodies[-1]["logprobs"] is True
            # a rerun stops on the cached answer, sending nothing; score_mode=number reads it
            n = len(srv.bodies)
            with pytest.raises(ResourceError, match="score_mode=number"):
                cls(backend="openai", base_url=srv.base_url, model="judge", cache=tmp_path / label,
                    concurrency=conc, metrics=[label]).score(cands, images=folder)
            assert len(srv.bodies) == n
        # the command line: exit 2, one line
        (tmp_path / "c.json").write_text(json.dumps(cands))
        n = len(srv.bodies)
        out = cli(tmp_path, "-m", "fleur", "--images", str(folder), "-O", "fleur.backend=openai",
                  "-O", f"fleur.base_url={srv.base_url}", "-O", "fleur.model=judge", "-O", "fleur.cache=false",
                  "-O", "fleur.concurrency=1")
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert out.stderr.startswith("capeval: ") and "score_mode=number" in out.stderr
        assert len(srv.bodies) == n + 1
        out = cli(tmp_path, "-m", "fleur", "--images", str(folder), "-O", "fleur.backend=openai",
                  "-O", f"fleur.base_url={srv.base_url}", "-O", "fleur.model=judge", "-O", "fleur.cache=false",
                  "-O", "fleur.score_mode=number")
        assert out.returncode == 0 and json.loads(out.stdout)["scores"]["fleur"] == 0.75
    finally:
        srv.close()
