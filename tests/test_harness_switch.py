"""``CAPEVAL_AS_PYCOCOEVALCAP=1`` inside the harnesses' own code, in fresh interpreters (issue 48).

- lmms-eval 0.7.3's ``lmms_eval/tasks/coco_cap/utils.py``, the file of the installed wheel
  (checked against the wheel's RECORD, so unmodified), loaded by path with its other
  imports stubbed: the seven aggregation functions run once with pycocoevalcap and Java and
  once under the switch with a ``java`` first on PATH that fails and leaves a marker file.
- VLMEvalKit's caption scorer (``vlmeval/dataset/image_caption.py`` at :data:`VLMEVAL_COMMIT`,
  from the fetched mirror; skipped without it), whole ``ImageCaptionDataset.evaluate`` on a
  TSV; its call pattern (BLEU/ROUGE-L/CIDEr on untokenised captions) also without the mirror.
- Unset: the real pycocoevalcap; the ``.pth`` line that setup.py ships is :data:`PTH_LINE`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _reference import cached, require_java, require_module

from capeval.compat.pycocoevalcap.switch import PTH_LINE, PTH_NAME, VARIABLE, hook_files

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path("/work/.mirror/open-compass+VLMEvalKit/repo")
#: VLMEvalKit's commit whose image_caption.py is run, and that file's sha256
VLMEVAL_COMMIT = "e8e78f05f3080fe28154f2130321f17951c3be94"
VLMEVAL_SHA256 = "e0f4ec184ae62c0373e3332ec2cbf0227b66dc47f108de8d37408a5e6990d36e"
METRICS = ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
FUNCS = ["coco_bleu1", "coco_bleu2", "coco_bleu3", "coco_bleu4", "coco_meteor", "coco_rougel", "coco_cider"]

# lmms-eval's coco_process_result output per document: {"answer", "pred", "image_id", "id"}
RESULTS = [
    {"image_id": 391895, "id": 0, "pred": "A man riding a red motorcycle down a dirt road.",
     "answer": ["A man with a red helmet on a small moped on a dirt road.", "Man riding a motor bike on a dirt road "
                "on the countryside.", "A man riding on the back of a motorcycle.", "A man in a red shirt and a red "
                "hat is on a motorcycle on a hill side.", "A dirt path with a young person on a motor bike rests to "
                "the foreground of a verdant area with a bridge and a background of cloud-wreathed mountains."]},
    {"image_id": 522418, "id": 1, "pred": "A woman cutting a large white sheet cake.",
     "answer": ["A woman wearing a net on her head cutting a cake.", "A woman cutting a large white sheet cake.",
                "A woman wearing a hair net cutting a large sheet cake.", "there is a woman that is cutting a white "
                "cake", "A woman marking a cake with the back of a chef's knife."]},
    {"image_id": 184613, "id": 2, "pred": "Two cows (a calf?) standing in a field -- near a boy's umbrella!",
     "answer": ["A child holding a flowered umbrella and petting a yak.", "A young man holding an umbrella next to "
                "a herd of cattle.", "a young boy barefoot holding an umbrella touching the horn of a cow",
                "A young boy with an umbrella who is touching the horn of a cow.", "A boy holding an umbrella while "
                "standing next to livestock."]},
    {"image_id": 318219, "id": 3, "pred": "a computer monitor and keyboard on a desk",
     "answer": ["A young kid with head phones on using a computer. ", "a young boy in a white shirt is at a "
                "computer", "A child sitting at a desk with a keyboard and a monitor.", "A boy is sitting at a "
                "computer with headphones.", "A little boy wearing headphones and looking at a computer monitor."]},
    {"image_id": 554625, "id": 4, "pred": "",
     "answer": ["A boy wearing headphones using one computer in a long row of computers", "A little boy with "
                "earphones on listening to something.", "A group of people sitting at desk using computers.",
                "Children sitting at computer stations on a long table.", "A small child wearing headphones plays "
                "on the computer."]},
    {"image_id": 397133, "id": 5, "pred": "A man is in a kitchen making pizzas; he's smiling.",
     "answer": ["A man is in a kitchen making pizzas.", "Man in apron standing on front of oven with pans and "
                "bakeware", "A baker is working in the kitchen rolling dough.", "A person standing by a stove in a "
                "kitchen.", "A table with pies being made and a person standing near a wall with pots and pans "
                "hanging on the wall."]},
]

# a fresh interpreter: lmms-eval's coco_cap/utils.py from the wheel, its other imports stubbed
LMMS_CHILD = textwrap.dedent("""
    import importlib.util, json, os, sys, types
    path, results_file, out_dir = sys.argv[1:4]
    def stub(name, **attrs):
        m = types.ModuleType(name); m.__dict__.update(attrs); sys.modules[name] = m
    class Log:  # loguru's logger
        def __getattr__(self, name): return lambda *a, **k: None
    stub("loguru", logger=Log())
    for name in ("lmms_eval", "lmms_eval.tasks", "lmms_eval.tasks._task_utils"):
        stub(name, __path__=[])
    stub("lmms_eval.tasks._task_utils.file_utils",
         generate_submission_file=lambda name, args: os.path.join(out_dir, name))
    spec = importlib.util.spec_from_file_location("coco_cap_utils", path)
    utils = importlib.util.module_from_spec(spec); spec.loader.exec_module(utils)
    results = json.load(open(results_file))
    out = {f: float(getattr(utils, f)(results, None)) for f in %(funcs)r}
    out["modules"] = sorted({c.__module__ for c in (utils.Bleu, utils.Meteor, utils.Rouge, utils.Cider,
                                                    utils.COCOEvalCap, utils.PTBTokenizer)})
    if sys.argv[4] == "spice":  # lmms-eval's commented-out SPICE: Spice().compute_score after PTBTokenizer
        from pycocoevalcap.spice.spice import Spice
        gts = {int(r["image_id"]): [{"caption": a} for a in r["answer"]] for r in results}
        res = {int(r["image_id"]): [{"caption": r["pred"]}] for r in results}
        tok = utils.PTBTokenizer()
        score, items = Spice().compute_score(tok.tokenize(gts), tok.tokenize(res))
        out["SPICE"] = float(score); out["spice_items"] = len(items)
    print("RESULT " + json.dumps(out))
