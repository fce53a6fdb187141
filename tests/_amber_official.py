"""Run junyangwang0410/AMBER's ``inference.py`` itself (its source read from a git mirror, nothing
in it changed) with the stand-in tools of ``_amber_cases``: ``nltk``, ``spacy`` and ``tqdm`` are
replaced by small modules exposing what the script calls (``nltk.word_tokenize``, ``nltk.pos_tag``,
``nltk.stem.WordNetLemmatizer().lemmatize``, ``spacy.load(...)(word).similarity(...)``,
``tqdm``). Its counters are read from the dict its ``init`` returns, its printed figures from stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import _amber_cases

COMMIT = "534babf6bbfcce2e735c26289dedfb21cef3c939"
MIRROR = Path("/work/.mirror/junyangwang0410+AMBER/repo")


def git_show(path: str, git_dir: Path = MIRROR) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _stubs() -> dict[str, types.ModuleType]:
    nltk = types.ModuleType("nltk")
    nltk.word_tokenize = _amber_cases.tokenize
    nltk.pos_tag = _amber_cases.tag
    stem = types.ModuleType("nltk.stem")

    class WordNetLemmatizer:
        def lemmatize(self, word: str) -> str:
            return _amber_cases.lemmatize(word)

    stem.WordNetLemmatizer = WordNetLemmatizer
    nltk.stem = stem

    class Doc:
        def __init__(self, text: str):
            self.text = text

        def similarity(self, other: "Doc") -> float:
            return _amber_cases.similarity(self.text, other.text)

    spacy = types.ModuleType("spacy")
    spacy.load = lambda name: Doc
    tqdm = types.ModuleType("tqdm")
    tqdm.tqdm = lambda it, *a, **k: it
    return {"nltk": nltk, "nltk.stem": stem, "spacy": spacy, "tqdm": tqdm}


def load_script(source: str) -> types.ModuleType:
    saved = {name: sys.modules.get(name) for name in ("nltk", "nltk.stem", "spacy", "tqdm")}
    sys.modules.update(_stubs())
    try:
        module = types.ModuleType("amber_inference")
        exec(compile(source, "inference.py", "exec"), module.__dict__)
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
    return module


def run(script: types.ModuleType, folder: Path, metrics_txt: str, responses: list[dict], evaluation_type: str,
        threshold: float = 0.8) -> tuple[dict, dict[str, str]]:
    """``(the script's counters, {printed section: {name: value}})`` of one run of ``main``."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "responses.json"
        data.write_text(json.dumps(responses), encoding="utf-8")
        metrics = Path(tmp) / "metrics.txt"
        metrics.write_text(metrics_txt, encoding="utf-8")
        args = argparse.Namespace(word_association=str(folder / "relation.json"),
                                  safe_words=str(folder / "safe_words.txt"), inference_data=str(data),
                                  annotation=str(folder / "annotations.json"), metrics=str(metrics),
                                  similarity_score=threshold, evaluation_type=evaluation_type)
        counters: list[dict] = []
        original = script.__dict__.get("_original_init") or script.init
        script._original_init = original

        def init():
            counters.append(original())
            return counters[-1]

        script.init = init
        script.args = args  # init() reads the global args
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            script.main(args)
    printed: dict[str, dict[str, str]] = {}
    section = ""
    for line in out.getvalue().splitlines():
        if line.endswith(":"):
            section = line[:-1]
            printed[section] = {}
        elif ":" in line:
            name, value = line.split(":", 1)
            printed[section][name.strip()] = value.strip()
    return counters[0], printed


COUNTERS = ("chair_score", "chair_num", "safe_cover_score", "safe_cover_num", "hallu_cover_score", "hallu_cover_num",
            "non_hallu_score", "non_hallu_num")


def item_counts(counters: dict) -> list[int]:
    # the denominators start at 0.001 (data/metrics.txt): one response adds integers to them
    return [round(counters[k] - (0.001 if k.endswith("_num") else 0)) for k in COUNTERS]


def record(git_dir: Path = MIRROR) -> dict:
    """What tools/amber_reference.py writes to tests/data/amber_official.json."""
    source = git_show("inference.py", git_dir)
    metrics_txt = git_show("data/metrics.txt", git_dir)
    script = load_script(source)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        responses = _amber_cases.build(folder)
        items = {}
        for row in responses:
            if row["id"] <= _amber_cases.N_GENERATIVE:
                counters, _ = run(script, folder, metrics_txt, [row], "g")
                items[str(row["id"])] = item_counts(counters)
        corpus = {}
        for threshold in (0.8, 0.5):
            counters, printed = run(script, folder, metrics_txt, responses, "a", threshold)
            corpus[str(threshold)] = {"printed": printed, "counters": counters}
    return {"commit": COMMIT, "counters": list(COUNTERS), "items": items, "corpus": corpus}
