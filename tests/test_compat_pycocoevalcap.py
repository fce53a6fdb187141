"""capeval.compat.pycocoevalcap against the installed pycocoevalcap 1.2 (Java) itself.

Every scorer's ``compute_score`` return value is compared with the original's type for
type (list vs ndarray, float vs np.float64, per-item order) on random small inputs with
edge cases; the COCO example flow (``COCO``, ``loadRes``, ``COCOEvalCap.evaluate``) runs on
Flickr8k data with both packages, stdout included. Tolerances: BLEU, ROUGE-L and CIDEr are
the same float operations in the same order as the original, so 1e-12 (exact in practice);
METEOR as tests/test_meteor.py allows: the corpus score to 1e-9 and items to 1e-6 (Java
prints each item's score as decimal text that pycocoevalcap parses back; the statistics
lines themselves are compared exactly there). The original SPICE needs CoreNLP, which is
not run: SPICE's result layout is checked against SPICE 1.0's documented JSON instead.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _reference import cached, java_ptb, require_java, require_module

ROOT = Path(__file__).resolve().parents[1]
TIGHT = 1e-12
METEOR_CORPUS = 1e-9
METEOR_ITEM = 1e-6
#: SPICE 1.0 JSON (``-subset``): one "All" score and six tuple categories, each with these fields
SPICE_CATEGORIES = {"All", "Object", "Attribute", "Relation", "Cardinality", "Color", "Size"}
SPICE_FIELDS = {"tp", "fp", "fn", "f", "pr", "re", "numImages"}


def same(ours, theirs, tol: float, where: str = "") -> None:
    """``ours`` equals ``theirs`` type for type, floats to ``tol``."""
    assert type(ours) is type(theirs), f"{where}: {type(ours).__name__} vs {type(theirs).__name__}"
    if isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=tol, err_msg=where)  # NaN == NaN here
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for k, (a, b) in enumerate(zip(ours, theirs)):
            same(a, b, tol, f"{where}[{k}]")
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for k in theirs:
            same(ours[k], theirs[k], tol, f"{where}[{k!r}]")
    elif isinstance(theirs, (float, np.floating)):
        assert abs(ours - theirs) <= tol or (math.isnan(ours) and math.isnan(theirs)), f"{where}: {ours!r} vs {theirs!r}"
    else:
        assert ours == theirs, where


def _random_set(seed: int) -> tuple[dict, dict]:
    """Tokenised gts/res with edge cases: 1-token and empty captions, no overlap, duplicates,
    one reference vs several, repeated words, int and str ids in no sorted order."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(10)]

    def sent(lo: int, hi: int) -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(lo, hi)))

    ids = rng.sample(range(1000), 60)
    gts = {i: [sent(1, 15) for _ in range(rng.choice([1, 1, 2, 5]))] for i in ids}
    res = {i: [sent(1, 18)] for i in reversed(ids)}  # res in another order: only gts's counts
    a, b, c, d, e = ids[:5]
    res[a] = [gts[a][0]]  # a duplicate of a reference
    gts[b] = ["x1 x2 x3", "x1 x2 x3"]  # duplicated references, no overlap with the candidate
    res[c] = ["w1"]  # one token
    gts[c] = ["w1"]
    res[d] = [""]  # empty candidate (a punctuation-only caption after PTB)
    gts[e] = ["w2 w2 w2 w2", "", "w2"]  # an empty reference among others
    f = ids[5]  # untokenised spacing: ROUGE-L splits on " " (empty tokens), BLEU/CIDEr on whitespace
    gts[f], res[f] = ["w1  w2", " w1 w2 ", "w3\tw1"], ["w1  w2 "]
    return gts, res


