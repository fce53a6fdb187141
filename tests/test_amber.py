"""AMBER against what the official inference.py computes.

tests/data/amber_official.json was written by tools/amber_reference.py, which runs
junyangwang0410/AMBER's inference.py (commit 534babf) itself with the stand-in tools of
tests/_amber_cases.py (NLTK's tagger data and spaCy's en_core_web_lg cannot be installed
here; capeval runs the same stand-ins through its tool slots) on 1,200 random responses and
600 yes/no answers built from AMBER's word lists. With the mirror present, the script is run
again here and must give the recorded numbers.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import _amber_cases
import _amber_official
from capeval.errors import InputError
from capeval.metrics.amber.scorer import DISCRIMINATIVE, GENERATIVE, Amber

OFFICIAL = json.loads((Path(__file__).parent / "data" / "amber_official.json").read_text(encoding="utf-8"))
STANDIN = {"tokenize": _amber_cases.tokenize, "tag": _amber_cases.tag, "lemmatize": _amber_cases.lemmatize,
           "similarity": _amber_cases.similarity}
PRINTED = {"amber-chair": ("Generative Task", "CHAIR"), "amber-cover": ("Generative Task", "Cover"),
           "amber-hal": ("Generative Task", "Hal"), "amber-cog": ("Generative Task", "Cog"),
           "amber-accuracy": ("Descriminative Task", "Accuracy"), "amber-precision": ("Descriminative Task", "Precision"),
           "amber-recall": ("Descriminative Task", "Recall"), "amber-f1": ("Descriminative Task", "F1")}
SECTIONS = {"existence": "Exsitence", "attribute": "Attribute", "state": "State", "number": "Number",
            "action": "Action", "relation": "Relation"}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("amber")
    responses = _amber_cases.build(folder)
    return folder, responses


def _candidates(responses):
    return {str(r["id"]): r["response"] for r in responses}


def test_word_lists_are_the_official_files():
    digests = {name: hashlib.sha256((_amber_cases.WORDS / name).read_bytes()).hexdigest()
               for name in ("relation.json", "safe_words.txt")}
    assert digests == {"relation.json": "c4c1491e9bbc3209abc1888c12a1bf8413bdbab8a0d8be04b990a2e7680cf23e",
                       "safe_words.txt": "f92cf1123f4578a2630832fac3e6ac4de36212ea55859d3bed4fd233723f4043"}
    if _amber_official.MIRROR.is_dir():
        for name in digests:
            assert _amber_official.git_show(f"data/{name}") == (_amber_cases.WORDS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("threshold", ["0.8", "0.5"])
def test_every_figure_equals_the_official_script(cases, threshold):
    folder, responses = cases
    report = Amber(annotations=str(folder), similarity_score=float(threshold), metrics=GENERATIVE + DISCRIMINATIVE,
                   **STANDIN).score(_candidates(responses))
    recorded = OFFICIAL["corpus"][threshold]
    printed = recorded["printed"]
    for metric, (section, name) in PRINTED.items():
        assert report[metric].system == float(printed[section][name]), metric
    dims = report["amber-f1"].extras["dimensions"]
    for dim, section in SECTIONS.items():
        for name in ("Accuracy", "Precision", "Recall", "F1"):
            assert dims[dim][name.lower()] == float(printed[section][name]), (dim, name)
    # the unrounded figures are the script's quotients, counters included
    raw = Amber(annotations=str(folder), similarity_score=float(threshold), rounded=False,
                **STANDIN).score(_candidates(responses))
    c = recorded["counters"]
    assert raw["amber-chair"].system == c["chair_score"] / c["chair_num"] * 100
    assert raw["amber-cover"].system == c["safe_cover_score"] / c["safe_cover_num"] * 100
    assert raw["amber-hal"].system == 100 - c["non_hallu_score"] / c["non_hallu_num"] * 100
    assert raw["amber-cog"].system == c["hallu_cover_score"] / c["hallu_cover_num"] * 100
    counts = raw["amber-chair"].extras["counts"]
    assert (counts["hallucinated_nouns"], counts["covered"], counts["cognitive"], counts["clean_responses"]) == (
        c["chair_score"], c["safe_cover_score"], c["hallu_cover_score"], c["non_hallu_score"])


def test_every_response_counted_as_the_official_script(cases):
    folder, responses = cases
    gen = [r for r in responses if r["id"] <= _amber_cases.N_GENERATIVE]
    assert len(gen) == len(OFFICIAL["items"]) >= 1000
    report = Amber(annotations=str(folder), **STANDIN).score(_candidates(gen))
    extras = report["amber-chair"].extras
    entries = json.loads((folder / "annotations.json").read_text())
    for r in gen:
        item = str(r["id"])
        h, n, cov, n_truth, cog, n_hallu, clean, _ = OFFICIAL["items"][item]
        assert len(extras["hallucinated"][item]) == h, item
        assert n_truth == len(entries[r["id"] - 1]["truth"]) and n_hallu == len(entries[r["id"] - 1]["hallu"])
        assert len(extras["covered"][item]) == cov and len(extras["cognitive"][item]) == cog, item
        assert report["amber-chair"].items[item] == (100 * h / n if n else 0.0), item
        assert report["amber-hal"].items[item] == (0.0 if clean else 100.0), item
        assert report["amber-cover"].items[item] == 100 * cov / n_truth, item
        if n_hallu:
            assert report["amber-cog"].items[item] == 100 * cog / n_hallu, item
        else:
            assert math.isnan(report["amber-cog"].items[item])
    # the cases exercise what they should
    items = OFFICIAL["items"].values()
    assert sum(1 for v in items if v[0] == 0) > 100 and sum(1 for v in items if v[0] > 0) > 100
    assert sum(1 for v in items if v[1] == 0) > 10 and sum(1 for v in items if v[5] == 0) > 5
    assert any(len(set(e["truth"])) < len(e["truth"]) for e in entries[:_amber_cases.N_GENERATIVE])
    assert any(set(e["truth"]) & set(e["hallu"]) for e in entries[:_amber_cases.N_GENERATIVE])


@pytest.mark.skipif(not _amber_official.MIRROR.is_dir(), reason="no mirror of junyangwang0410/AMBER: the recorded "
                    "numbers are not recomputed")
def test_recorded_numbers_are_what_the_script_computes():
    assert json.loads(json.dumps(_amber_official.record(), sort_keys=True)) == OFFICIAL


def test_official_quirks_and_the_variants(cases):
    folder, _ = cases
    tools = dict(STANDIN, similarity=lambda a, b: 1.0 if a == b else 0.0,
                 tag=lambda toks: [(t, "NN") for t in toks], lemmatize=lambda w: w)
    entries = json.loads((folder / "annotations.json").read_text())
    # a capitalised object is no noun of the vocabulary: the official run does not see it
    item = next(k + 1 for k, e in enumerate(entries) if e["type"] == "generative" and "dog" not in e["truth"]
                and "dog" not in e["hallu"] and "cat" not in e["truth"])
    text = "Dog cat"
    official = Amber(annotations=str(folder), **tools).score({str(item): text})
    lower = Amber(annotations=str(folder), variant="lowercase", **tools).score({str(item): text})
    assert official["amber-chair"].extras["hallucinated"][str(item)] == ["cat"]
    assert lower["amber-chair"].extras["hallucinated"][str(item)] == ["dog", "cat"]
    with pytest.raises(InputError, match="amber.variant"):
        Amber(annotations=str(folder), variant="fixed", **tools)


def test_own_word_variant_credits_the_object_named(tmp_path):
    folder = tmp_path / "amber"
    folder.mkdir()
    (folder / "relation.json").write_text(json.dumps({"person": ["man", "woman"], "man": [], "dog": [], "sign": []}))
    (folder / "safe_words.txt").write_text("sign")
    (folder / "annotations.json").write_text(json.dumps(
        [{"id": 1, "type": "generative", "truth": ["person", "man"], "hallu": ["dog"]}]))
    tools = dict(tokenize=str.split, tag=lambda toks: [(t, "NN") for t in toks], lemmatize=lambda w: w,
                 similarity=lambda a, b: 1.0 if a == b else 0.0)
    # "man" is listed under "person" before "man" itself: the script credits person
    assert Amber(annotations=str(folder), **tools).score({"1": "man sign"})["amber-cover"].extras["covered"] == \
        {"1": ["person"]}
    fixed = Amber(annotations=str(folder), variant="own-word", **tools).score({"1": "man sign"})
    assert fixed["amber-cover"].extras["covered"] == {"1": ["man"]}
    # safe words are kept nouns: they count in CHAIR's denominator
    assert fixed["amber-chair"].extras["counts"]["nouns"] == 2


def test_empty_counts_are_undefined_not_zero(cases):
    folder, _ = cases
    report = Amber(annotations=str(folder), **STANDIN).score({"1": "", "2": "on the"})
    assert math.isnan(report["amber-chair"].system)  # the script prints 0.0 (its counters start at 0.001)
    assert report["amber-hal"].system == 0.0
    d = Amber(annotations=str(folder), metrics=DISCRIMINATIVE).score({"1201": "Yes"})
    assert not math.isnan(d["amber-accuracy"].system)


def test_ids_and_kinds(cases):
    folder, responses = cases
    gen = Amber(annotations=str(folder), metrics=GENERATIVE, **STANDIN)
    text = responses[0]["response"]
    by_id = gen.score({"7": text})
    by_name = gen.score({"images/AMBER_7.jpg": text})
    assert list(by_id["amber-chair"].items.values()) == list(by_name["amber-chair"].items.values())
    for bad, pattern in (("0", "not in annotations.json"), ("99999", "not in annotations.json"),
                         ("dog.jpg", "not an AMBER id"), ("1201", "yes/no question")):
        with pytest.raises(InputError, match=pattern):
            gen.score({bad: "a dog"})
    with pytest.raises(InputError, match="is a description"):
        Amber(annotations=str(folder), metrics=DISCRIMINATIVE).score({"3": "Yes"})


def _cli(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True, env=env)


def test_cli_scores_a_response_file_in_the_released_layout(cases, tmp_path):
    folder, responses = cases
    path = tmp_path / "responses.json"
    path.write_text(json.dumps(responses))
    tests = str(Path(__file__).parent)
    env = {"PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    env["CAPEVAL_DATA"] = str(tmp_path / "data")  # no downloaded AMBER folder to fall back on
    tools = [f"-Oamber.{name}=_amber_cases:{name}" for name in STANDIN]
    ok = _cli("score", "-m", "amber,amber-d", f"-Oamber.annotations={folder}", *tools, "-c", str(path), env_extra=env)
    assert ok.returncode == 0, ok.stderr
    scores = json.loads(ok.stdout)["scores"]
    printed = OFFICIAL["corpus"]["0.8"]["printed"]
    assert scores == {m: float(printed[s][n]) for m, (s, n) in PRINTED.items()}
    for args, pattern in (
        ((), "amber.annotations=DIR"),
        ((f"-Oamber.annotations={tmp_path / 'none'}",), "not a folder"),
        ((f"-Oamber.annotations={tmp_path}",), "missing annotations.json"),
        ((f"-Oamber.annotations={folder}", "-Oamber.variant=fixed", *tools), "amber.variant"),
        ((f"-Oamber.annotations={folder}", "-Oamber.similarity_score=2", *tools), "similarity_score"),
        ((f"-Oamber.annotations={folder}", "-Oamber.tag=nowhere:tag"), "amber.tag"),
    ):
        bad = _cli("score", "-m", "amber", "-c", str(path), *args, env_extra=env)
        assert bad.returncode == 2, bad.stderr
        lines = [line for line in bad.stderr.splitlines() if line.startswith("capeval: error")]
        assert len(lines) == 1 and pattern in lines[0], bad.stderr
        assert "Traceback" not in bad.stderr


def _serve(root: Path):
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_download_lays_out_the_folder_the_metric_reads_by_default(tmp_path, monkeypatch, capsys):
    from capeval.cli.main import main

    served = tmp_path / "mirror" / "amber"
    served.mkdir(parents=True)
    for name in ("relation.json", "safe_words.txt"):
        (served / name).write_bytes((_amber_cases.WORDS / name).read_bytes())
    real = _amber_official.MIRROR.is_dir()
    (served / "annotations.json").write_text(_amber_official.git_show("data/annotations.json") if real else "[]",
                                             encoding="utf-8")
    server = _serve(tmp_path / "mirror")
    try:
        monkeypatch.setenv("CAPEVAL_DATA_MIRROR", f"http://127.0.0.1:{server.server_address[1]}/")
        monkeypatch.setenv("CAPEVAL_DATA", str(tmp_path / "data"))
        code = main(["download", "amber", "--quiet"])
        out, err = capsys.readouterr()
        if not real:  # not the release's annotations.json: refused, nothing left in place
            assert code == 2 and "sha256" in err and "annotations.json" in err
            assert not (tmp_path / "data" / "amber" / "annotations.json").exists()
            return
        assert code == 0, err
        assert set(json.loads(out)["files"]) == {f"amber/{n}" for n in ("annotations.json", "relation.json",
                                                                         "safe_words.txt")}
        exact = dict(tokenize=str.split, tag=lambda toks: [(t, "NN") for t in toks], lemmatize=lambda w: w,
                     similarity=lambda a, b: float(a == b))
        report = Amber(**exact).score({"1": "a man on a road under a dog", "1005": "Yes"})
        # AMBER_1: truth sky, forest, grass, person, lake, mountain, road; hallu cloud, sun, bird, dog, flower
        extras = report["amber-chair"].extras
        assert (extras["covered"]["1"], extras["hallucinated"]["1"], extras["cognitive"]["1"]) == (
            ["person", "road"], ["dog"], ["dog"])
        assert report["amber-accuracy"].items["1005"] == 100.0
        assert "|annotations:534babf|" in str(report["amber-accuracy"].signature)
    finally:
        server.shutdown()
        server.server_close()


def test_published_results_table_and_reproduce_lists_it(tmp_path):
    from capeval.bench import published as pub
    from capeval.bench import reproduce as rp

    cells = pub.select(["amber"])
    assert len(cells) == 9 * 8 and {c.metric for c in cells} == set(GENERATIVE + DISCRIMINATIVE)
    value = {(c.variant, c.metric): c.value for c in cells}
    # the table's AMBER Score column, (100 - CHAIR + F1) / 2 as the README defines it, checks two columns
    amber_score = {"mPLUG-Owl": 48.7, "LLaVA": 60.6, "MiniGPT-4": 75.6, "CogVLM": 83.4, "LLaVA-1.5": 83.5,
                   "mPLUG-Owl2": 84.0, "InstructBLIP": 86.5, "Qwen-VL": 89.7, "GPT-4V": 91.4}
    for model, score in amber_score.items():
        assert abs((100 - value[(model, "amber-chair")] + value[(model, "amber-f1")]) / 2 - score) <= 0.05 + 1e-9
    assert value[("GPT-4V", "amber-cover")] == 67.1 and value[("CogVLM", "amber-cog")] == 1.3
    out = rp.reproduce(["amber"], None, tmp_path, runner=lambda *a, **k: pytest.fail("nothing to run"))
    assert len(out) == 72 and all(o.status.startswith(f"not run: model outputs ({o.variant}'s responses") for o in out)
    assert "72 not run (72 model outputs)" in rp.summary(out)
    assert "junyangwang0410/AMBER@534babf" in out[0].source


@pytest.mark.parametrize("text, pattern", [
    ('[{"id": 1, "type": "generative", "truth": ["sky"], "hallu": [], "truth": ["dog"]}]', "'truth' appears twice"),
    ('[{"id": 1, "type": "generative", "truth": ["skyy"], "hallu": []}]', "'skyy' is not a key of relation.json"),
    ('[{"id": 1, "type": "generative", "truth": "sky", "hallu": []}]', "'truth' must be a list of words"),
    ('[{"id": 2, "type": "relation", "truth": "yes"}]', "AMBER ids are the list positions"),
    ('[{"id": 1, "type": "relation", "truth": "maybe"}]', 'must be "yes" or "no"'),
    ('[{"id": 1,', "not readable JSON"),
    ('{"1": {}}', "expected a list of annotations"),
])
def test_bad_annotation_files_are_one_line_errors(tmp_path, text, pattern):
    from capeval.metrics.amber.annotations import load

    for name in ("relation.json", "safe_words.txt"):
        (tmp_path / name).write_bytes((_amber_cases.WORDS / name).read_bytes())
    (tmp_path / "annotations.json").write_text(text)
    with pytest.raises(InputError, match=pattern) as err:
        load(tmp_path)
    assert "\n" not in str(err.value) and str(tmp_path / "annotations.json") in str(err.value)


def test_the_0_001_start_moves_a_figure_across_a_rounding_step():
    """7 hallucinated of 16 nouns: 43.75 % would print 43.8; the script divides by 16.001: 43.7."""
    from capeval.metrics.amber.generative import Judged, Totals

    totals = Totals()
    totals.add(Judged(nouns=("dog",) * 16, hallucinated=("dog",) * 7, covered=(True, False), cognitive=(False,)))
    assert round(7 / 16 * 100, 1) == 43.8
    assert totals.figures()["chair"] == 43.7 == round(7 / (0.001 + 16) * 100, 1)
    assert totals.figures(rounded=False)["chair"] == 7 / (0.001 + 16) * 100