""") % {"funcs": FUNCS}


def _lmms_utils() -> Path:
    """lmms-eval 0.7.3's coco_cap/utils.py as installed, its sha256 checked against the wheel's RECORD."""
    from importlib import metadata

    require_module("pycocotools", "lmms-eval's coco_cap aggregation builds pycocotools COCO objects")
    try:
        dist = metadata.distribution("lmms_eval")
    except metadata.PackageNotFoundError:
        from _reference import unavailable

        unavailable("lmms-eval 0.7.3 is not installed (pip install --no-deps lmms-eval==0.7.3)")
    assert dist.version == "0.7.3", dist.version
    entry = next(f for f in dist.files or [] if str(f) == "lmms_eval/tasks/coco_cap/utils.py")
    path = Path(str(dist.locate_file(entry)))
    import base64

    got = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
    assert entry.hash is not None and got == entry.hash.value, "coco_cap/utils.py differs from the wheel's RECORD"
    return path


def _fake_java(tmp_path: Path) -> tuple[Path, Path]:
    """A ``java`` that fails loudly and leaves a marker: (its folder, the marker path)."""
    bin_dir, marker = tmp_path / "fakebin", tmp_path / "java-was-started"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho started >> '{marker}'\necho 'fake java: must not run' >&2\nexit 97\n")
    java.chmod(0o755)
    return bin_dir, marker


def _run(code: str, args: list[str], *, switch: bool, path_first: Path | None = None, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if switch:
        env[VARIABLE] = "1"
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _need_hook() -> None:
    if not hook_files():
        pytest.fail(f"{PTH_NAME} is not in site-packages: reinstall capeval (pip install -e .) so setup.py ships it")


def _switch_run(utils: Path, tmp_path: Path, results: Path) -> tuple[dict, Path]:
    bin_dir, marker = _fake_java(tmp_path)
    (tmp_path / "switch").mkdir()
    got = _run(LMMS_CHILD, [str(utils), str(results), str(tmp_path / "switch"), "spice"], switch=True,
               path_first=bin_dir, cwd=tmp_path)
    assert not marker.exists(), "java was started under the switch"
    assert all(m.startswith("capeval.compat.pycocoevalcap.") for m in got["modules"]), got["modules"]
    assert 0.0 <= got["SPICE"] <= 1.0 and got["spice_items"] == len(RESULTS)  # SPICE back on: a number
    stored = json.loads((tmp_path / "switch" / "coco_captions_val2014_alg_results.json").read_text())
    assert [(s["image_id"], s["caption"]) for s in stored] == [(r["image_id"], r["pred"]) for r in RESULTS]
    return got, marker


def _assert_equal(got: dict, ref: dict) -> None:
    for f in FUNCS:
        if f == "coco_meteor":  # the jar prints its corpus score; ours sums the same statistics (test_meteor.py)
            assert abs(got[f] - ref[f]) <= 1e-9, (f, got[f], ref[f])
        else:
            assert got[f] == ref[f], (f, got[f], ref[f])


def _reference_scores() -> dict:
    """What each of lmms-eval's seven functions computes: PTBTokenizer (Java) on references and
    predictions, then one ``compute_score`` (BLEU-n: entry n-1). BLEU, ROUGE-L, CIDEr by pycocoevalcap;
    METEOR by the drop-in without the switch (its parity with the jar: tests/test_compat_pycocoevalcap.py
    and the slow test below, which runs the jar through lmms-eval's own code)."""
    require_java()

    def run() -> dict:
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.rouge.rouge import Rouge
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

        tok = PTBTokenizer()
        gts = tok.tokenize({r["image_id"]: [{"caption": a} for a in r["answer"]] for r in RESULTS})
        res = tok.tokenize({r["image_id"]: [{"caption": r["pred"]}] for r in RESULTS})
        bleu = Bleu(4).compute_score(gts, res, verbose=0)[0]
        out = {f"coco_bleu{n}": float(bleu[n - 1]) for n in range(1, 5)}
        out["coco_rougel"] = float(Rouge().compute_score(gts, res)[0])
        out["coco_cider"] = float(Cider().compute_score(gts, res)[0])
        return out, gts, res

    out, gts, res = cached("lmms_coco_cap_tokens_scores", RESULTS, run)
    from capeval.compat.pycocoevalcap.meteor.meteor import Meteor

    return {**out, "coco_meteor": Meteor().compute_score(gts, res)[0]}


def test_lmms_eval_coco_cap_aggregation_under_the_switch(tmp_path: Path) -> None:
    """lmms-eval 0.7.3's own seven functions under the switch, java failing: pycocoevalcap's numbers."""
    _need_hook()
    utils = _lmms_utils()
    ref = _reference_scores()
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    got, _ = _switch_run(utils, tmp_path, results)
    _assert_equal(got, ref)


@pytest.mark.slow
def test_lmms_eval_coco_cap_aggregation_with_java_and_with_the_switch(tmp_path: Path) -> None:
    """The same file run twice: with pycocoevalcap and Java (14 tokenizer and 7 METEOR JVM starts), then
    under the switch with a failing java: the seven numbers equal."""
    require_java()
    _need_hook()
    utils = _lmms_utils()
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    (tmp_path / "java").mkdir()
    ref = _run(LMMS_CHILD, [str(utils), str(results), str(tmp_path / "java"), "no-spice"], switch=False, cwd=tmp_path)
    assert ref["modules"] == ["pycocoevalcap.bleu.bleu", "pycocoevalcap.cider.cider", "pycocoevalcap.eval",
                              "pycocoevalcap.meteor.meteor", "pycocoevalcap.rouge.rouge",
                              "pycocoevalcap.tokenizer.ptbtokenizer"]
    got, _ = _switch_run(utils, tmp_path, results)
    _assert_equal(got, ref)
    print(json.dumps({"java": {f: ref[f] for f in FUNCS}, "switch": {f: got[f] for f in FUNCS},
                      "SPICE (switch)": got["SPICE"]}, indent=1))


# VLMEvalKit: its scorer's call pattern (untokenised captions; BLEU, ROUGE-L, CIDEr) and, given its file,
# ImageCaptionDataset.evaluate on a TSV with `prediction` and `answer` (a Python list literal)
VLMEVAL_CHILD = textwrap.dedent("""
    import importlib.util, json, sys, types
    import pandas as pd
    tsv, source = sys.argv[1:3]
    def stub(name, **attrs):
        m = types.ModuleType(name); m.__dict__.update(attrs); sys.modules[name] = m
    def load(f):  # vlmeval.smp.load for .tsv
        return pd.read_csv(f, sep="\\t")
    def dump(data, f):
        json.dump(data, open(f, "w"))
    class ImageBaseDataset:
        pass
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    data = load(tsv)
    ref = {str(i): [str(p)] for i, p in enumerate(data["prediction"])}
    gt = {str(i): eval(a) for i, a in enumerate(data["answer"])}
    out = {"pattern": {"Bleu": [x * 100 for x in Bleu(4).compute_score(gt, ref, verbose=0)[0]],
                       "ROUGE_L": float(Rouge().compute_score(gt, ref)[0]) * 100,
                       "CIDEr": float(Cider().compute_score(gt, ref)[0]) * 100}}
    if source != "-":
        stub("vlmeval", __path__=[]); stub("vlmeval.dataset", __path__=[])
        stub("vlmeval.smp", load=load, dump=dump)
        stub("vlmeval.smp.file", get_intermediate_file_path=lambda f, suffix, ext: f.rsplit(".", 1)[0] + suffix + "." + ext)
        stub("vlmeval.dataset.image_base", ImageBaseDataset=ImageBaseDataset)
        spec = importlib.util.spec_from_file_location("vlmeval.dataset.image_caption", source)
        mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
        out["vlmevalkit"] = {k: (float(v) if not isinstance(v, list) else [float(x) for x in v])
                             for k, v in mod.ImageCaptionDataset.evaluate(tsv).items()}
    out["modules"] = sorted({m.__name__ for n, m in sys.modules.items() if n.startswith("pycocoevalcap.")})
    print("RESULT " + json.dumps(out))
""")


def _vlmeval_tsv(tmp_path: Path) -> Path:
    import pandas as pd

    tsv = tmp_path / "COCO_VAL_model.tsv"
    pd.DataFrame({"index": range(len(RESULTS)), "prediction": [r["pred"] or "nan" for r in RESULTS],
                  "answer": [repr(r["answer"]) for r in RESULTS]}).to_csv(tsv, sep="\t", index=False)
    return tsv


def _vlmeval_source(tmp_path: Path) -> Path | None:
    """VLMEvalKit's image_caption.py at VLMEVAL_COMMIT (sha256 checked), or None without the mirror."""
    if not (MIRROR / "HEAD").exists() and not (MIRROR / "config").exists():
        return None
    text = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"{VLMEVAL_COMMIT}:vlmeval/dataset/image_caption.py"],
                          capture_output=True, check=True).stdout
    assert hashlib.sha256(text).hexdigest() == VLMEVAL_SHA256
    path = tmp_path / "image_caption.py"
    path.write_bytes(text)
    return path