@pytest.mark.parametrize("seed", [0, 1])
def test_bleu_rouge_cider_match_the_original(seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    require_module("pycocoevalcap", "pycocoevalcap==1.2 is the reference implementation (test extra)")
    from pycocoevalcap.bleu.bleu import Bleu as RefBleu
    from pycocoevalcap.cider.cider import Cider as RefCider
    from pycocoevalcap.rouge.rouge import Rouge as RefRouge

    from capeval.compat.pycocoevalcap.bleu.bleu import Bleu
    from capeval.compat.pycocoevalcap.cider.cider import Cider
    from capeval.compat.pycocoevalcap.rouge.rouge import Rouge

    gts, res = _random_set(seed)
    for n in (4, 2, 1):
        for verbose in (0, 1, 2):
            theirs = RefBleu(n).compute_score(gts, res, verbose=verbose)
            printed = capsys.readouterr().out
            ours = Bleu(n).compute_score(gts, res, verbose=verbose)
            assert capsys.readouterr().out == printed  # BLEU's statistics lines, verbatim
            same(ours, theirs, TIGHT, f"Bleu({n})")
    same(Rouge().compute_score(gts, res), RefRouge().compute_score(gts, res), TIGHT, "Rouge")
    same(Rouge().calc_score(res[next(iter(gts))], gts[next(iter(gts))]),
         RefRouge().calc_score(res[next(iter(gts))], gts[next(iter(gts))]), TIGHT, "calc_score")  # fmt: skip
    same(Cider().compute_score(gts, res), RefCider().compute_score(gts, res), TIGHT, "Cider")
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):  # the empty set: NaN mean, as numpy gives
        same(Rouge().compute_score({}, {}), RefRouge().compute_score({}, {}), TIGHT, "Rouge empty")
    same(Bleu().compute_score({}, {}, verbose=0), RefBleu().compute_score({}, {}, verbose=0), TIGHT, "Bleu empty")
    one = {k: gts[k] for k in list(gts)[:1]}  # a single item (log N = 0)
    same(Cider().compute_score(one, {k: res[k] for k in one}), RefCider().compute_score(one, {k: res[k] for k in one}),
         TIGHT, "Cider single")  # fmt: skip


def test_flickr8k_expert_in_chunks_and_workers_matches_the_original(expert_pairs) -> None:
    """5,664 items (over 2,000: chunked, forked workers where there are several cores)."""
    from pycocoevalcap.bleu.bleu import Bleu as RefBleu
    from pycocoevalcap.cider.cider import Cider as RefCider
    from pycocoevalcap.rouge.rouge import Rouge as RefRouge

    from capeval.compat.pycocoevalcap.bleu.bleu import Bleu
    from capeval.compat.pycocoevalcap.cider.cider import Cider
    from capeval.compat.pycocoevalcap.rouge.rouge import Rouge

    ids, cands, refs = expert_pairs
    gts, res = java_ptb(ids, cands, refs)
    same(Bleu().compute_score(gts, res, verbose=0), RefBleu().compute_score(gts, res, verbose=0), TIGHT, "Bleu")
    same(Rouge().compute_score(gts, res), RefRouge().compute_score(gts, res), TIGHT, "Rouge")
    same(Cider().compute_score(gts, res), RefCider().compute_score(gts, res), TIGHT, "Cider")


def test_meteor_matches_the_java_original() -> None:
    require_java()
    from capeval.compat.pycocoevalcap.meteor.meteor import Meteor

    gts, res = _random_set(3)
    gts[next(iter(gts))] = ["a dog ||| runs", "the dog  runs"]  # the line protocol's separator
    raw = {k: list(v) for k, v in gts.items()}

    def run() -> tuple:
        from pycocoevalcap.meteor.meteor import Meteor as RefMeteor

        java = RefMeteor()
        out = java.compute_score(raw, res)
        del java
        return out

    theirs = cached("compat-meteor", [sorted(map(str, raw.items())), sorted(map(str, res.items()))], run)
    score, scores = Meteor().compute_score(raw, res)
    same(score, theirs[0], METEOR_CORPUS, "METEOR corpus")
    same(scores, theirs[1], METEOR_ITEM, "METEOR items")