def test_vlmevalkit_caption_scorer_under_the_switch(tmp_path: Path) -> None:
    """VLMEvalKit's COCO_Caption_Scorer (its file at the pinned commit, when the mirror is here) and its
    call pattern (always): pycocoevalcap's numbers, bit for bit, under the switch with java failing."""
    require_module("pycocoevalcap", "pycocoevalcap==1.2 is the reference (test extra)")
    require_module("pandas", "VLMEvalKit reads its prediction files with pandas (test extra)")
    _need_hook()
    source = _vlmeval_source(tmp_path)
    tsv = _vlmeval_tsv(tmp_path)
    args = [str(tsv), str(source) if source else "-"]
    ref = _run(VLMEVAL_CHILD, args, switch=False, cwd=tmp_path)
    ref_file = json.loads((tmp_path / "COCO_VAL_model_score.json").read_text()) if source else None
    bin_dir, marker = _fake_java(tmp_path)
    got = _run(VLMEVAL_CHILD, args, switch=True, path_first=bin_dir, cwd=tmp_path)
    assert not marker.exists()
    assert {"pycocoevalcap.bleu.bleu", "pycocoevalcap.rouge.rouge", "pycocoevalcap.cider.cider"} <= set(ref["modules"])
    assert all(m.startswith("pycocoevalcap.") for m in ref.pop("modules"))
    assert all(m.startswith("capeval.compat.pycocoevalcap.") for m in got.pop("modules"))
    assert got == ref  # BLEU-1..4, ROUGE-L, CIDEr (x100): bit for bit
    if source is None:
        pytest.skip("no open-compass/VLMEvalKit mirror (fetch github:open-compass/VLMEvalKit): call pattern only")
    assert set(got["vlmevalkit"]) == {"Bleu", "ROUGE_L", "CIDEr"}
    assert json.loads((tmp_path / "COCO_VAL_model_score.json").read_text()) == ref_file  # what it dumps, too