def test_bad_input_is_an_assertion_and_an_input_error() -> None:
    from capeval.compat.pycocoevalcap._common import CompatInputError
    from capeval.compat.pycocoevalcap.bleu.bleu import Bleu
    from capeval.compat.pycocoevalcap.cider.cider import Cider
    from capeval.compat.pycocoevalcap.rouge.rouge import Rouge
    from capeval.errors import InputError

    assert issubclass(CompatInputError, AssertionError) and issubclass(CompatInputError, InputError)
    with pytest.raises(CompatInputError, match="same image ids.*first: 2"):
        Rouge().compute_score({1: ["a"], 2: ["b"]}, {1: ["a"]})
    with pytest.raises(CompatInputError, match="image 7: res must hold exactly one caption, got 2"):
        Cider().compute_score({7: ["a b"]}, {7: ["a", "b"]})
    with pytest.raises(CompatInputError, match="image 7: gts must hold a non-empty"):
        Bleu().compute_score({7: []}, {7: ["a"]}, verbose=0)
    with pytest.raises(CompatInputError, match="must be lists"):
        Bleu().compute_score({7: ("a",)}, {7: ["a"]}, verbose=0)
    with pytest.raises(CompatInputError, match="n must be an integer in 1..4"):
        Bleu(5)
    with pytest.raises(CompatInputError, match="sigma"):
        Cider(sigma=0)


def test_spice_layout_is_the_originals() -> None:
    require_module("spacy", "capeval's SPICE parses with spaCy (spice extra)")
    from capeval.compat.pycocoevalcap.spice import spice as mod

    gts = {3: ["a black dog runs on the grass", "two dogs play"], 1: ["a man rides a red bike"], 2: ["a cat"]}
    res = {1: ["a man on a bike"], 2: ["a cat"], 3: ["a white dog"]}
    mod._warned = False
    with pytest.warns(mod.SpiceParserWarning, match="spaCy.*signature metric:spice"):
        score, scores = mod.Spice().compute_score(gts, res)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        mod.Spice().compute_score({1: ["a dog"]}, {1: ["a dog"]})
    assert type(score) is np.float64 and type(scores) is list and len(scores) == 3
    for item in scores:
        assert type(item) is dict and set(item) == SPICE_CATEGORIES
        for cat in item.values():
            assert set(cat) == SPICE_FIELDS and all(type(v) is float for v in cat.values())
    # sorted image ids: 1 (bike), 2 (identical caption: F1 1), 3
    assert scores[1]["All"]["f"] == 1.0 and scores[0]["All"]["f"] < 1.0
    assert score == np.mean([s["All"]["f"] for s in scores])
    assert math.isnan(scores[1]["Color"]["f"])  # no colour tuple in the references: null -> NaN


def test_tokenizer_matches_the_java_original() -> None:
    require_java()
    from capeval.compat.pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    data = {
        5: [{"caption": "A dog's ball, (red) ...", "id": 1}, {"caption": "U.S. The end"}],
        "x": [{"caption": "!!!"}, {"caption": "Don't\nstop: 1 1/2 cups"}],
        0: [],  # no caption: no key in the output
        2: [{"caption": "fig. 3 and Mr. Smith's cat."}],
    }

    def run() -> dict:
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer as Ref

        return Ref().tokenize(data)

    theirs = cached("compat-ptb", [str(data)], run)
    ours = PTBTokenizer().tokenize(data)
    assert ours == theirs and list(ours) == list(theirs)
    import pycocoevalcap.tokenizer.ptbtokenizer as ref

    from capeval.compat.pycocoevalcap.tokenizer import ptbtokenizer
    from capeval.tokenize import PUNCTUATIONS

    assert ptbtokenizer.PUNCTUATIONS == ref.PUNCTUATIONS and set(ref.PUNCTUATIONS) == PUNCTUATIONS


# --------------------------------------------------------------------------- the COCO flow


def _coco_files(root: Path, tmp: Path, n_images: int = 200) -> tuple[Path, Path]:
    """A COCO-format annotation file (Flickr8k test images, 5 captions each) and a results
    file (each image's first Flickr8k-Expert candidate), images in a shuffled order."""
    from capeval.bench.flickr8k import expert_pairs

    ids, cands, refs = expert_pairs(root)
    tests = set((root / "flickr8k" / "Flickr_8k.testImages.txt").read_text().split())
    first: dict[str, str] = {}
    for key in ids:
        image = key.split("|")[0]
        if image in tests and image not in first:
            first[image] = key
    chosen = list(first.items())[:n_images]
    random.Random(0).shuffle(chosen)
    images, anns, results = [], [], []
    for img_id, (name, key) in enumerate(chosen, start=1):
        images.append({"id": img_id * 7 % 1009, "file_name": name})
        for r in refs[key]:
            anns.append({"id": len(anns) + 1, "image_id": img_id * 7 % 1009, "caption": r})
        results.append({"image_id": img_id * 7 % 1009, "caption": cands[key]})
    ann_path, res_path = tmp / "captions.json", tmp / "results.json"
    ann_path.write_text(json.dumps({"images": images, "annotations": anns, "type": "captions"}))
    res_path.write_text(json.dumps(results))
    return ann_path, res_path


def _evaluate(cls, ann: Path, res: Path) -> tuple[dict, dict, list, str]:
    import contextlib
    import io

    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(ann))
        coco_res = coco.loadRes(str(res))
    out = io.StringIO()
    ev = cls(coco, coco_res)
    with contextlib.redirect_stdout(out):
        ev.evaluate()
    return ev.eval, ev.imgToEval, ev.evalImgs, out.getvalue()


def _original_without_spice(ann: Path, res: Path) -> tuple:
    """pycocoevalcap's own flow (Java tokenizer and METEOR); its SPICE (CoreNLP) stubbed out."""
    import pycocoevalcap.eval as ref

    class NoSpice:
        def compute_score(self, gts, res):
            return 0.0, [0.0] * len(gts)

        def method(self):
            return "SPICE"

    saved = ref.Spice
    ref.Spice = NoSpice
    try:
        return _evaluate(ref.COCOEvalCap, ann, res)
    finally:
        ref.Spice = saved


def test_coco_example_flow_matches_the_original(shared_data: Path, tmp_path: Path) -> None:
    require_java()
    require_module("pycocotools", "pycocotools reads the COCO files (installed with pycocoevalcap)")
    require_module("spacy", "capeval's SPICE parses with spaCy (spice extra)")
    from capeval.compat.pycocoevalcap.eval import COCOEvalCap

    ann, res = _coco_files(shared_data, tmp_path)
    theirs = cached("compat-coco-flow", [ann.read_text(), res.read_text()], lambda: _original_without_spice(ann, res))
    ours = _evaluate(COCOEvalCap, ann, res)
    t_eval, t_img, t_list, t_out = theirs
    o_eval, o_img, o_list, o_out = ours
    tol = {"METEOR": METEOR_CORPUS}
    assert list(o_eval) == list(t_eval)
    for m in t_eval:
        if m != "SPICE":
            same(o_eval[m], t_eval[m], tol.get(m, TIGHT), m)
    assert list(o_img) == list(t_img) and len(o_img) == 200
    for img, d in t_img.items():
        assert list(o_img[img]) == list(d) and o_img[img]["image_id"] == img
        for m, v in d.items():
            if m not in ("SPICE", "image_id"):
                same(o_img[img][m], v, METEOR_ITEM if m == "METEOR" else TIGHT, f"{img}/{m}")
    assert [e["image_id"] for e in o_list] == [e["image_id"] for e in t_list] and o_list[0] is o_img[o_list[0]["image_id"]]
    # the same stdout, line for line, but SPICE's score (a stub on the original's side)
    drop = lambda text: [ln for ln in text.splitlines() if not ln.startswith("SPICE: ")]
    assert drop(o_out) == drop(t_out)
    assert type(o_eval["SPICE"]) is np.float64 and 0 < o_eval["SPICE"] < 1
    assert all(set(d["SPICE"]) == SPICE_CATEGORIES for d in o_img.values())