SWITCH_CHILD = textwrap.dedent("""
    import json, sys
    loaded_at_start = "capeval" in sys.modules  # the .pth line imports capeval only when switched
    import pycocoevalcap, pycocoevalcap.eval, pycocoevalcap.tokenizer.ptbtokenizer, pycocoevalcap.bleu.bleu
    import pycocoevalcap.meteor.meteor, pycocoevalcap.rouge.rouge, pycocoevalcap.cider.cider, pycocoevalcap.spice.spice
    from pycocoevalcap.cider.cider_scorer import CiderScorer  # a helper the drop-in does not provide
    import importlib.util
    from capeval.compat.pycocoevalcap.switch import status
    names = ["eval", "tokenizer.ptbtokenizer", "bleu.bleu", "meteor.meteor", "rouge.rouge", "cider.cider", "spice.spice"]
    print("RESULT " + json.dumps({
        "capeval_at_start": loaded_at_start,
        "modules": [sys.modules["pycocoevalcap." + n].__name__ for n in names],
        "top_path": list(pycocoevalcap.__path__),
        "spec_path": list(importlib.util.find_spec("pycocoevalcap").submodule_search_locations),
        "helper": CiderScorer.__module__ + ":" + sys.modules[CiderScorer.__module__].__file__,
        "status": status(),
    }))
""")