# --------------------------------------------------------------------------- scripts

SCRIPT = '''\
import json, sys
from pycocotools.coco import COCO
from pycocoevalcap.eval import Bleu, Cider, COCOEvalCap, Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

coco = COCO()
coco.dataset = json.load(open(sys.argv[1]))
coco.createIndex()
coco_result = coco.loadRes(sys.argv[2])
coco_eval = COCOEvalCap(coco, coco_result)
gts, res = {}, {}
for i in coco_eval.params["image_id"]:
    gts[i] = coco_eval.coco.imgToAnns[i]
    res[i] = coco_eval.cocoRes.imgToAnns[i]
tok = PTBTokenizer()
gts, res = tok.tokenize(gts), tok.tokenize(res)
out = {"module": COCOEvalCap.__module__}
for name, scorer in (("Bleu_4", Bleu(4)), ("ROUGE_L", Rouge()), ("CIDEr", Cider())):
    score, scores = scorer.compute_score(gts, res)
    if name == "Bleu_4":
        score, scores = score[3], scores[3]
    out[name] = [repr(score), [repr(float(s)) for s in scores]]
print("RESULT " + json.dumps(out))
'''


def _run_script(text: str, ann: Path, res: Path, preamble: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", preamble + text, str(ann), str(res)], capture_output=True, text=True,
                          env=env, timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_lmms_eval_style_script_with_one_changed_import(shared_data: Path, tmp_path: Path) -> None:
    """An unmodified lmms-eval-style script; only the import prefix rewritten (or install())."""
    require_java()
    require_module("pycocotools", "pycocotools reads the COCO files (installed with pycocoevalcap)")
    ann, res = _coco_files(shared_data, tmp_path, 60)
    rewritten = SCRIPT.replace("from pycocoevalcap.", "from capeval.compat.pycocoevalcap.")
    assert rewritten.count("capeval.compat") == 2 and "pycocoevalcap" not in SCRIPT.replace("pycocoevalcap.", "")
    theirs = cached("compat-script", [SCRIPT, ann.read_text(), res.read_text()], lambda: _run_script(SCRIPT, ann, res))
    ours = _run_script(rewritten, ann, res)
    aliased = _run_script(SCRIPT, ann, res, "import capeval.compat.pycocoevalcap as c; c.install()\n")
    assert theirs.pop("module") == "pycocoevalcap.eval"
    assert ours.pop("module") == aliased.pop("module") == "capeval.compat.pycocoevalcap.eval"
    assert ours == theirs == aliased  # repr of every float: bit for bit


def test_import_is_light_and_install_is_explicit() -> None:
    code = (
        "import sys, importlib.util\n"
        "import capeval.compat.pycocoevalcap as c\n"
        "assert 'pycocoevalcap' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)\n"
        "import capeval.compat.pycocoevalcap.eval\n"
        "heavy = [m for m in ('torch', 'spacy', 'capeval.metrics.meteor', 'capeval.tokenize.ptb') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "real = importlib.util.find_spec('pycocoevalcap')\n"
        "c.install()\n"
        "from pycocoevalcap.eval import COCOEvalCap\n"
        "import pycocoevalcap.bleu.bleu\n"
        "assert COCOEvalCap is c.eval.COCOEvalCap and pycocoevalcap.bleu.bleu.Bleu is c.bleu.bleu.Bleu\n"
        "spec = importlib.util.find_spec('pycocoevalcap')  # METEOR still finds its resources\n"
        "assert list(spec.submodule_search_locations) == list(real.submodule_search_locations), spec\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