def test_switch_on_off_and_bad_values(tmp_path: Path) -> None:
    """Unset, 0 or a bad value: the real pycocoevalcap and capeval not imported at start-up (a bad value
    says so in one line); 1: every submodule is the drop-in's, helpers and resources from the real wheel."""
    real = require_module("pycocoevalcap", "pycocoevalcap==1.2 is the reference (test extra)")
    _need_hook()
    real_dir = list(real.__path__)[0]  # pycocoevalcap 1.2 is a namespace package (no __init__.py)
    names = ["eval", "tokenizer.ptbtokenizer", "bleu.bleu", "meteor.meteor", "rouge.rouge", "cider.cider", "spice.spice"]
    off = _run(SWITCH_CHILD, [], switch=False, cwd=tmp_path)
    assert off["modules"] == [f"pycocoevalcap.{n}" for n in names] and not off["capeval_at_start"]
    assert off["status"]["active"] is False and off["status"]["pycocoevalcap_resolves_to"] == "pycocoevalcap"
    on = _run(SWITCH_CHILD, [], switch=True, cwd=tmp_path)
    assert on["modules"] == [f"capeval.compat.pycocoevalcap.{n}" for n in names] and on["capeval_at_start"]
    assert on["top_path"] == on["spec_path"] == [real_dir]  # METEOR's resources still found in the wheel
    assert on["helper"] == f"pycocoevalcap.cider.cider_scorer:{real_dir}/cider/cider_scorer.py"
    assert on["status"]["active"] is True and on["status"]["hook"] == hook_files()[0]
    for value, says in (("0", ""), ("maybe", "is NOT switched")):
        env = {**os.environ, VARIABLE: value}
        proc = subprocess.run([sys.executable, "-c", SWITCH_CHILD], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300, check=True)
        got = json.loads(proc.stdout.split("RESULT ", 1)[1])
        assert got["modules"] == off["modules"] and got["capeval_at_start"] == bool(says)  # "0": nothing imported
        lines = [x for x in proc.stderr.splitlines() if x.startswith("capeval:")]
        assert (len(lines) == 1 and says in lines[0] and VARIABLE in lines[0]) if says else not lines, proc.stderr


def test_child_processes_inherit_the_switch(tmp_path: Path) -> None:
    """A worker started by the switched process (as torchrun/accelerate start theirs) is switched too."""
    _need_hook()
    code = ("import subprocess, sys; print('RESULT ' + subprocess.run([sys.executable, '-c', "
            "'import pycocoevalcap.bleu.bleu as b, json; print(json.dumps({\"m\": b.__name__}))'], "
            "capture_output=True, text=True, check=True).stdout.strip())")
    assert _run(code, [], switch=True, cwd=tmp_path) == {"m": "capeval.compat.pycocoevalcap.bleu.bleu"}
    assert _run(code, [], switch=False, cwd=tmp_path) == {"m": "pycocoevalcap.bleu.bleu"}


def test_the_pth_file_setup_ships(tmp_path: Path) -> None:
    """setup.py writes PTH_LINE under PTH_NAME into wheels and editable wheels (with its RECORD line);
    the installed hook is that line."""
    import base64
    import importlib.util
    import zipfile

    spec = importlib.util.spec_from_file_location("capeval_setup", ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    assert setup.pth_file() == (PTH_NAME, (PTH_LINE + "\n").encode())
    assert PTH_LINE.startswith("import ") and "\n" not in PTH_LINE  # site runs only lines starting with import
    from capeval.compat.pycocoevalcap.switch import OFF, ON

    for value in (*ON, *OFF, "maybe", " On "):  # the line's cheap test agrees with install_from_env's
        os_env = {VARIABLE: value}
        acts = eval(PTH_LINE.split("; ", 1)[1].split(" and __import__")[0], {"os": type("os", (), {"environ": os_env})})
        assert acts == (value.strip().lower() not in OFF), value
    wheel = tmp_path / "capeval-0-0.editable-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("capeval-0.dist-info/RECORD", "capeval-0.dist-info/RECORD,,\n")
    setup.add_to_wheel(wheel, *setup.pth_file())
    with zipfile.ZipFile(wheel) as z:
        data = z.read(PTH_NAME)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert z.read("capeval-0.dist-info/RECORD").decode().splitlines()[-1] == f"{PTH_NAME},sha256={digest},{len(data)}"
    for hook in hook_files():
        assert Path(hook).read_text() == PTH_LINE + "\n"
    assert PTH_NAME > "__editable__"  # runs after an editable install's path file


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["wheel", "editable"])
def test_built_wheels_carry_the_pth(tmp_path: Path, kind: str) -> None:
    """``pip wheel .`` and the PEP 660 editable wheel (what ``pip install -e .`` installs) hold the hook."""
    import zipfile

    out = tmp_path / "dist"
    out.mkdir()
    code = f"from setuptools import build_meta as b; print(b.build_{kind}({str(out)!r}))"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read(PTH_NAME).decode() == PTH_LINE + "\n"
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        assert any(line.startswith(PTH_NAME + ",sha256=") for line in z.read(record).decode().splitlines())


def test_memo_answers_only_the_same_content() -> None:
    """Under the switch, tokenisation and BLEU statistics are remembered by content: a changed caption,
    key type, order or grouping is recomputed (equal to the memo-off result); callers' mutations do not
    reach the memo; at most ENTRIES inputs are kept."""
    require_module("capeval.tokenize", "capeval's tokenizer")
    from capeval.compat.pycocoevalcap import _memo
    from capeval.compat.pycocoevalcap.bleu.bleu import Bleu
    from capeval.compat.pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    base = {r["image_id"]: [{"caption": a} for a in r["answer"]] for r in RESULTS}
    variants = [
        base,
        {**base, 391895: [{"caption": "A man riding a RED motorcycle."}]},                 # one caption changed
        {str(k): v for k, v in base.items()},                                             # key types
        {float(k): v for k, v in base.items()},                                           # 391895.0 == 391895
        dict(reversed(list(base.items()))),                                               # order
        {k: v[:1] for k, v in base.items()},                                              # grouping
        {1: [{"caption": "a b"}, {"caption": "c"}], 2: []},
        {1: [{"caption": "a b"}], 2: [{"caption": "c"}]},                                 # same texts, other groups
    ]
    tok = PTBTokenizer()
    plain = [tok.tokenize(v) for v in variants]
    try:
        _memo.enable(True)
        for _ in range(2):  # second round: from the memo where still held
            for v, want in zip(variants, plain):
                got = tok.tokenize(v)
                assert got == want and [type(k) for k in got] == [type(k) for k in want]
                got[next(iter(got))].append("mutated")  # a caller's change
        assert len(_memo._memos["ptb"]) == _memo.ENTRIES
        refs = tok.tokenize(base)
        hyps = {k: [v[0]] for k, v in refs.items()}
        changed = {**hyps, 391895: ["a man on a bike"]}
        _memo.enable(False)
        want = [Bleu(4).compute_score(refs, h, verbose=0) for h in (hyps, changed)]
        _memo.enable(True)
        for _ in range(2):
            assert [Bleu(4).compute_score(refs, h, verbose=0) for h in (hyps, changed)] == want
        assert Bleu(2).compute_score(refs, changed, verbose=0) == (want[1][0][:2], want[1][1][:2])  # one memo, any n
    finally:
        _memo.enable(False)
